/*
 * test_loss.c
 *	  The exact loss against a sum over every cell, its descent over ALS
 *	  sweeps, and its independence from how rows are split into ranges.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

static void
test_against_dense(void)
{
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		TestProblem tp;
		double		got;
		double		want;

		problem_make_variant(&tp, tv, 13, 17, 6, 0.3, 500 + v);
		got = core_loss(&tp, tp.X, tp.Y);
		want = brute_loss(&tp, tp.X, tp.Y);
		CHECK(fabs(got - want) < 1e-5 * fabs(want), "%s: loss %.10g, every cell %.10g",
			  tv->name, got, want);
		problem_free(&tp);
	}
}

/* One exact half-sweep: rows of A given B, through R (m rows) or Rt. */
static void
half_sweep(const WalsParams *params, const WalsCsr *R, const float *B,
		   int64_t nb, float *A)
{
	int			f = params->factors;
	float	   *G = test_alloc((size_t) f * f, sizeof(float));
	float	   *scratch = test_alloc(wals_solve_scratch(params, csr_max_row(R)),
									 sizeof(float));
	WalsStatus	st;

	wals_gram_rows(B, 0, nb, f, G);
	st = wals_solve_rows(params, R, B, G, A, 0, R->nrows, scratch, NULL);
	CHECK(st == WALS_OK, "half-sweep: %s", wals_status_string(st));
	free(G);
	free(scratch);
}

/*
 * Each exact half-sweep minimises L over one side, and CG steps each lower
 * a row's quadratic, so L must never rise beyond float noise.
 */
static void
test_descent(void)
{
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		int			solver;

		for (solver = 0; solver < 2; solver++)
		{
			const TestVariant *tv = &test_variants[v];
			TestProblem tp;
			WalsParams	params;
			int64_t    *ids;
			double		first;
			double		prev;
			double		now = 0.0;
			int			rising = 0;
			int			it;
			int			r;

			problem_make_variant(&tp, tv, 15, 19, 4, 0.3, 600 + v);
			params = tp.params;
			params.solver = solver == 0 ? WALS_CHOLESKY : WALS_CG;
			ids = test_alloc(tp.n, sizeof(int64_t));
			for (r = 0; r < tp.n; r++)
				ids[r] = 1000 + r;
			wals_init_rows(tp.X, ids, 0, tp.m, 4, 9, 0.1f);
			wals_init_rows(tp.Y, ids, 0, tp.n, 4, 10, 0.1f);
			first = prev = core_loss(&tp, tp.X, tp.Y);
			for (it = 0; it < 6; it++)
			{
				half_sweep(&params, &tp.R, tp.Y, tp.n, tp.X);
				now = core_loss(&tp, tp.X, tp.Y);
				rising += now > prev + 1e-5 * fabs(prev);
				prev = now;
				half_sweep(&params, &tp.Rt, tp.X, tp.m, tp.Y);
				now = core_loss(&tp, tp.X, tp.Y);
				rising += now > prev + 1e-5 * fabs(prev);
				prev = now;
			}
			CHECK(rising == 0, "%s solver %d: loss rose %d times", tv->name,
				  solver, rising);
			CHECK(now < 0.9 * first, "%s solver %d: loss %g from %g", tv->name,
				  solver, now, first);
			CHECK(fabs(now - brute_loss(&tp, tp.X, tp.Y)) < 1e-5 * fabs(now),
				  "%s solver %d: trained loss differs from every cell",
				  tv->name, solver);
			free(ids);
			problem_free(&tp);
		}
	}
}

/* Parts over any split of the rows add up to the whole. */
static void
test_ranges(void)
{
	int64_t		cuts[] = {0, 4, 4, 5, 11, 13};
	int			ncuts = sizeof(cuts) / sizeof(cuts[0]);
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		TestProblem tp;
		double		whole;
		double		parts = 0.0;
		double		reg_whole;
		double		reg_parts = 0.0;
		int			c;

		problem_make_variant(&tp, tv, 13, 13, 5, 0.3, 700 + v);
		whole = wals_loss_rows(&tp.params, &tp.R, tp.X, tp.Y, 0, tp.m);
		reg_whole = wals_reg_rows(&tp.params, &tp.Rt, tp.Y, 0, tp.n);
		for (c = 0; c + 1 < ncuts; c++)
		{
			parts += wals_loss_rows(&tp.params, &tp.R, tp.X, tp.Y,
									cuts[c], cuts[c + 1]);
			reg_parts += wals_reg_rows(&tp.params, &tp.Rt, tp.Y,
									   cuts[c], cuts[c + 1]);
		}
		CHECK(fabs(whole - parts) <= 1e-12 * fabs(whole),
			  "%s: loss parts %.17g, whole %.17g", tv->name, parts, whole);
		CHECK(fabs(reg_whole - reg_parts) <= 1e-12 * fabs(reg_whole),
			  "%s: reg parts %.17g, whole %.17g", tv->name, reg_parts, reg_whole);
		problem_free(&tp);
	}
}

/* Entry point: every loss check. */
void
test_loss(void)
{
	test_against_dense();
	test_descent();
	test_ranges();
}
