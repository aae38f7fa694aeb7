/*
 * score_internal.h
 *	  What the files of the scoring engine share, and nothing outside them
 *	  uses: the blocks of an index, a query's first-pass state, the paths'
 *	  functions that score.c dispatches to, and the first pass's loops,
 *	  which each path's file compiles around its own block function.  The
 *	  design is explained at the head of score.c.
 *
 * The loops are defined here, static, as kernels_simd.h defines its
 * kernels: each path inlines them into functions compiled for its own
 * instruction set, and each file that includes this one keeps its own
 * copy of the helpers they call; score.c calls none of them.
 */
#ifndef SCORE_INTERNAL_H
#define SCORE_INTERNAL_H

#include <math.h>

#include "wals_internal.h"
#include "wals_score.h"

/* Items per block: one vector of 16 int32 or float lanes. */
#define BLOCK 16

/*
 * The scan asks for the block this many ahead, every cache line of it:
 * the hardware's own prefetching alone left a single query waiting on
 * memory, about 5% of its time with VNNI and 10% on the AVX2 path.
 */
#define PREFETCH_BLOCKS 4

/* The paths this compiler builds besides the portable one. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define SCORE_X86 1
#endif

#if defined(__aarch64__) && defined(__GNUC__)
#define SCORE_NEON 1

/*
 * GCC compiles SDOT in functions of their own target; clang 14's
 * arm_neon.h offers it only where the whole file is built for it, which is
 * all PostgreSQL's bitcode of score_arm.c needs (the server runs GCC's).
 */
#if defined(__ARM_FEATURE_DOTPROD)
#define WALS_DOTPROD
#elif !defined(__clang__)
#define WALS_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

#ifdef WALS_DOTPROD
#define SCORE_DOTPROD 1
#endif
#endif							/* aarch64 */

static inline int64_t
block_count(int64_t n)
{
	return (n + BLOCK - 1) / BLOCK;
}

/* Bytes of one block: the factor groups, then scales, errors, norms. */
static inline size_t
block_bytes(int groups)
{
	return (size_t) (groups + 3) * 64;
}

/* Positions in a filter's two lists, which only move forward. */
typedef struct Cursor
{
	const int32_t *skip;
	int64_t		nskip;
	int64_t		s;
	const int32_t *allow;		/* NULL: every item */
	int64_t		nallow;
	int64_t		a;
} Cursor;

/* The first block from b on that holds an allowed item, or nblocks. */
static inline int64_t
cursor_next_block(Cursor *c, int64_t b, int64_t nblocks)
{
	int64_t		first;

	if (c->allow == NULL)
		return b;
	while (c->a < c->nallow && c->allow[c->a] < b * BLOCK)
		c->a++;
	if (c->a == c->nallow)
		return nblocks;
	first = c->allow[c->a] / BLOCK;
	return first < nblocks ? first : nblocks;
}

/* The eligible lanes of block b of an index of n items. */
static inline uint32_t
cursor_block_mask(Cursor *c, int64_t b, int64_t n)
{
	int64_t		base = b * BLOCK;
	int64_t		end = base + BLOCK;
	uint32_t	mask = 0xffff;

	if (c->allow)
	{
		mask = 0;
		for (; c->a < c->nallow && c->allow[c->a] < end; c->a++)
			if (c->allow[c->a] >= base)
				mask |= 1u << (c->allow[c->a] - base);
	}
	for (; c->s < c->nskip && c->skip[c->s] < end; c->s++)
		if (c->skip[c->s] >= base)
			mask &= ~(1u << (c->skip[c->s] - base));
	if (end > n)
		mask &= (1u << (n - base)) - 1;
	return mask;
}

/* What the first pass needs of a query, from prepare_query (score.c). */
typedef struct Query
{
	const int32_t *qx;			/* q_x, groups of four signed bytes */
	/* for block_avx2, cheap beside any scan: the groups in its order */
	const int32_t *offset;		/* byte offsets in a block, narrow first */
	const int32_t *qx_ordered;	/* their q_x */
	const int32_t *qabs_ordered;	/* and |q_x| */
	int			paired;			/* how many are in pairs */
	int			narrow;			/* how many are narrow, those included */
	int32_t		corr_narrow;	/* corr's share of the narrow groups */
	const int16_t *pairs;		/* per group, q_x of positions 0 and 2 in 8
								 * alternating int16, then of 1 and 3 */
	int32_t		corr;			/* -128 sum_j q_x,j: the byte offset's share */
	float		sx;				/* s_x */
	float		A;				/* the terms of E, see score.c */
	float		B;
	float		eta;
} Query;

/* A query's first pass: the running floor and the candidates so far. */
typedef struct Scan
{
	WalsTopK	lower;			/* the k best lower bounds */
	float		threshold;		/* the k-th of them, -inf until k are in */
	int32_t    *cand;			/* items whose upper bound reached it */
	float	   *cand_upper;
	int64_t		ncand;
} Scan;

/*
 * Each path's first pass, for nu queries at once, and its bounds alone
 * (for tests): what score.c's table of paths points to.
 */
extern void wals_score_scan_portable(const WalsScoreIndex *ix,
									 const Query *q, Cursor *c, Scan *st,
									 int nu);
extern void wals_score_bounds_portable(const WalsScoreIndex *ix,
									   const Query *q, float *lower,
									   float *upper);

#ifdef SCORE_X86
extern void wals_score_scan_vnni(const WalsScoreIndex *ix, const Query *q,
								 Cursor *c, Scan *st, int nu);
extern void wals_score_bounds_vnni(const WalsScoreIndex *ix, const Query *q,
								   float *lower, float *upper);
extern void wals_score_scan_avx2(const WalsScoreIndex *ix, const Query *q,
								 Cursor *c, Scan *st, int nu);
extern void wals_score_bounds_avx2(const WalsScoreIndex *ix, const Query *q,
								   float *lower, float *upper);
#endif

#ifdef SCORE_NEON
extern void wals_score_scan_neon(const WalsScoreIndex *ix, const Query *q,
								 Cursor *c, Scan *st, int nu);
extern void wals_score_bounds_neon(const WalsScoreIndex *ix, const Query *q,
								   float *lower, float *upper);
#endif

#ifdef SCORE_DOTPROD
extern void wals_score_scan_dotprod(const WalsScoreIndex *ix, const Query *q,
									Cursor *c, Scan *st, int nu);
extern void wals_score_bounds_dotprod(const WalsScoreIndex *ix,
									  const Query *q, float *lower,
									  float *upper);
#endif

/*
 * A path's core: the bounds of the 16 items of blk for query q; returns
 * the eligible lanes whose upper bound reaches threshold, storing both
 * bounds when there are any.
 */
typedef uint32_t (*BlockFn) (const unsigned char *blk, int groups,
							 const Query *q, float threshold,
							 uint32_t eligible, float *lower, float *upper);

/*
 * The loops around a block function are written once and inlined into
 * each path's functions, where the constant block function is inlined in
 * turn, compiled for that path's instruction set.
 */
#ifdef __GNUC__
#define SCORE_INLINE inline __attribute__((always_inline))
#define SCORE_PREFETCH(p) __builtin_prefetch(p)
#else
#define SCORE_INLINE inline
#define SCORE_PREFETCH(p) ((void) (p))
#endif

/*
 * Record block items as candidates (mask cand) and push their lower bounds.
 * Items pushed below a threshold raised by an earlier lane are refused by
 * the heap itself.
 */
static void
scan_take(Scan *st, int64_t base, uint32_t cand, const float *lower,
		  const float *upper)
{
	int			lane;

	for (lane = 0; lane < BLOCK; lane++)
	{
		if (!(cand >> lane & 1))
			continue;
		st->cand[st->ncand] = (int32_t) (base + lane);
		st->cand_upper[st->ncand++] = upper[lane];
		if (lower[lane] > st->threshold)
			wals_topk_push(&st->lower, (int32_t) (base + lane), lower[lane]);
	}
	if (st->lower.size == st->lower.k)
		st->threshold = st->lower.score[0];
}

/* The first block from b on that one of the nu users may take. */
static int64_t
next_block(Cursor *c, int nu, int64_t b, int64_t nblocks)
{
	int64_t		first = nblocks;
	int			u;

	for (u = 0; u < nu && first > b; u++)
	{
		int64_t		next = cursor_next_block(&c[u], b, nblocks);

		first = next < first ? next : first;
	}
	return first;
}

/*
 * The first pass of nu queries at once, block by block, so that a block
 * read from memory serves them all while it is in the first-level cache.
 * Each path inlines this body with its own block function, compiled for
 * its own instruction set.
 */
static SCORE_INLINE void
scan_body(const WalsScoreIndex *ix, const Query *q, Cursor *c, Scan *st,
		  int nu, BlockFn block)
{
	int64_t		nblocks = block_count(ix->n);
	size_t		bb = block_bytes(ix->groups);
	int64_t		b;
	int			u;

	for (b = next_block(c, nu, 0, nblocks); b < nblocks;
		 b = next_block(c, nu, b + 1, nblocks))
	{
		size_t		o;

		if (b + PREFETCH_BLOCKS < nblocks)
			for (o = 0; o < bb; o += 64)
				SCORE_PREFETCH(ix->blocks + (size_t) (b + PREFETCH_BLOCKS) * bb + o);
		for (u = 0; u < nu; u++)
		{
			float		lower[BLOCK];
			float		upper[BLOCK];
			uint32_t	eligible = cursor_block_mask(&c[u], b, ix->n);
			uint32_t	cand;

			if (eligible == 0)
				continue;
			cand = block(ix->blocks + (size_t) b * bb, ix->groups, &q[u],
						 st[u].threshold, eligible, lower, upper);
			if (cand)
				scan_take(&st[u], b * BLOCK, cand, lower, upper);
		}
	}
}

/* Every item's bounds, for tests, through the same block function. */
static SCORE_INLINE void
bounds_body(const WalsScoreIndex *ix, const Query *q, float *lower,
			float *upper, BlockFn block)
{
	size_t		bb = block_bytes(ix->groups);
	int64_t		b;

	for (b = 0; b < block_count(ix->n); b++)
	{
		float		lo[BLOCK];
		float		up[BLOCK];
		int64_t		j;

		block(ix->blocks + (size_t) b * bb, ix->groups, q, -INFINITY, 0xffff,
			  lo, up);
		for (j = 0; j < BLOCK && b * BLOCK + j < ix->n; j++)
		{
			lower[b * BLOCK + j] = lo[j];
			upper[b * BLOCK + j] = up[j];
		}
	}
}

#endif							/* SCORE_INTERNAL_H */
