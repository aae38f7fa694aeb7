/*
 * test_solve.c
 *	  The Gram matrix and the per-row solvers against dense double-precision
 *	  references, CG's convergence to the exact answer, independence from
 *	  how rows are split into ranges, and the failure statuses.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ||a - b|| / max(||b||, 1): relative where it can be, absolute near 0. */
static double
rel_err(const float *a, const double *b, int f)
{
	double		d = 0.0;
	double		nb = 0.0;
	int			k;

	for (k = 0; k < f; k++)
	{
		d += (a[k] - b[k]) * (a[k] - b[k]);
		nb += b[k] * b[k];
	}
	return sqrt(d) / (sqrt(nb) > 1.0 ? sqrt(nb) : 1.0);
}

static float *
gram(const float *Y, int64_t n, int f)
{
	float	   *G = test_alloc((size_t) f * f, sizeof(float));

	wals_gram_rows(Y, 0, n, f, G);
	return G;
}

/* Solve every row of X in one range; returns the status. */
static WalsStatus
solve_all(const TestProblem *tp, const WalsParams *params, float *X,
		  int64_t *bad_row)
{
	float	   *G = gram(tp->Y, tp->n, params->factors);
	float	   *scratch = test_alloc(wals_solve_scratch(params, csr_max_row(&tp->R)),
									 sizeof(float));
	WalsStatus	st;

	st = wals_solve_rows(params, &tp->R, tp->Y, G, X, 0, tp->m, scratch,
						 bad_row);
	free(G);
	free(scratch);
	return st;
}

static void
test_gram_values(void)
{
	int			n = 23;
	int			f = 7;
	float	   *Y = test_alloc((size_t) n * f, sizeof(float));
	float	   *G = test_alloc((size_t) f * f, sizeof(float));
	float	   *G2 = test_alloc((size_t) f * f, sizeof(float));
	TestRng		rng;
	int			bad = 0;
	int			a;
	int			b;
	int			i;

	rng_seed(&rng, 3);
	for (i = 0; i < n * f; i++)
		Y[i] = (float) rng_normal(&rng);
	wals_gram_rows(Y, 0, n, f, G);
	wals_gram_rows(Y, 0, 9, f, G2);
	wals_gram_rows(Y, 9, 9, f, G2);
	wals_gram_rows(Y, 9, n, f, G2);
	for (a = 0; a < f; a++)
		for (b = 0; b < f; b++)
		{
			double		want = 0.0;

			for (i = 0; i < n; i++)
				want += (double) Y[i * f + a] * Y[i * f + b];
			bad += fabs(G[a * f + b] - want) > 1e-5 * (1.0 + fabs(want));
			bad += fabs(G2[a * f + b] - want) > 1e-5 * (1.0 + fabs(want));
			bad += G[a * f + b] != G[b * f + a] || G2[a * f + b] != G2[b * f + a];
		}
	CHECK(bad == 0, "gram: %d entries wrong or asymmetric", bad);
	free(Y);
	free(G);
	free(G2);
}

/* Both solvers on every variant against the dense normal equations. */
static void
test_against_dense(void)
{
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		int			solver;

		for (solver = 0; solver < 2; solver++)
		{
			TestProblem tp;
			WalsParams	params;
			double	   *want;
			double		worst = 0.0;
			int64_t		bad_row = 7;
			WalsStatus	st;
			int			u;

			problem_make_variant(&tp, tv, 11, 16, 5, 0.35, 100 + v);
			params = tp.params;
			params.solver = solver == 0 ? WALS_CHOLESKY : WALS_CG;
			params.cg_steps = 60;
			want = test_alloc(params.factors, sizeof(double));
			st = solve_all(&tp, &params, tp.X, &bad_row);
			CHECK(st == WALS_OK && bad_row == -1, "%s solver %d: status %s",
				  tv->name, solver, wals_status_string(st));
			for (u = 0; u < tp.m; u++)
			{
				double		e;

				brute_solve_row(&tp, tp.Y, u, want);
				e = rel_err(tp.X + u * params.factors, want, params.factors);
				if (e > worst)
					worst = e;
			}
			CHECK(worst < 1e-4, "%s solver %d: relative error %g", tv->name,
				  solver, worst);
			for (u = 0; u < params.factors; u++)
				CHECK(tp.X[params.factors + u] == 0.0f,
					  "%s solver %d: the empty row is not zero", tv->name, solver);
			free(want);
			problem_free(&tp);
		}
	}
}

/*
 * Frequency-scaled regularisation, s = (n + w0 N)^nu, on every variant and
 * solver: the rows against the dense normal equations, the loss against
 * every cell, and nu = 0 giving the classic implicit models exactly.
 */
static void
test_frequency_scaled(void)
{
	static const float nus[] = {0.0f, 0.5f, 1.0f, 2.0f};

	for (int v = 0; v < n_test_variants; v++)
		for (size_t e = 0; e < sizeof(nus) / sizeof(nus[0]); e++)
			for (int solver = 0; solver < 3; solver++)
			{
				const TestVariant *tv = &test_variants[v];
				TestProblem tp;
				WalsParams	params;
				double	   *want;
				double		worst = 0.0;
				double		loss;
				double		brute;
				int64_t		bad_row = 7;
				WalsStatus	st;

				problem_make_variant(&tp, tv, 11, 16, 5, 0.35, 400 + v);
				tp.params.regularization = 0.05f;
				tp.params.frequency_scaled = true;
				tp.params.reg_exponent = nus[e];
				params = tp.params;
				params.solver = solver == 0 ? WALS_CHOLESKY : solver == 1 ? WALS_CG : WALS_SUBSPACE;
				params.cg_steps = 60;
				params.block_size = params.factors;
				want = test_alloc(params.factors, sizeof(double));
				st = solve_all(&tp, &params, tp.X, &bad_row);
				for (int u = 0; u < tp.m; u++)
				{
					double		err;

					brute_solve_row(&tp, tp.Y, u, want);
					err = rel_err(tp.X + u * params.factors, want, params.factors);
					if (err > worst)
						worst = err;
				}
				CHECK(st == WALS_OK && worst < 1e-4, "%s nu=%g solver %d: status %s, error %g",
					  tv->name, nus[e], solver, wals_status_string(st), worst);
				loss = core_loss(&tp, tp.X, tp.Y);
				brute = brute_loss(&tp, tp.X, tp.Y);
				CHECK(fabs(loss - brute) <= 1e-6 * fabs(brute), "%s nu=%g: loss %.12g, brute %.12g",
					  tv->name, nus[e], loss, brute);
				free(want);
				problem_free(&tp);
			}
	for (int v = 0; v < n_test_variants; v++)
	{
		WalsParams	classic;
		WalsParams	scaled;

		memset(&classic, 0, sizeof(classic));
		classic.feedback = test_variants[v].feedback;
		scaled = classic;

		scaled.frequency_scaled = true;
		CHECK(wals_row_scale(&scaled, 7, 100) == 1.0 &&
			  wals_row_scale(&classic, 7, 100) == (classic.feedback == WALS_EXPLICIT ? 7.0 : 1.0),
			  "%s: nu = 0 and the classic scale", test_variants[v].name);
	}
}

/*
 * In exact arithmetic CG's error norm falls at every step and vanishes
 * after f.  In float the last steps of a moderately conditioned row (here
 * one with condition number near 130) lose conjugacy and land one step
 * late, so the check is a falling error, well down after f steps and exact
 * to float precision after f + 2.
 */
static void
test_cg_convergence(void)
{
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		TestProblem tp;
		WalsParams	params;
		int			f = 6;
		int			steps;
		float	   *exact;
		float	   *X;
		double		prev = INFINITY;
		double		first = 0.0;
		int			rising = 0;

		problem_make_variant(&tp, tv, 10, 15, f, 0.4, 200 + v);
		params = tp.params;
		exact = test_alloc((size_t) tp.m * f, sizeof(float));
		X = test_alloc((size_t) tp.m * f, sizeof(float));
		CHECK(solve_all(&tp, &params, exact, NULL) == WALS_OK, "cholesky");
		params.solver = WALS_CG;
		for (steps = 0; steps <= f + 2; steps++)
		{
			double		err = 0.0;
			double		norm = 0.0;
			int			k;

			memcpy(X, tp.X, sizeof(float) * tp.m * f);
			params.cg_steps = steps;
			CHECK(solve_all(&tp, &params, X, NULL) == WALS_OK, "cg %d", steps);
			for (k = 0; k < tp.m * f; k++)
			{
				err += ((double) X[k] - exact[k]) * ((double) X[k] - exact[k]);
				norm += (double) exact[k] * exact[k];
			}
			err = sqrt(err / norm);
			if (steps == 0)
				first = err;
			rising += err > prev * 1.01 + 1e-6;
			prev = err;
			if (steps == f)
				CHECK(err < 0.1 * first, "%s: CG after f steps is %g from exact",
					  tv->name, err);
			if (steps == f + 2)
				CHECK(err < 1e-4, "%s: CG after f + 2 steps is %g from exact",
					  tv->name, err);
		}
		CHECK(rising == 0, "%s: CG error rose %d times", tv->name, rising);
		CHECK(first > 0.1, "%s: the start was already exact (%g)", tv->name, first);
		free(exact);
		free(X);
		problem_free(&tp);
	}
}

/* Any split of the rows gives the same bits: rows are independent. */
static void
test_ranges(void)
{
	int64_t		cuts[] = {0, 3, 3, 4, 9, 12};
	int			solver;

	for (solver = 0; solver < 2; solver++)
	{
		TestProblem tp;
		WalsParams	params;
		float	   *whole;
		float	   *G;
		float	   *scratch;
		int			c;

		problem_make(&tp, WALS_IMPLICIT, 1.0f, 12, 14, 4, 0.3, 300);
		params = tp.params;
		params.solver = solver == 0 ? WALS_CHOLESKY : WALS_CG;
		whole = test_alloc((size_t) tp.m * 4, sizeof(float));
		memcpy(whole, tp.X, sizeof(float) * tp.m * 4);
		G = gram(tp.Y, tp.n, 4);
		scratch = test_alloc(wals_solve_scratch(&params, csr_max_row(&tp.R)),
							 sizeof(float));
		CHECK(wals_solve_rows(&params, &tp.R, tp.Y, G, whole, 0, tp.m, scratch,
							  NULL) == WALS_OK, "whole range");
		for (c = 0; c + 1 < (int) (sizeof(cuts) / sizeof(cuts[0])); c++)
			CHECK(wals_solve_rows(&params, &tp.R, tp.Y, G, tp.X, cuts[c],
								  cuts[c + 1], scratch, NULL) == WALS_OK,
				  "range %d", c);
		CHECK(memcmp(whole, tp.X, sizeof(float) * tp.m * 4) == 0,
			  "solver %d: split ranges differ from one range", solver);
		free(whole);
		free(G);
		free(scratch);
		problem_free(&tp);
	}
}

static void
test_failures(void)
{
	TestProblem tp;
	WalsParams	params;
	int64_t		bad_row = 0;
	float	   *G;
	float	   *scratch;
	int			expect_row;

	problem_make(&tp, WALS_EXPLICIT, 0.0f, 6, 8, 3, 0.5, 400);
	params = tp.params;
	params.regularization = 0.0f;
	memset(tp.Y, 0, sizeof(float) * tp.n * 3);
	for (expect_row = 0; tp.R.indptr[expect_row + 1] == 0; expect_row++)
		;
	CHECK(solve_all(&tp, &params, tp.X, &bad_row) == WALS_ESINGULAR &&
		  bad_row == expect_row, "zero system: bad_row %lld",
		  (long long) bad_row);

	tp.Y[0] = NAN;
	params.regularization = 0.1f;
	params.solver = WALS_CG;
	CHECK(solve_all(&tp, &params, tp.X, &bad_row) == WALS_ENONFINITE &&
		  bad_row >= 0, "CG with a NaN factor");
	params.solver = WALS_CHOLESKY;
	CHECK(solve_all(&tp, &params, tp.X, &bad_row) != WALS_OK && bad_row >= 0,
		  "Cholesky with a NaN factor");

	G = gram(tp.Y, tp.n, 3);
	scratch = test_alloc(wals_solve_scratch(&params, csr_max_row(&tp.R)),
						 sizeof(float));
	CHECK(wals_solve_rows(&params, &tp.R, tp.Y, G, tp.X, 0, tp.m + 1, scratch,
						  &bad_row) == WALS_EINVAL, "range past the end");
	CHECK(wals_solve_rows(&params, &tp.R, tp.Y, G, tp.X, 3, 2, scratch,
						  &bad_row) == WALS_EINVAL, "reversed range");
	CHECK(wals_solve_rows(&params, &tp.R, tp.Y, G, tp.X, 2, 2, scratch,
						  &bad_row) == WALS_OK, "empty range");
	params.factors = 0;
	CHECK(wals_solve_rows(&params, &tp.R, tp.Y, G, tp.X, 0, 1, scratch,
						  &bad_row) == WALS_EINVAL, "no factors");
	free(G);
	free(scratch);
	problem_free(&tp);
}

/* Entry point: the Gram matrix, kept apart so a failure points at it. */
void
test_gram(void)
{
	test_gram_values();
}

/*
 * In test_kernels.c and test_subspace.c; run from here, as harness.c lists
 * one entry per area.
 */
extern void test_kernels(void);
extern void test_subspace(void);

/* Entry point: every solver check, and the kernels under them. */
void
test_solve(void)
{
	test_kernels();
	test_against_dense();
	test_frequency_scaled();
	test_cg_convergence();
	test_ranges();
	test_failures();
	test_subspace();
}
