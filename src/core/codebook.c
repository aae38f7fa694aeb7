/*
 * codebook.c
 *	  One-byte codes for the few distinct ratings most data has.
 *
 * Stars, thumbs, clicks and small counts take a handful of values, and
 * the four bytes of a float per cell were a third of a training's memory.
 * A value is found by its bits in an open-addressing table twice the size
 * of the codebook, so that a lookup, done once per cell as a matrix is
 * built, costs a probe or two.
 */
#include <string.h>

#include "wals_internal.h"

void
wals_codebook_init(WalsCodebook *cb)
{
	cb->n = 0;
	memset(cb->value, 0, sizeof(cb->value));
	memset(cb->slot, 0xff, sizeof(cb->slot));
}

static uint32_t
value_bits(float v)
{
	uint32_t	bits;

	memcpy(&bits, &v, sizeof(bits));
	return bits;
}

int
wals_codebook_code(WalsCodebook *cb, float v)
{
	uint32_t	bits = value_bits(v);
	uint32_t	h = (bits * 2654435761u) >> 23;

	for (;;)
	{
		int			code = cb->slot[h % WALS_CODE_SLOTS];

		if (code < 0)
			break;
		if (value_bits(cb->value[code]) == bits)
			return code;
		h++;
	}
	if (cb->n == WALS_CODES)
		return -1;
	cb->value[cb->n] = v;
	cb->slot[h % WALS_CODE_SLOTS] = (int16_t) cb->n;
	return cb->n++;
}

void
wals_codebook_decode(const WalsCodebook *cb, const uint8_t *codes, size_t n, float *v)
{
	size_t		k;

	for (k = 0; k < n; k++)
	{
		if (k % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		v[k] = cb->value[codes[k]];
	}
}

/*
 * A rating finds its code in a small cache by the bits of its value, each
 * value where its bits hash to, before the codebook's hash and probes:
 * ratings take a handful of values, hundreds of millions of times, and
 * one load and one compare a rating took half the time of the table of
 * small whole numbers it replaces, and serves fractional stars too.
 */
#define TAKE_CACHE_BITS	10
#define TAKE_CACHE		(1 << TAKE_CACHE_BITS)

bool
wals_codebook_take(WalsCodebook *cb, const float *v, size_t n, uint8_t *codes)
{
	uint32_t	cached_bits[TAKE_CACHE];
	int16_t		cached_code[TAKE_CACHE];
	size_t		k;

	memset(cached_bits, 0, sizeof(cached_bits));
	memset(cached_code, 0xff, sizeof(cached_code));
	for (k = 0; k < n; k++)
	{
		uint32_t	bits = value_bits(v[k]);
		uint32_t	h = (bits * 2654435761u) >> (32 - TAKE_CACHE_BITS);
		int			code = cached_code[h] >= 0 && cached_bits[h] == bits ? cached_code[h] : -1;

		if (k % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		if (code < 0)
		{
			code = wals_codebook_code(cb, v[k]);
			if (code < 0)
				return false;
			cached_bits[h] = bits;
			cached_code[h] = (int16_t) code;
		}
		if (codes != NULL)
			codes[k] = (uint8_t) code;
	}
	return true;
}
