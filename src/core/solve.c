/*
 * solve.c
 *	  The per-row least-squares updates of an ALS half-sweep.
 *
 * Row u of X minimises its part of L with Y fixed, which is the f x f system
 *
 *	  (w0 G + sum_i (c_i - w0) y_i y_i^T + lambda s_u I) x_u = sum_i c_i p_i y_i
 *
 * over the row's observed cells i only: the unobserved cells enter through
 * w0 G, G = Y^T Y computed once per half-sweep, which keeps a sweep linear in
 * nnz.  Rows are independent, so any split of [lo, hi) gives the same bits.
 */
#include <math.h>
#include <string.h>

#include "wals_internal.h"

/*
 * The implicit library's threshold: a squared residual below it is float
 * noise, and further steps would divide by it.
 */
#define WALS_CG_TINY 1e-20f

/*
 * Cells per block of the Cholesky system: their weighted rows (16 KiB at
 * f = 64) and the factor rows they came from stay in L1 while the Gram
 * kernel sweeps them once per tile of A.  A row of any length needs only
 * one block of scratch, which matters when every worker holds its own and
 * popular items have 100k ratings.
 */
#define WALS_CHOL_BLOCK 64

/* Round a scratch pointer up to WALS_ALIGN; wals_solve_scratch leaves room. */
static float *
align_floats(float *p)
{
	return (float *) wals_align_ptr(p);
}

/*
 * w0 G with rows padded to wals_pad(f), once per call: each row's system
 * starts as a copy of it.
 */
static void
scaled_gram(const WalsParams *params, const float *G, float *wG)
{
	int			f = params->factors;
	int			fp = wals_pad(f);
	int			a;
	int			c;

	wals_fill_floats(wG, NULL, (size_t) f * fp);
	if (params->w0 == 0.0f)
		return;
	for (a = 0; a < f; a++)
	{
		for (c = 0; c < f; c++)
			wG[(size_t) a * fp + c] = params->w0 * G[(size_t) a * f + c];
		wals_poll(fp);
	}
}

/*
 * Exact solve.  The system is w0 G plus the weighted outer products of the
 * row's cells, added a block of cells at a time: the kernel takes any sign
 * of c - w0 (w0 > c is legal), so no square roots and no second path.
 * Scratch: A and b (padded), then one block of weighted rows.
 */
static WalsStatus
solve_row_cholesky(const WalsParams *params, const WalsKernels *kern,
				   const WalsCellLinear *cl, const float *Y, const float *wG,
				   const WalsCsr *R, int64_t start, int nnz, float s,
				   float *x, float *work)
{
	const int32_t *idx = R->indices + start;
	float		decoded[WALS_CHOL_BLOCK];
	int			f = params->factors;
	int			fp = wals_pad(f);
	float	   *A = work;
	float	   *b = A + (size_t) f * fp;
	float	   *W = b + fp;
	WalsPassCoef coef = {cl->cp0, cl->cp1, cl->cp_from, cl->cw0, cl->cw1};
	int			lo;
	int			k;

	wals_fill_floats(A, wG, (size_t) f * fp);
	memset(b, 0, sizeof(float) * fp);
	for (lo = 0; lo < nnz; lo += WALS_CHOL_BLOCK)
	{
		int			m = nnz - lo < WALS_CHOL_BLOCK ? nnz - lo : WALS_CHOL_BLOCK;

		kern->chol_gather(Y, idx + lo, wals_csr_values(R, start + lo, m, decoded),
						  m, f, &coef, W, b);
		kern->gram_acc(A, f, W, Y, idx + lo, m);
		wals_poll((int64_t) m * f * (f / 2 + 2));
	}
	for (k = 0; k < f; k++)
		A[(size_t) k * fp + k] += params->regularization * s;
	if (!kern->chol_solve(A, f, b, x))
		return WALS_ESINGULAR;
	wals_poll((int64_t) f * f / 6 * f + (int64_t) f * f);
	return wals_all_finite(x, f) ? WALS_OK : WALS_ENONFINITE;
}

/* A v = w0 G v + sum_i (c_i - w0) (y_i.v) y_i + lambda s v, never forming A. */
static void
apply_a(const WalsParams *params, const WalsKernels *kern,
		const WalsPassCoef *apply, const float *Y, const float *G,
		const int32_t *idx, const float *val, int nnz, float s,
		const float *v, float *out)
{
	kern->row_pass(Y, idx, val, nnz, params->factors, apply, v, out);
	if (params->w0 != 0.0f)
		kern->symv(G, params->factors, params->w0, v, out);
	kern->axpy(params->regularization * s, v, out, params->factors);
}

/*
 * Conjugate gradient warm started from the current x, as the implicit
 * library's _least_squares_cg: a few steps from last sweep's answer get most
 * of the way, since factors move little between sweeps.  b is folded into
 * the first residual, r = sum_i (c_i p_i - (c_i - w0) y_i.x) y_i - w0 G x -
 * lambda s x, one pass over the cells like each product with A.  A step
 * whose curvature p.Ap is not positive (A not positive definite, or nothing
 * left to gain in float) ends the loop rather than dividing by it.  A NaN
 * residual is reported at once: the loop's tests would read it as converged
 * and keep the old x.  The cells are read in place, so the scratch is r, p
 * and Ap whatever the row's length, and the row's ratings where the matrix
 * keeps them as codes.
 */
static WalsStatus
solve_row_cg(const WalsParams *params, const WalsKernels *kern,
			 const WalsCellLinear *cl, const float *Y, const float *G,
			 const int32_t *idx, const float *val, int nnz, float s,
			 float *x, float *work)
{
	int			f = params->factors;
	int			fp = wals_pad(f);
	float	   *r = work;
	float	   *p = r + fp;
	float	   *Ap = p + fp;
	WalsPassCoef resid = {cl->cp0, cl->cp1, cl->cp_from, -cl->cw0, -cl->cw1};
	WalsPassCoef apply = {0.0f, 0.0f, cl->cp_from, cl->cw0, cl->cw1};
	int64_t		step_work = (int64_t) 2 * nnz * f +
		(params->w0 != 0.0f ? (int64_t) f * f : 0);
	float		rsold;
	int			step;

	kern->row_pass(Y, idx, val, nnz, f, &resid, x, r);
	if (params->w0 != 0.0f)
		kern->symv(G, f, -params->w0, x, r);
	kern->axpy(-params->regularization * s, x, r, f);
	memcpy(p, r, sizeof(float) * f);
	rsold = kern->dot(r, r, f);
	wals_poll(step_work);
	if (!isfinite(rsold))
		return WALS_ENONFINITE;

	for (step = 0; step < params->cg_steps && rsold >= WALS_CG_TINY; step++)
	{
		float		pap;
		float		a;
		float		rsnew;

		apply_a(params, kern, &apply, Y, G, idx, val, nnz, s, p, Ap);
		wals_poll(step_work);
		pap = kern->dot(p, Ap, f);
		if (!isfinite(pap))
			return WALS_ENONFINITE;
		if (pap <= 0.0f)
			break;
		a = rsold / pap;
		kern->axpy(a, p, x, f);
		kern->axpy(-a, Ap, r, f);
		rsnew = kern->dot(r, r, f);
		kern->xpay(r, rsnew / rsold, p, f);
		rsold = rsnew;
	}
	return wals_all_finite(x, f) ? WALS_OK : WALS_ENONFINITE;
}

/*
 * Exactly what the row solvers below lay out: CG needs three f-vectors and
 * the longest row's ratings (decoded there from a matrix of codes),
 * Cholesky w0 G and A (f x f), b and one block of weighted rows, never more
 * than the longest row needs, and the subspace solver what subspace.c
 * says; all round the scratch up to a cache line.
 * The caller passes the longest row of the matrix it will solve (or of both
 * sides, to size one buffer for a whole sweep), or rows past it overrun.
 */
size_t
wals_solve_scratch(const WalsParams *params, int64_t max_row_nnz)
{
	size_t		fp = params->factors > 0 ? (size_t) wals_pad(params->factors) : 0;
	size_t		f = params->factors > 0 ? (size_t) params->factors : 0;
	size_t		block = max_row_nnz < WALS_CHOL_BLOCK ?
		(size_t) (max_row_nnz > 0 ? max_row_nnz : 0) : WALS_CHOL_BLOCK;
	size_t		slack = WALS_ALIGN / sizeof(float);

	if (params->solver == WALS_CG)
		return slack + 3 * fp + (size_t) (max_row_nnz > 0 ? max_row_nnz : 0);
	if (params->solver == WALS_SUBSPACE)
		return wals_subspace_scratch(params, max_row_nnz);
	return slack + 2 * f * fp + fp + block * fp;
}

/*
 * s_u is 1 for implicit feedback and the row's rating count for explicit
 * (ALS-WR), so heavy raters are not under-regularised.  A row without
 * ratings has b = 0 and gets x = 0 directly: under explicit feedback with
 * w0 = 0 its system would have no equations at all.  G is not read when w0
 * is 0, so explicit training may skip computing it.
 */
WalsStatus
wals_solve_rows(const WalsParams *params, const WalsCsr *R,
				const float *Y, const float *G, float *X,
				int64_t lo, int64_t hi, float *scratch,
				int64_t *bad_row)
{
	int			f = params->factors;
	const WalsKernels *kern = wals_kernels();
	WalsCellLinear cl = wals_cell_linear(params);
	float	   *work = align_floats(scratch);
	float	   *wG = NULL;
	int64_t		u;

	if (bad_row)
		*bad_row = -1;
	if (f < 1 || lo < 0 || hi < lo || hi > R->nrows ||
		(params->solver != WALS_CHOLESKY && params->solver != WALS_CG &&
		 params->solver != WALS_SUBSPACE) ||
		(params->solver == WALS_CG && params->cg_steps < 0) ||
		(params->solver == WALS_SUBSPACE && params->block_size < 1))
		return WALS_EINVAL;
	if (params->solver == WALS_SUBSPACE)
		return wals_solve_rows_subspace(params, R, Y, G, X, lo, hi, scratch,
										bad_row);

	if (params->solver == WALS_CHOLESKY)
	{
		wG = work;
		work += (size_t) f * wals_pad(f);
		scaled_gram(params, G, wG);
	}

	for (u = lo; u < hi; u++)
	{
		int64_t		start = R->indptr[u];
		int			nnz = (int) (R->indptr[u + 1] - start);
		float		s = (float) wals_row_scale(params, nnz, R->ncols);
		float	   *x = X + u * f;
		WalsStatus	st;

		if (nnz == 0)
		{
			memset(x, 0, sizeof(float) * f);
			continue;
		}
		if (params->solver == WALS_CHOLESKY)
			st = solve_row_cholesky(params, kern, &cl, Y, wG, R, start,
									nnz, s, x, work);
		else
			st = solve_row_cg(params, kern, &cl, Y, G, R->indices + start,
							  wals_csr_values(R, start, nnz, work + 3 * wals_pad(f)),
							  nnz, s, x, work);
		if (st != WALS_OK)
		{
			if (bad_row)
				*bad_row = u;
			return st;
		}
	}
	return WALS_OK;
}
