/*
 * score_bench.c
 *	  Microseconds per top-k query and batch throughput of the scoring
 *	  engine on every path this CPU runs, single-threaded, on synthetic item
 *	  factors, without a server.
 *
 *	  score_bench [items f k queries users]
 *	  (defaults: 27000 64 10 3000 8192, MovieLens-20M's items at the
 *	  default width; users is the batch sample, extrapolated to 138,000)
 *
 * Two data sets: factors drawn from a normal distribution, and low-rank
 * "trained-like" ones (a few shared directions, norms spread by item
 * popularity), where a few items dominate every user's scores.  Each is
 * queried without a filter and with a 50-item skip list, under each kernel
 * family the CPU runs (chosen with wals_kernels_use, as the server's
 * wals.kernels does), which brings its own first-pass path: one row per
 * family, with the query's p50 and p99, the batch's throughput (the median
 * of BATCH_RUNS), and both against the widest family's.  The families take
 * turns of QUERY_TURN queries and of one batch, so that a machine's slow
 * spells fall on all of them, while each turn is long enough that a switch
 * of instruction set (AVX-512 lowers the clock for a while) costs it
 * nothing measurable.  Every result is checked against the reference of
 * its family (every item through wals_score_dot, the same heap) and
 * mismatches are counted: the figure must be 0.  Below the rows, for
 * scale, the scan the server used before this engine (cblas_sgemv, then
 * wals_topk_select) and the reference scan of the widest family.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "wals_internal.h"
#define BENCH_NAME "score_bench"
#include "bench_common.h"
#include "wals_score.h"

#define SKIP_ITEMS 50
#define BENCH_RANK 8
#define FULL_USERS 138000
#define BATCH_RUNS 3
#define QUERY_TURN 100
#define MAX_FAMILIES WALS_ISA_COUNT

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


/* A kernel family this CPU runs and the first pass it brings. */
typedef struct Family
{
	const char *kernels;
	const char *path;
} Family;

/* The families, widest first; their count. */
static int
list_families(Family *fam)
{
	int			nfam = 0;
	int			isa;

	for (isa = 0; isa < WALS_ISA_COUNT; isa++)
	{
		const WalsKernels *kernels = wals_kernels_isa((WalsIsa) isa);

		if (kernels == NULL)
			continue;
		wals_kernels_use(kernels->name);
		fam[nfam].kernels = kernels->name;
		fam[nfam].path = wals_score_path();
		nfam++;
	}
	wals_kernels_use("auto");
	return nfam;
}

/* The top k of rows users, as a reference or as a path returned them. */
typedef struct Results
{
	int32_t    *idx;			/* k per user */
	float	   *score;
	int		   *count;
} Results;

static void
results_alloc(Results *r, int rows, int k)
{
	r->idx = xalloc((size_t) rows * k, sizeof(int32_t));
	r->score = xalloc((size_t) rows * k, sizeof(float));
	r->count = xalloc(rows, sizeof(int));
}

static void
results_free(Results *r)
{
	free(r->idx);
	free(r->score);
	free(r->count);
}

/* How many of users [0, rows) of got differ from want. */
static int
count_differing(const Results *got, const Results *want, int rows, int k)
{
	int			differing = 0;
	int			u;

	for (u = 0; u < rows; u++)
		differing += differs(got->count[u], got->idx + (size_t) u * k,
							 got->score + (size_t) u * k, want->count[u],
							 want->idx + (size_t) u * k,
							 want->score + (size_t) u * k);
	return differing;
}

/* The p-th quantile (0 to 1) of count seconds, sorting them. */
static double
quantile(double *sec, int count, double p)
{
	int			i = (int) (p * count);

	qsort(sec, count, sizeof(double), cmp_double);
	return sec[i < count ? i : count - 1];
}

/*
 * The references of every family for users U, rows of them; the widest
 * family's time per query over the first queries goes to ref_sec.
 */
static void
make_references(const WalsScoreIndex *ix, const float *U, int rows,
				const WalsScoreFilter *filters, int k, const Family *fam,
				int nfam, Results *ref, double *ref_sec, int queries)
{
	float	   *scores = xalloc(ix->n, sizeof(float));
	int			p;
	int			u;

	for (p = 0; p < nfam; p++)
	{
		wals_kernels_use(fam[p].kernels);
		results_alloc(&ref[p], rows, k);
		for (u = 0; u < rows; u++)
		{
			double		t0 = now();

			ref[p].count[u] = reference_scan(ix->Y, ix->n, ix->f,
											 U + (size_t) u * ix->f,
											 filters ? &filters[u] : NULL, k,
											 ref[p].idx + (size_t) u * k,
											 ref[p].score + (size_t) u * k,
											 scores);
			if (p == 0 && u < queries)
				ref_sec[u] = now() - t0;
		}
	}
	wals_kernels_use("auto");
	free(scores);
}

/* Seconds per query of the old serving scan, cblas_sgemv and the heap. */
static void
time_sgemv(const WalsScoreIndex *ix, const float *U, int queries,
		   const WalsScoreFilter *filters, int k, double *sec)
{
	float	   *scores = xalloc(ix->n, sizeof(float));
	int32_t    *idx = xalloc(k, sizeof(int32_t));
	float	   *score = xalloc(k, sizeof(float));
	int			q;

	for (q = 0; q < queries; q++)
	{
		const WalsScoreFilter *filter = filters ? &filters[q] : NULL;
		double		t0 = now();

		cblas_sgemv(CblasRowMajor, CblasNoTrans, (int) ix->n, ix->f, 1.0f,
					ix->Y, ix->f, U + (size_t) q * ix->f, 1, 0.0f, scores, 1);
		wals_topk_select(scores, ix->n, filter ? filter->skip : NULL,
						 filter ? filter->nskip : 0, k, idx, score);
		sec[q] = now() - t0;
	}
	free(scores);
	free(idx);
	free(score);
}

/*
 * Each family's seconds per query (sec[p][q]), the families taking turns
 * of QUERY_TURN queries; their mismatches go to differing[p].
 */
static void
time_queries(const WalsScoreIndex *ix, const float *U, int queries,
			 const WalsScoreFilter *filters, int k, const Family *fam,
			 int nfam, const Results *ref, double **sec, int *differing)
{
	void	   *scratch = xalloc(wals_score_scratch_size(ix, k), 1);
	Results		got;
	int			q0;
	int			q;
	int			p;

	results_alloc(&got, 1, k);
	for (q0 = 0; q0 < queries; q0 += QUERY_TURN)
		for (p = 0; p < nfam; p++)
		{
			wals_kernels_use(fam[p].kernels);
			for (q = q0; q < q0 + QUERY_TURN && q < queries; q++)
			{
				const WalsScoreFilter *filter = filters ? &filters[q] : NULL;
				double		t0 = now();

				got.count[0] = wals_score_topk(ix, U + (size_t) q * ix->f, filter,
											   k, got.idx, got.score, scratch);
				sec[p][q] = now() - t0;
				differing[p] += differs(got.count[0], got.idx, got.score,
										ref[p].count[q],
										ref[p].idx + (size_t) q * k,
										ref[p].score + (size_t) q * k);
			}
		}
	wals_kernels_use("auto");
	results_free(&got);
	free(scratch);
}

/*
 * Each family's batch of users users, BATCH_RUNS times in turn; the median
 * run's seconds go to batch_sec[p], its mismatches to differing[p].
 */
static void
time_batches(const WalsScoreIndex *ix, const float *U, int users,
			 const WalsScoreFilter *filters, int k, const Family *fam,
			 int nfam, const Results *ref, double *batch_sec, int *differing)
{
	void	   *scratch = xalloc(wals_score_batch_scratch_size(ix, k), 1);
	double		runs[MAX_FAMILIES][BATCH_RUNS];
	Results		got;
	int			run;
	int			p;

	results_alloc(&got, users, k);
	for (run = 0; run < BATCH_RUNS; run++)
		for (p = 0; p < nfam; p++)
		{
			double		t0;

			wals_kernels_use(fam[p].kernels);
			t0 = now();
			wals_score_topk_batch(ix, U, 0, users, filters, k, got.idx,
								  got.score, got.count, scratch);
			runs[p][run] = now() - t0;
			differing[p] += count_differing(&got, &ref[p], users, k);
		}
	wals_kernels_use("auto");
	for (p = 0; p < nfam; p++)
		batch_sec[p] = quantile(runs[p], BATCH_RUNS, 0.5);
	results_free(&got);
	free(scratch);
}

/*
 * One data set with one filter setting through every family: a row each,
 * then the old serving scan and the reference for scale.
 */
static void
bench_families(const WalsScoreIndex *ix, const float *U, int queries,
			   int users, const WalsScoreFilter *filters, int k,
			   const Family *fam, int nfam)
{
	int			rows = queries > users ? queries : users;
	Results		ref[MAX_FAMILIES];
	double	   *sec[MAX_FAMILIES];
	double	   *ref_sec = xalloc(queries, sizeof(double));
	double	   *gemv_sec = xalloc(queries, sizeof(double));
	double		batch_sec[MAX_FAMILIES];
	int			differing[MAX_FAMILIES] = {0};
	double		p50_widest = 0.0;
	int			p;

	for (p = 0; p < nfam; p++)
		sec[p] = xalloc(queries, sizeof(double));
	make_references(ix, U, rows, filters, k, fam, nfam, ref, ref_sec, queries);
	time_sgemv(ix, U, queries, filters, k, gemv_sec);
	time_queries(ix, U, queries, filters, k, fam, nfam, ref, sec, differing);
	time_batches(ix, U, users, filters, k, fam, nfam, ref, batch_sec,
				 differing);
	printf("    %-8s %-12s %10s %10s %8s  %13s %10s %8s %9s\n", "kernels",
		   "first pass", "query p50", "p99", "x widest", "batch users/s",
		   "138k users", "x widest", "differing");
	for (p = 0; p < nfam; p++)
	{
		double		p50 = quantile(sec[p], queries, 0.5);
		double		p99 = quantile(sec[p], queries, 0.99);

		if (p == 0)
			p50_widest = p50;
		printf("    %-8s %-12s %7.1f us %7.1f us %8.2f  %13.0f %8.2f s %8.2f %9d\n",
			   fam[p].kernels, fam[p].path, 1e6 * p50, 1e6 * p99,
			   p50 / p50_widest, users / batch_sec[p],
			   FULL_USERS * batch_sec[p] / users, batch_sec[p] / batch_sec[0],
			   differing[p]);
	}
	printf("    (differing: of %d queries and %d x %d batch results per row)\n",
		   queries, BATCH_RUNS, users);
	printf("    sgemv + heap (old serving): p50 %.1f us, p99 %.1f us\n",
		   1e6 * quantile(gemv_sec, queries, 0.5),
		   1e6 * quantile(gemv_sec, queries, 0.99));
	printf("    reference scan (%s dot + heap): p50 %.1f us, p99 %.1f us\n",
		   fam[0].kernels, 1e6 * quantile(ref_sec, queries, 0.5),
		   1e6 * quantile(ref_sec, queries, 0.99));
	for (p = 0; p < nfam; p++)
	{
		results_free(&ref[p]);
		free(sec[p]);
	}
	free(ref_sec);
	free(gemv_sec);
}

/* The value of key on a line of /proc/cpuinfo, or NULL for another key. */
static const char *
cpuinfo_value(char *line, const char *key)
{
	size_t		len = strlen(key);
	char	   *colon = strchr(line, ':');

	if (colon == NULL || strncmp(line, key, len) != 0 ||
		strspn(line + len, " \t") != (size_t) (colon - line) - len)
		return NULL;
	line[strcspn(line, "\n")] = '\0';
	return colon + 1 + strspn(colon + 1, " ");
}

/*
 * The CPU's name and numbers as /proc/cpuinfo gives them (a virtual
 * machine may show a generic name, qemu-user the host's), its byte-product
 * features, and what runs where.
 */
static void
print_machine(const Family *fam, int nfam)
{
	static const char *const keys[] = {"model name", "cpu family", "model",
	"stepping", "CPU implementer", "CPU part"};
	char		values[6][128] = {{0}};
	FILE	   *cpuinfo = fopen("/proc/cpuinfo", "r");
	char		line[256];
	int			key;
	int			p;

	while (cpuinfo && fgets(line, sizeof(line), cpuinfo))
		for (key = 0; key < 6; key++)
		{
			const char *value = values[key][0] ? NULL : cpuinfo_value(line, keys[key]);

			if (value)
				snprintf(values[key], sizeof(values[key]), "%s", value);
		}
	if (cpuinfo)
		fclose(cpuinfo);
	printf("cpu: %s (", values[0][0] ? values[0] : "no model name");
	for (key = 1, p = 0; key < 6; key++)
		if (values[key][0])
			printf("%s%s %s", p++ ? ", " : "", keys[key], values[key]);
	printf(")\n");
	printf("byte dot products: AVX-512 VNNI %s, Arm dotprod %s\n",
		   wals_cpu_feature(WALS_CPU_VNNI) ? "yes" : "no",
		   wals_cpu_feature(WALS_CPU_DOTPROD) ? "yes" : "no");
	printf("kernel families (first pass):");
	for (p = 0; p < nfam; p++)
		printf("%s %s (%s)", p ? "," : "", fam[p].kernels, fam[p].path);
	printf("; widest: %s\n", fam[0].kernels);
	printf("OpenBLAS (old serving, batches by matrix product): %s, core %s\n",
		   openblas_get_config(), openblas_get_corename());
	printf("one thread; each row's queries and batches rescore with its family's dot product\n");
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
	Family		fam[MAX_FAMILIES];
	int			nfam = list_families(fam);
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
	print_machine(fam, nfam);
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
		printf("  no filter, %d queries, batches of %d users:\n", queries, users);
		bench_families(&ix, U, queries, users, NULL, k, fam, nfam);
		printf("  skip list of %d items:\n", SKIP_ITEMS);
		bench_families(&ix, U, queries, users, filters, k, fam, nfam);
	}
	free(Y);
	free(U);
	free(basis);
	free(skip);
	free(filters);
	free(buffer);
	return 0;
}
