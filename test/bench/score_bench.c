/*
 * score_bench.c
 *	  Microseconds per top-k query and batch throughput of the scoring
 *	  engine, single-threaded, on synthetic item factors, without a server.
 *
 *	  score_bench [items f k queries users]
 *	  (defaults: 27000 64 10 3000 8192, MovieLens-20M's items at the
 *	  default width; users is the batch sample, extrapolated to 138,000)
 *
 * Two data sets: factors drawn from a normal distribution, and low-rank
 * "trained-like" ones (a few shared directions, norms spread by item
 * popularity), where a few items dominate every user's scores.  Each is
 * queried without a filter and with a 50-item skip list, through the scan
 * the server used before this engine (cblas_sgemv, then
 * wals_topk_select), the reference scan (every item through
 * wals_score_dot, the same heap), the index, and the batch; the index and
 * the batch once more on the portable path, as a CPU without VNNI runs
 * them.  Every result of the index and the batch is checked against the
 * reference and mismatches are counted: the figure must be 0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "wals_internal.h"
#include "wals_score.h"

#define SKIP_ITEMS 50
#define BENCH_RANK 8
#define FULL_USERS 138000

static uint64_t rng_state = 42;

static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
rng_uniform(void)
{
	return (double) (rng_next() >> 11) / 9007199254740992.0;
}

/* Box-Muller; the offset keeps log away from 0. */
static double
rng_normal(void)
{
	double		u1 = rng_uniform() + 1e-300;
	double		u2 = rng_uniform();

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void *
xalloc(size_t n, size_t size)
{
	void	   *p = calloc(n ? n : 1, size);

	if (p == NULL)
	{
		fprintf(stderr, "score_bench: out of memory\n");
		exit(2);
	}
	return p;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
fill_normal(float *v, size_t count)
{
	size_t		j;

	for (j = 0; j < count; j++)
		v[j] = (float) (0.1 * rng_normal());
}

/* Rows on a few shared directions, scaled log-normally: popularity. */
static void
fill_trained(float *v, int64_t rows, int f, const float *basis)
{
	int64_t		r;
	int			j;
	int			c;

	for (r = 0; r < rows; r++)
	{
		double		pop = exp(0.7 * rng_normal());
		double		z[BENCH_RANK];

		for (c = 0; c < BENCH_RANK; c++)
			z[c] = rng_normal();
		for (j = 0; j < f; j++)
		{
			double		s = 0.1 * rng_normal();

			for (c = 0; c < BENCH_RANK; c++)
				s += z[c] * basis[c * f + j];
			v[(size_t) r * f + j] = (float) (0.05 * pop * s);
		}
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static int
cmp_int32(const void *a, const void *b)
{
	int32_t		x = *(const int32_t *) a;
	int32_t		y = *(const int32_t *) b;

	return (x > y) - (x < y);
}

/* p50 and p90 of seconds, printed in microseconds. */
static void
print_quantiles(const char *what, double *sec, int count)
{
	qsort(sec, count, sizeof(double), cmp_double);
	printf("    %-28s p50 %8.1f us   p90 %8.1f us\n", what,
		   1e6 * sec[count / 2], 1e6 * sec[count * 9 / 10]);
}

/* SKIP_ITEMS distinct sorted items per user, as rated items would be. */
static void
make_skips(int32_t *skip, int users, int64_t n)
{
	int			u;

	for (u = 0; u < users; u++)
	{
		int32_t    *s = skip + (size_t) u * SKIP_ITEMS;
		int			j;
		int			kept = 0;

		while (kept < SKIP_ITEMS)
		{
			int32_t		i = (int32_t) (rng_next() % (uint64_t) n);

			for (j = 0; j < kept && s[j] != i; j++)
				;
			if (j == kept)
				s[kept++] = i;
		}
		qsort(s, SKIP_ITEMS, sizeof(int32_t), cmp_int32);
	}
}

/* The reference: every eligible item through wals_score_dot, one heap. */
static int
reference_scan(const float *Y, int64_t n, int f, const float *x,
			   const WalsScoreFilter *filter, int k, int32_t *idx,
			   float *score, float *scores)
{
	int64_t		i;

	for (i = 0; i < n; i++)
		scores[i] = wals_score_dot(x, Y + (size_t) i * f, f);
	return wals_topk_select(scores, n, filter ? filter->skip : NULL,
							filter ? filter->nskip : 0, k, idx, score);
}

static int
differs(int got, const int32_t *idx, const float *score, int want,
		const int32_t *ridx, const float *rscore)
{
	return got != want || memcmp(idx, ridx, sizeof(int32_t) * want) != 0 ||
		memcmp(score, rscore, sizeof(float) * want) != 0;
}

static void
bench_queries(const WalsScoreIndex *ix, const float *Q, int queries,
			  const WalsScoreFilter *filters, int k)
{
	int64_t		n = ix->n;
	int			f = ix->f;
	float	   *scores = xalloc(n, sizeof(float));
	double	   *t_gemv = xalloc(queries, sizeof(double));
	double	   *t_ref = xalloc(queries, sizeof(double));
	double	   *t_ix = xalloc(queries, sizeof(double));
	double	   *t_port = xalloc(queries, sizeof(double));
	void	   *scratch = xalloc(wals_score_scratch_size(ix, k), 1);
	int32_t    *idx = xalloc(k, sizeof(int32_t));
	float	   *score = xalloc(k, sizeof(float));
	int32_t    *ridx = xalloc(k, sizeof(int32_t));
	float	   *rscore = xalloc(k, sizeof(float));
	int			mismatches = 0;
	int			q;

	for (q = 0; q < queries; q++)
	{
		const float *x = Q + (size_t) q * f;
		const WalsScoreFilter *filter = filters ? &filters[q] : NULL;
		const int32_t *skip = filter ? filter->skip : NULL;
		int64_t		nskip = filter ? filter->nskip : 0;
		int			want;
		int			got;
		double		t0 = now();

		cblas_sgemv(CblasRowMajor, CblasNoTrans, (int) n, f, 1.0f, ix->Y, f,
					x, 1, 0.0f, scores, 1);
		wals_topk_select(scores, n, skip, nskip, k, idx, score);
		t_gemv[q] = now() - t0;

		t0 = now();
		want = reference_scan(ix->Y, n, f, x, filter, k, ridx, rscore, scores);
		t_ref[q] = now() - t0;

		t0 = now();
		got = wals_score_topk(ix, x, filter, k, idx, score, scratch);
		t_ix[q] = now() - t0;
		mismatches += differs(got, idx, score, want, ridx, rscore);

		wals_score_force_portable(1);
		t0 = now();
		got = wals_score_topk(ix, x, filter, k, idx, score, scratch);
		t_port[q] = now() - t0;
		wals_score_force_portable(0);
		mismatches += differs(got, idx, score, want, ridx, rscore);
	}
	print_quantiles("sgemv + heap (old serving)", t_gemv, queries);
	print_quantiles("reference scan (dot + heap)", t_ref, queries);
	print_quantiles("index", t_ix, queries);
	print_quantiles("index, portable path", t_port, queries);
	printf("    index results differing from the reference: %d of %d\n",
		   mismatches, 2 * queries);
	free(scores);
	free(t_gemv);
	free(t_ref);
	free(t_ix);
	free(t_port);
	free(scratch);
	free(idx);
	free(score);
	free(ridx);
	free(rscore);
}

static void
bench_batch(const WalsScoreIndex *ix, const float *U, int users,
			const WalsScoreFilter *filters, int k, int portable)
{
	int			f = ix->f;
	void	   *scratch = xalloc(wals_score_batch_scratch_size(ix, k), 1);
	int32_t    *idx = xalloc((size_t) users * k, sizeof(int32_t));
	float	   *score = xalloc((size_t) users * k, sizeof(float));
	int		   *count = xalloc(users, sizeof(int));
	float	   *scores = xalloc(ix->n, sizeof(float));
	int32_t    *ridx = xalloc(k, sizeof(int32_t));
	float	   *rscore = xalloc(k, sizeof(float));
	int			mismatches = 0;
	double		t0;
	double		sec;
	int			u;

	wals_score_force_portable(portable);
	t0 = now();
	wals_score_topk_batch(ix, U, 0, users, filters, k, idx, score, count,
						  scratch);
	sec = now() - t0;
	wals_score_force_portable(0);
	for (u = 0; u < users; u++)
	{
		int			want = reference_scan(ix->Y, ix->n, f, U + (size_t) u * f,
										  filters ? &filters[u] : NULL, k,
										  ridx, rscore, scores);

		mismatches += differs(count[u], idx + (size_t) u * k,
							  score + (size_t) u * k, want, ridx, rscore);
	}
	printf("    batch%s: %d users in %.3f s, %.0f users/s, %d users: %.2f s; "
		   "%d differing from the reference\n", portable ? ", portable path" : "",
		   users, sec, users / sec, FULL_USERS, FULL_USERS * sec / users,
		   mismatches);
	free(scratch);
	free(idx);
	free(score);
	free(count);
	free(scores);
	free(ridx);
	free(rscore);
}

static void
print_machine(void)
{
	FILE	   *cpuinfo = fopen("/proc/cpuinfo", "r");
	char		line[256];

	while (cpuinfo && fgets(line, sizeof(line), cpuinfo))
		if (strncmp(line, "model name", 10) == 0)
		{
			printf("cpu:%s", strchr(line, ':') + 1);
			break;
		}
	if (cpuinfo)
		fclose(cpuinfo);
	printf("first pass: %s, dot kernels: %s, one thread\n",
		   wals_score_path(), wals_kernels_name());
}

int
main(int argc, char **argv)
{
	int64_t		n = argc > 1 ? atol(argv[1]) : 27000;
	int			f = argc > 2 ? atoi(argv[2]) : 64;
	int			k = argc > 3 ? atoi(argv[3]) : 10;
	int			queries = argc > 4 ? atoi(argv[4]) : 3000;
	int			users = argc > 5 ? atoi(argv[5]) : 8192;
	int			rows = queries > users ? queries : users;
	float	   *Y = xalloc((size_t) n * f, sizeof(float));
	float	   *U = xalloc((size_t) rows * f, sizeof(float));
	float	   *basis = xalloc((size_t) BENCH_RANK * f, sizeof(float));
	int32_t    *skip = xalloc((size_t) rows * SKIP_ITEMS, sizeof(int32_t));
	WalsScoreFilter *filters = xalloc(rows, sizeof(WalsScoreFilter));
	void	   *buffer;
	WalsScoreIndex ix;
	int			set;
	int			u;

	if (n < SKIP_ITEMS || f < 1 || k < 1 || queries < 1 || users < 1)
	{
		fprintf(stderr, "usage: score_bench [items >= %d, f, k, queries, users]\n",
				SKIP_ITEMS);
		return 2;
	}
	print_machine();
	make_skips(skip, rows, n);
	for (u = 0; u < rows; u++)
	{
		filters[u].skip = skip + (size_t) u * SKIP_ITEMS;
		filters[u].nskip = SKIP_ITEMS;
	}
	fill_normal(basis, (size_t) BENCH_RANK * f);
	buffer = xalloc(wals_score_index_size(n, f), 1);
	for (set = 0; set < 2; set++)
	{
		double		t0;

		if (set == 0)
		{
			fill_normal(Y, (size_t) n * f);
			fill_normal(U, (size_t) rows * f);
		}
		else
		{
			fill_trained(Y, n, f, basis);
			fill_trained(U, rows, f, basis);
		}
		t0 = now();
		wals_score_index_build(&ix, Y, n, f, buffer);
		printf("\n%s factors, %lld items x %d, k = %d: index of %.1f MB built in %.1f ms\n",
			   set == 0 ? "random normal" : "trained-like (rank 8, popularity)",
			   (long long) n, f, k, wals_score_index_size(n, f) / 1048576.0,
			   1e3 * (now() - t0));
		printf("  no filter, %d queries:\n", queries);
		bench_queries(&ix, U, queries, NULL, k);
		bench_batch(&ix, U, users, NULL, k, 0);
		bench_batch(&ix, U, users, NULL, k, 1);
		printf("  skip list of %d items:\n", SKIP_ITEMS);
		bench_queries(&ix, U, queries, filters, k);
		bench_batch(&ix, U, users, filters, k, 0);
		bench_batch(&ix, U, users, filters, k, 1);
	}
	free(Y);
	free(U);
	free(basis);
	free(skip);
	free(filters);
	free(buffer);
	return 0;
}
