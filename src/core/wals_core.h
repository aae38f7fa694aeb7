/*
 * wals_core.h
 *	  The WALS engine without PostgreSQL: id maps, sparse matrices, the
 *	  per-row solvers, the exact loss and top-k selection.
 *
 * Everything here works on buffers the caller owns and, where work can be
 * split, on a half-open row range [lo, hi), so that one function serves a
 * single backend, each parallel worker and the unit tests alike.  Functions
 * report failure through a WalsStatus and never allocate, longjmp or print;
 * the server glue turns a status into an ereport in one place.
 *
 * Matrices are dense row-major float: row r of an n x f factor matrix starts
 * at r * f.  Sparse matrices are CSR with int64 row pointers (nnz may exceed
 * 2^31) and int32 column indices (users and items are each fewer than 2^31).
 *
 * The objective (DESIGN section 1), over all cells, unobserved ones with
 * weight w0 and target 0:
 *
 *	  L = sum_ui c_ui (p_ui - x_u.y_i)^2 + lambda (sum_u s_u |x_u|^2 + sum_i s_i |y_i|^2)
 *
 * with, for an observed rating r:
 *	  implicit: p = 1, c = 1 + alpha r, s = 1
 *	  explicit: p = r, c = 1,           s = number of ratings of the row
 * and w0 the unobserved weight (1 for implicit, 0 for explicit by default;
 * any other value gives WALS as in TensorFlow).
 */
#ifndef WALS_CORE_H
#define WALS_CORE_H

#include <stddef.h>
#include <stdint.h>

typedef enum WalsStatus
{
	WALS_OK = 0,
	WALS_EINVAL,				/* an argument is out of its domain */
	WALS_ENONFINITE,			/* a rating or a result is NaN or infinite */
	WALS_ESINGULAR,				/* a row's system is not positive definite */
	WALS_ETOOBIG				/* more distinct ids than int32 indices allow */
} WalsStatus;

/* A short lower-case description of a status, for error details. */
extern const char *wals_status_string(WalsStatus status);

typedef enum WalsFeedback
{
	WALS_IMPLICIT = 0,
	WALS_EXPLICIT
} WalsFeedback;

typedef enum WalsSolver
{
	WALS_CHOLESKY = 0,
	WALS_CG
} WalsSolver;

typedef struct WalsParams
{
	WalsFeedback feedback;
	WalsSolver	solver;
	int			factors;		/* f */
	int			cg_steps;		/* CG steps per row and half-sweep */
	float		regularization; /* lambda */
	float		alpha;			/* implicit confidence slope */
	float		w0;				/* unobserved weight, already resolved */
} WalsParams;

/*
 * Compressed sparse rows.  values hold the merged rating r of each cell; the
 * solvers derive c and p from it and the params.  Within a row, indices are
 * strictly increasing.
 */
typedef struct WalsCsr
{
	int64_t		nrows;
	int64_t		ncols;
	int64_t	   *indptr;			/* nrows + 1 entries */
	int32_t	   *indices;		/* indptr[nrows] entries */
	float	   *values;			/* indptr[nrows] entries */
} WalsCsr;

/* ---------- id maps (idmap.c) ---------- */

/*
 * Open-addressing hash from int64 ids to dense int32 indices.  The caller
 * provides the slot arrays, of wals_idmap_slots(n) entries each, for at most
 * n distinct ids.
 */
typedef struct WalsIdMap
{
	int64_t	   *keys;
	int32_t	   *vals;			/* -1 marks an empty slot */
	size_t		nslots;			/* a power of two */
	size_t		count;			/* distinct ids inserted */
} WalsIdMap;

extern size_t wals_idmap_slots(size_t max_distinct);
extern void wals_idmap_init(WalsIdMap *map, int64_t *keys, int32_t *vals, size_t nslots);

/* Index of id, or -1 when absent. */
extern int32_t wals_idmap_find(const WalsIdMap *map, int64_t id);

/*
 * Map ids[0..n) to dense indices in out[0..n), numbering the distinct ids in
 * increasing id order, so that index order is id order and the result does
 * not depend on the order of the input.  uniq receives the distinct ids
 * sorted (capacity n, also used as scratch); *nuniq their count.  map must
 * be freshly initialised with more than n slots, else WALS_EINVAL.
 * Returns WALS_ETOOBIG past INT32_MAX distinct ids.
 */
extern WalsStatus wals_idmap_build(WalsIdMap *map, const int64_t *ids, size_t n,
								   int32_t *out, int64_t *uniq, size_t *nuniq);

/*
 * Index of id in ids[0..n), which must be strictly increasing (as the
 * distinct ids from wals_idmap_build are), or -1 when absent.  For lookups
 * against a stored model, where keeping the hash table would cost memory.
 */
extern int64_t wals_ids_find(const int64_t *ids, int64_t n, int64_t id);

/* ---------- sparse build (csr.c) ---------- */

/*
 * Build the CSR by user from coordinates (row[k], col[k], val[k]), k < n,
 * merging duplicate cells: summed for implicit, averaged for explicit.
 * out->indptr has nrows + 1 entries; out->indices and out->values have room
 * for n; on return out->indptr[nrows] is the merged nnz.  Work buffers:
 * tmp_indptr (ncols + 1 int64), tmp_idx (n int32), tmp_val (n float),
 * counts (n int32).  Returns WALS_EINVAL for an index out of range and
 * WALS_ENONFINITE for a non-finite rating or a merged sum that overflows.
 */
extern WalsStatus wals_csr_from_coo(WalsFeedback feedback,
									int64_t nrows, int64_t ncols, size_t n,
									const int32_t *row, const int32_t *col,
									const float *val, WalsCsr *out,
									int64_t *tmp_indptr, int32_t *tmp_idx,
									float *tmp_val, int32_t *counts);

/* The transpose of a CSR (its CSC, as a CSR by column); rows stay sorted. */
extern void wals_csr_transpose(const WalsCsr *in, WalsCsr *out);

/* ---------- factors (init.c) ---------- */

/*
 * Deterministic initial factors for rows [lo, hi) of X: entry (r, k) is a
 * normal deviate of standard deviation scale drawn from (seed, ids[r], k)
 * alone, so a row's start does not depend on how many rows there are or in
 * which order they were read.
 */
extern void wals_init_rows(float *X, const int64_t *ids, int64_t lo, int64_t hi,
						   int f, uint64_t seed, float scale);

/* ---------- solvers (gram.c, solve.c) ---------- */

/*
 * G += sum over rows [lo, hi) of Y of y y^T (f x f, full symmetric, row-major).
 * The caller zeroes G first; partial sums of disjoint ranges add up.
 */
extern void wals_gram_rows(const float *Y, int64_t lo, int64_t hi, int f, float *G);

/* Floats of scratch one process needs to solve rows with these params and
 * at most max_row_nnz ratings in a row. */
extern size_t wals_solve_scratch(const WalsParams *params, int64_t max_row_nnz);

/*
 * Solve rows [lo, hi) of X given the other side Y, whose Gram G = Y^T Y is
 * already computed.  R has one row per row of X and columns index Y.  Row u
 * solves
 *	  (w0 G + sum_i (c_ui - w0) y_i y_i^T + lambda s_u I) x_u = sum_i c_ui p_ui y_i
 * exactly (Cholesky) or with params->cg_steps conjugate gradient steps warm
 * started from the current x_u.  A row without ratings gets the zero vector.
 * On WALS_ESINGULAR or WALS_ENONFINITE, *bad_row (when not NULL) names the
 * first failing row; WALS_EINVAL for a bad range or params.  G is not read
 * when w0 is 0.
 */
extern WalsStatus wals_solve_rows(const WalsParams *params, const WalsCsr *R,
								  const float *Y, const float *G, float *X,
								  int64_t lo, int64_t hi, float *scratch,
								  int64_t *bad_row);

/* ---------- loss (loss.c) ---------- */

/*
 * Part of L from rows [lo, hi) of R: sum over their observed cells of
 * c (p - x.y)^2 - w0 (x.y)^2, plus lambda s_u |x_u|^2.  Accumulated in double.
 */
extern double wals_loss_rows(const WalsParams *params, const WalsCsr *R,
							 const float *X, const float *Y,
							 int64_t lo, int64_t hi);

/* lambda sum over rows [lo, hi) of s_i |y_i|^2, s_i read from Rt. */
extern double wals_reg_rows(const WalsParams *params, const WalsCsr *Rt,
							const float *Y, int64_t lo, int64_t hi);

/* The unobserved term over every cell, w0 sum_ab GX_ab GY_ab (trace identity). */
extern double wals_loss_unobserved(const WalsParams *params,
								   const float *GX, const float *GY);

/* ---------- top-k (topk.c) ---------- */

/*
 * A bounded heap keeping the k best (score, index) pairs: a higher score
 * wins, and among equal scores the lower index (= the lower id, since
 * indices follow id order).  NaN scores are never kept.
 */
typedef struct WalsTopK
{
	int			k;
	int			size;
	int32_t    *idx;			/* k entries, caller-owned */
	float	   *score;			/* k entries, caller-owned */
} WalsTopK;

extern void wals_topk_init(WalsTopK *heap, int k, int32_t *idx, float *score);
extern void wals_topk_push(WalsTopK *heap, int32_t idx, float score);

/* Sort the kept pairs best first, in place; returns how many there are. */
extern int	wals_topk_finish(WalsTopK *heap);

/*
 * The k best of scores[0..n), skipping the sorted indices skip[0..nskip).
 * Fills idx/score best first and returns the count, min(k, eligible).
 */
extern int	wals_topk_select(const float *scores, int64_t n,
							 const int32_t *skip, int64_t nskip,
							 int k, int32_t *idx, float *score);

#endif							/* WALS_CORE_H */
