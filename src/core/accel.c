/*
 * accel.c
 *	  What ALS-NCG needs beside the sweeps: L along a line through all
 *	  factors.
 *
 * Moving X and Y together by t DX and t DY changes each prediction to
 *
 *	  x(t).y(t) = d0 + d1 t + d2 t^2,  d0 = x.y, d1 = x.dy + dx.y, d2 = dx.dy,
 *
 * so every term of L is a polynomial of degree four in t: the observed
 * cells through their three dot products, the unobserved ones through the
 * trace identity of loss.c applied to Grams that are themselves quadratic in
 * t, and the regularisation as a quadratic.  The line search then minimises
 * an exact quartic rather than probing L at trial steps, each of which
 * would cost a pass over the ratings.
 */
#include <math.h>

#include "wals_internal.h"

/* 2 pi / 3, the spacing of a cubic's three real roots on the circle. */
#define WALS_TWO_PI_3 2.0943951023931954923

/* Cells whose dot products are taken at a time, as in loss.c. */
#define LINE_BLOCK 256

static double
dot_double(const float *a, const float *b, int f)
{
	double		s = 0.0;
	int			k;

	for (k = 0; k < f; k++)
		s += (double) a[k] * b[k];
	return s;
}

/* coef += lambda s (|x|^2 + 2 t x.dx + t^2 |dx|^2) */
static void
add_reg(double ls, const float *x, const float *dx, int f, double *coef)
{
	coef[0] += ls * dot_double(x, x, f);
	coef[1] += ls * 2.0 * dot_double(x, dx, f);
	coef[2] += ls * dot_double(dx, dx, f);
}

/*
 * Per cell, with yhat(t) = d0 + d1 t + d2 t^2:
 * c (p - yhat)^2 - w0 yhat^2 = (c - w0) yhat^2 - 2 c p yhat + c p^2.
 */
void
wals_line_rows(const WalsParams *params, const WalsCsr *R,
			   const float *X, const float *DX,
			   const float *Y, const float *DY,
			   int64_t lo, int64_t hi, double coef[WALS_LINE_TERMS])
{
	const WalsKernels *kern = wals_kernels();
	int			f = params->factors;
	double		w0 = params->w0;
	float		d0[LINE_BLOCK];
	float		d1[LINE_BLOCK];
	float		e1[LINE_BLOCK];
	float		d2[LINE_BLOCK];
	float		decoded[LINE_BLOCK];
	int64_t		u;

	for (u = lo; u < hi; u++)
	{
		const float *x = X + u * f;
		const float *dx = DX + u * f;
		int64_t		start = R->indptr[u];
		int64_t		nnz = R->indptr[u + 1] - start;
		double		s = wals_row_scale(params, nnz, R->ncols);
		int64_t		j0;

		for (j0 = 0; j0 < nnz; j0 += LINE_BLOCK)
		{
			int			m = nnz - j0 < LINE_BLOCK ? (int) (nnz - j0) : LINE_BLOCK;
			const int32_t *idx = R->indices + start + j0;
			const float *val = wals_csr_values(R, start + j0, m, decoded);
			int			j;

			kern->dots2(Y, idx, m, f, x, dx, d0, e1);
			kern->dots2(DY, idx, m, f, x, dx, d1, d2);
			for (j = 0; j < m; j++)
			{
				double		a = d0[j];
				double		b = (double) d1[j] + e1[j];
				double		q = d2[j];
				float		c;
				float		p;
				double		cw;
				double		cp;

				wals_cell_weights(params, val[j], &c, &p);
				cw = (double) c - w0;
				cp = (double) c * p;
				coef[0] += cw * a * a - 2.0 * cp * a + cp * p;
				coef[1] += cw * 2.0 * a * b - 2.0 * cp * b;
				coef[2] += cw * (b * b + 2.0 * a * q) - 2.0 * cp * q;
				coef[3] += cw * 2.0 * b * q;
				coef[4] += cw * q * q;
			}
			wals_poll((int64_t) 4 * m * f);
		}
		add_reg(params->regularization * s, x, dx, f, coef);
		wals_poll((int64_t) 3 * f);
	}
}

void
wals_line_reg_rows(const WalsParams *params, const WalsCsr *Rt,
				   const float *Y, const float *DY,
				   int64_t lo, int64_t hi, double coef[WALS_LINE_TERMS])
{
	int			f = params->factors;
	int64_t		i;

	for (i = lo; i < hi; i++)
	{
		double		s = wals_row_scale(params, Rt->indptr[i + 1] - Rt->indptr[i], Rt->ncols);

		add_reg(params->regularization * s, Y + i * f, DY + i * f, f, coef);
		wals_poll((int64_t) 3 * f);
	}
}

/*
 * One sgemm where it is within WALS_BLAS_PIECE, else cut as the Gram is
 * (wals_piece_rows): pieces of rows, and stripes of C's rows where even
 * a few hundred rows cost too much; a poll after each.
 */
void
wals_cross_rows(const float *X, const float *D, int64_t lo, int64_t hi,
				int f, float *C)
{
	int64_t		per = (int64_t) f * f;
	int64_t		kc;
	int64_t		k0;
	int			h;

	if (hi <= lo || f <= 0)
		return;
	if (per * (hi - lo) <= WALS_BLAS_PIECE)
	{
		wals_blas()->sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, f, f, (int) (hi - lo),
					       1.0f, X + lo * f, f, D + lo * f, f, 1.0f, C, f);
		wals_poll(per * (hi - lo));
		return;
	}
	kc = wals_piece_rows(per, f, hi - lo, &h);
	for (k0 = lo; k0 < hi; k0 += kc)
	{
		int			m = (int) (hi - k0 < kc ? hi - k0 : kc);
		int			a0;

		for (a0 = 0; a0 < f; a0 += h)
		{
			int			w = f - a0 < h ? f - a0 : h;

			wals_blas()->sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, w, f, m, 1.0f,
						       X + k0 * f + a0, f, D + k0 * f, f, 1.0f, C + (size_t) a0 * f, f);
			wals_poll((int64_t) w * f * m);
		}
	}
}

/*
 * trace(A(t) B(t)) with A(t) = A0 + t A1 + t^2 A2 and A1 = C + C^T:
 * sum_ab A(t)_ab B(t)_ab, so coefficient k gathers <A_i, B_j> for i + j = k.
 */
void
wals_line_unobserved(const WalsParams *params,
					 const float *GX, const float *CX, const float *GDX,
					 const float *GY, const float *CY, const float *GDY,
					 double coef[WALS_LINE_TERMS])
{
	int			f = params->factors;
	double		w0 = params->w0;
	double		s[3][3] = {{0}};
	int			a;
	int			b;
	int			i;
	int			j;

	if (w0 == 0.0)
		return;
	for (a = 0; a < f; a++)
	{
		for (b = 0; b < f; b++)
		{
			size_t		ab = (size_t) a * f + b;
			size_t		ba = (size_t) b * f + a;
			double		x[3] = {GX[ab], (double) CX[ab] + CX[ba], GDX[ab]};
			double		y[3] = {GY[ab], (double) CY[ab] + CY[ba], GDY[ab]};

			for (i = 0; i < 3; i++)
				for (j = 0; j < 3; j++)
					s[i][j] += x[i] * y[j];
		}
		/* nine products an entry, and CX[ba] read down a column */
		wals_poll((int64_t) 16 * f);
	}
	for (i = 0; i < 3; i++)
		for (j = 0; j < 3; j++)
			coef[i + j] += w0 * s[i][j];
}

static double
quartic_at(const double *c, double t)
{
	return (((c[4] * t + c[3]) * t + c[2]) * t + c[1]) * t + c[0];
}

/*
 * The real roots of a3 t^3 + a2 t^2 + a1 t + a0 (a3 != 0), by the
 * trigonometric or Cardano form, each polished by two Newton steps; the
 * caller only compares the quartic at them, so a root missed by
 * cancellation costs a worse step, never a wrong value.
 */
static int
cubic_roots(double a3, double a2, double a1, double a0, double *roots)
{
	double		b = a2 / a3;
	double		c = a1 / a3;
	double		d = a0 / a3;
	double		p = c - b * b / 3.0;
	double		q = 2.0 * b * b * b / 27.0 - b * c / 3.0 + d;
	double		disc = q * q / 4.0 + p * p * p / 27.0;
	int			n;
	int			k;

	if (disc > 0)
	{
		double		sq = sqrt(disc);

		roots[0] = cbrt(-q / 2.0 + sq) + cbrt(-q / 2.0 - sq) - b / 3.0;
		n = 1;
	}
	else if (p == 0.0)
	{
		roots[0] = -b / 3.0;
		n = 1;
	}
	else
	{
		double		r = 2.0 * sqrt(-p / 3.0);
		double		arg = 3.0 * q / (p * r);
		double		phi;

		arg = arg > 1.0 ? 1.0 : arg < -1.0 ? -1.0 : arg;
		phi = acos(arg) / 3.0;
		for (k = 0; k < 3; k++)
			roots[k] = r * cos(phi - WALS_TWO_PI_3 * k) - b / 3.0;
		n = 3;
	}
	for (k = 0; k < n; k++)
	{
		int			it;

		for (it = 0; it < 2; it++)
		{
			double		t = roots[k];
			double		f = ((a3 * t + a2) * t + a1) * t + a0;
			double		df = (3.0 * a3 * t + 2.0 * a2) * t + a1;

			if (df != 0.0 && isfinite(f / df))
				roots[k] = t - f / df;
		}
	}
	return n;
}

/*
 * The quartic's leading coefficient is the weight of (dx.dy)^2 over all
 * cells, never negative; where it vanishes (a direction that moves one
 * side only) the quartic is a quadratic.  A leading term too small to
 * matter beside the others is treated as zero, or rounding would put the
 * minimum of a nearly quadratic function far out.
 */
int
wals_quartic_min(const double coef[WALS_LINE_TERMS], double *t, double *value)
{
	double		roots[3];
	double		scale = 0.0;
	double		best_t = 0.0;
	double		best = coef[0];
	int			n = 0;
	int			k;

	for (k = 0; k < WALS_LINE_TERMS; k++)
	{
		if (!isfinite(coef[k]))
			return 0;
		scale = fmax(scale, fabs(coef[k]));
	}
	if (coef[4] < 0 || (coef[4] <= 1e-12 * scale && coef[3] != 0.0 &&
						fabs(coef[3]) > 1e-12 * scale))
		return 0;
	if (coef[4] > 1e-12 * scale)
		n = cubic_roots(4.0 * coef[4], 3.0 * coef[3], 2.0 * coef[2], coef[1], roots);
	else if (coef[2] > 0)
	{
		roots[0] = -coef[1] / (2.0 * coef[2]);
		n = 1;
	}
	else
	{
		*t = 0.0;
		*value = coef[0];
		return coef[1] == 0.0 && coef[2] == 0.0;
	}
	for (k = 0; k < n; k++)
	{
		double		v = quartic_at(coef, roots[k]);

		if (isfinite(roots[k]) && isfinite(v) && v < best)
		{
			best = v;
			best_t = roots[k];
		}
	}
	*t = best_t;
	*value = best;
	return 1;
}
