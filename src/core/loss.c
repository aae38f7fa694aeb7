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
 * Cells whose predictions are taken at a time: the dot products go through
 * the vector kernels, the squares and the sum stay in double.
 */
#define LOSS_BLOCK 256

/*
 * Part of the observed term of one row: c (p - x.y)^2 - w0 (x.y)^2 over its
 * cells, in four partial sums, which breaks the chain of dependent
 * additions in a fixed order.
 */
static double
row_loss(const WalsParams *params, const WalsKernels *kern, const float *x,
		 const float *Y, const WalsCsr *R, int64_t start, int64_t nnz)
{
	double		w0 = params->w0;
	double		acc[4] = {0.0, 0.0, 0.0, 0.0};
	float		pred[LOSS_BLOCK];
	float		decoded[LOSS_BLOCK];
	int64_t		j0;

	for (j0 = 0; j0 < nnz; j0 += LOSS_BLOCK)
	{
		int			m = nnz - j0 < LOSS_BLOCK ? (int) (nnz - j0) : LOSS_BLOCK;
		const float *val = wals_csr_values(R, start + j0, m, decoded);
		int			j;

		kern->dots(Y, R->indices + start + j0, m, params->factors, x, pred);
		for (j = 0; j < m; j++)
		{
			double		e;
			float		c;
			float		p;

			wals_cell_weights(params, val[j], &c, &p);
			e = (double) p - pred[j];
			acc[j & 3] += (double) c * e * e - w0 * pred[j] * pred[j];
		}
		wals_poll((int64_t) 2 * m * params->factors);
	}
	return (acc[0] + acc[1]) + (acc[2] + acc[3]);
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
	const WalsKernels *kern = wals_kernels();
	int			f = params->factors;
	double		total = 0.0;
	int64_t		u;

	for (u = lo; u < hi; u++)
	{
		const float *x = X + u * f;
		int64_t		start = R->indptr[u];
		int64_t		nnz = R->indptr[u + 1] - start;
		double		s = wals_row_scale(params, nnz, R->ncols);

		total += row_loss(params, kern, x, Y, R, start, nnz);
		total += params->regularization * s * sqnorm(x, f);
		wals_poll(f);
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
		double		s = wals_row_scale(params, Rt->indptr[i + 1] - Rt->indptr[i], Rt->ncols);

		total += s * sqnorm(Y + i * f, f);
		wals_poll(f);
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
	int			a;
	int			b;

	if (params->w0 == 0.0f)
		return 0.0;
	for (a = 0; a < f; a++)
	{
		for (b = 0; b < f; b++)
			total += (double) GX[(size_t) a * f + b] * GY[(size_t) a * f + b];
		wals_poll(f);
	}
	return params->w0 * total;
}
