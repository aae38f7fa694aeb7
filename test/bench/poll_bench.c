/*
 * poll_bench.c
 *	  How long the core goes between two calls of its poll hook, and what
 *	  cutting the Gram into pieces for it costs, single-threaded, without a
 *	  server.
 *
 *	  poll_bench [f ...]	(default: 64 128 1024 4096)
 *
 * The server's hook is CHECK_FOR_INTERRUPTS, so the longest gap between
 * two polls bounds how late a cancel or statement_timeout is answered
 * (DESIGN section 6, rule 14: about 10 ms).  For each f it runs, with a
 * hook that records the time of each call, the operations whose work per
 * step grows as f^2 or f^3: the Gram of the rows training computes (in its
 * slices of 4096) and of the items serving loads (all at once), a Cholesky
 * row, a CG row of three steps, a subspace row (blocks of 64), the index
 * build, a top-10 query, a query scanned exactly (k a quarter of the
 * items, where the bounds would not prune), and the starting factors.  Each
 * line gives the seconds, the polls, and the longest and mean gap in
 * milliseconds, the stretches before the first poll and after the last
 * included.  Then the Gram in pieces (wals_gram_rows) against one ssyrk
 * over the same rows, as it was before, best of three.  Times are the
 * process's CPU time, which on a shared machine is what an idle one's
 * clock would show.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "wals_internal.h"
#include "wals_score.h"
#define BENCH_NAME "poll_bench"
#include "bench_common.h"

/* The times of the hook's calls. */
static double last_poll;
static double longest_gap;
static int64_t polls;

static void
timed_poll(void)
{
	double		now = cpu_seconds();

	if (now - last_poll > longest_gap)
		longest_gap = now - last_poll;
	last_poll = now;
	polls++;
}

static double run_start;

static void
gaps_begin(void)
{
	wals_set_poll_hook(timed_poll);
	polls = 0;
	longest_gap = 0.0;
	run_start = last_poll = cpu_seconds();
}

/* One line of the table, from the start to now. */
static void
gaps_end(const char *what, int f, const char *size)
{
	double		now = cpu_seconds();
	double		total = now - run_start;

	if (now - last_poll > longest_gap)
		longest_gap = now - last_poll;
	wals_set_poll_hook(NULL);
	printf("%-22s %5d %-16s %9.3f %8lld %9.2f %9.2f\n", what, f, size, total,
		   (long long) polls, longest_gap * 1e3, total * 1e3 / (double) (polls + 1));
}

static float *
normal_rows(int64_t n, int f, double scale)
{
	float	   *Y = xalloc((size_t) n * f, sizeof(float));
	int64_t		k;

	for (k = 0; k < n * f; k++)
		Y[k] = (float) (scale * rng_normal());
	return Y;
}

/* Rows of the Gram by shape: as many as keep each line to a second or so. */
static int64_t
gram_rows(int f)
{
	int64_t		n = (int64_t) 4e10 / ((int64_t) f * f);

	return n > 138000 ? 138000 : n < 600 ? 600 : n;
}

/* Cells of one row: long rows, as popular items have. */
static int
row_cells(int f)
{
	return f >= 1024 ? 2000 : 12000;
}

/* One row of cells spread over the items, its CSR. */
typedef struct BenchRow
{
	WalsCsr		R;
	int64_t		indptr[2];
	int32_t    *idx;
	float	   *val;
} BenchRow;

static void
row_make(BenchRow *row, int cells, int64_t items)
{
	int			j;

	row->idx = xalloc((size_t) cells, sizeof(int32_t));
	row->val = xalloc((size_t) cells, sizeof(float));
	for (j = 0; j < cells; j++)
	{
		row->idx[j] = (int32_t) ((int64_t) j * items / cells);
		row->val[j] = 1.0f + (float) (j % 5);
	}
	row->indptr[0] = 0;
	row->indptr[1] = cells;
	row->R.nrows = 1;
	row->R.ncols = items;
	row->R.indptr = row->indptr;
	row->R.indices = row->idx;
	row->R.values = row->val;
}

static void
solve_row(const char *what, WalsSolver solver, int f, const BenchRow *row,
		  const float *Y, const float *G)
{
	WalsParams	params = {0};
	float	   *scratch;
	float	   *x = xalloc((size_t) f, sizeof(float));
	char		size[32];

	params.feedback = WALS_IMPLICIT;
	params.solver = solver;
	params.factors = f;
	params.cg_steps = 3;
	params.regularization = 0.1f;
	params.alpha = 1.0f;
	params.w0 = 1.0f;
	params.block_size = 64;
	scratch = xalloc(wals_solve_scratch(&params, row->indptr[1]), sizeof(float));
	snprintf(size, sizeof(size), "%lld cells", (long long) row->indptr[1]);
	gaps_begin();
	if (wals_solve_rows(&params, &row->R, Y, G, x, 0, 1, scratch, NULL) != WALS_OK)
		printf("%s: the row did not solve\n", what);
	gaps_end(what, f, size);
	free(scratch);
	free(x);
}

static void
one_f(int f)
{
	int64_t		n = gram_rows(f);
	int64_t		items = n < 20000 ? 20000 : n;
	float	   *Y = normal_rows(items, f, 1.0 / sqrt((double) f));
	float	   *G = xalloc((size_t) f * f, sizeof(float));
	int64_t    *ids = xalloc((size_t) items, sizeof(int64_t));
	void	   *buffer = xalloc(wals_score_index_size(items, f), 1);
	WalsScoreIndex ix;
	void	   *qscratch;
	int32_t		idx[10];
	float		score[10];
	int			kexact = (int) (items / 4);
	int32_t    *eidx = xalloc((size_t) kexact, sizeof(int32_t));
	float	   *escore = xalloc((size_t) kexact, sizeof(float));
	BenchRow	row;
	char		size[32];
	int64_t		lo;
	int64_t		k;

	snprintf(size, sizeof(size), "%lld rows", (long long) n);
	gaps_begin();
	for (lo = 0; lo < n; lo += 4096)
		wals_gram_rows(Y, lo, lo + 4096 < n ? lo + 4096 : n, f, G);
	gaps_end("gram, slices of 4096", f, size);
	memset(G, 0, sizeof(float) * f * f);
	gaps_begin();
	wals_gram_rows(Y, 0, n, f, G);
	gaps_end("gram, all at once", f, size);
	memset(G, 0, sizeof(float) * f * f);
	wals_gram_rows(Y, 0, items, f, G);

	row_make(&row, row_cells(f), items);
	solve_row("cholesky row", WALS_CHOLESKY, f, &row, Y, G);
	solve_row("cg row, 3 steps", WALS_CG, f, &row, Y, G);
	solve_row("subspace row, b = 64", WALS_SUBSPACE, f, &row, Y, G);

	snprintf(size, sizeof(size), "%lld items", (long long) items);
	gaps_begin();
	if (wals_score_index_build(&ix, Y, items, f, buffer) != WALS_OK)
		printf("the index did not build\n");
	gaps_end("index build", f, size);
	qscratch = xalloc(wals_score_scratch_size(&ix, kexact), 1);
	gaps_begin();
	(void) wals_score_topk(&ix, Y, NULL, 10, idx, score, qscratch);
	gaps_end("top 10 query", f, size);
	gaps_begin();
	(void) wals_score_topk(&ix, Y, NULL, kexact, eidx, escore, qscratch);
	gaps_end("top n/4, exact scan", f, size);

	for (k = 0; k < items; k++)
		ids[k] = k;
	gaps_begin();
	wals_init_rows(Y, ids, 0, items, f, 42, 0.1f);
	gaps_end("starting factors", f, size);

	free(row.idx);
	free(row.val);
	free(eidx);
	free(escore);
	free(qscratch);
	free(buffer);
	free(ids);
	free(G);
	free(Y);
}

/* Best of three: the Gram in pieces, and one ssyrk and its mirror. */
static void
gram_cost(int f)
{
	int64_t		n = gram_rows(f);
	float	   *Y = normal_rows(n, f, 1.0);
	float	   *G = xalloc((size_t) f * f, sizeof(float));
	double		pieces = 1e30;
	double		one = 1e30;
	int			rep;

	for (rep = 0; rep < 3; rep++)
	{
		double		t;
		int			a;
		int			b;

		memset(G, 0, sizeof(float) * f * f);
		t = cpu_seconds();
		wals_gram_rows(Y, 0, n, f, G);
		t = cpu_seconds() - t;
		pieces = t < pieces ? t : pieces;

		memset(G, 0, sizeof(float) * f * f);
		t = cpu_seconds();
		cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, f, (int) n, 1.0f, Y, f, 1.0f, G, f);
		for (a = 0; a < f; a++)
			for (b = 0; b < a; b++)
				G[(size_t) a * f + b] = G[(size_t) b * f + a];
		t = cpu_seconds() - t;
		one = t < one ? t : one;
	}
	printf("gram of %6lld rows at f = %4d: %8.4f s in pieces, %8.4f s as one ssyrk (%+.1f%%), %.1f Gflop/s\n",
		   (long long) n, f, pieces, one, 100.0 * (pieces - one) / one,
		   (double) f * f * n / pieces * 1e-9);
	free(Y);
	free(G);
}

static void
print_machine(void)
{
	FILE	   *fp = fopen("/proc/cpuinfo", "r");
	char		line[512];

	if (fp != NULL)
	{
		while (fgets(line, sizeof(line), fp) != NULL)
			if (strncmp(line, "model name", 10) == 0)
			{
				printf("cpu:%s", strchr(line, ':') + 1);
				break;
			}
		fclose(fp);
	}
	printf("kernels: %s; polls every %lld units of work, BLAS in pieces of %lld\n",
		   wals_kernels_name(), (long long) WALS_POLL_WORK, (long long) WALS_BLAS_PIECE);
}

int
main(int argc, char **argv)
{
	static const int defaults[] = {64, 128, 1024, 4096};
	int			nf = argc > 1 ? argc - 1 : 4;
	int			i;

	print_machine();
	printf("%-22s %5s %-16s %9s %8s %9s %9s\n", "operation", "f", "size", "seconds",
		   "polls", "max ms", "mean ms");
	for (i = 0; i < nf; i++)
		one_f(argc > 1 ? atoi(argv[i + 1]) : defaults[i]);
	printf("\n");
	for (i = 0; i < nf; i++)
		gram_cost(argc > 1 ? atoi(argv[i + 1]) : defaults[i]);
	return 0;
}
