/*
 * test_topk.c
 *	  Top-k selection: the edge cases a recommendation query meets, and
 *	  random inputs with many ties against a full sort.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

/* Best first: higher score, then lower index. */
static int
cmp_pair(const void *a, const void *b)
{
	const float *x = a;
	const float *y = b;

	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

static void
test_edges(void)
{
	float		scores[] = {0.5f, 2.0f, NAN, 2.0f, -1.0f, 0.5f};
	int32_t		skip[] = {1, 1, 4};
	int32_t		all[] = {0, 1, 2, 3, 4, 5};
	float		neg[] = {-3.0f, -1.0f, -2.0f};
	float		nans[] = {NAN, NAN};
	int32_t		idx[10];
	float		sc[10];
	int			got;
	WalsTopK	heap;

	got = wals_topk_select(scores, 6, NULL, 0, 10, idx, sc);
	CHECK(got == 5, "k > n returns the %d non-NaN, got %d", 5, got);
	CHECK(idx[0] == 1 && idx[1] == 3 && idx[2] == 0 && idx[3] == 5 &&
		  idx[4] == 4, "order %d %d %d %d %d", idx[0], idx[1], idx[2],
		  idx[3], idx[4]);
	CHECK(sc[0] == 2.0f && sc[4] == -1.0f, "scores follow their indices");

	CHECK(wals_topk_select(scores, 6, NULL, 0, 0, idx, sc) == 0, "k = 0");
	CHECK(wals_topk_select(scores, 6, NULL, 0, -3, idx, sc) == 0, "k < 0");
	CHECK(wals_topk_select(scores, 0, NULL, 0, 3, idx, sc) == 0, "n = 0");

	got = wals_topk_select(scores, 6, NULL, 0, 1, idx, sc);
	CHECK(got == 1 && idx[0] == 1, "k = 1 keeps the lower of tied indices");
	got = wals_topk_select(scores, 6, NULL, 0, 3, idx, sc);
	CHECK(got == 3 && idx[0] == 1 && idx[1] == 3 && idx[2] == 0,
		  "k = 3 with ties at the cut");

	got = wals_topk_select(scores, 6, skip, 3, 10, idx, sc);
	CHECK(got == 3 && idx[0] == 3 && idx[1] == 0 && idx[2] == 5,
		  "skip list (with a repeat) honoured");
	CHECK(wals_topk_select(scores, 6, all, 6, 4, idx, sc) == 0, "all skipped");

	got = wals_topk_select(neg, 3, NULL, 0, 2, idx, sc);
	CHECK(got == 2 && idx[0] == 1 && idx[1] == 2 && sc[1] == -2.0f,
		  "negative scores");
	CHECK(wals_topk_select(nans, 2, NULL, 0, 2, idx, sc) == 0, "only NaN");

	wals_topk_init(&heap, 2, idx, sc);
	wals_topk_push(&heap, 7, INFINITY);
	wals_topk_push(&heap, 3, -INFINITY);
	wals_topk_push(&heap, 9, NAN);
	wals_topk_push(&heap, 1, 0.0f);
	CHECK(wals_topk_finish(&heap) == 2 && idx[0] == 7 && idx[1] == 1,
		  "push with infinities");
}

/* Random scores from a few values, so ties are everywhere. */
static void
test_random(void)
{
	TestRng		rng;
	int			trial;

	rng_seed(&rng, 5);
	for (trial = 0; trial < 200; trial++)
	{
		int			n = 1 + rng_below(&rng, 60);
		int			k = 1 + rng_below(&rng, 70);
		float	   *scores = test_alloc(n, sizeof(float));
		float	   *pairs = test_alloc((size_t) n * 2, sizeof(float));
		int32_t    *skip = test_alloc(n, sizeof(int32_t));
		int32_t    *idx = test_alloc(k, sizeof(int32_t));
		float	   *sc = test_alloc(k, sizeof(float));
		int			nskip = 0;
		int			npairs = 0;
		int			want;
		int			got;
		int			bad = 0;
		int			j;

		for (j = 0; j < n; j++)
		{
			scores[j] = (float) (rng_below(&rng, 7) - 3);
			if (rng_below(&rng, 10) == 0)
				scores[j] = NAN;
			if (rng_below(&rng, 4) == 0)
				skip[nskip++] = j;
			else if (!isnan(scores[j]))
			{
				pairs[2 * npairs] = scores[j];
				pairs[2 * npairs + 1] = (float) j;
				npairs++;
			}
		}
		qsort(pairs, npairs, 2 * sizeof(float), cmp_pair);
		want = npairs < k ? npairs : k;
		got = wals_topk_select(scores, n, skip, nskip, k, idx, sc);
		for (j = 0; j < want && j < got; j++)
			bad += idx[j] != (int32_t) pairs[2 * j + 1] || sc[j] != pairs[2 * j];
		CHECK(got == want && bad == 0, "trial %d: got %d of %d, %d wrong",
			  trial, got, want, bad);
		free(scores);
		free(pairs);
		free(skip);
		free(idx);
		free(sc);
	}
}

/* Entry point: every top-k check. */
void
test_topk(void)
{
	test_edges();
	test_random();
}
