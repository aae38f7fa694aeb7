/*
 * test_accel.c
 *	  What ALS-NCG relies on: the quartic along a line against the loss
 *	  summed over every cell at several steps, and the minimum of known
 *	  quartics.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

static float *
random_rows(TestRng *rng, int rows, int f, double scale)
{
	float	   *v = test_alloc((size_t) rows * f, sizeof(float));
	int			k;

	for (k = 0; k < rows * f; k++)
		v[k] = (float) (scale * rng_normal(rng));
	return v;
}

/* v = a + t d, over n floats */
static void
step(const float *a, double t, const float *d, int n, float *v)
{
	int			k;

	for (k = 0; k < n; k++)
		v[k] = (float) (a[k] + t * d[k]);
}

static double
poly(const double *c, double t)
{
	return (((c[4] * t + c[3]) * t + c[2]) * t + c[1]) * t + c[0];
}

/* The quartic of z + t d against the loss summed over every cell. */
static void
test_line(void)
{
	static const double steps[] = {-1.0, 0.0, 0.4, 1.0, 2.5};
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		TestProblem tp;
		TestRng		rng;
		int			f = 4;
		float	   *DX;
		float	   *DY;
		float	   *Xt;
		float	   *Yt;
		float	   *M[6];
		double		coef[WALS_LINE_TERMS] = {0};
		int			s;
		int			k;

		problem_make_variant(&tp, tv, 9, 12, f, 0.4, 1300 + v);
		rng_seed(&rng, 31 + v);
		DX = random_rows(&rng, tp.m, f, 0.3);
		DY = random_rows(&rng, tp.n, f, 0.3);
		Xt = test_alloc((size_t) tp.m * f, sizeof(float));
		Yt = test_alloc((size_t) tp.n * f, sizeof(float));
		for (k = 0; k < 6; k++)
			M[k] = test_alloc((size_t) f * f, sizeof(float));

		wals_gram_rows(tp.X, 0, tp.m, f, M[0]);
		wals_cross_rows(tp.X, DX, 0, tp.m, f, M[1]);
		wals_gram_rows(DX, 0, tp.m, f, M[2]);
		wals_gram_rows(tp.Y, 0, tp.n, f, M[3]);
		wals_cross_rows(tp.Y, DY, 0, 5, f, M[4]);
		wals_cross_rows(tp.Y, DY, 5, tp.n, f, M[4]);
		wals_gram_rows(DY, 0, tp.n, f, M[5]);
		wals_line_rows(&tp.params, &tp.R, tp.X, DX, tp.Y, DY, 0, 4, coef);
		wals_line_rows(&tp.params, &tp.R, tp.X, DX, tp.Y, DY, 4, tp.m, coef);
		wals_line_reg_rows(&tp.params, &tp.Rt, tp.Y, DY, 0, tp.n, coef);
		wals_line_unobserved(&tp.params, M[0], M[1], M[2], M[3], M[4], M[5], coef);

		for (s = 0; s < (int) (sizeof(steps) / sizeof(steps[0])); s++)
		{
			double		want;
			double		got = poly(coef, steps[s]);

			step(tp.X, steps[s], DX, tp.m * f, Xt);
			step(tp.Y, steps[s], DY, tp.n * f, Yt);
			want = brute_loss(&tp, Xt, Yt);
			CHECK(fabs(got - want) < 1e-4 * fabs(want) + 1e-6,
				  "%s: L(z + %g d) from the quartic %.10g, every cell %.10g",
				  tv->name, steps[s], got, want);
		}
		CHECK(coef[4] >= 0, "%s: leading coefficient %g is negative", tv->name, coef[4]);
		problem_free(&tp);
		free(DX);
		free(DY);
		free(Xt);
		free(Yt);
		for (k = 0; k < 6; k++)
			free(M[k]);
	}
}

static void
check_min(const char *what, const double *c, int ok_want, double t_want)
{
	double		t = -99.0;
	double		value = -99.0;
	int			ok = wals_quartic_min(c, &t, &value);

	CHECK(ok == ok_want, "%s: minimum found %d, want %d", what, ok, ok_want);
	if (ok && ok_want)
	{
		CHECK(fabs(t - t_want) < 1e-6 * (1 + fabs(t_want)), "%s: step %.10g, want %.10g",
			  what, t, t_want);
		CHECK(fabs(value - poly(c, t_want)) < 1e-9 * (1 + fabs(value)),
			  "%s: value %.12g, want %.12g", what, value, poly(c, t_want));
	}
}

static void
test_quartic_min(void)
{
	/* (t - 2)^2 (t + 1)^2 + t: two wells, the one near -1 lower by 3 */
	double		wells[5] = {4.0, 5.0, -3.0, -2.0, 1.0};
	double		quartic[5] = {0.0, -4.0, 0.0, 0.0, 1.0};	/* t^4 - 4t: t = 1 */
	double		quad[5] = {1.0, -6.0, 3.0, 0.0, 0.0};	/* t = 1 */
	double		concave[5] = {1.0, 0.0, 0.0, 0.0, -1.0};
	double		linear[5] = {1.0, 2.0, 0.0, 0.0, 0.0};
	double		cubic[5] = {0.0, 0.0, 1.0, 1.0, 0.0};
	double		flat[5] = {3.0, 0.0, 0.0, 0.0, 0.0};
	double		nan_coef[5] = {1.0, NAN, 1.0, 0.0, 1.0};
	double		t;
	double		value;

	check_min("t^4 - 4t", quartic, 1, 1.0);
	check_min("3t^2 - 6t + 1", quad, 1, 1.0);
	check_min("-t^4 + 1", concave, 0, 0.0);
	check_min("2t + 1", linear, 0, 0.0);
	check_min("t^3 + t^2", cubic, 0, 0.0);
	check_min("3", flat, 1, 0.0);
	check_min("NaN", nan_coef, 0, 0.0);

	CHECK(wals_quartic_min(wells, &t, &value) == 1, "two wells: no minimum");
	CHECK(t < -0.5 && t > -1.5, "two wells: step %g is not in the lower well near -1", t);
	CHECK(value <= poly(wells, -1.0) + 1e-12, "two wells: value %g above the well's %g",
		  value, poly(wells, -1.0));
}

void
test_accel(void)
{
	test_line();
	test_quartic_min();
}
