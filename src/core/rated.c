/*
 * rated.c
 *	  A user's rated items, packed for the user factor table.
 *
 * Layout: one byte of kind (0: every rating is 1; 1: ratings are whole
 * numbers from 0 to 2^32 - 1, as varints; 2: ratings are float32, little
 * endian), the count n as a varint, the first id zigzag-encoded and the
 * n - 1 gaps to the next id (each at least 1) as varints, then the
 * ratings.  Varints are LEB128: 7 bits a byte, low bits first.  With the
 * ids of a catalogue of tens of thousands of items, a rating takes two or
 * three bytes instead of twelve.
 */
#include <math.h>
#include <string.h>

#include "wals_core.h"

enum
{
	RATED_ONES = 0,
	RATED_WHOLE = 1,
	RATED_FLOAT = 2
};

/* Enough for a 64-bit varint. */
#define VARINT_MAX 10

static size_t
put_varint(uint8_t *out, uint64_t v)
{
	size_t		n = 0;

	while (v >= 0x80)
	{
		out[n++] = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t) v;
	return n;
}

/* Read a varint at in[*at..len); false when it is cut short or too long. */
static int
get_varint(const uint8_t *in, size_t len, size_t *at, uint64_t *v)
{
	uint64_t	r = 0;

	for (int shift = 0; shift < 64; shift += 7)
	{
		uint8_t		b;

		if (*at >= len)
			return 0;
		b = in[(*at)++];
		if (shift == 63 && b > 1)
			return 0;
		r |= (uint64_t) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
		{
			*v = r;
			return 1;
		}
	}
	return 0;
}

static uint64_t
zigzag(int64_t v)
{
	return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
}

static int64_t
unzigzag(uint64_t v)
{
	return (int64_t) (v >> 1) ^ -(int64_t) (v & 1);
}

size_t
wals_rated_pack_bound(int64_t n)
{
	return 1 + VARINT_MAX + (size_t) n * (VARINT_MAX + 4);
}

/*
 * The kind of ratings[0..n): first, with neither a call nor a branch per
 * rating, whether all are 1 or all are whole numbers below 2^31, those
 * the conversion to int32 keeps (floorf, called per rating, was a third
 * of the packing's time); else, rating by rating, whether all are whole
 * numbers below 2^32.
 */
static int
kind_of(const float *ratings, int64_t n)
{
	int			ones = 1;
	int			small = 1;
	int			kind = RATED_ONES;

	for (int64_t i = 0; i < n; i++)
	{
		float		r = ratings[i];
		float		inside = r >= 0.0f && r < 2147483648.0f ? r : 0.5f;

		ones &= r == 1.0f;
		small &= (float) (int32_t) inside == r;
	}
	if (ones)
		return RATED_ONES;
	if (small)
		return RATED_WHOLE;

	for (int64_t i = 0; i < n; i++)
	{
		float		r = ratings[i];

		if (r == 1.0f)
			continue;
		if (r >= 0.0f && r < 4294967296.0f && r == floorf(r))
			kind = RATED_WHOLE;
		else
			return RATED_FLOAT;
	}
	return kind;
}

size_t
wals_rated_pack(const int64_t *ids, const float *ratings, int64_t n, uint8_t *out)
{
	int			kind = kind_of(ratings, n);
	size_t		at = 0;

	out[at++] = (uint8_t) kind;
	at += put_varint(out + at, (uint64_t) n);
	for (int64_t i = 0; i < n; i++)
		at += put_varint(out + at, i == 0 ? zigzag(ids[0]) :
						 (uint64_t) ids[i] - (uint64_t) ids[i - 1]);
	for (int64_t i = 0; i < n && kind != RATED_ONES; i++)
	{
		if (kind == RATED_WHOLE)
			at += put_varint(out + at, (uint64_t) ratings[i]);
		else
		{
			uint32_t	bits;

			memcpy(&bits, &ratings[i], 4);
			for (int b = 0; b < 4; b++)
				out[at++] = (uint8_t) (bits >> (8 * b));
		}
	}
	return at;
}

WalsStatus
wals_rated_count(const uint8_t *in, size_t len, int64_t *n)
{
	size_t		at = 1;
	uint64_t	count;

	if (len < 2 || in[0] > RATED_FLOAT || !get_varint(in, len, &at, &count))
		return WALS_EINVAL;
	/* every item takes one byte at least */
	if (count > len - at)
		return WALS_EINVAL;
	*n = (int64_t) count;
	return WALS_OK;
}

WalsStatus
wals_rated_unpack(const uint8_t *in, size_t len, int64_t n, int64_t *ids, float *ratings)
{
	size_t		at = 1;
	uint64_t	v;
	int64_t		check;
	int			kind;

	if (wals_rated_count(in, len, &check) != WALS_OK || check != n)
		return WALS_EINVAL;
	kind = in[0];
	(void) get_varint(in, len, &at, &v);
	for (int64_t i = 0; i < n; i++)
	{
		if (!get_varint(in, len, &at, &v))
			return WALS_EINVAL;
		if (i == 0)
			ids[0] = unzigzag(v);
		else
		{
			/* the true gap to INT64_MAX, which fits in uint64_t */
			uint64_t	room = (uint64_t) INT64_MAX - (uint64_t) ids[i - 1];

			if (v == 0 || v > room)
				return WALS_EINVAL;
			ids[i] = (int64_t) ((uint64_t) ids[i - 1] + v);
		}
	}
	for (int64_t i = 0; i < n; i++)
	{
		if (kind == RATED_ONES)
			ratings[i] = 1.0f;
		else if (kind == RATED_WHOLE)
		{
			if (!get_varint(in, len, &at, &v) || v > 4294967295u)
				return WALS_EINVAL;
			ratings[i] = (float) v;
		}
		else
		{
			uint32_t	bits = 0;

			if (len - at < 4)
				return WALS_EINVAL;
			for (int b = 0; b < 4; b++)
				bits |= (uint32_t) in[at++] << (8 * b);
			memcpy(&ratings[i], &bits, 4);
		}
	}
	return at == len ? WALS_OK : WALS_EINVAL;
}
