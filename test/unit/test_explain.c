/*
 * test_explain.c
 *	  The terms of an explanation add up to the score of the exact solve,
 *	  for every model variant, and each term is the share its cell puts
 *	  into that solve.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

/* Row u of X by the Cholesky solver against tp->Y, and its Gram. */
static void
exact_row(const TestProblem *tp, int u, float *x, float *G)
{
	WalsParams	params = tp->params;
	int			f = params.factors;
	float	   *X = test_alloc((size_t) tp->m * f, sizeof(float));
	float	   *scratch = test_alloc(wals_solve_scratch(&params, tp->n) + 64, sizeof(float));
	int64_t		bad;

	params.solver = WALS_CHOLESKY;
	for (int a = 0; a < f * f; a++)
		G[a] = 0.0f;
	wals_gram_rows(tp->Y, 0, tp->n, f, G);
	CHECK(wals_solve_rows(&params, &tp->R, tp->Y, G, X, u, u + 1, scratch, &bad) == WALS_OK,
		  "the exact solve of row %d", u);
	for (int a = 0; a < f; a++)
		x[a] = X[(size_t) u * f + a];
	free(X);
	free(scratch);
}

void
test_explain(void)
{
	for (int v = 0; v < n_test_variants; v++)
	{
		const TestVariant *tv = &test_variants[v];
		TestProblem tp;
		int			f = 6;

		problem_make_variant(&tp, tv, 9, 14, f, 0.4, 500 + v);
		for (int u = 0; u < tp.m; u++)
		{
			int64_t		lo = tp.R.indptr[u];
			int64_t		n = tp.R.indptr[u + 1] - lo;
			float	   *x = test_alloc(f, sizeof(float));
			float	   *G = test_alloc((size_t) f * f, sizeof(float));
			float	   *contrib = test_alloc(n + 1, sizeof(float));
			double	   *scratch = test_alloc(wals_explain_scratch(f), sizeof(double));

			exact_row(&tp, u, x, G);
			for (int i = 0; i < tp.n; i++)
			{
				const float *yi = tp.Y + (size_t) i * f;
				double		score = 0.0;
				double		sum = 0.0;
				double		scale = 0.0;
				WalsStatus	st = wals_explain_row(&tp.params, G, tp.Y, tp.R.ncols, tp.R.indices + lo,
												  tp.R.values + lo, n, yi, contrib, scratch);

				CHECK(st == WALS_OK, "%s row %d item %d: status %s", tv->name, u, i,
					  wals_status_string(st));
				for (int a = 0; a < f; a++)
					score += (double) x[a] * yi[a];
				for (int64_t j = 0; j < n; j++)
				{
					sum += contrib[j];
					scale += fabs(contrib[j]);
				}
				CHECK(fabs(sum - score) <= 1e-4 * (scale + fabs(score)) + 1e-7,
					  "%s row %d item %d: the terms add up to %g, the score is %g",
					  tv->name, u, i, sum, score);
			}
			free(x);
			free(G);
			free(contrib);
			free(scratch);
		}
		problem_free(&tp);
	}
}

/*
 * One cell: A = w0 G + (c - w0) y y^T + lambda s I with y = (1, 0) and
 * G = I, so for implicit feedback, w0 = 1, alpha = 1, r = 1, lambda = 1:
 * c = 2, A = diag(1 + 1 + 1, 1 + 1) = diag(3, 2); the term for item
 * y_i = (2, 5) is c p (A^-1 y_i) . y = 2 * (2/3) = 4/3.
 */
void
test_explain_by_hand(void)
{
	WalsParams	params = {WALS_IMPLICIT, WALS_CHOLESKY, 2, 3, 1.0f, 1.0f, 1.0f, 0, false, 0.0f};
	float		G[4] = {1, 0, 0, 1};
	float		Y[4] = {1, 0, 2, 5};
	int32_t		idx[1] = {0};
	float		val[1] = {1.0f};
	float		contrib[1];
	double		scratch[6];
	WalsStatus	st = wals_explain_row(&params, G, Y, 2, idx, val, 1, Y + 2, contrib, scratch);

	CHECK(st == WALS_OK && fabsf(contrib[0] - 4.0f / 3.0f) < 1e-6f,
		  "by hand: status %s, term %g, want 4/3", wals_status_string(st), contrib[0]);

	/* A singular system: no regularization, no unobserved weight. */
	params.regularization = 0.0f;
	params.w0 = 0.0f;
	params.feedback = WALS_EXPLICIT;
	st = wals_explain_row(&params, G, Y, 2, idx, val, 1, Y + 2, contrib, scratch);
	CHECK(st == WALS_ESINGULAR, "a singular system: status %s", wals_status_string(st));
}
