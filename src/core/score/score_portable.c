/*
 * score_portable.c
 *	  The portable path's first pass, which the generic kernel family uses:
 *	  byte products in 16-byte vectors of int16 where the compiler offers
 *	  vector types, in plain loops elsewhere.
 *
 * On its own because, unlike score_x86.c and score_arm.c, it needs no
 * target attributes nor intrinsics, and every machine builds and runs it.
 */
#include <string.h>

#include "score_internal.h"

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__

/*
 * 16 bytes as 8 int16 or 4 int32 lanes, the width every vector unit has.
 * Without byte products in hardware, one is cheapest in 16 bits: the four
 * bytes of item j are two int16 lanes, and each lane's low and high byte,
 * made signed (q_y, without the offset), times the query's bytes for
 * those positions (Query.pairs) gives products of at most 127^2, two of
 * which still fit in an int16 before they are widened.
 */
typedef int16_t ScoreI16 __attribute__((vector_size(16), may_alias));
typedef uint16_t ScoreU16 __attribute__((vector_size(16), may_alias));
typedef int32_t ScoreI32 __attribute__((vector_size(16), may_alias));
typedef uint32_t ScoreU32 __attribute__((vector_size(16), may_alias));

/* The exact q_x.q_y of the 16 items of blk. */
static inline void
block_sums(const unsigned char *blk, int groups, const int16_t *pairs,
		   int32_t *sums)
{
	ScoreI32	acc[4] = {{0}};
	int			g;
	int			c;

	for (g = 0; g < groups; g++)
	{
		ScoreI16	x_low = *(const ScoreI16 *) (pairs + 16 * g);
		ScoreI16	x_high = *(const ScoreI16 *) (pairs + 16 * g + 8);

		/*
		 * Shifts left are done unsigned, where they are defined for every
		 * value; shifts right signed, which extends the sign.
		 */
		for (c = 0; c < 4; c++)
		{
			ScoreU16	w = *(const ScoreU16 *) (blk + 64 * (size_t) g + 16 * c) ^
				(uint16_t) 0x8080;	/* q_y + 128 back to q_y */
			ScoreI16	low = (ScoreI16) (w << 8) >> 8;
			ScoreI16	high = (ScoreI16) w >> 8;
			ScoreU32	p = (ScoreU32) (low * x_low + high * x_high);

			acc[c] += ((ScoreI32) (p << 16) >> 16) + ((ScoreI32) p >> 16);
		}
	}
	memcpy(sums, acc, sizeof(acc));
}

#else

/* Plain loops where vectors or the byte order are unknown. */
static void
block_sums(const unsigned char *blk, int groups, const int16_t *pairs,
		   int32_t *sums)
{
	int			g;
	int			j;

	for (j = 0; j < BLOCK; j++)
		sums[j] = 0;
	for (g = 0; g < groups; g++)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		const int16_t *xg = pairs + 16 * g;

		for (j = 0; j < BLOCK; j++)
			sums[j] += (p[4 * j] - 128) * xg[0] + (p[4 * j + 1] - 128) * xg[8] +
				(p[4 * j + 2] - 128) * xg[1] + (p[4 * j + 3] - 128) * xg[9];
	}
}

#endif

/*
 * The portable path's PrepareFn: per group, q_x of positions 0 and 2 in 8
 * alternating int16, then of 1 and 3 (Query.pairs), for block_sums.
 */
void
wals_score_prepare_portable(const int8_t *q8, int groups,
							const QueryScratch *qs, Query *q)
{
	int			g;
	int			j;

	for (g = 0; g < groups; g++)
		for (j = 0; j < 8; j++)
		{
			qs->pairs[16 * g + j] = q8[4 * g + 2 * (j % 2)];
			qs->pairs[16 * g + 8 + j] = q8[4 * g + 2 * (j % 2) + 1];
		}
	q->pairs = qs->pairs;
}

/*
 * The portable BlockFn.  The integer sums are exact in any order and with
 * either byte offset, so every path gives the same a.
 */
static uint32_t
block_portable(const unsigned char *blk, int groups, const Query *q,
			   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	int32_t		sums[BLOCK];
	uint32_t	cand = 0;
	int			j;

	block_sums(blk, groups, q->pairs, sums);
	for (j = 0; j < BLOCK; j++)
	{
		float		a = (float) sums[j] * (q->sx * meta[j]);
		float		e = q->A * meta[BLOCK + j] +
			(q->B * meta[2 * BLOCK + j] + q->eta);

		lower[j] = a - e;
		upper[j] = a + e;
		if ((eligible >> j & 1) && upper[j] >= threshold)
			cand |= 1u << j;
	}
	return cand;
}

/* The portable path's scan and bounds. */
void
wals_score_scan_portable(const WalsScoreIndex *ix, const Query *q,
						 Scan *st, int nu)
{
	scan_body(ix, q, st, nu, block_portable);
}

void
wals_score_bounds_portable(const WalsScoreIndex *ix, const Query *q,
						   float *lower, float *upper)
{
	bounds_body(ix, q, lower, upper, block_portable);
}
