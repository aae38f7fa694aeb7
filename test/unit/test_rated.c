/*
 * test_rated.c
 *	  Packed rated items: round trips of every kind of ratings and of ids
 *	  across the whole int64 range, the size on realistic lists, and bytes
 *	  that are not a packed list (cut short, trailing, out of order,
 *	  overflowing, random), which must be refused without reading outside
 *	  the buffer.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static int
round_trip(const int64_t *ids, const float *ratings, int64_t n, size_t *packed)
{
	uint8_t    *buf = test_alloc(wals_rated_pack_bound(n), 1);
	int64_t    *back = test_alloc(n + 1, sizeof(int64_t));
	float	   *rback = test_alloc(n + 1, sizeof(float));
	size_t		len = wals_rated_pack(ids, ratings, n, buf);
	int64_t		count = -1;
	int			ok = len <= wals_rated_pack_bound(n) &&
		wals_rated_count(buf, len, &count) == WALS_OK && count == n &&
		wals_rated_unpack(buf, len, n, back, rback) == WALS_OK;

	for (int64_t i = 0; ok && i < n; i++)
		ok = back[i] == ids[i] && memcmp(&rback[i], &ratings[i], sizeof(float)) == 0;
	if (packed != NULL)
		*packed = len;
	free(buf);
	free(back);
	free(rback);
	return ok;
}

/* The kind byte ids[0..n) with ratings r pack with (0 ones, 1 whole, 2 float). */
static int
packed_kind(const int64_t *ids, const float *r, int64_t n)
{
	uint8_t    *buf = test_alloc(wals_rated_pack_bound(n), 1);
	int			kind;

	(void) wals_rated_pack(ids, r, n, buf);
	kind = buf[0];
	free(buf);
	return kind;
}

static void
test_round_trips(void)
{
	int64_t		edge[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX};
	float		ones[] = {1, 1, 1, 1, 1, 1, 1};
	float		whole[] = {0, 1, 2, 127, 128, 4294967040.0f, 3};
	float		reals[] = {0.5f, -1, 1e30f, 1, 2, -0.0f, 3.25f};
	float		odd[] = {NAN, INFINITY, 1, 1, 1, 1, 1};
	TestRng		rng;
	size_t		len = 0;
	int			ok = round_trip(edge, ones, 0, &len);

	CHECK(ok && len == 2, "an empty list packs in 2 bytes, got %zu", len);
	CHECK(round_trip(edge, ones, 7, NULL), "ids across the int64 range, ratings 1");
	CHECK(round_trip(edge, whole, 7, NULL), "whole ratings");
	CHECK(round_trip(edge, reals, 7, NULL), "real ratings, negative zero included");
	CHECK(round_trip(edge, odd, 7, NULL), "NaN and infinite ratings come back as they were");
	CHECK(round_trip(edge + 6, ones, 1, NULL), "a single INT64_MAX");
	CHECK(packed_kind(edge, ones, 7) == 0, "ratings all 1 pack as ones");
	CHECK(packed_kind(edge, whole, 7) == 1, "whole ratings up to 2^32 (one beyond 2^31) pack as whole numbers");
	CHECK(packed_kind(edge, whole, 5) == 1, "whole ratings below 2^31 pack as whole numbers");
	CHECK(packed_kind(edge, reals, 7) == 2, "real ratings pack as floats");
	CHECK(packed_kind(edge, odd, 7) == 2, "a NaN packs as a float");

	rng_seed(&rng, 17);
	for (int t = 0; t < 200; t++)
	{
		int64_t		n = rng_below(&rng, 300);
		int64_t    *ids = test_alloc(n + 1, sizeof(int64_t));
		float	   *r = test_alloc(n + 1, sizeof(float));
		int64_t		id = (int64_t) rng_below(&rng, 1000) - 500;
		int			kind = t % 3;

		for (int64_t i = 0; i < n; i++)
		{
			id += 1 + rng_below(&rng, t % 2 ? 400 : 3);
			ids[i] = id;
			r[i] = kind == 0 ? 1.0f : kind == 1 ? (float) rng_below(&rng, 50) :
				(float) rng_normal(&rng);
		}
		CHECK(round_trip(ids, r, n, NULL), "random list %d of %lld items", t, (long long) n);
		free(ids);
		free(r);
	}
}

/* About 150 items of a 27,000-item catalogue with small counts: ~2.3 bytes an item. */
static void
test_size(void)
{
	int64_t		ids[150];
	float		r[150];
	size_t		len = 0;
	TestRng		rng;
	int			ok;

	rng_seed(&rng, 5);
	for (int i = 0; i < 150; i++)
	{
		ids[i] = 1000 + i * 180 + rng_below(&rng, 100);
		r[i] = (float) (1 + rng_below(&rng, 6));
	}
	ok = round_trip(ids, r, 150, &len);
	CHECK(ok && len <= 150 * 3 + 4,
		  "150 items with small counts pack in %zu bytes, at most %d", len, 150 * 3 + 4);
}

static int
refused(const uint8_t *in, size_t len)
{
	int64_t		n;
	int64_t    *ids;
	float	   *r;
	WalsStatus	st;

	if (wals_rated_count(in, len, &n) != WALS_OK)
		return 1;
	ids = test_alloc(n + 1, sizeof(int64_t));
	r = test_alloc(n + 1, sizeof(float));
	st = wals_rated_unpack(in, len, n, ids, r);
	free(ids);
	free(r);
	return st == WALS_EINVAL;
}

static void
test_malformed(void)
{
	int64_t		ids[] = {3, 7, 900};
	float		r[] = {2, 5, 1};
	uint8_t		good[64];
	size_t		len = wals_rated_pack(ids, r, 3, good);
	uint8_t		buf[64];
	TestRng		rng;
	int			accepted = 0;
	int			increasing = 0;

	CHECK(!refused(good, len), "the packed list is accepted");
	for (size_t cut = 0; cut < len; cut++)
		CHECK(refused(good, cut), "cut short at %zu of %zu bytes is refused", cut, len);
	memcpy(buf, good, len);
	buf[len] = 0;
	CHECK(refused(buf, len + 1), "a trailing byte is refused");
	memcpy(buf, good, len);
	buf[0] = 3;
	CHECK(refused(buf, len), "an unknown kind is refused");
	{
		uint8_t		zero_gap[] = {0, 2, 6, 0};
		uint8_t		too_many[] = {0, 9, 2, 2};
		uint8_t		long_varint[] = {0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
		uint8_t		overflow[] = {0, 2, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2};
		uint8_t		big_whole[] = {1, 1, 2, 0x80, 0x80, 0x80, 0x80, 0x10};

		CHECK(refused(zero_gap, sizeof(zero_gap)), "a repeated id is refused");
		CHECK(refused(too_many, sizeof(too_many)), "a count beyond the bytes is refused");
		CHECK(refused(long_varint, sizeof(long_varint)), "a varint of more than 64 bits is refused");
		CHECK(refused(overflow, sizeof(overflow)), "ids past INT64_MAX are refused");
		CHECK(refused(big_whole, sizeof(big_whole)), "a whole rating of 2^32 or more is refused");
	}

	/*
	 * Random bytes, with small counts so that some are accepted: read
	 * within the buffer (valgrind sees any read beyond), and whatever is
	 * accepted holds strictly increasing ids.
	 */
	rng_seed(&rng, 99);
	for (int t = 0; t < 20000; t++)
	{
		size_t		len = 2 + rng_below(&rng, 12);
		uint8_t    *in = test_alloc(len, 1);
		int64_t		n;
		int64_t    *ids;
		float	   *r;
		int			ok = 1;

		for (size_t i = 0; i < len; i++)
			in[i] = (uint8_t) (i == 0 ? rng_below(&rng, 4) : i == 1 ? rng_below(&rng, 4) :
							   rng_below(&rng, 256));
		if (wals_rated_count(in, len, &n) == WALS_OK)
		{
			ids = test_alloc(n + 1, sizeof(int64_t));
			r = test_alloc(n + 1, sizeof(float));
			if (wals_rated_unpack(in, len, n, ids, r) == WALS_OK)
			{
				accepted++;
				for (int64_t i = 1; i < n; i++)
					ok = ok && ids[i] > ids[i - 1];
				increasing += ok;
			}
			free(ids);
			free(r);
		}
		free(in);
	}
	CHECK(accepted > 0 && increasing == accepted,
		  "of 20000 random inputs, %d are packed lists, and %d of those hold increasing ids",
		  accepted, increasing);
}

/* LEB128, a byte at a time, as the format defines it. */
static size_t
reference_varint(uint8_t *out, uint64_t v)
{
	size_t		n = 0;

	do
	{
		out[n] = (uint8_t) (v & 0x7f);
		v >>= 7;
		if (v != 0)
			out[n] |= 0x80;
		n++;
	} while (v != 0);
	return n;
}

/*
 * The bytes of a packed list are the format's, whatever way the packer
 * writes them: gaps and whole ratings on either side of every length of a
 * varint, against a reference written a byte at a time; and the packer
 * writes nothing past its bound.
 */
static void
test_format(void)
{
	static const uint64_t vals[] = {
		1, 2, 127, 128, 16383, 16384, ((uint64_t) 1 << 21) - 1, (uint64_t) 1 << 21,
		((uint64_t) 1 << 28) - 1, (uint64_t) 1 << 28, ((uint64_t) 1 << 35) - 1,
		(uint64_t) 1 << 35, (uint64_t) 1 << 42, (uint64_t) 1 << 49, (uint64_t) 1 << 56
	};
	int			n = (int) (sizeof(vals) / sizeof(vals[0]));
	int64_t		ids[sizeof(vals) / sizeof(vals[0])];
	float		whole[sizeof(vals) / sizeof(vals[0])];
	size_t		bound = wals_rated_pack_bound(n);
	uint8_t    *got = test_alloc(bound + 16, 1);
	uint8_t    *want = test_alloc(bound + 16, 1);
	size_t		len;
	size_t		at = 0;
	int64_t		id = -5;

	for (int i = 0; i < n; i++)
	{
		id += (int64_t) vals[i];
		ids[i] = id;
		/* whole numbers a float holds exactly, below 2^32 */
		whole[i] = (float) (vals[i] < ((uint64_t) 1 << 32) ? vals[i] & ~(uint64_t) 0xff : 7);
	}
	memset(got, 0xa5, bound + 16);
	len = wals_rated_pack(ids, whole, n, got);
	want[at++] = 1;
	at += reference_varint(want + at, (uint64_t) n);
	at += reference_varint(want + at, ((uint64_t) ids[0] << 1) ^ (uint64_t) (ids[0] >> 63));
	for (int i = 1; i < n; i++)
		at += reference_varint(want + at, (uint64_t) (ids[i] - ids[i - 1]));
	for (int i = 0; i < n; i++)
		at += reference_varint(want + at, (uint64_t) whole[i]);
	CHECK(len == at && memcmp(got, want, at) == 0,
		  "packed bytes differ from the format's (%zu bytes, %zu expected)", len, at);
	CHECK(got[bound] == 0xa5 && got[bound + 15] == 0xa5, "the packer writes past its bound");
	free(got);
	free(want);
}

void
test_rated(void)
{
	test_format();
	test_round_trips();
	test_size();
	test_malformed();
}
