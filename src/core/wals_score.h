/*
 * wals_score.h
 *	  Exact top-k recommendation scores over an item matrix, fast.
 *
 * The reference a query must reproduce is the plain scan: score_i =
 * wals_score_dot(x, y_i) for every eligible item i of Y (n x f, row-major),
 * then the k best by wals_topk_select's order (higher score, then lower
 * index; NaN never kept).  Everything here returns that result exactly:
 * the same indices, the same float scores, the same order.  Faster paths
 * only decide which items to score exactly; the scores returned always come
 * from wals_score_dot.
 *
 * An index is built once per item matrix into one caller-owned buffer and
 * read by any number of queries; it keeps a pointer to Y, which must stay
 * alive and unchanged while the index is used.  Queries write only their
 * outputs and their scratch, so concurrent queries may share an index.
 */
#ifndef WALS_SCORE_H
#define WALS_SCORE_H

#include "wals_core.h"

/*
 * Items a query may return: those not in skip and, when allow is not NULL,
 * in allow.  Both lists are sorted ascending; repeats and indices outside
 * [0, n) are harmless.  A NULL filter admits every item.
 */
typedef struct WalsScoreFilter
{
	const int32_t *skip;		/* rated and excluded items */
	int64_t		nskip;
	const int32_t *allow;		/* the only items wanted, or NULL for all */
	int64_t		nallow;
} WalsScoreFilter;

/*
 * The compact copy of Y a query scans first, plus what its bounds need.
 * Written by wals_score_index_build, read-only afterwards.
 */
typedef struct WalsScoreIndex
{
	const float *Y;				/* the exact factors, read by rescoring */
	int64_t		n;
	int			f;
	int			groups;			/* f in groups of 4 bytes, padded */
	int			usable;			/* every factor finite, norms in range */
	float		max_norm;		/* the largest |y_i|, rounded up */
	const unsigned char *blocks;	/* blocks of 16 items, see score_query.c */
	const int32_t *item;		/* the item at each position of the blocks */
	const int32_t *position;	/* and each item's position */
} WalsScoreIndex;

/* The dot product all scores come from: the core's own vector kernel. */
extern float wals_score_dot(const float *x, const float *y, int f);

/* Bytes of buffer an index of n items of f factors needs (any alignment). */
extern size_t wals_score_index_size(int64_t n, int f);

/*
 * Build the index of Y (n x f) in buffer, of wals_score_index_size bytes.
 * WALS_EINVAL when n < 0 or f is outside [1, 32768].
 */
extern WalsStatus wals_score_index_build(WalsScoreIndex *ix, const float *Y,
										 int64_t n, int f, void *buffer);

/*
 * The index of Y (n x f) in buffer, as wals_score_index_build makes it,
 * from old's where most rows are old's rows unchanged: was[i] is the row
 * of old that row i of Y repeats bit for bit, or -1 (new or changed);
 * now[j], for each of old's rows, is the row of Y that repeats it, or -1.
 * Rows repeated keep their order among themselves (was increasing where
 * not -1).  Only the other rows are quantised and sorted, the others'
 * bytes being copied.  old is read, not changed, and may lie anywhere.
 */
extern WalsStatus wals_score_index_patch(WalsScoreIndex *ix, const float *Y, int64_t n,
										 int f, void *buffer, const WalsScoreIndex *old,
										 const int32_t *was, const int32_t *now);

/*
 * The same build in three steps, for builders that share the middle one
 * among processes: begin orders the items (time O(n f), a small part of
 * the build), fill quantises blocks [lo, hi) of the
 * wals_score_index_blocks, which may run at once in any processes on
 * disjoint ranges, each with the index remapped where it maps the buffer,
 * and end, once every block is filled, writes the map from items to
 * positions.  The index answers queries only after end.
 */
extern WalsStatus wals_score_index_begin(WalsScoreIndex *ix, const float *Y,
										 int64_t n, int f, void *buffer);
extern int64_t wals_score_index_blocks(const WalsScoreIndex *ix);
extern void wals_score_index_fill(const WalsScoreIndex *ix, int64_t lo,
								  int64_t hi);
extern void wals_score_index_end(const WalsScoreIndex *ix);

/*
 * Point ix, a copy of a built index's fields, at Y and at its blocks where
 * another process maps them (a shared segment); what else the index holds
 * lies at fixed offsets after the blocks.
 */
extern void wals_score_index_remap(WalsScoreIndex *ix, const float *Y,
								   const void *blocks);

/* Bytes of scratch one query with this k needs (any alignment). */
extern size_t wals_score_scratch_size(const WalsScoreIndex *ix, int k);

/*
 * The k best eligible items for the user vector x (f floats): idx and score
 * (k entries each) receive them best first; returns how many, min(k, number
 * of eligible items with a non-NaN score).
 */
extern int	wals_score_topk(const WalsScoreIndex *ix, const float *x,
							const WalsScoreFilter *filter, int k,
							int32_t *idx, float *score, void *scratch);

/* Bytes of scratch one wals_score_topk_batch call with this k needs. */
extern size_t wals_score_batch_scratch_size(const WalsScoreIndex *ix, int k);
/* The same for any index of n items of f factors, before one is built. */
extern size_t wals_score_batch_scratch_bound(int64_t n, int f, int k);

/*
 * wals_score_topk for users [lo, hi) of X (rows of f floats), with user u's
 * filter at filters[u] (filters NULL: none for anyone), its results at
 * idx + u k and score + u k, and their count at count[u].  Several users
 * share each read of the index (where bytes are multiplied in vectors) or
 * each block of a matrix product (the portable path), which costs less per
 * user than a query each.
 */
extern void wals_score_topk_batch(const WalsScoreIndex *ix, const float *X,
								  int64_t lo, int64_t hi,
								  const WalsScoreFilter *filters, int k,
								  int32_t *idx, float *score, int *count,
								  void *scratch);

/*
 * The scores of m users (rows of X) against n items (rows of Y), both of f
 * factors: scores[u n + i] = x_u.y_i by the matrix product (cblas_sgemm),
 * cut into blocks of items where it would exceed the core's bound on one
 * call into BLAS, with a poll after each (wals_set_poll_hook).  Each score
 * rounds as the product rounds it, not as wals_score_dot: for metrics over
 * every item, not for results that must match a query's.
 */
extern void wals_score_product(const float *X, int m, const float *Y, int64_t n,
							   int f, float *scores);

/*
 * For tests: lower[i] <= wals_score_dot(x, y_i) <= upper[i] for every item,
 * as the first pass of a query bounds them, computed by the same code.
 * Returns 0, writing nothing, where a query would scan exactly instead.
 * scratch as for wals_score_topk with k = 1.
 */
extern int	wals_score_bounds(const WalsScoreIndex *ix, const float *x,
							  float *lower, float *upper, void *scratch);

/*
 * The first pass's instruction set, which follows the kernel family in use
 * (wals_kernels_use): "avx512vnni" for avx512 on a CPU with VNNI, "avx2"
 * for avx512 without it and for avx2, "neon-dotprod" or "neon" for neon on
 * a CPU with or without Arm's dotprod, and "portable" for generic.
 */
extern const char *wals_score_path(void);

#endif							/* WALS_SCORE_H */
