/*
 * loss.c
 *	  The exact training loss L, in parts that parallel workers can sum.
 *
 * Visiting every cell would cost users x items.  Instead the observed cells
 * carry their own term minus the w0 (x.y)^2 that the all-cell term counts
 * for them, and the all-cell term sum_ui w0 (x_u.y_i)^2 is
 * w0 trace(X^T X Y^T Y), an f x f product of the two Gram matrices.  Sums
 * are in double: L adds millions of terms and is compared between sweeps.
 */
#include "wals_internal.h"

/* Squares taken in double, where the product of two floats is exact. */
static double
sqnorm(const float *x, int f)
{
	double		s = 0.0;
	int			k;

	for (k = 0; k < f; k++)
		s += (double) x[k] * x[k];
	return s;
}

/*
 * s_u follows the solver: 1 for implicit, the row's count for explicit, so
 * an explicit row without ratings adds nothing.
 */
double
wals_loss_rows(const WalsParams *params, const WalsCsr *R,
			   const float *X, const float *Y,
			   int64_t lo, int64_t hi)
{
	int			f = params->factors;
	double		w0 = params->w0;
	double		total = 0.0;
	int64_t		u;

	for (u = lo; u < hi; u++)
	{
		const float *x = X + u * f;
		int64_t		nnz = R->indptr[u + 1] - R->indptr[u];
		double		s = params->feedback == WALS_EXPLICIT ? (double) nnz : 1.0;
		int64_t		j;

		for (j = R->indptr[u]; j < R->indptr[u + 1]; j++)
		{
			const float *y = Y + (size_t) R->indices[j] * f;
			float		pred = wals_dot(x, y, f);
			float		c;
			float		p;

			wals_cell_weights(params, R->values[j], &c, &p);
			total += (double) c * ((double) p - pred) * ((double) p - pred) -
				w0 * pred * pred;
		}
		total += params->regularization * s * sqnorm(x, f);
	}
	return total;
}

/* The item side's regularisation, with s_i counted on the transpose. */
double
wals_reg_rows(const WalsParams *params, const WalsCsr *Rt,
			  const float *Y, int64_t lo, int64_t hi)
{
	int			f = params->factors;
	double		total = 0.0;
	int64_t		i;

	for (i = lo; i < hi; i++)
	{
		double		s = params->feedback == WALS_EXPLICIT ?
			(double) (Rt->indptr[i + 1] - Rt->indptr[i]) : 1.0;

		total += s * sqnorm(Y + i * f, f);
	}
	return params->regularization * total;
}

/*
 * sum_ui (x_u.y_i)^2 = sum_ab GX_ab GY_ab with GX = X^T X and GY = Y^T Y,
 * both full symmetric as wals_gram_rows leaves them.
 */
double
wals_loss_unobserved(const WalsParams *params,
					 const float *GX, const float *GY)
{
	int			f = params->factors;
	double		total = 0.0;
	int			k;

	if (params->w0 == 0.0f)
		return 0.0;
	for (k = 0; k < f * f; k++)
		total += (double) GX[k] * GY[k];
	return params->w0 * total;
}
