/*
 * test_subspace.c
 *	  The subspace (iALS++) solver: one block of all the dimensions is the
 *	  exact update; narrower blocks lower every row's objective and, called
 *	  again and again, reach the exact update; every family of kernels the
 *	  CPU runs agrees, through each of the kernels' paths; any split of the
 *	  rows gives the same bits; the scratch is enough; and the failures.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wals_internal.h"

/* Floats past the scratch that the solver must leave alone. */
#define GUARD 64
#define GUARD_VALUE 1234.5f

/* ||a - b|| / max(||b||, 1) over n floats */
static double
rel_diff(const float *a, const float *b, int n)
{
	double		d = 0.0;
	double		nb = 0.0;
	int			k;

	for (k = 0; k < n; k++)
	{
		d += ((double) a[k] - b[k]) * ((double) a[k] - b[k]);
		nb += (double) b[k] * b[k];
	}
	return sqrt(d) / (sqrt(nb) > 1.0 ? sqrt(nb) : 1.0);
}

/*
 * Rows [lo, hi) of X solved with these params, with a scratch of exactly
 * the size asked for, followed by a guard that must come back untouched.
 */
static WalsStatus
solve_range(const TestProblem *tp, const WalsParams *params, float *X,
			int64_t lo, int64_t hi, int64_t *bad_row)
{
	int			f = params->factors;
	float	   *G = test_alloc((size_t) f * f, sizeof(float));
	size_t		floats = wals_solve_scratch(params, csr_max_row(&tp->R));
	float	   *scratch = test_alloc(floats + GUARD, sizeof(float));
	WalsStatus	st;
	int			bad = 0;
	int			k;

	wals_gram_rows(tp->Y, 0, tp->n, f, G);
	for (k = 0; k < GUARD; k++)
		scratch[floats + k] = GUARD_VALUE;
	st = wals_solve_rows(params, &tp->R, tp->Y, G, X, lo, hi, scratch, bad_row);
	for (k = 0; k < GUARD; k++)
		bad += scratch[floats + k] != GUARD_VALUE;
	CHECK(bad == 0, "f=%d b=%d: %d floats written past the scratch", f,
		  params->block_size, bad);
	free(G);
	free(scratch);
	return st;
}

static WalsStatus
solve_all(const TestProblem *tp, const WalsParams *params, float *X,
		  int64_t *bad_row)
{
	return solve_range(tp, params, X, 0, tp->m, bad_row);
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

static WalsParams
subspace(const TestProblem *tp, int block_size)
{
	WalsParams	params = tp->params;

	params.solver = WALS_SUBSPACE;
	params.block_size = block_size;
	return params;
}

/*
 * Row u's part of L, over all n cells in double with the weights of
 * DESIGN section 1, written out here rather than taken from the core.
 */
static double
row_objective(const TestProblem *tp, const float *x, int u)
{
	const WalsParams *p = &tp->params;
	int			f = p->factors;
	int			count = 0;
	double		total = 0.0;
	int			i;
	int			k;

	for (i = 0; i < tp->n; i++)
	{
		double		pred = 0.0;
		double		r = tp->dense[(size_t) u * tp->n + i];
		double		c = p->w0;
		double		target = 0.0;

		for (k = 0; k < f; k++)
			pred += (double) x[k] * tp->Y[(size_t) i * f + k];
		if (tp->observed[(size_t) u * tp->n + i])
		{
			count++;
			c = p->feedback == WALS_IMPLICIT ? 1.0 + p->alpha * fabs(r) : 1.0;
			target = p->feedback == WALS_IMPLICIT ? r >= 0.0 : r;
		}
		total += c * (target - pred) * (target - pred);
	}
	for (k = 0; k < f; k++)
		total += p->regularization * (p->feedback == WALS_EXPLICIT ? count : 1) *
			(double) x[k] * x[k];
	return total;
}

/* b >= f is one block: Cholesky's answer, for every model variant. */
static void
test_one_block(void)
{
	static const int sizes[] = {7, 8, 100};
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		TestProblem tp;
		float	   *exact;
		int			s;

		problem_make_variant(&tp, tv, 12, 20, 7, 0.4, 500 + v);
		exact = test_alloc((size_t) tp.m * 7, sizeof(float));
		memcpy(exact, tp.X, sizeof(float) * tp.m * 7);
		CHECK(solve_all(&tp, &tp.params, exact, NULL) == WALS_OK,
			  "%s: cholesky", tv->name);
		for (s = 0; s < (int) (sizeof(sizes) / sizeof(sizes[0])); s++)
		{
			WalsParams	params = subspace(&tp, sizes[s]);
			float	   *X = test_alloc((size_t) tp.m * 7, sizeof(float));
			int64_t		bad_row = 5;
			WalsStatus	st;
			double		worst = 0.0;
			int			u;

			memcpy(X, tp.X, sizeof(float) * tp.m * 7);
			st = solve_all(&tp, &params, X, &bad_row);
			CHECK(st == WALS_OK && bad_row == -1, "%s b=%d: status %s",
				  tv->name, sizes[s], wals_status_string(st));
			for (u = 0; u < tp.m; u++)
			{
				double		e = rel_diff(X + u * 7, exact + u * 7, 7);

				if (e > worst)
					worst = e;
			}
			CHECK(worst < 1e-5, "%s b=%d: %g from Cholesky", tv->name,
				  sizes[s], worst);
			for (u = 0; u < 7; u++)
				CHECK(X[7 + u] == 0.0f, "%s b=%d: the empty row is not zero",
					  tv->name, sizes[s]);
			free(X);
		}
		free(exact);
		problem_free(&tp);
	}
}

/*
 * Narrower blocks, b = 1, 2 (not dividing f = 7) and 3: each call lowers
 * every row's objective, and calls over and over (block coordinate
 * descent, which converges for a positive definite system) reach the
 * exact answer.
 */
static void
test_narrow_blocks(void)
{
	static const int sizes[] = {1, 2, 3, 6};
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		TestProblem tp;
		float	   *exact;
		int			s;

		problem_make_variant(&tp, tv, 10, 18, 7, 0.45, 600 + v);
		exact = test_alloc((size_t) tp.m * 7, sizeof(float));
		memcpy(exact, tp.X, sizeof(float) * tp.m * 7);
		CHECK(solve_all(&tp, &tp.params, exact, NULL) == WALS_OK,
			  "%s: cholesky", tv->name);
		for (s = 0; s < (int) (sizeof(sizes) / sizeof(sizes[0])); s++)
		{
			WalsParams	params = subspace(&tp, sizes[s]);
			float	   *X = test_alloc((size_t) tp.m * 7, sizeof(float));
			double		first = 0.0;
			double		err = 0.0;
			int			rising = 0;
			int			call;
			int			u;

			memcpy(X, tp.X, sizeof(float) * tp.m * 7);
			for (u = 0; u < tp.m; u++)
				first = fmax(first, rel_diff(X + u * 7, exact + u * 7, 7));
			for (call = 0; call < 400; call++)
			{
				double		before[16];

				for (u = 0; u < tp.m; u++)
					before[u] = row_objective(&tp, X + u * 7, u);
				CHECK(solve_all(&tp, &params, X, NULL) == WALS_OK,
					  "%s b=%d call %d", tv->name, sizes[s], call);
				for (u = 0; u < tp.m; u++)
					rising += row_objective(&tp, X + u * 7, u) >
						before[u] + 1e-6 * fabs(before[u]);
			}
			for (u = 0; u < tp.m; u++)
				err = fmax(err, rel_diff(X + u * 7, exact + u * 7, 7));
			CHECK(rising == 0, "%s b=%d: a row's objective rose %d times",
				  tv->name, sizes[s], rising);
			CHECK(first > 0.1, "%s b=%d: the start was already exact (%g)",
				  tv->name, sizes[s], first);
			CHECK(err < 1e-4, "%s b=%d: %g from exact after 400 calls",
				  tv->name, sizes[s], err);
			free(X);
		}
		free(exact);
		problem_free(&tp);
	}
}

/*
 * Every family of kernels, through each path of the block pass, agrees
 * with the portable one, and with one block is exact: blocks of one
 * vector whose Gram fits in registers, of several vectors, wider than the
 * registers hold, a narrow last block after a wider one, and rows longer
 * than a chunk of gathered cells.
 */
static void
test_kernel_families(void)
{
	static const int widths[] = {3, 17, 37, 130};
	static const int sizes[] = {1, 4, 16, 24, 64, 1000};
	const WalsKernels *generic = wals_kernels_isa(WALS_ISA_GENERIC);
	int			w;

	for (w = 0; w < (int) (sizeof(widths) / sizeof(widths[0])); w++)
	{
		int			f = widths[w];
		int			v;

		for (v = 0; v < n_test_variants; v++)
		{
			const TestVariant *tv = &test_variants[v];
			TestProblem tp;
			float	   *want = test_alloc((size_t) 5 * f, sizeof(float));
			float	   *X = test_alloc((size_t) 5 * f, sizeof(float));
			int			s;
			int			a;

			problem_make_variant(&tp, tv, 5, 160, f, 0.9,
						 700 + 10 * w + v);
			tp.params.regularization = 1.0f;
			for (a = 0; a < tp.n * f; a++)
				tp.Y[a] *= 0.3f;
			for (s = 0; s < (int) (sizeof(sizes) / sizeof(sizes[0])); s++)
			{
				WalsParams	params = subspace(&tp, sizes[s]);
				int			isa;

				wals_kernels_force(generic);
				memcpy(want, tp.X, sizeof(float) * 5 * f);
				CHECK(solve_all(&tp, &params, want, NULL) == WALS_OK,
					  "generic %s f=%d b=%d", tv->name, f, sizes[s]);
				if (sizes[s] >= f)
				{
					double	   *exact = test_alloc(f, sizeof(double));
					float	   *fx = test_alloc(f, sizeof(float));
					double		worst = 0.0;
					int			u;

					for (u = 0; u < tp.m; u++)
					{
						brute_solve_row(&tp, tp.Y, u, exact);
						for (a = 0; a < f; a++)
							fx[a] = (float) exact[a];
						worst = fmax(worst, rel_diff(want + u * f, fx, f));
					}
					CHECK(worst < 2e-4, "generic %s f=%d b=%d: %g from exact",
						  tv->name, f, sizes[s], worst);
					free(exact);
					free(fx);
				}
				for (isa = 0; isa < WALS_ISA_COUNT; isa++)
				{
					const WalsKernels *k = wals_kernels_isa((WalsIsa) isa);
					double		worst = 0.0;
					int			u;

					if (k == NULL || k == generic)
						continue;
					wals_kernels_force(k);
					memcpy(X, tp.X, sizeof(float) * 5 * f);
					CHECK(solve_all(&tp, &params, X, NULL) == WALS_OK,
						  "%s %s f=%d b=%d", k->name, tv->name, f, sizes[s]);
					for (u = 0; u < tp.m; u++)
						worst = fmax(worst, rel_diff(X + u * f, want + u * f, f));
					CHECK(worst < 1e-4, "%s %s f=%d b=%d: %g from generic",
						  k->name, tv->name, f, sizes[s], worst);
				}
				wals_kernels_force(NULL);
			}
			free(want);
			free(X);
			problem_free(&tp);
		}
	}
}

/*
 * Rows go through the blocks in groups, but a row's arithmetic does not
 * depend on its group: any split of the rows gives the same bits.  At
 * f = 320 G is 400 kB, and groups take several rows.
 */
static void
test_ranges(void)
{
	static const int64_t cuts[] = {0, 1, 2, 9, 9, 10, 17, 30};
	static const int sizes[] = {3, 16, 40};
	int			s;

	for (s = 0; s < (int) (sizeof(sizes) / sizeof(sizes[0])); s++)
	{
		TestProblem tp;
		WalsParams	params;
		float	   *whole;
		int			c;

		problem_make(&tp, WALS_IMPLICIT, 1.0f, 30, 25, 320, 0.3, 800 + s);
		params = subspace(&tp, sizes[s]);
		whole = test_alloc((size_t) tp.m * 320, sizeof(float));
		memcpy(whole, tp.X, sizeof(float) * tp.m * 320);
		CHECK(solve_all(&tp, &params, whole, NULL) == WALS_OK, "whole range");
		for (c = 0; c + 1 < (int) (sizeof(cuts) / sizeof(cuts[0])); c++)
			CHECK(solve_range(&tp, &params, tp.X, cuts[c], cuts[c + 1], NULL) ==
				  WALS_OK, "range %d", c);
		CHECK(memcmp(whole, tp.X, sizeof(float) * tp.m * 320) == 0,
			  "b=%d: split ranges differ from one range", sizes[s]);
		free(whole);
		problem_free(&tp);
	}
}

/*
 * Explicit feedback without regularization: a block's system is the Gram
 * of the row's pieces alone, singular where all of them are zero in one
 * dimension.  Three rows of 90 ratings each, at f = 320 (so that they
 * share a group) in blocks of 40: row 1 fails in its last block and row 2
 * in its first; the failure reported is row 1's, the first in order, as
 * the other solvers report.
 */
static void
test_failures(void)
{
	enum
	{
		F = 320, CELLS = 90
	};
	WalsParams	params;
	WalsCsr		R;
	float	   *Y = test_alloc((size_t) 3 * CELLS * F, sizeof(float));
	float	   *X = test_alloc((size_t) 3 * F, sizeof(float));
	float	   *G = test_alloc((size_t) F * F, sizeof(float));
	float	   *scratch;
	int64_t		bad_row = 0;
	WalsStatus	st;
	TestRng		rng;
	int			k;

	memset(&params, 0, sizeof(params));
	params.feedback = WALS_EXPLICIT;
	params.solver = WALS_SUBSPACE;
	params.factors = F;
	params.alpha = 1.0f;
	params.block_size = 40;
	R.nrows = 3;
	R.ncols = 3 * CELLS;
	R.indptr = test_alloc(4, sizeof(int64_t));
	R.indices = test_alloc(3 * CELLS, sizeof(int32_t));
	R.values = test_alloc(3 * CELLS, sizeof(float));
	rng_seed(&rng, 900);
	for (k = 0; k < 4; k++)
		R.indptr[k] = (int64_t) k * CELLS;
	for (k = 0; k < 3 * CELLS; k++)
	{
		R.indices[k] = k;
		R.values[k] = (float) (1 + rng_below(&rng, 5));
	}
	for (k = 0; k < 3 * CELLS * F; k++)
		Y[k] = (float) rng_normal(&rng);
	for (k = 0; k < CELLS; k++)
	{
		Y[(size_t) (CELLS + k) * F + F - 1] = 0.0f;
		Y[(size_t) (2 * CELLS + k) * F] = 0.0f;
	}
	for (k = 0; k < F * F; k++)
		G[k] = NAN;				/* not to be read when w0 is 0 */
	scratch = test_alloc(wals_solve_scratch(&params, CELLS), sizeof(float));

	st = wals_solve_rows(&params, &R, Y, G, X, 0, 3, scratch, &bad_row);
	CHECK(st == WALS_ESINGULAR && bad_row == 1, "singular block: %s, bad_row %lld",
		  wals_status_string(st), (long long) bad_row);
	st = wals_solve_rows(&params, &R, Y, G, X, 2, 3, scratch, &bad_row);
	CHECK(st == WALS_ESINGULAR && bad_row == 2,
		  "singular first block: %s, bad_row %lld", wals_status_string(st),
		  (long long) bad_row);
	st = wals_solve_rows(&params, &R, Y, G, X, 0, 1, scratch, &bad_row);
	CHECK(st == WALS_OK && bad_row == -1 && all_finite(X, F),
		  "the row that is not singular: %s", wals_status_string(st));

	params.regularization = 0.1f;
	Y[5] = NAN;
	st = wals_solve_rows(&params, &R, Y, G, X, 0, 3, scratch, &bad_row);
	CHECK(st != WALS_OK && bad_row == 0, "a NaN factor: %s, bad_row %lld",
		  wals_status_string(st), (long long) bad_row);

	params.block_size = 0;
	CHECK(wals_solve_rows(&params, &R, Y, G, X, 0, 3, scratch, &bad_row) ==
		  WALS_EINVAL, "block_size 0");
	params.block_size = -3;
	CHECK(wals_solve_rows(&params, &R, Y, G, X, 0, 3, scratch, &bad_row) ==
		  WALS_EINVAL, "negative block_size");
	free(scratch);
	free(Y);
	free(X);
	free(G);
	free(R.indptr);
	free(R.indices);
	free(R.values);
}

/*
 * The scratch covers the predictions of the longest row and, as for
 * Cholesky, the block system grows with b, not with the longest row past
 * that.
 */
static void
test_scratch(void)
{
	WalsParams	params;
	size_t		one;

	memset(&params, 0, sizeof(params));
	params.solver = WALS_SUBSPACE;
	params.factors = 512;
	params.block_size = 16;
	CHECK(wals_solve_scratch(&params, 2000000) >=
		  wals_solve_scratch(&params, 1000000) + 1000000,
		  "subspace scratch does not hold the predictions");
	CHECK(wals_solve_scratch(&params, 1000) < 512 * 512,
		  "subspace scratch holds an f x f system");
	params.block_size = 512;
	one = wals_solve_scratch(&params, 0);
	params.block_size = 4096;
	CHECK(wals_solve_scratch(&params, 0) == one,
		  "a block past f is not one block of f");
}

/* Entry point, called from test_solve(). */
void
test_subspace(void)
{
	test_one_block();
	test_narrow_blocks();
	test_kernel_families();
	test_ranges();
	test_failures();
	test_scratch();
}
