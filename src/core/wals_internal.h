/*
 * wals_internal.h
 *	  What the files of src/core share, and nothing outside it uses: the
 *	  weights of a cell, which the solvers and the loss must agree on, or the
 *	  loss would not be the one being minimised; and the vector kernels.
 */
#ifndef WALS_INTERNAL_H
#define WALS_INTERNAL_H

#include <float.h>
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "wals_core.h"

/*
 * A pivot of a Cholesky factorization that goes on: positive and finite.
 * An infinite one would go on with zeros where its column is infinite, and
 * a NaN would pass a test of d <= 0, so that whether a system of
 * non-finite entries (an overflowing confidence) is refused would depend
 * on the kernels; every solver, and the GPU engine, refuses it.
 */
static inline int
wals_pivot_ok(float d)
{
	return d > 0.0f && d <= FLT_MAX;
}

/*
 * Confidence c and target p of one observed cell with merged rating r.  An
 * implicit rating below zero is a dislike, as in the implicit library: the
 * user is confident, by its magnitude, of not wanting the item.
 */
static inline void
wals_cell_weights(const WalsParams *params, float r, float *c, float *p)
{
	if (params->feedback == WALS_IMPLICIT)
	{
		*c = 1.0f + params->alpha * fabsf(r);
		*p = r >= 0.0f ? 1.0f : 0.0f;
	}
	else
	{
		*c = 1.0f;
		*p = r;
	}
}

/*
 * The same weights in the form the kernels take, for both feedback kinds:
 * c - w0 = cw0 + cw1 |r|, and c p = cp0 + cp1 r where r >= cp_from, 0 below
 * it.  A dislike's target is 0, so c p drops to 0 below zero while c goes
 * on rising with |r|: neither is linear in r any more, but each is one
 * absolute value or one comparison away from it, which costs a vector
 * kernel an instruction where a table of per-cell weights would cost a
 * pass over memory.  test_kernels.c checks that the two definitions agree.
 */
typedef struct WalsCellLinear
{
	float		cw0;
	float		cw1;
	float		cp0;
	float		cp1;
	float		cp_from;
} WalsCellLinear;

static inline WalsCellLinear
wals_cell_linear(const WalsParams *params)
{
	WalsCellLinear w;

	w.cw0 = 1.0f - params->w0;
	if (params->feedback == WALS_IMPLICIT)
	{
		w.cw1 = params->alpha;
		w.cp0 = 1.0f;
		w.cp1 = params->alpha;
		w.cp_from = 0.0f;
	}
	else
	{
		w.cw1 = 0.0f;
		w.cp0 = 0.0f;
		w.cp1 = 1.0f;
		w.cp_from = -INFINITY;
	}
	return w;
}

/* ---------- interrupts (poll.c) ---------- */

/*
 * Units of work between two calls of the poll hook: multiply-adds of the
 * vector kernels (a pass over memory counts each element it reads as a
 * few, a random normal as many).  2^24 is about 1 ms of a kernel that
 * computes and 5 to 10 ms of one that waits on memory, on the 2-core
 * machine of doc/performance.md.
 */
#define WALS_POLL_WORK (INT64_C(1) << 24)

/*
 * Multiply-adds of one call into BLAS at most, which cannot poll inside:
 * 2^29 is 10 to 30 ms of OpenBLAS's sgemm on one core.  Products are cut
 * into pieces of this size (wals_syrk_pieces, the matrix products of
 * scoring), each followed by a poll; where a whole product is within it,
 * it stays one call, and its result does not change.
 */
#define WALS_BLAS_PIECE (INT64_C(1) << 29)

/* The work left until the next poll; only wals_poll and poll.c touch it. */
extern int64_t wals_poll_budget;

/* Renew the budget and call the hook (which may not return). */
extern void wals_poll_due(void);

/*
 * Count work units of work just done, and poll when the budget is spent.
 * Call it where the core holds nothing it would have to release.
 */
static inline void
wals_poll(int64_t work)
{
	wals_poll_budget -= work;
	if (wals_poll_budget < 0)
		wals_poll_due();
}

/*
 * The first write to a page of a fresh buffer is a fault of microseconds:
 * about 10 ns a float, dozens of multiply-adds, on the 2-core machine, so
 * that clearing or copying an f x f system at f = 4096 (64 MB) into fresh
 * scratch took 170 ms.  Large clears and copies go by slices of
 * WALS_SLICE_FLOATS, each counting WALS_TOUCH_WORK a float.
 */
#define WALS_SLICE_FLOATS ((size_t) 1 << 16)
#define WALS_TOUCH_WORK 32

/*
 * bytes of dst = those of src, or 0 where src is NULL, by slices of
 * WALS_SLICE_FLOATS floats' bytes, polling.
 */
static inline void
wals_fill_bytes(void *dst, const void *src, size_t bytes)
{
	const size_t slice = sizeof(float) * WALS_SLICE_FLOATS;
	size_t		k;

	for (k = 0; k < bytes; k += slice)
	{
		size_t		m = bytes - k < slice ? bytes - k : slice;

		if (src != NULL)
			memcpy((char *) dst + k, (const char *) src + k, m);
		else
			memset((char *) dst + k, 0, m);
		wals_poll((int64_t) (m / sizeof(float)) * WALS_TOUCH_WORK);
	}
}

/* dst[0..n) = src[0..n), or 0 where src is NULL, by slices, polling. */
static inline void
wals_fill_floats(float *dst, const float *src, size_t n)
{
	wals_fill_bytes(dst, src, sizeof(float) * n);
}

/*
 * Work a cell costs in a pass of a counting sort, or a swap of the
 * in-place grouping (csr.c, csr_group.c): a few nanoseconds streaming, ten
 * or more where the cell's line is missed; those passes poll every
 * WALS_CELL_POLL cells, about a millisecond at the first and 10 ms at the
 * second.
 */
#define WALS_CELL_WORK 32
#define WALS_CELL_POLL ((size_t) 1 << 19)

/*
 * Compact rows [first, last) of csr, sorted by column, in place, folding
 * runs of equal columns into one cell (csr.c), and write the new row
 * starts, from *w on, to indptr[first..last); the rows start at
 * indptr[first..last) and the last ends at end.  counts, where not NULL,
 * receives the number of cells folded into each cell.
 */
extern WalsStatus wals_csr_merge_rows(WalsFeedback feedback, WalsCsr *csr, int64_t first,
									  int64_t last, int64_t end, int64_t *w,
									  int32_t *counts);

/* Bits needed to write every index below ncols, 31 at most (csr.c). */
extern int	wals_index_bits(int64_t ncols);

/*
 * How a product of k rows, each costing row_work multiply-adds over its
 * whole output of n columns, is cut (gram.c): the rows a piece takes, and
 * in *stripe the columns of the output it covers, all n unless a piece
 * of a few hundred rows (or of all k, if fewer) would still exceed
 * WALS_BLAS_PIECE.
 */
extern int64_t wals_piece_rows(int64_t row_work, int n, int64_t k, int *stripe);

/*
 * For the inner loops of the kernels, whose steps are a few dozen cycles at
 * f = 64, where even wals_poll's subtraction and test in memory showed:
 * the work is summed in a local variable, which stays in a register, and
 * handed on once it reaches a sixteenth of the budget; the loop hands on
 * what is left when it ends (wals_poll(*local), which may be 0).
 */
static inline void
wals_poll_local(int64_t *local, int64_t work)
{
	*local += work;
	if (*local >= WALS_POLL_WORK / 16)
	{
		wals_poll(*local);
		*local = 0;
	}
}

/*
 * C += alpha A A^T on the lower triangle of C (n x n), A being n x k, both
 * column-major with leading dimensions lda and ldc: one cblas_ssyrk where
 * it is within WALS_BLAS_PIECE, else pieces of k and stripes of C's
 * columns as wals_piece_rows cuts them, each followed by a poll.
 */
extern void wals_syrk_pieces(int n, int64_t k, float alpha, const float *A,
							 int lda, float *C, int ldc);

/* LAPACK's Fortran entry points, exported by the serial OpenBLAS. */
extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda,
					int *info);
extern void spotrs_(const char *uplo, const int *n, const int *nrhs,
					const float *a, const int *lda, float *b, const int *ldb,
					int *info);

/*
 * The functions of BLAS and LAPACK the core calls, bound on first use
 * (blas.c), of the types CBLAS declares.
 */
typedef struct WalsBlas
{
	__typeof__(&cblas_sgemm) sgemm;
	__typeof__(&cblas_ssyrk) ssyrk;
	__typeof__(&cblas_strsm) strsm;
	__typeof__(&spotrf_) spotrf;
	__typeof__(&spotrs_) spotrs;
} WalsBlas;

extern const WalsBlas *wals_blas(void);

/* ---------- the subspace solver (subspace.c) ---------- */

/*
 * Floats of scratch the subspace solver needs, and the rows [lo, hi) of X
 * solved by blocks of params->block_size dimensions, as wals_solve_rows
 * does with WALS_SUBSPACE (which has checked the arguments).
 */
extern size_t wals_subspace_scratch(const WalsParams *params, int64_t max_row_nnz);
extern WalsStatus wals_solve_rows_subspace(const WalsParams *params,
										   const WalsCsr *R, const float *Y,
										   const float *G, float *X,
										   int64_t lo, int64_t hi,
										   float *scratch, int64_t *bad_row);

/* ---------- vector kernels (kernels.c) ---------- */

/*
 * Floats per vector register of the widest instruction set a kernel may use.
 * Row buffers that kernels write (the Cholesky system, its weighted rows)
 * have rows of wals_pad(f) floats, whole vectors with zero tails, so that
 * the kernels need no masked tail there; factor matrices keep stride f.
 */
#define WALS_VEC 16

/* Scratch buffers start on a cache line, so that whole vectors never split. */
#define WALS_ALIGN 64

/* bytes rounded up to a whole number of WALS_ALIGN */
static inline size_t
wals_align_size(size_t bytes)
{
	return (bytes + WALS_ALIGN - 1) & ~(size_t) (WALS_ALIGN - 1);
}

/* p rounded up to WALS_ALIGN; the buffer must leave room for it */
static inline unsigned char *
wals_align_ptr(void *p)
{
	return (unsigned char *) (((uintptr_t) p + WALS_ALIGN - 1) & ~(uintptr_t) (WALS_ALIGN - 1));
}

/* Whether every one of the n floats at x is finite. */
static inline int
wals_all_finite(const float *x, int n)
{
	int			k;

	for (k = 0; k < n; k++)
		if (!isfinite(x[k]))
			return 0;
	return 1;
}

static inline int
wals_pad(int f)
{
	return (f + WALS_VEC - 1) / WALS_VEC * WALS_VEC;
}

/*
 * Cells whose pieces of a block the subspace solver gathers at a time,
 * when the block's Gram does not fit in registers: 16 kB each for the
 * pieces and their weighted copies at b = 64, in L1 while the register
 * tiles go over them.
 */
#define WALS_SUB_CHUNK 64

/*
 * The factor a row pass gives cell i, t_i = a(r_i) + b(r_i) d_i with
 * d_i = y_i.v, where a(r) = a0 + a1 r for r >= a_from and 0 below it, and
 * b(r) = b0 + b1 |r|: the cell weights c p and c - w0 of WalsCellLinear,
 * scaled, so that a kernel needs only the row's ratings, not per-cell
 * weights computed beforehand.
 */
typedef struct WalsPassCoef
{
	float		a0;
	float		a1;
	float		a_from;
	float		b0;
	float		b1;
} WalsPassCoef;

/* a(r) and b(r) of WalsPassCoef, for the kernels that take a cell at a time. */
static inline float
wals_coef_a(const WalsPassCoef *coef, float r)
{
	return r >= coef->a_from ? coef->a0 + coef->a1 * r : 0.0f;
}

static inline float
wals_coef_b(const WalsPassCoef *coef, float r)
{
	return coef->b0 + coef->b1 * fabsf(r);
}

/* Instruction sets with kernels, widest first; names in wals_isa_names. */
typedef enum WalsIsa
{
	WALS_ISA_AVX512 = 0,
	WALS_ISA_AVX2,
	WALS_ISA_NEON,
	WALS_ISA_GENERIC,
	WALS_ISA_COUNT
} WalsIsa;

/*
 * Features beyond an instruction set's kernels that a path may use: the
 * scoring pass's byte dot products (AVX-512 VNNI, Arm's SDOT).
 */
typedef enum WalsCpuFeature
{
	WALS_CPU_VNNI,
	WALS_CPU_DOTPROD
} WalsCpuFeature;

/* Whether this CPU and its operating system support the feature. */
extern int	wals_cpu_feature(WalsCpuFeature feature);

/*
 * One instruction set's kernels.  Y is a factor matrix of stride f read in
 * place at rows idx[0..n); val holds the n ratings of those cells.
 */
typedef struct WalsKernels
{
	const char *name;
	WalsIsa		isa;

	/* out[0..f) = sum_i t_i y_i, t_i as in WalsPassCoef with d_i = y_i.v */
	void		(*row_pass) (const float *Y, const int32_t *idx, const float *val,
							 int n, int f, const WalsPassCoef *coef,
							 const float *v, float *out);

	/* out[0..f) += alpha G v, G full symmetric f x f of stride f */
	void		(*symv) (const float *G, int f, float alpha, const float *v,
						 float *out);

	/* out[i] = x.y_i for the n cells */
	void		(*dots) (const float *Y, const int32_t *idx, int n, int f,
						 const float *x, float *out);

	/*
	 * outa[i] = a.y_i and outb[i] = b.y_i for the n cells, each row read
	 * once for both: a line search's predictions (accel.c)
	 */
	void		(*dots2) (const float *Y, const int32_t *idx, int n, int f,
						  const float *a, const float *b, float *outa,
						  float *outb);

	/* a.b, b += t a and b = a + t b, on f-vectors: CG's own steps */
	float		(*dot) (const float *a, const float *b, int f);
	void		(*axpy) (float t, const float *a, float *b, int f);
	void		(*xpay) (const float *a, float t, float *b, int f);

	/*
	 * Gather n cells for the Cholesky system: row j of W (stride wals_pad(f),
	 * zero tail) = b(r_j) y_j, and rhs += a(r_j) y_j (WalsPassCoef), rhs of
	 * wals_pad(f) floats with a zero padding that stays zero; W and b
	 * aligned to WALS_ALIGN.
	 */
	void		(*chol_gather) (const float *Y, const int32_t *idx,
								const float *val, int n, int f,
								const WalsPassCoef *coef, float *W, float *rhs);

	/*
	 * A += sum_j y_j W_j^T over the n gathered cells, on the upper triangle
	 * of A (f rows of stride wals_pad(f), aligned to WALS_ALIGN); entries
	 * below the diagonal may be overwritten with anything.
	 */
	void		(*gram_acc) (float *A, int f, const float *W, const float *Y,
							 const int32_t *idx, int n);

	/*
	 * Solve A x = b for symmetric positive definite A given by its upper
	 * triangle, destroying A and b; x has f floats.  A has f rows of stride
	 * wals_pad(f) whose padding columns are zero, b has wals_pad(f) floats
	 * with a zero padding, and both are aligned to WALS_ALIGN.  Returns 0
	 * when A is not positive definite to working precision (a pivot is not
	 * above zero), else 1, x then possibly holding non-finite values (a NaN
	 * in A may show as either).
	 */
	int			(*chol_solve) (float *A, int f, float *b, float *x);

	/*
	 * out[j nx + r] = M_j.X_r for the m rows of M and the nx rows of X,
	 * both of stride f: a small M X^T, each entry summed the same way
	 * whatever m and nx, so that a row's result does not depend on the
	 * rows it is computed with.
	 */
	void		(*gemm_nt) (const float *M, int m, const float *X, int nx,
							int f, float *out);

	/*
	 * The subspace solver's pass over the n cells for the block of
	 * dimensions [k0, k0 + b), reading y_iB = y_i[k0..k0+b) in place: first
	 * yhat_i += y_i[p0..p0+pb).dp, the previous block's step (none when pb
	 * is 0); then, with t_i as in WalsPassCoef with d_i = yhat_i,
	 * rhs[0..b) += t_i y_iB and A += -b(r_i) y_iB y_iB^T.  A (b rows
	 * of stride wals_pad(b)) and rhs (wals_pad(b) floats) are laid out as
	 * chol_solve takes them, their padding zero and left so; only A's upper
	 * triangle is meant, the entries below it may be overwritten.  work has
	 * 2 WALS_SUB_CHUNK wals_pad(b) floats, aligned to WALS_ALIGN.
	 */
	void		(*sub_block) (const float *Y, const int32_t *idx,
							  const float *val, int n, int f,
							  const WalsPassCoef *coef, float *yhat,
							  const float *dp, int p0, int pb, int k0, int b,
							  float *A, float *rhs, float *work);

	/*
	 * below[p] and equal[p] = how many of the n scores s are below r[p]
	 * and equal to it, for p < nr (NaN is neither): AUC's counts
	 * (metrics.c), n below 2^31.
	 */
	void		(*rank_counts) (const float *s, int64_t n, const float *r,
								int nr, int64_t *below, int64_t *equal);
} WalsKernels;


/* The widest kernels this CPU runs, chosen once. */
extern const WalsKernels *wals_kernels(void);

/* The kernels of one instruction set, or NULL where this CPU lacks it. */
extern const WalsKernels *wals_kernels_isa(WalsIsa isa);

/*
 * Make wals_kernels() return these from now on (NULL: choose again), so
 * that tests and benchmarks can run every variant through the solvers.
 */
extern void wals_kernels_force(const WalsKernels *kernels);

/* The portable family's table (kernels_generic.c). */
extern const WalsKernels wals_generic_kernels;

/* The table kernels_simd.c built for isa, NULL where it built none. */
extern const WalsKernels *wals_kernels_simd(WalsIsa isa);

#endif							/* WALS_INTERNAL_H */
