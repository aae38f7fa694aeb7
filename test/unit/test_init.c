/*
 * test_init.c
 *	  Initial factors: deterministic, a function of (seed, id, k) only, and
 *	  normally distributed with the requested scale.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void
test_determinism(void)
{
	int			f = 5;
	int64_t		ids[] = {10, -3, 7, INT64_MAX, 0, 99};
	int64_t		perm[] = {7, 99, 10, 0, INT64_MAX, -3};
	int			where[] = {2, 5, 0, 4, 3, 1};	/* perm[r] = ids[where[r]] */
	float		a[30];
	float		b[30];
	float		c[30];
	int			r;
	int			k;
	int			same = 0;

	wals_init_rows(a, ids, 0, 6, f, 42, 0.1f);
	wals_init_rows(b, ids, 0, 6, f, 42, 0.1f);
	CHECK(memcmp(a, b, sizeof(a)) == 0, "same inputs, different factors");

	memset(c, 0, sizeof(c));
	wals_init_rows(c, ids, 2, 5, f, 42, 0.1f);
	CHECK(memcmp(c + 2 * f, a + 2 * f, 3 * f * sizeof(float)) == 0,
		  "a range differs from the whole");
	CHECK(c[0] == 0.0f && c[5 * f] == 0.0f, "rows outside the range written");

	wals_init_rows(b, perm, 0, 6, f, 42, 0.1f);
	for (r = 0; r < 6; r++)
		CHECK(memcmp(b + r * f, a + where[r] * f, f * sizeof(float)) == 0,
			  "row of id %lld depends on its position", (long long) perm[r]);

	wals_init_rows(b, ids, 0, 6, f, 43, 0.1f);
	for (k = 0; k < 30; k++)
		same += a[k] == b[k];
	CHECK(same == 0, "another seed repeats %d entries", same);

	for (r = 0; r < 6; r++)
		for (k = 1; k < f; k++)
			CHECK(a[r * f + k] != a[r * f], "entries of row %d repeat", r);
}

/* Mean near 0 and standard deviation near scale over many draws. */
static void
test_distribution(void)
{
	int			nrows = 4000;
	int			f = 8;
	int64_t    *ids = test_alloc(nrows, sizeof(int64_t));
	float	   *X = test_alloc((size_t) nrows * f, sizeof(float));
	double		sum = 0.0;
	double		sq = 0.0;
	double		mean;
	double		sd;
	int			finite = 1;
	int			r;

	for (r = 0; r < nrows; r++)
		ids[r] = (int64_t) r * 7919 - 1000000;
	wals_init_rows(X, ids, 0, nrows, f, 1, 0.5f);
	for (r = 0; r < nrows * f; r++)
	{
		finite &= isfinite(X[r]) != 0;
		sum += X[r];
		sq += (double) X[r] * X[r];
	}
	mean = sum / (nrows * f);
	sd = sqrt(sq / (nrows * f) - mean * mean);
	CHECK(finite, "non-finite initial factor");
	CHECK(fabs(mean) < 0.02, "mean %g", mean);
	CHECK(fabs(sd - 0.5) < 0.02, "standard deviation %g, expected 0.5", sd);
	free(ids);
	free(X);
}

/* Entry point: every initialisation check. */
void
test_init(void)
{
	test_determinism();
	test_distribution();
}
