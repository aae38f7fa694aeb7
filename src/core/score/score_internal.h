/*
 * score_internal.h
 *	  What the files of the scoring engine share, and nothing outside them
 *	  uses: the blocks of an index, the terms of the bounds, a query's
 *	  first-pass state, the functions of each file that score_query.c
 *	  calls, and the first pass's loops, which each path's file compiles
 *	  around its own block function.  The design is explained at the head
 *	  of score_query.c.
 *
 * The loops are defined here, static, as the template of simd_family.h
 * defines its kernels: each path inlines them into functions compiled for
 * its own instruction set, and each file that includes this one keeps its
 * own copy of the helpers they call; score_query.c calls none of them.
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

/*
 * Queries sharing each block of the first pass in a batch: the block is
 * read from memory once for all of them, and their state stays in the
 * first-level cache.
 */
#define SCAN_USERS 8

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

/*
 * The largest stored norm |y| in block b and every block after it: the
 * index orders items by that norm, largest first, so it is lane 0's.
 */
static inline float
block_top_norm(const unsigned char *blk, int groups)
{
	return ((const float *) (blk + 64 * (size_t) groups))[2 * BLOCK];
}

/* Relative slack on quantities computed in double before their use. */
#define SLACK_DOUBLE 0x1p-30
#define SLACK_FLOAT 0x1p-20

/* The least float not below v. */
static inline float
float_up(double v)
{
	float		r = (float) v;

	if ((double) r < v)
		r = nextafterf(r, INFINITY);
	return r;
}

/*
 * v to the nearest integer in [-127, 127].  Adding and taking away 1.5
 * 2^52 rounds a double of magnitude below 2^51 to an integer, to nearest
 * (the default mode), with no branch on the sign, which random signs
 * would mispredict half the time, and no call into the maths library in
 * the build's inner loop.
 */
static inline int
clamp_byte(double v)
{
	v = v > 127.0 ? 127.0 : v < -127.0 ? -127.0 : v;
	return (int) ((v + 0x1.8p52) - 0x1.8p52);
}

/* Past this |x| max|y|, scores may near overflow: scan exactly. */
#define SCORE_MAX_PRODUCT 0x1p100

#define U_ROUND 0x1p-24

/*
 * gamma of score_query.c's header, for the rounding of any f-term dot
 * product.
 */
static inline double
dot_gamma(int f)
{
	double		mu = (f + 2) * U_ROUND;

	return mu / (1.0 - mu);
}

/* The absolute allowance for underflow, eta of score_query.c's header. */
static inline double
underflow_eta(int f)
{
	return f * 0x1p-112;
}

/*
 * The bounds prune when k is this many times smaller than the eligible
 * items; above, nearly every item would be rescored anyway.
 */
#define PRUNE_RATIO 4

/*
 * An allow list this many times shorter than the items is scored exactly,
 * row by row: its rows cost less than a pass over every block, which
 * visits the blocks that hold none of them too.  At 41,000 items × 64 a
 * call took 0.05 ms through the blocks whatever the list, 0.02 ms row by
 * row for 200 ids, 0.06 ms for 2,000.
 */
#define ALLOW_EXACT_RATIO 32

/* Whether the bounds can prune enough for k among the filter's items. */
static inline int
prunes(const WalsScoreIndex *ix, const WalsScoreFilter *filter, int k)
{
	int64_t		items = ix->n;

	if (filter && filter->allow && filter->nallow < items)
	{
		if (filter->nallow * ALLOW_EXACT_RATIO < items)
			return 0;
		items = filter->nallow;
	}
	return (int64_t) k * PRUNE_RATIO < items;
}

/* What the first pass needs of a query, from prepare_query (score_query.c). */
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
	float		A;				/* the terms of E, see score_query.c */
	float		B;
	float		eta;
	/* where the scan may stop, see score_query.c (Order) */
	const uint16_t *eligible;	/* per block, the lanes the filter admits */
	float		reach;			/* r <= reach |y| + reach_eta for any item */
	float		reach_eta;
} Query;

/* A query's first pass: the running floor and the candidates so far. */
typedef struct Scan
{
	float	   *floor;			/* a min-heap of the k best lower bounds */
	int			nfloor;
	int			k;
	float		threshold;		/* the k-th of them, -inf until k are in */
	int32_t    *cand;			/* items whose upper bound reached it */
	float	   *cand_upper;
	int64_t		ncand;
	int64_t		visited;		/* blocks passed before it stopped */
} Scan;

/* Where one query's first pass keeps its state. */
typedef struct QueryScratch
{
	int32_t    *qx;				/* groups of four signed bytes */
	int32_t    *offset;			/* see Query */
	int32_t    *qx_ordered;
	int32_t    *qabs_ordered;
	int16_t    *pairs;			/* 16 per group, see Query */
	float	   *floor;			/* the lower-bound heap, k entries */
	int32_t    *cand;			/* candidates, n at most */
	float	   *cand_upper;
	uint16_t   *eligible;		/* a word per block, see Query */
} QueryScratch;

/*
 * What a path's block function reads of a query besides q_x and the
 * bound's terms, made from its bytes q8 into the scratch and pointed to
 * by q: the int16 pairs of the portable path, the order of block_avx2.
 * Each path that needs one has its own, beside its block function; with
 * the scan stopping early, preparing them for a path that ignores them
 * had come to a sixth of a query's time.
 */
typedef void (*PrepareFn) (const int8_t *q8, int groups,
						   const QueryScratch *qs, Query *q);

extern void wals_score_prepare_portable(const int8_t *q8, int groups,
										const QueryScratch *qs, Query *q);
#ifdef SCORE_X86
extern void wals_score_prepare_avx2(const int8_t *q8, int groups,
									const QueryScratch *qs, Query *q);
#endif

/*
 * Each path's first pass, for nu queries at once, and its bounds alone
 * (for tests): what score_query.c's table of paths points to.
 */
extern void wals_score_scan_portable(const WalsScoreIndex *ix,
									 const Query *q, Scan *st, int nu);
extern void wals_score_bounds_portable(const WalsScoreIndex *ix,
									   const Query *q, float *lower,
									   float *upper);

#ifdef SCORE_X86
extern void wals_score_scan_vnni(const WalsScoreIndex *ix, const Query *q,
								 Scan *st, int nu);
extern void wals_score_bounds_vnni(const WalsScoreIndex *ix, const Query *q,
								   float *lower, float *upper);
extern void wals_score_scan_avx2(const WalsScoreIndex *ix, const Query *q,
								 Scan *st, int nu);
extern void wals_score_bounds_avx2(const WalsScoreIndex *ix, const Query *q,
								   float *lower, float *upper);
#endif

#ifdef SCORE_NEON
extern void wals_score_scan_neon(const WalsScoreIndex *ix, const Query *q,
								 Scan *st, int nu);
extern void wals_score_bounds_neon(const WalsScoreIndex *ix, const Query *q,
								   float *lower, float *upper);
#endif

#ifdef SCORE_DOTPROD
extern void wals_score_scan_dotprod(const WalsScoreIndex *ix, const Query *q,
								 Scan *st, int nu);
extern void wals_score_bounds_dotprod(const WalsScoreIndex *ix,
									  const Query *q, float *lower,
									  float *upper);
#endif

/*
 * The exact scan of one query, the reference, and the batch through the
 * matrix product, with its scratch (score_exact.c).
 */
extern int	wals_score_exact_topk(const WalsScoreIndex *ix, const float *x,
								  const WalsScoreFilter *filter, int k,
								  int32_t *idx, float *score);
extern size_t wals_score_product_scratch_size(const WalsScoreIndex *ix, int k);
extern void wals_score_batch_product(const WalsScoreIndex *ix, const float *X,
									 int64_t lo, int64_t hi,
									 const WalsScoreFilter *filters, int k,
									 int32_t *idx, float *score, int *count,
									 unsigned char *scratch);

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
 * Push a lower bound above the threshold into the floor's heap.  Only
 * their values matter, not which items they bound, so the heap holds
 * floats alone, which took a sixth off a query that stops early, where
 * pushes are many beside the blocks scanned.
 */
static inline void
floor_push(Scan *st, float v)
{
	float	   *h = st->floor;
	int			n = st->nfloor;
	int			i;

	if (n < st->k)
	{
		for (i = n; i > 0 && h[(i - 1) / 2] > v; i = (i - 1) / 2)
			h[i] = h[(i - 1) / 2];
		h[i] = v;
		st->nfloor = ++n;
		if (n == st->k)
			st->threshold = h[0];
		return;
	}
	for (i = 0;;)
	{
		int			c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1] < h[c])
			c++;
		if (h[c] >= v)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = v;
	st->threshold = h[0];
}

/*
 * Record block items as candidates (mask cand; item holds the block's
 * items by lane) and push their lower bounds.  A bound pushed below a
 * threshold raised by an earlier lane is left out, as the heap would.
 */
static void
scan_take(Scan *st, const int32_t *item, uint32_t cand, const float *lower,
		  const float *upper)
{
	int			lane;

	for (lane = 0; lane < BLOCK; lane++)
	{
		if (!(cand >> lane & 1))
			continue;
		st->cand[st->ncand] = item[lane];
		st->cand_upper[st->ncand++] = upper[lane];
		if (lower[lane] > st->threshold)
			floor_push(st, lower[lane]);
	}
}

/*
 * The first pass of nu queries at once, block by block, so that a block
 * read from memory serves them all while it is in the first-level cache.
 * A query leaves the pass at the first block whose items cannot reach its
 * floor by their norms, nor can any item after it (score_query.c, Order).
 * Each path inlines this body with its own block function, compiled for
 * its own instruction set.
 */
static SCORE_INLINE void
scan_body(const WalsScoreIndex *ix, const Query *q, Scan *st, int nu,
		  BlockFn block)
{
	int64_t		nblocks = block_count(ix->n);
	size_t		bb = block_bytes(ix->groups);
	uint32_t	live = nu >= 32 ? 0xffffffffu : (1u << nu) - 1;
	int64_t		b;
	int			u;

	for (b = 0; b < nblocks && live; b++)
	{
		const unsigned char *blk = ix->blocks + (size_t) b * bb;
		float		top = block_top_norm(blk, ix->groups);
		size_t		o;

		if (b + PREFETCH_BLOCKS < nblocks)
			for (o = 0; o < bb; o += 64)
				SCORE_PREFETCH(blk + PREFETCH_BLOCKS * bb + o);
		for (u = 0; u < nu; u++)
		{
			float		lower[BLOCK];
			float		upper[BLOCK];
			uint32_t	eligible;
			uint32_t	cand;

			if (!(live >> u & 1))
				continue;
			if (q[u].reach * top + q[u].reach_eta < st[u].threshold)
			{
				live &= ~(1u << u);
				st[u].visited = b;
				continue;
			}
			eligible = q[u].eligible[b];
			if (eligible == 0)
				continue;
			cand = block(blk, ix->groups, &q[u], st[u].threshold, eligible,
						 lower, upper);
			if (cand)
				scan_take(&st[u], ix->item + b * BLOCK, cand, lower, upper);
		}
		/* a block is 16 f bytes read, and 16 f byte products a query */
		if ((b & 15) == 15)
			wals_poll((int64_t) 64 * ix->f * (nu + 1));
	}
	for (u = 0; u < nu; u++)
		if (live >> u & 1)
			st[u].visited = nblocks;
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
			lower[ix->item[b * BLOCK + j]] = lo[j];
			upper[ix->item[b * BLOCK + j]] = up[j];
		}
		wals_poll((int64_t) 8 * ix->f);
	}
}

#endif							/* SCORE_INTERNAL_H */
