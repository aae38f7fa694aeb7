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

#include <cblas.h>

#include "wals_internal.h"

/*
 * LAPACK's Fortran entry points, which the serial OpenBLAS exports; there is
 * no LAPACKE there, and linking liblapacke would pull in a second, threaded
 * OpenBLAS.  They read matrices column-major: our row-major upper triangle is
 * their lower one.
 */
extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda,
					int *info);
extern void spotrs_(const char *uplo, const int *n, const int *nrhs,
					const float *a, const int *lda, float *b, const int *ldb,
					int *info);

/*
 * The implicit library's threshold: a squared residual below it is float
 * noise, and further steps would divide by it.
 */
#define WALS_CG_TINY 1e-20f

/* b += t a on f-vectors: O(f) per CG step, small beside the sgemv passes. */
static inline void
axpy(float t, const float *restrict a, float *restrict b, int n)
{
	int			k;

	for (k = 0; k < n; k++)
		b[k] += t * a[k];
}

static int
all_finite(const float *x, int n)
{
	int			k;

	for (k = 0; k < n; k++)
		if (!isfinite(x[k]))
			return 0;
	return 1;
}

/*
 * Copy the row's y_i into Yu, contiguous for BLAS, with each cell's c p and
 * c - w0; returns whether every c - w0 is non-negative.
 */
static int
gather_row(const WalsParams *params, const float *Y, const int32_t *idx,
		   const float *val, int nnz, float *Yu, float *cp, float *cw)
{
	int			f = params->factors;
	int			nonneg = 1;
	int			i;

	for (i = 0; i < nnz; i++)
	{
		float		c;
		float		p;

		wals_cell_weights(params, val[i], &c, &p);
		cp[i] = c * p;
		cw[i] = c - params->w0;
		if (cw[i] < 0.0f)
			nonneg = 0;
		memcpy(Yu + (size_t) i * f, Y + (size_t) idx[i] * f, sizeof(float) * f);
	}
	return nonneg;
}

/*
 * Exact solve.  The row's y_i are gathered so that the weighted sum of outer
 * products is one BLAS-3 call: ssyrk on rows scaled by sqrt(c - w0) when all
 * weights allow it (half the flops), else a general product with a weighted
 * copy, since w0 > c is legal and makes some weights negative.  Scratch:
 * gathered rows and weighted rows (nnz x f each), A (f x f), b (f), and the
 * weights c p and c - w0 (nnz each).
 */
static WalsStatus
solve_row_cholesky(const WalsParams *params, const float *Y, const float *G,
				   const int32_t *idx, const float *val, int nnz, float s,
				   float *x, float *scratch)
{
	int			f = params->factors;
	float		w0 = params->w0;
	float	   *Yu = scratch;
	float	   *W = Yu + (size_t) nnz * f;
	float	   *A = W + (size_t) nnz * f;
	float	   *b = A + (size_t) f * f;
	float	   *cp = b + f;
	float	   *cw = cp + nnz;
	int			nonneg;
	int			one = 1;
	int			info = 0;
	int			i;
	int			k;

	nonneg = gather_row(params, Y, idx, val, nnz, Yu, cp, cw);

	if (w0 != 0.0f)
		for (k = 0; k < f * f; k++)
			A[k] = w0 * G[k];
	else
		memset(A, 0, sizeof(float) * f * f);
	for (i = 0; i < nnz; i++)
	{
		float		t = nonneg ? sqrtf(cw[i]) : cw[i];

		for (k = 0; k < f; k++)
			W[(size_t) i * f + k] = t * Yu[(size_t) i * f + k];
	}
	if (nonneg)
		cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, f, nnz,
					1.0f, W, f, 1.0f, A, f);
	else
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, f, f, nnz,
					1.0f, Yu, f, W, f, 1.0f, A, f);
	for (k = 0; k < f; k++)
		A[k * f + k] += params->regularization * s;
	cblas_sgemv(CblasRowMajor, CblasTrans, nnz, f, 1.0f, Yu, f, cp, 1,
				0.0f, b, 1);

	spotrf_("L", &f, A, &f, &info);
	if (info != 0)
		return WALS_ESINGULAR;
	spotrs_("L", &f, &one, A, &f, b, &f, &info);
	if (info != 0 || !all_finite(b, f))
		return WALS_ENONFINITE;
	memcpy(x, b, sizeof(float) * f);
	return WALS_OK;
}

/*
 * A v without forming A: O(nnz f) instead of O(nnz f^2), which is the whole
 * point of CG.  The row's y_i are gathered once so that both passes over
 * them, Yu v and Yu^T (cw .* Yu v), are sgemv calls: OpenBLAS picks the
 * widest vector unit at run time, where our own loops are built for the
 * baseline ISA.  G v is skipped when w0 is 0.
 */
static void
apply_a(const WalsParams *params, const float *G, const float *Yu,
		const float *cw, int nnz, float s, const float *v, float *t,
		float *out)
{
	int			f = params->factors;
	int			i;

	cblas_sgemv(CblasRowMajor, CblasNoTrans, nnz, f, 1.0f, Yu, f, v, 1,
				0.0f, t, 1);
	for (i = 0; i < nnz; i++)
		t[i] *= cw[i];
	cblas_sgemv(CblasRowMajor, CblasTrans, nnz, f, 1.0f, Yu, f, t, 1,
				0.0f, out, 1);
	if (params->w0 != 0.0f)
		cblas_ssymv(CblasRowMajor, CblasUpper, f, params->w0, G, f, v, 1,
					1.0f, out, 1);
	axpy(params->regularization * s, v, out, f);
}

/*
 * Conjugate gradient warm started from the current x, as the implicit
 * library's _least_squares_cg: a few steps from last sweep's answer get most
 * of the way, since factors move little between sweeps.  b is folded into
 * the first residual, r = Yu^T (cp - cw .* Yu x) - w0 G x - lambda s x, to
 * save a pass.  A step whose curvature p.Ap is not positive (A not positive
 * definite, or nothing left to gain in float) ends the loop rather than
 * dividing by it.  A NaN residual is reported at once: the loop's tests
 * would read it as converged and keep the old x.  Scratch: gathered rows
 * (nnz x f), c p, c - w0 and Yu v (nnz each), r, p and Ap (f each).
 */
static WalsStatus
solve_row_cg(const WalsParams *params, const float *Y, const float *G,
			 const int32_t *idx, const float *val, int nnz, float s,
			 float *x, float *scratch)
{
	int			f = params->factors;
	float	   *Yu = scratch;
	float	   *cp = Yu + (size_t) nnz * f;
	float	   *cw = cp + nnz;
	float	   *t = cw + nnz;
	float	   *r = t + nnz;
	float	   *p = r + f;
	float	   *Ap = p + f;
	float		rsold;
	int			step;
	int			i;
	int			k;

	gather_row(params, Y, idx, val, nnz, Yu, cp, cw);

	cblas_sgemv(CblasRowMajor, CblasNoTrans, nnz, f, 1.0f, Yu, f, x, 1,
				0.0f, t, 1);
	for (i = 0; i < nnz; i++)
		t[i] = cp[i] - cw[i] * t[i];
	cblas_sgemv(CblasRowMajor, CblasTrans, nnz, f, 1.0f, Yu, f, t, 1,
				0.0f, r, 1);
	if (params->w0 != 0.0f)
		cblas_ssymv(CblasRowMajor, CblasUpper, f, -params->w0, G, f, x, 1,
					1.0f, r, 1);
	axpy(-params->regularization * s, x, r, f);
	memcpy(p, r, sizeof(float) * f);
	rsold = wals_dot(r, r, f);
	if (!isfinite(rsold))
		return WALS_ENONFINITE;

	for (step = 0; step < params->cg_steps && rsold >= WALS_CG_TINY; step++)
	{
		float		pap;
		float		a;
		float		rsnew;

		apply_a(params, G, Yu, cw, nnz, s, p, t, Ap);
		pap = wals_dot(p, Ap, f);
		if (!isfinite(pap))
			return WALS_ENONFINITE;
		if (pap <= 0.0f)
			break;
		a = rsold / pap;
		axpy(a, p, x, f);
		axpy(-a, Ap, r, f);
		rsnew = wals_dot(r, r, f);
		for (k = 0; k < f; k++)
			p[k] = r[k] + (rsnew / rsold) * p[k];
		rsold = rsnew;
	}
	return all_finite(x, f) ? WALS_OK : WALS_ENONFINITE;
}

/*
 * Exactly what the row solvers below lay out for the longest row.  The
 * caller passes the longest row of the matrix it will solve (or of both
 * sides, to size one buffer for a whole sweep), or rows past it overrun.
 */
size_t
wals_solve_scratch(const WalsParams *params, int64_t max_row_nnz)
{
	size_t		f = params->factors > 0 ? (size_t) params->factors : 0;
	size_t		m = max_row_nnz > 0 ? (size_t) max_row_nnz : 0;

	if (params->solver == WALS_CG)
		return m * f + 3 * m + 3 * f;
	return 2 * m * f + f * f + f + 2 * m;
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
	int64_t		u;

	if (bad_row)
		*bad_row = -1;
	if (f < 1 || lo < 0 || hi < lo || hi > R->nrows ||
		(params->solver != WALS_CHOLESKY && params->solver != WALS_CG) ||
		(params->solver == WALS_CG && params->cg_steps < 0))
		return WALS_EINVAL;

	for (u = lo; u < hi; u++)
	{
		int64_t		start = R->indptr[u];
		int			nnz = (int) (R->indptr[u + 1] - start);
		float		s = params->feedback == WALS_EXPLICIT ? (float) nnz : 1.0f;
		float	   *x = X + u * f;
		WalsStatus	st;

		if (nnz == 0)
		{
			memset(x, 0, sizeof(float) * f);
			continue;
		}
		if (params->solver == WALS_CHOLESKY)
			st = solve_row_cholesky(params, Y, G, R->indices + start,
									R->values + start, nnz, s, x, scratch);
		else
			st = solve_row_cg(params, Y, G, R->indices + start,
							  R->values + start, nnz, s, x, scratch);
		if (st != WALS_OK)
		{
			if (bad_row)
				*bad_row = u;
			return st;
		}
	}
	return WALS_OK;
}
