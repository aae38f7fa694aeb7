/*
 * explain.c
 *	  Why a user is recommended an item: the share of each rated item.
 *
 * A user's factors solve A x = b with A = w0 G + sum_j (c_j - w0) y_j y_j^T
 * + lambda s I and b = sum_j c_j p_j y_j (solve.c), so the score of item i
 * is y_i . x = sum_j c_j p_j (A^-1 y_i) . y_j: one solve with y_i as the
 * right-hand side splits the score into one term per rated item j, as the
 * implicit library's explain() does for ALS.  The system is formed and
 * factored in double: it is solved once per call, and the terms should add
 * up to the score to the last float bits a user could compare.
 */
#include <math.h>
#include <string.h>

#include "wals_internal.h"

size_t
wals_explain_scratch(int f)
{
	return (size_t) f * f + (size_t) f;
}

WalsStatus
wals_explain_row(const WalsParams *params, const float *G, const float *Y,
				 int64_t ncols, const int32_t *idx, const float *val, int64_t n,
				 const float *yi, float *contrib, double *scratch)
{
	int			f = params->factors;
	double	   *A = scratch;
	double	   *w = A + (size_t) f * f;
	WalsCellLinear cl = wals_cell_linear(params);
	double		s = wals_row_scale(params, n, ncols);

	if (f <= 0 || n < 0)
		return WALS_EINVAL;
	/* A user without ratings has the zero vector: nothing to split. */
	if (n == 0)
		return WALS_OK;
	for (int a = 0; a < f * f; a++)
		A[a] = params->w0 == 0.0f ? 0.0 : (double) params->w0 * G[a];
	for (int64_t j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		double		cw = (double) cl.cw0 + (double) cl.cw1 * fabsf(val[j]);

		for (int a = 0; a < f; a++)
			for (int c = 0; c <= a; c++)
				A[a * f + c] += cw * y[a] * y[c];
		wals_poll((int64_t) f * f / 2);
	}
	for (int a = 0; a < f; a++)
		A[a * f + a] += (double) params->regularization * s;

	/* Cholesky A = L L^T in the lower triangle. */
	for (int a = 0; a < f; a++)
	{
		for (int c = 0; c <= a; c++)
		{
			double		sum = A[a * f + c];

			for (int k = 0; k < c; k++)
				sum -= A[a * f + k] * A[c * f + k];
			if (c < a)
				A[a * f + c] = sum / A[c * f + c];
			else if (!(sum > 0.0))
				return WALS_ESINGULAR;
			else
				A[a * f + a] = sqrt(sum);
		}
		wals_poll((int64_t) a * a / 2 + f);
	}
	for (int a = 0; a < f; a++)
	{
		double		sum = yi[a];

		for (int k = 0; k < a; k++)
			sum -= A[a * f + k] * w[k];
		w[a] = sum / A[a * f + a];
		wals_poll(a + 1);
	}
	for (int a = f - 1; a >= 0; a--)
	{
		double		sum = w[a];

		for (int k = a + 1; k < f; k++)
			sum -= A[k * f + a] * w[k];
		w[a] = sum / A[a * f + a];
		/* down a column of A */
		wals_poll((int64_t) 8 * (f - a));
	}

	for (int64_t j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		double		d = 0.0;

		for (int a = 0; a < f; a++)
			d += w[a] * y[a];
		contrib[j] = val[j] >= cl.cp_from ?
			(float) (((double) cl.cp0 + (double) cl.cp1 * val[j]) * d) : 0.0f;
		if (!isfinite(contrib[j]))
			return WALS_ENONFINITE;
		wals_poll(f);
	}
	return WALS_OK;
}
