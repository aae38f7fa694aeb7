/*
 * test_score.c
 *	  The scoring engine against the reference scan, which this file
 *	  computes its own way: every item's dot product with the core's kernel
 *	  into an array, the filter turned into one sorted skip list, then
 *	  wals_topk_select.  Results must be identical, bit for bit, on random,
 *	  trained-like and tie-ridden factors, with every kind of filter, and
 *	  through the batch, under each kernel family the CPU runs, which
 *	  brings its own first-pass path and its own reference; and the first
 *	  pass's bounds must hold item by item.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wals_internal.h"
#include "wals_score.h"

/* An index of Y in a buffer deliberately off a cache line. */
typedef struct TestIndex
{
	WalsScoreIndex ix;
	unsigned char *buffer;
	unsigned char *scratch;
	unsigned char *batch_scratch;
} TestIndex;

static void
index_make(TestIndex *t, const float *Y, int64_t n, int f)
{
	WalsStatus	st;

	t->buffer = test_alloc(wals_score_index_size(n, f) + 8, 1);
	st = wals_score_index_build(&t->ix, Y, n, f, t->buffer + 8);
	CHECK(st == WALS_OK, "index build n=%lld f=%d: status %d", (long long) n,
		  f, (int) st);
	t->scratch = NULL;
	t->batch_scratch = NULL;
}

static void
index_free(TestIndex *t)
{
	free(t->buffer);
	free(t->scratch);
	free(t->batch_scratch);
}

/* Sorted union of the skip list and, with an allow list, its complement. */
static int64_t
reference_skip(const WalsScoreFilter *filter, int64_t n, int32_t *skip)
{
	int64_t		ns = 0;
	int64_t		s = 0;
	int64_t		a = 0;
	int64_t		i;

	for (i = 0; i < n; i++)
	{
		int			out = 0;

		if (filter == NULL)
			continue;
		while (s < filter->nskip && filter->skip[s] < i)
			s++;
		out = s < filter->nskip && filter->skip[s] == i;
		if (filter->allow)
		{
			while (a < filter->nallow && filter->allow[a] < i)
				a++;
			out |= !(a < filter->nallow && filter->allow[a] == i);
		}
		if (out)
			skip[ns++] = (int32_t) i;
	}
	return ns;
}

/* The reference's best kmax eligible items, best first; their count. */
static int
reference_order(const float *Y, int64_t n, int f, const float *x,
				const WalsScoreFilter *filter, int kmax, int32_t *idx,
				float *score)
{
	float	   *scores = test_alloc(n, sizeof(float));
	int32_t    *skip = test_alloc(n, sizeof(int32_t));
	int64_t		nskip = reference_skip(filter, n, skip);
	int64_t		i;
	int			got;

	for (i = 0; i < n; i++)
		scores[i] = wals_kernels()->dot(x, Y + (size_t) i * f, f);
	got = wals_topk_select(scores, n, skip, nskip, kmax, idx, score);
	free(scores);
	free(skip);
	return got;
}

/*
 * The reference top k is the first k of its top kmax for any kmax >= k
 * (the order is total), so one reference serves every k: same count,
 * indices and score bits (so -0 and 0 differ).
 */
static int
same_results(int got, const int32_t *idx, const float *score, int k,
			 int nref, const int32_t *ridx, const float *rscore)
{
	int			want = k < 0 ? 0 : k < nref ? k : nref;

	return got == want && memcmp(idx, ridx, sizeof(int32_t) * want) == 0 &&
		memcmp(score, rscore, sizeof(float) * want) == 0;
}

/*
 * One query through the index with each of ks[0..nk) against the
 * reference; 1 when every result is identical.
 */
static int
query_matches(TestIndex *t, const float *x, const WalsScoreFilter *filter,
			  const int *ks, int nk)
{
	const WalsScoreIndex *ix = &t->ix;
	int32_t    *ridx = test_alloc(ix->n, sizeof(int32_t));
	float	   *rscore = test_alloc(ix->n, sizeof(float));
	int			nref = reference_order(ix->Y, ix->n, ix->f, x, filter,
									   (int) ix->n, ridx, rscore);
	int			ok = 1;
	int			j;

	for (j = 0; j < nk; j++)
	{
		int			room = ks[j] > 0 ? ks[j] : 1;
		int32_t    *idx = test_alloc(room, sizeof(int32_t));
		float	   *score = test_alloc(room, sizeof(float));
		int			got;

		free(t->scratch);
		t->scratch = test_alloc(wals_score_scratch_size(ix, ks[j]), 1);
		got = wals_score_topk(ix, x, filter, ks[j], idx, score, t->scratch);
		ok &= same_results(got, idx, score, ks[j], nref, ridx, rscore);
		free(idx);
		free(score);
	}
	free(ridx);
	free(rscore);
	return ok;
}

/* query_matches for one k. */
static int
query_matches_k(TestIndex *t, const float *x, const WalsScoreFilter *filter,
				int k)
{
	return query_matches(t, x, filter, &k, 1);
}

/* The reference's best kmax of each of users X. */
typedef struct TestOrders
{
	int			kmax;
	int32_t    *idx;			/* kmax per user */
	float	   *score;
	int		   *count;
} TestOrders;

static void
orders_make(TestOrders *o, const WalsScoreIndex *ix, const float *X,
			int64_t users, const WalsScoreFilter *filters, int kmax)
{
	int64_t		u;

	o->kmax = kmax;
	o->idx = test_alloc((size_t) users * kmax, sizeof(int32_t));
	o->score = test_alloc((size_t) users * kmax, sizeof(float));
	o->count = test_alloc(users, sizeof(int));
	for (u = 0; u < users; u++)
		o->count[u] = reference_order(ix->Y, ix->n, ix->f, X + (size_t) u * ix->f,
									  filters ? &filters[u] : NULL, kmax,
									  o->idx + (size_t) u * kmax,
									  o->score + (size_t) u * kmax);
}

static void
orders_free(TestOrders *o)
{
	free(o->idx);
	free(o->score);
	free(o->count);
}

/*
 * Users [lo, hi) of X through the batch against their reference orders;
 * rows outside the range must stay untouched.
 */
static int
batch_matches(TestIndex *t, const float *X, int64_t users, int64_t lo,
			  int64_t hi, const WalsScoreFilter *filters,
			  const TestOrders *o, int k)
{
	const WalsScoreIndex *ix = &t->ix;
	int			room = k > 0 ? k : 1;
	int32_t    *idx = test_alloc((size_t) users * room, sizeof(int32_t));
	float	   *score = test_alloc((size_t) users * room, sizeof(float));
	int		   *count = test_alloc(users, sizeof(int));
	int64_t		u;
	int			ok = 1;

	for (u = 0; u < users; u++)
		count[u] = -1;
	free(t->batch_scratch);
	t->batch_scratch = test_alloc(wals_score_batch_scratch_size(ix, k), 1);
	wals_score_topk_batch(ix, X, lo, hi, filters, k, idx, score, count,
						  t->batch_scratch);
	for (u = 0; u < users; u++)
	{
		if (u < lo || u >= hi)
			ok &= count[u] == -1;
		else
			ok &= same_results(count[u], idx + (size_t) u * room,
							   score + (size_t) u * room, k, o->count[u],
							   o->idx + (size_t) u * o->kmax,
							   o->score + (size_t) u * o->kmax);
	}
	free(idx);
	free(score);
	free(count);
	return ok;
}

/* Every item's reference inside the first pass's bounds; 1 if so. */
static int
bounds_hold(TestIndex *t, const float *x, int *applied)
{
	const WalsScoreIndex *ix = &t->ix;
	float	   *lower = test_alloc(ix->n, sizeof(float));
	float	   *upper = test_alloc(ix->n, sizeof(float));
	int64_t		i;
	int			ok = 1;

	free(t->scratch);
	t->scratch = test_alloc(wals_score_scratch_size(ix, 1), 1);
	*applied = wals_score_bounds(ix, x, lower, upper, t->scratch);
	for (i = 0; *applied && i < ix->n; i++)
	{
		float		r = wals_kernels()->dot(x, ix->Y + (size_t) i * ix->f, ix->f);

		ok &= lower[i] <= r && r <= upper[i];
	}
	free(lower);
	free(upper);
	return ok;
}

/* ---------- data ---------- */

static void
fill_normal(float *v, size_t count, TestRng *rng, double scale)
{
	size_t		j;

	for (j = 0; j < count; j++)
		v[j] = (float) (scale * rng_normal(rng));
}

/*
 * Factors as training leaves them: a few latent directions shared by all
 * rows, norms spread over an order of magnitude (popular items), a little
 * noise.
 */
static void
fill_trained(float *v, int64_t rows, int f, TestRng *rng)
{
	enum
	{
		RANK = 6
	};
	float	   *basis = test_alloc((size_t) RANK * f, sizeof(float));
	int64_t		r;
	int			j;
	int			c;

	fill_normal(basis, (size_t) RANK * f, rng, 1.0);
	for (r = 0; r < rows; r++)
	{
		double		pop = exp(0.8 * rng_normal(rng));
		double		z[RANK];

		for (c = 0; c < RANK; c++)
			z[c] = rng_normal(rng);
		for (j = 0; j < f; j++)
		{
			double		s = 0.05 * rng_normal(rng);

			for (c = 0; c < RANK; c++)
				s += z[c] * basis[c * f + j];
			v[(size_t) r * f + j] = (float) (0.1 * pop * s);
		}
	}
	free(basis);
}

/*
 * Ties everywhere: integer factors in [-2, 2], a run of duplicated rows, a
 * few zero rows, and -0 entries.
 */
static void
fill_ties(float *v, int64_t rows, int f, TestRng *rng)
{
	int64_t		r;
	int			j;

	for (r = 0; r < rows; r++)
		for (j = 0; j < f; j++)
		{
			float		w = (float) (rng_below(rng, 5) - 2);

			v[(size_t) r * f + j] = w == 0.0f && rng_below(rng, 2) ? -0.0f : w;
		}
	for (r = 1; r < rows && r < 40; r++)
		if (r % 3 != 0)
			memcpy(v + (size_t) r * f, v, sizeof(float) * f);
	for (r = 5; r < rows; r += 97)
		memset(v + (size_t) r * f, 0, sizeof(float) * f);
}

/* A sorted list of about share * n indices of [0, n), with repeats. */
static int64_t
random_list(int32_t *list, int64_t n, double share, TestRng *rng)
{
	int64_t		count = 0;
	int64_t		i;

	for (i = 0; i < n; i++)
		if (rng_uniform(rng) < share)
		{
			list[count++] = (int32_t) i;
			if (rng_uniform(rng) < 0.1)
				list[count++] = (int32_t) i;
		}
	return count;
}

/* ---------- cases ---------- */

enum
{
	DATA_NORMAL,
	DATA_TRAINED,
	DATA_TIES,
	DATA_KINDS
};

static const char *const data_names[DATA_KINDS] = {"normal", "trained", "ties"};

static void
fill_data(int kind, float *v, int64_t rows, int f, TestRng *rng)
{
	if (kind == DATA_NORMAL)
		fill_normal(v, (size_t) rows * f, rng, 0.3);
	else if (kind == DATA_TRAINED)
		fill_trained(v, rows, f, rng);
	else
		fill_ties(v, rows, f, rng);
}

/*
 * Queries of each data kind and width with every filter shape and k from 1
 * past the eligible count.
 */
static void
test_queries(const char *path)
{
	static const int widths[] = {1, 3, 64, 256};
	static const int64_t sizes[] = {0, 1, 17, 1000, 3001};
	TestRng		rng;
	int			kind;
	int			w;
	int			s;

	rng_seed(&rng, 11);
	for (kind = 0; kind < DATA_KINDS; kind++)
		for (w = 0; w < 4; w++)
			for (s = 0; s < 5; s++)
			{
				int			f = widths[w];
				int64_t		n = sizes[s];
				float	   *Y = test_alloc((size_t) n * f, sizeof(float));
				float	   *x = test_alloc(f, sizeof(float));
				int32_t    *skip = test_alloc(2 * n + 2, sizeof(int32_t));
				int32_t    *allow = test_alloc(2 * n + 3, sizeof(int32_t));
				int32_t    *few = test_alloc(2 * n + 1, sizeof(int32_t));
				int			ks[5];
				int			nk;
				int			q;
				TestIndex	t;

				fill_data(kind, Y, n, f, &rng);
				index_make(&t, Y, n, f);
				ks[0] = 1;
				ks[1] = 10;
				ks[2] = (int) n;
				ks[3] = (int) n + 5;
				ks[4] = 0;
				nk = 5;
				for (q = 0; q < 6; q++)
				{
					WalsScoreFilter filters[5];
					int			fi;

					fill_data(kind, x, 1, f, &rng);
					if (q == 5)
						memcpy(x, Y + (size_t) (n > 1 ? 1 : 0) * f,
							   sizeof(float) * (n > 0 ? f : 0));
					memset(filters, 0, sizeof(filters));
					/* skip only */
					filters[1].skip = skip;
					filters[1].nskip = random_list(skip, n, 0.05, &rng);
					/* skip plus a large allow list with strays outside [0, n) */
					filters[2] = filters[1];
					filters[2].allow = allow;
					allow[0] = -3;
					filters[2].nallow = 1 + random_list(allow + 1, n, 0.6, &rng);
					allow[filters[2].nallow++] = (int32_t) n + 2;
					/* an allow list of a handful */
					filters[3].allow = few;
					filters[3].nallow = random_list(few, n, n > 0 ? 4.0 / n : 0, &rng);
					/* an empty allow list admits nothing */
					filters[4].allow = allow;
					filters[4].nallow = 0;
					for (fi = 0; fi < 5; fi++)
						CHECK(query_matches(&t, x, fi == 0 ? NULL : &filters[fi], ks, nk),
							  "%s, %s data, n=%lld f=%d query %d filter %d",
							  path, data_names[kind], (long long) n, f, q, fi);
				}
				index_free(&t);
				free(Y);
				free(x);
				free(skip);
				free(allow);
				free(few);
			}
}

/*
 * Vectors the quantisation handles worst or not at all: zero, non-finite,
 * huge (the overflow guard), tiny (underflow), all items skipped, items
 * with a NaN.
 */
static void
test_edges(const char *path)
{
	enum
	{
		N = 700,
		F = 64
	};
	TestRng		rng;
	float	   *Y = test_alloc((size_t) N * F, sizeof(float));
	float	   *Yh = test_alloc((size_t) N * F, sizeof(float));
	float		x[F];
	float		xs[F];
	int32_t    *all = test_alloc(N, sizeof(int32_t));
	WalsScoreFilter everything = {0};
	TestIndex	t;
	TestIndex	th;
	int			applied;
	int			j;
	int64_t		i;

	rng_seed(&rng, 12);
	fill_normal(Y, (size_t) N * F, &rng, 0.3);
	index_make(&t, Y, N, F);
	fill_normal(x, F, &rng, 0.3);

	memset(xs, 0, sizeof(xs));
	CHECK(query_matches_k(&t, xs, NULL, 10), "%s: zero x", path);
	memcpy(xs, x, sizeof(x));
	xs[7] = NAN;
	CHECK(query_matches_k(&t, xs, NULL, 10), "%s: NaN in x", path);
	xs[7] = INFINITY;
	CHECK(query_matches_k(&t, xs, NULL, 10), "%s: infinity in x", path);
	for (j = 0; j < F; j++)
		xs[j] = x[j] * 1e30f;
	CHECK(query_matches_k(&t, xs, NULL, 10), "%s: huge x, past the guard", path);
	for (j = 0; j < F; j++)
		xs[j] = x[j] * 1e29f;
	CHECK(query_matches_k(&t, xs, NULL, 10), "%s: large x, within the guard", path);
	CHECK(bounds_hold(&t, xs, &applied) && applied, "%s: bounds for large x", path);
	for (j = 0; j < F; j++)
		xs[j] = x[j] * 1e-37f;
	CHECK(query_matches_k(&t, xs, NULL, 10), "%s: tiny x, subnormal products", path);
	CHECK(bounds_hold(&t, xs, &applied) && applied, "%s: bounds for tiny x", path);
	for (j = 0; j < F; j++)
		xs[j] = j == 3 ? 1.0f : 0.0f;
	CHECK(query_matches_k(&t, xs, NULL, 10), "%s: one-hot x", path);
	for (i = 0; i < N; i++)
		all[i] = (int32_t) i;
	everything.skip = all;
	everything.nskip = N;
	CHECK(query_matches_k(&t, x, &everything, 10), "%s: every item skipped", path);

	memcpy(Yh, Y, sizeof(float) * N * F);
	Yh[123 * F + 5] = NAN;
	Yh[456 * F + 9] = -INFINITY;
	index_make(&th, Yh, N, F);
	CHECK(!th.ix.usable, "%s: an index with NaN is not usable for bounds", path);
	CHECK(query_matches_k(&th, x, NULL, 10), "%s: NaN and infinity in Y", path);
	index_free(&th);
	index_free(&t);
	free(Y);
	free(Yh);
	free(all);
}

/*
 * The bounds item by item, on random vectors and on the worst cases for
 * quantisation and for rounding: every coordinate half a step from the
 * grid, x and y alike, so that the errors of both line up; and every
 * coordinate on the grid with full-width scales, so that only the float
 * rounding of the reference is left to bound, and positive, so that it
 * accumulates.
 */
static void
test_bounds(const char *path)
{
	enum
	{
		N = 2000
	};
	static const int widths[] = {1, 3, 64, 256};
	TestRng		rng;
	int			w;

	rng_seed(&rng, 13);
	for (w = 0; w < 4; w++)
	{
		int			f = widths[w];
		float	   *Y = test_alloc((size_t) N * f, sizeof(float));
		float	   *x = test_alloc(f, sizeof(float));
		int			kind;
		int			applied;
		TestIndex	t;
		int64_t		i;
		int			j;

		for (kind = 0; kind < DATA_KINDS; kind++)
		{
			fill_data(kind, Y, N, f, &rng);
			index_make(&t, Y, N, f);
			fill_data(kind, x, 1, f, &rng);
			CHECK(bounds_hold(&t, x, &applied) && applied,
				  "%s: bounds on %s data, f=%d", path, data_names[kind], f);
			index_free(&t);
		}
		for (i = 0; i < N; i++)
			for (j = 0; j < f; j++)
				Y[(size_t) i * f + j] = (float) ((j == 0 ? 127.0 : (j % 60) + 0.5) *
												 (i % 2 ? -1.0 : 1.0) * (1 + i % 5));
		for (j = 0; j < f; j++)
			x[j] = (float) (j == 0 ? 127.0 : (j % 60) + 0.4999);
		index_make(&t, Y, N, f);
		CHECK(bounds_hold(&t, x, &applied) && applied,
			  "%s: bounds with errors aligned, f=%d", path, f);
		CHECK(query_matches_k(&t, x, NULL, 10),
			  "%s: top 10 with errors aligned, f=%d", path, f);
		index_free(&t);

		for (i = 0; i <= N; i++)
		{
			float	   *v = i < N ? Y + (size_t) i * f : x;
			double		scale = ldexp(1.0 + rng_below(&rng, 1 << 16) / 65536.0,
									  rng_below(&rng, 6) - 3);

			for (j = 0; j < f; j++)
				v[j] = (float) (scale * (j == 0 ? 127 : 64 + rng_below(&rng, 64)));
		}
		index_make(&t, Y, N, f);
		CHECK(bounds_hold(&t, x, &applied) && applied,
			  "%s: bounds on the grid, f=%d", path, f);
		CHECK(query_matches_k(&t, x, NULL, 10),
			  "%s: top 10 on the grid, f=%d", path, f);
		index_free(&t);
		free(Y);
		free(x);
	}
}

/*
 * The first pass's integer sums, exactly, where products of bytes are
 * formed in pieces that could overflow or saturate: every factor on the
 * integer grid with a largest entry of 127 (scales of 1, no quantisation
 * error), so that the reference is exact and the middle of an item's
 * bounds must be within half a unit of it.  Items take the extreme bytes
 * (+-127 stored as 255 and 1); queries take pairs of bytes at each edge
 * of what one int16 lane holds: positive or negative sums of 128 (64 + 64,
 * 127 + 1) and of 129, opposite signs at full scale, and zeros.
 */
static void
test_integer_grid(const char *path)
{
	enum
	{
		N = 300
	};
	static const int item_bytes[] = {127, -127, 1, -1, 0, 64, -64, 126, -100};
	static const int query_pairs[][2] = {
		{64, 64}, {-64, -64}, {127, 1}, {-1, -127}, {127, 2}, {-2, -127},
		{65, 64}, {127, 127}, {-127, -127}, {127, -127}, {-127, 127},
		{0, 127}, {-127, 0}, {0, 0}, {100, 28}, {-28, -101}
	};
	static const int widths[] = {64, 62, 7};
	TestRng		rng;
	int			w;

	rng_seed(&rng, 18);
	for (w = 0; w < 3; w++)
	{
		int			f = widths[w];
		float	   *Y = test_alloc((size_t) N * f, sizeof(float));
		float	   *lower = test_alloc(N, sizeof(float));
		float	   *upper = test_alloc(N, sizeof(float));
		float	   *x = test_alloc(f, sizeof(float));
		TestIndex	t;
		int64_t		i;
		int			r;
		int			j;

		for (i = 0; i < N; i++)
			for (j = 0; j < f; j++)
				Y[(size_t) i * f + j] = (float) (j == f - 1 ? (i % 2 ? -127 : 127) :
												 item_bytes[rng_below(&rng, 9)]);
		index_make(&t, Y, N, f);
		t.scratch = test_alloc(wals_score_scratch_size(&t.ix, 1), 1);
		for (r = 0; r < 16; r++)
		{
			int			applied;
			int			exact = 1;

			for (j = 0; j < f; j++)
				x[j] = (float) query_pairs[(j / 2 + r) % 16][j % 2];
			x[0] = 127.0f;
			applied = wals_score_bounds(&t.ix, x, lower, upper, t.scratch);
			for (i = 0; applied && i < N; i++)
			{
				float		ref = wals_kernels()->dot(x, Y + (size_t) i * f, f);

				exact &= lower[i] <= ref && ref <= upper[i] &&
					fabs(0.5 * ((double) lower[i] + upper[i]) - ref) < 0.5;
			}
			CHECK(applied && exact, "%s: integer sums exact, f=%d rotation %d",
				  path, f, r);
			CHECK(query_matches_k(&t, x, NULL, 10),
				  "%s: top 10 on the integer grid, f=%d rotation %d", path, f, r);
		}
		index_free(&t);
		free(Y);
		free(lower);
		free(upper);
		free(x);
	}
}

/*
 * Items whose exact scores all tie and whose float scores differ only by
 * rounding: the rows are permutations of one vector whose large entries
 * cancel, and x is constant, so which item wins depends on the order of
 * summation alone, and the matrix product orders it differently from the
 * reference.  Only the margins keep such items among the candidates.
 */
static void
test_cancellation(const char *path)
{
	enum
	{
		N = 600,
		F = 64,
		USERS = 80
	};
	TestRng		rng;
	float	   *Y = test_alloc((size_t) N * F, sizeof(float));
	float	   *X = test_alloc((size_t) USERS * F, sizeof(float));
	float		base[F];
	TestOrders	o;
	TestIndex	t;
	int64_t		i;
	int			u;
	int			j;

	rng_seed(&rng, 17);
	for (j = 0; j < F; j++)
		base[j] = (float) ((j % 2 ? -1.0 : 1.0) * ldexp(1.0 + rng_uniform(&rng), rng_below(&rng, 40)) +
						   rng_normal(&rng));
	for (i = 0; i < N; i++)
	{
		float	   *y = Y + (size_t) i * F;

		memcpy(y, base, sizeof(base));
		for (j = F - 1; j > 0; j--)
		{
			int			r = rng_below(&rng, j + 1);
			float		tmp = y[j];

			y[j] = y[r];
			y[r] = tmp;
		}
	}
	for (u = 0; u < USERS; u++)
		for (j = 0; j < F; j++)
			X[(size_t) u * F + j] = (float) ldexp(1.0, u % 5 - 2);
	index_make(&t, Y, N, F);
	for (u = 0; u < 5; u++)
		CHECK(query_matches_k(&t, X + (size_t) u * F, NULL, 10),
			  "%s: cancelling rows, query %d", path, u);
	orders_make(&o, &t.ix, X, USERS, NULL, 10);
	CHECK(batch_matches(&t, X, USERS, 0, USERS, NULL, &o, 1),
		  "%s: cancelling rows, batch k=1", path);
	CHECK(batch_matches(&t, X, USERS, 0, USERS, NULL, &o, 10),
		  "%s: cancelling rows, batch k=10", path);
	orders_free(&o);
	index_free(&t);
	free(Y);
	free(X);
}

/*
 * The bounds must prune to be worth having: on random factors of 64 their
 * width stays a few percent of |x||y|.
 */
static void
test_tightness(void)
{
	enum
	{
		N = 2000,
		F = 64
	};
	TestRng		rng;
	float	   *Y = test_alloc((size_t) N * F, sizeof(float));
	float	   *lower = test_alloc(N, sizeof(float));
	float	   *upper = test_alloc(N, sizeof(float));
	float		x[F];
	double		xn = 0.0;
	double		worst = 0.0;
	TestIndex	t;
	int64_t		i;
	int			j;

	rng_seed(&rng, 14);
	fill_normal(Y, (size_t) N * F, &rng, 0.3);
	fill_normal(x, F, &rng, 0.3);
	index_make(&t, Y, N, F);
	t.scratch = test_alloc(wals_score_scratch_size(&t.ix, 1), 1);
	CHECK(wals_score_bounds(&t.ix, x, lower, upper, t.scratch),
		  "bounds apply to random factors");
	for (j = 0; j < F; j++)
		xn += (double) x[j] * x[j];
	for (i = 0; i < N; i++)
	{
		double		yn = 0.0;

		for (j = 0; j < F; j++)
			yn += (double) Y[i * F + j] * Y[i * F + j];
		worst = fmax(worst, (upper[i] - lower[i]) / sqrt(xn * yn));
	}
	CHECK(worst < 0.05, "bound width %.4f of |x||y|", worst);
	index_free(&t);
	free(Y);
	free(lower);
	free(upper);
}

/*
 * The batch: more users than one block of them and more items than one
 * block of items, per-user filters of every shape, a sub-range of users,
 * tie-ridden data that sends users to the exact scan, and k past the
 * eligible count (on the smaller sizes, where a full order is cheap).
 */
static void
test_batch(const char *path)
{
	enum
	{
		USERS = 150
	};
	static const int64_t sizes[] = {0, 5, 300, 4200};
	static const int widths[] = {1, 3, 64};
	TestRng		rng;
	int			kind;
	int			s;
	int			w;

	rng_seed(&rng, 15);
	for (kind = 0; kind < DATA_KINDS; kind++)
		for (s = 0; s < 4; s++)
			for (w = 0; w < 3; w++)
			{
				int64_t		n = sizes[s];
				int			f = widths[w];
				float	   *Y = test_alloc((size_t) n * f, sizeof(float));
				float	   *X = test_alloc((size_t) USERS * f, sizeof(float));
				int32_t    *lists = test_alloc((size_t) USERS * (2 * n + 1), sizeof(int32_t));
				WalsScoreFilter *filters = test_alloc(USERS, sizeof(WalsScoreFilter));
				int			ks[4];
				int			j;
				int			u;
				TestIndex	t;
				TestOrders	filtered;
				TestOrders	unfiltered;

				fill_data(kind, Y, n, f, &rng);
				fill_data(kind, X, USERS, f, &rng);
				X[(size_t) 3 * f] = NAN;
				memset(X + (size_t) 4 * f, 0, sizeof(float) * f);
				for (u = 0; u < USERS; u++)
				{
					int32_t    *list = lists + (size_t) u * (2 * n + 1);

					if (u % 3 == 1)
					{
						filters[u].skip = list;
						filters[u].nskip = random_list(list, n, 0.02, &rng);
					}
					else if (u % 3 == 2)
					{
						filters[u].allow = list;
						filters[u].nallow = random_list(list, n, u % 2 ? 0.5 : 0.01, &rng);
					}
				}
				index_make(&t, Y, n, f);
				ks[0] = 1;
				ks[1] = 10;
				ks[2] = n <= 300 ? (int) n : 40;
				ks[3] = n <= 300 ? (int) n + 3 : 200;
				orders_make(&filtered, &t.ix, X, USERS, filters, ks[3]);
				orders_make(&unfiltered, &t.ix, X, USERS, NULL, ks[3]);
				for (j = 0; j < 4; j++)
				{
					CHECK(batch_matches(&t, X, USERS, 0, USERS, filters,
										&filtered, ks[j]),
						  "%s, %s data: batch n=%lld f=%d k=%d", path,
						  data_names[kind], (long long) n, f, ks[j]);
					CHECK(batch_matches(&t, X, USERS, 7, 140, NULL,
										&unfiltered, ks[j]),
						  "%s, %s data: batch users 7-140 unfiltered n=%lld f=%d k=%d",
						  path, data_names[kind], (long long) n, f, ks[j]);
				}
				orders_free(&filtered);
				orders_free(&unfiltered);
				index_free(&t);
				free(Y);
				free(X);
				free(lists);
				free(filters);
			}
}

static void
test_build_args(void)
{
	WalsScoreIndex ix;
	float		y = 1.0f;
	unsigned char buffer[256];

	CHECK(wals_score_index_build(&ix, &y, -1, 4, buffer) == WALS_EINVAL,
		  "negative n refused");
	CHECK(wals_score_index_build(&ix, &y, 1, 0, buffer) == WALS_EINVAL,
		  "f = 0 refused");
	CHECK(wals_score_index_build(&ix, &y, 1, 40000, buffer) == WALS_EINVAL,
		  "f past the limit refused");
	CHECK(wals_score_index_size(1, 0) == 0, "no size for a bad f");
}

static double
norm2(const float *y, int f)
{
	double		sum = 0.0;
	int			j;

	for (j = 0; j < f; j++)
		sum += (double) y[j] * y[j];
	return sum;
}

/*
 * The order the first pass stops by: positions hold every item once, by
 * norm, largest first (ties by item), and map back to it; a copy of the
 * index moved elsewhere, as a shared segment is in another process, and
 * remapped there answers as the original does; and a build in steps,
 * its blocks filled one by one, last first, is the build at once.
 */
static void
test_order(const char *path)
{
	static const int64_t sizes[] = {0, 1, 17, 4200};
	TestRng		rng;
	int			kind;
	int			s;

	rng_seed(&rng, 23);
	for (kind = 0; kind < DATA_KINDS; kind++)
		for (s = 0; s < 4; s++)
		{
			int64_t		n = sizes[s];
			int			f = 12;
			float	   *Y = test_alloc((size_t) n * f + 1, sizeof(float));
			float	   *x = test_alloc(f, sizeof(float));
			size_t		bytes = wals_score_index_size(n, f);
			unsigned char *moved = test_alloc(bytes, 1);
			int			ok = 1;
			TestIndex	t;
			TestIndex	copy;
			int64_t		p;
			int			k;

			fill_data(kind, Y, n, f, &rng);
			fill_data(kind, x, 1, f, &rng);
			index_make(&t, Y, n, f);
			for (p = 0; p < n; p++)
			{
				int32_t		i = t.ix.item[p];

				ok &= i >= 0 && i < n && t.ix.position[i] == p;
				if (p > 0)
				{
					double		prev = sqrt(norm2(Y + (size_t) t.ix.item[p - 1] * f, f));
					double		here = sqrt(norm2(Y + (size_t) i * f, f));

					ok &= prev >= here * (1 - 1e-6) &&
						(prev != here || t.ix.item[p - 1] < i);
				}
			}
			CHECK(ok, "%s, %s data: n=%lld items ordered by norm, mapped both ways",
				  path, data_names[kind], (long long) n);
			{
				unsigned char *steps = test_alloc(bytes, 1);
				WalsScoreIndex in_steps;
				int64_t		b;

				CHECK(wals_score_index_begin(&in_steps, Y, n, f, steps) == WALS_OK,
					  "index begun in steps");
				for (b = wals_score_index_blocks(&in_steps) - 1; b >= 0; b--)
					wals_score_index_fill(&in_steps, b, b + 1);
				wals_score_index_end(&in_steps);
				CHECK(memcmp(in_steps.blocks, t.ix.blocks, bytes - WALS_ALIGN) == 0 &&
					  in_steps.usable == t.ix.usable && in_steps.max_norm == t.ix.max_norm,
					  "%s, %s data: n=%lld index built in steps, blocks filled last first, "
					  "is the one built at once", path, data_names[kind], (long long) n);
				free(steps);
			}
			memcpy(wals_align_ptr(moved), t.ix.blocks, bytes - WALS_ALIGN);
			copy = t;
			copy.buffer = NULL;
			copy.scratch = NULL;
			copy.batch_scratch = NULL;
			wals_score_index_remap(&copy.ix, Y, wals_align_ptr(moved));
			memset(t.buffer, 0, bytes + 8);
			for (k = 1; k <= 3 && n > 0; k++)
				CHECK(query_matches_k(&copy, x, NULL, k),
					  "%s, %s data: n=%lld k=%d from a remapped copy",
					  path, data_names[kind], (long long) n, k);
			index_free(&t);
			free(copy.scratch);
			free(moved);
			free(Y);
			free(x);
		}
}

/*
 * An index patched from the index of the rows before (kept, changed,
 * removed, added; ties of norm between kept and changed rows where the
 * data has them) is, byte for byte, the index built from the rows after;
 * so where every row is new; and where a changed row is not finite, the
 * unusable index (its blocks unwritten) keeps the items in order, as the
 * build does.
 */
static void
test_patch(void)
{
	static const int64_t sizes[] = {0, 1, 17, 4200};
	static const int widths[] = {12, 37};
	TestRng		rng;

	rng_seed(&rng, 31);
	for (int kind = 0; kind < DATA_KINDS; kind++)
		for (int s = 0; s < 4; s++)
			for (int w = 0; w < 2; w++)
				for (int mode = 0; mode < 3; mode++)
				{
					int64_t		n0 = sizes[s];
					int			f = widths[w];
					int64_t		cap = 2 * n0 + 4;
					float	   *Y0 = test_alloc((size_t) n0 * f + 1, sizeof(float));
					float	   *Y = test_alloc((size_t) cap * f + 1, sizeof(float));
					float	   *spare = test_alloc((size_t) f, sizeof(float));
					int32_t    *was = test_alloc((size_t) cap, sizeof(int32_t));
					int32_t    *now = test_alloc((size_t) n0 + 1, sizeof(int32_t));
					int64_t		n = 0;
					TestIndex	old;
					TestIndex	built;
					WalsScoreIndex patched;
					unsigned char *buffer;
					size_t		bytes;

					fill_data(kind, Y0, n0, f, &rng);
					index_make(&old, Y0, n0, f);
					for (int64_t j = 0; j <= n0; j++)
					{
						int			r = rng_below(&rng, 20);

						/* a new row before row j: a copy of a kept row's now and then, for ties */
						if (r == 0 || (j == n0 && mode == 2))
						{
							fill_data(kind, spare, 1, f, &rng);
							memcpy(Y + n * f, rng_below(&rng, 2) && j > 0 ? Y0 + (j - 1) * f : spare,
								   sizeof(float) * f);
							was[n++] = -1;
						}
						if (j == n0)
							break;
						now[j] = -1;
						if (mode == 2 || r == 1)
							continue;	/* removed */
						if (r == 2 || r == 3)
						{
							fill_data(kind, Y + n * f, 1, f, &rng);
							was[n++] = -1;
							continue;	/* changed */
						}
						memcpy(Y + n * f, Y0 + j * f, sizeof(float) * f);
						now[j] = (int32_t) n;
						was[n++] = (int32_t) j;
					}
					if (mode == 1 && n > 0)
					{
						int64_t		j = rng_below(&rng, (int) n);

						Y[j * f] = NAN;
						if (was[j] >= 0)
							now[was[j]] = -1;
						was[j] = -1;
					}
					index_make(&built, Y, n, f);
					bytes = wals_score_index_size(n, f);
					buffer = test_alloc(bytes, 1);
					CHECK(wals_score_index_patch(&patched, Y, n, f, buffer, &old.ix, was, now) == WALS_OK,
						  "patch of an index");
					CHECK(patched.n == n && patched.usable == built.ix.usable &&
						  patched.max_norm == built.ix.max_norm &&
						  (built.ix.usable ?
						   memcmp(patched.blocks, built.ix.blocks, bytes - WALS_ALIGN) == 0 :
						   memcmp(patched.item, built.ix.item, sizeof(int32_t) * n) == 0 &&
						   memcmp(patched.position, built.ix.position, sizeof(int32_t) * n) == 0),
						  "%s data, %lld rows of %d before, %lld after%s: the index patched is the one built",
						  data_names[kind], (long long) n0, f, (long long) n,
						  mode == 1 ? ", one not finite" : mode == 2 ? ", every row new" : "");
					index_free(&old);
					index_free(&built);
					free(buffer);
					free(Y0);
					free(Y);
					free(spare);
					free(was);
					free(now);
				}
}

/*
 * The path each kernel family brings: the one wals_score_path names must
 * be the one the family and the CPU's features call for.
 */
static void
test_path_choice(const char *family, const char *path)
{
	const char *want = "portable";

	if (strcmp(family, "avx512") == 0)
		want = wals_cpu_feature(WALS_CPU_VNNI) ? "avx512vnni" : "avx2";
	else if (strcmp(family, "avx2") == 0)
		want = "avx2";
	else if (strcmp(family, "neon") == 0)
		want = wals_cpu_feature(WALS_CPU_DOTPROD) ? "neon-dotprod" : "neon";
	CHECK(strcmp(path, want) == 0, "%s kernels choose the %s path, not %s",
		  family, want, path);
}

/*
 * Whether family is one of the comma-separated names of WALS_UNIT_KERNELS,
 * or any where it is unset: make unit-arm64 runs the Cortex-A57 with neon
 * alone, for its path without dotprod, as the generic family there is the
 * code the other CPU's run has checked.
 */
static bool
family_wanted(const char *family)
{
	const char *want = getenv("WALS_UNIT_KERNELS");
	size_t		len = strlen(family);

	if (want == NULL || *want == '\0')
		return true;
	while (*want != '\0')
	{
		size_t		n = strcspn(want, ",");

		if (n == len && strncmp(want, family, len) == 0)
			return true;
		want += n + (want[n] == ',');
	}
	return false;
}

/*
 * Every test under each kernel family this CPU runs, chosen the way the
 * server's wals.kernels chooses it (those WALS_UNIT_KERNELS names).
 */
void
test_score(void)
{
	int			isa;

	test_build_args();
	test_patch();
	for (isa = 0; isa < WALS_ISA_COUNT; isa++)
	{
		const WalsKernels *kernels = wals_kernels_isa((WalsIsa) isa);
		char		label[64];

		if (kernels == NULL || !family_wanted(kernels->name))
			continue;
		wals_kernels_use(kernels->name);
		test_path_choice(kernels->name, wals_score_path());
		snprintf(label, sizeof(label), "%s kernels, %s path", kernels->name,
				 wals_score_path());
		test_queries(label);
		test_edges(label);
		test_bounds(label);
		test_integer_grid(label);
		test_batch(label);
		test_order(label);
		test_cancellation(label);
	}
	wals_kernels_use("auto");
	test_tightness();
}
