/*
 * solver_bench.c
 *	  Seconds per ALS iteration of the core solvers, single-threaded, on
 *	  synthetic ratings of a given shape, without a server.
 *
 *	  solver_bench [users items nnz f solver steps iterations kernels]
 *	  (defaults: 138000 27000 20000000 64 cg 3 3, MovieLens-20M's shape,
 *	  and every family of kernels the CPU runs, side by side; solver:
 *	  cholesky, cg or subspace; steps: CG's steps per row, or the
 *	  subspace solver's block size; kernels: avx512, avx2, neon or generic
 *	  for one of them)
 *
 * The degrees follow gen_ratings.py, the reference workload of DESIGN
 * section 4: log-normal user activity and Zipf(0.9) item popularity, so a
 * few items hold a large share of the ratings and their rows are the long
 * ones a solver must not choke on.  Latent structure does not matter to
 * speed and is left out.  Duplicate cells merge; the draws are scaled so
 * that nnz ratings remain.
 *
 * Each iteration is timed in the parts that training runs, in its order:
 * user half-sweep, Gram of X, item half-sweep, Gram of Y, loss.  The loss
 * is printed as a sanity check that the solvers still minimise it.  Every
 * family starts from the same factors, so that their losses can be
 * compared iteration by iteration: the summary gives each family's best
 * iteration, its ratio to the widest family's, and the largest relative
 * difference of its losses from those of the portable kernels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wals_internal.h"
#define BENCH_NAME "solver_bench"
#include "bench_common.h"

/* Rows per call, as training hands them out between cancel checks. */
#define BENCH_CHUNK 4096

#define BENCH_PARTS 5

/* Genres of gen_ratings.py's default: users draw from a few of them. */
#define BENCH_GENRES 40

static const char *const part_names[BENCH_PARTS] = {
	"user sweep", "gram X", "item sweep", "gram Y", "loss"
};

/*
 * Factors and scratch on a cache line, as the training's shared segment
 * lays them out: a factor row of f = 64 then spans 4 lines, not 5.
 */
static float *
xalloc_floats(size_t n)
{
	void	   *p = NULL;

	if (posix_memalign(&p, 64, sizeof(float) * (n ? n : 1)) != 0)
	{
		fprintf(stderr, "solver_bench: out of memory\n");
		exit(2);
	}
	memset(p, 0, sizeof(float) * (n ? n : 1));
	return p;
}

/* Marsaglia and Tsang's method, boosted for shapes below 1. */
static double
rng_gamma(double shape)
{
	double		d;
	double		c;

	if (shape < 1.0)
		return rng_gamma(shape + 1.0) * pow(rng_uniform() + 1e-300, 1.0 / shape);
	d = shape - 1.0 / 3.0;
	c = 1.0 / sqrt(9.0 * d);
	for (;;)
	{
		double		x = rng_normal();
		double		v = 1.0 + c * x;
		double		u = rng_uniform();

		if (v <= 0.0)
			continue;
		v = v * v * v;
		if (log(u + 1e-300) < 0.5 * x * x + d - d * v + d * log(v))
			return d * v;
	}
}

/*
 * Items of each genre in a row of order[], with the cumulative popularity
 * of the genre's items in the matching row of cdf[], normalised per genre.
 */
static void
make_items(int64_t items, int32_t *order, double *cdf, int64_t *gstart)
{
	int32_t    *genre = xalloc(items, sizeof(int32_t));
	double	   *pop = xalloc(items, sizeof(double));
	int64_t		i;
	int			g;

	for (i = 0; i < items; i++)
	{
		int64_t		j = (int64_t) (rng_next() % (uint64_t) (i + 1));

		/* An inside-out shuffle of the Zipf popularities. */
		pop[i] = pop[j];
		pop[j] = pow((double) i + 1.0, -0.9);
		genre[i] = (int32_t) (rng_next() % BENCH_GENRES);
	}
	gstart[0] = 0;
	for (g = 0; g < BENCH_GENRES; g++)
	{
		double		total = 0.0;
		int64_t		k;

		gstart[g + 1] = gstart[g];
		for (i = 0; i < items; i++)
			if (genre[i] == g)
			{
				total += pop[i];
				order[gstart[g + 1]] = (int32_t) i;
				cdf[gstart[g + 1]++] = total;
			}
		for (k = gstart[g]; k < gstart[g + 1]; k++)
			cdf[k] /= total;
	}
	free(genre);
	free(pop);
}

/*
 * The CSR by user of nnz synthetic draws, built with the core's merge.
 * Each draw picks a genre from the user's Dirichlet(0.3) taste, then an item
 * by popularity inside the genre, as gen_ratings.py does.
 */
static void
draw_ratings(int64_t users, int64_t items, int64_t nnz, WalsCsr *R)
{
	double	   *activity = xalloc(users, sizeof(double));
	int32_t    *order = xalloc(items, sizeof(int32_t));
	double	   *cdf = xalloc(items, sizeof(double));
	int64_t		gstart[BENCH_GENRES + 1];
	double		taste[BENCH_GENRES];
	double		total = 0.0;
	size_t		cap = 0;
	size_t		n = 0;
	int32_t    *row;
	int32_t    *col;
	float	   *val;
	int64_t    *tmp_indptr;
	int32_t    *tmp_idx;
	float	   *tmp_val;
	int32_t    *counts;
	int64_t		u;
	WalsStatus	st;

	for (u = 0; u < users; u++)
	{
		activity[u] = exp(rng_normal());
		total += activity[u];
	}
	for (u = 0; u < users; u++)
	{
		double		want = round(activity[u] / total * (double) nnz);

		activity[u] = fmin(fmax(want, 1.0), (double) (items / 2 > 0 ? items / 2 : 1));
		cap += (size_t) activity[u];
	}
	make_items(items, order, cdf, gstart);

	row = xalloc(cap, sizeof(int32_t));
	col = xalloc(cap, sizeof(int32_t));
	val = xalloc(cap, sizeof(float));
	for (u = 0; u < users; u++)
	{
		double		sum = 0.0;
		int64_t		k;
		int			g;

		for (g = 0; g < BENCH_GENRES; g++)
			taste[g] = sum += rng_gamma(0.3);
		for (k = 0; k < (int64_t) activity[u]; k++)
		{
			double		t = rng_uniform() * sum;

			g = 0;
			while (g < BENCH_GENRES - 1 &&
				   (taste[g] <= t || gstart[g + 1] == gstart[g]))
				g++;
			while (gstart[g + 1] == gstart[g])
				g--;
			row[n] = (int32_t) u;
			col[n] = order[gstart[g] + draw(cdf + gstart[g],
											(int32_t) (gstart[g + 1] - gstart[g]),
											rng_uniform())];
			val[n] = (float) (1 + rng_next() % 3);
			n++;
		}
	}

	tmp_indptr = xalloc(items + 1, sizeof(int64_t));
	tmp_idx = xalloc(n, sizeof(int32_t));
	tmp_val = xalloc(n, sizeof(float));
	counts = xalloc(n, sizeof(int32_t));
	R->indptr = xalloc(users + 1, sizeof(int64_t));
	R->indices = xalloc(n, sizeof(int32_t));
	R->values = xalloc(n, sizeof(float));
	st = wals_csr_from_coo(WALS_IMPLICIT, users, items, n, row, col, val, R,
						   tmp_indptr, tmp_idx, tmp_val, counts);
	if (st != WALS_OK)
	{
		fprintf(stderr, "solver_bench: %s\n", wals_status_string(st));
		exit(2);
	}
	R->values = realloc(R->values, sizeof(float) * R->indptr[users]);
	R->indices = realloc(R->indices, sizeof(int32_t) * R->indptr[users]);
	free(activity);
	free(order);
	free(cdf);
	free(row);
	free(col);
	free(val);
	free(tmp_indptr);
	free(tmp_idx);
	free(tmp_val);
	free(counts);
}

/*
 * Popular cells are drawn many times and merge, so a given number of draws
 * gives fewer ratings; the draws are scaled up from the same seed until the
 * merged count is within 1% of the one asked for.
 */
static void
make_ratings(int64_t users, int64_t items, int64_t nnz, WalsCsr *R)
{
	double		draws = (double) nnz;
	int			tries;

	for (tries = 0;; tries++)
	{
		bench_rng_state = 42;
		draw_ratings(users, items, (int64_t) draws, R);
		if (R->indptr[users] >= 0.99 * nnz || tries == 4)
			break;
		draws *= (double) nnz / (double) R->indptr[users];
		free(R->indptr);
		free(R->indices);
		free(R->values);
	}
}

static int64_t
max_row(const WalsCsr *R)
{
	int64_t		best = 0;
	int64_t		r;

	for (r = 0; r < R->nrows; r++)
		if (R->indptr[r + 1] - R->indptr[r] > best)
			best = R->indptr[r + 1] - R->indptr[r];
	return best;
}

static void
compute_gram(const float *Y, int64_t n, int f, float *G)
{
	int64_t		lo;

	memset(G, 0, sizeof(float) * f * f);
	for (lo = 0; lo < n; lo += BENCH_CHUNK * 16)
		wals_gram_rows(Y, lo, lo + BENCH_CHUNK * 16 < n ? lo + BENCH_CHUNK * 16 : n,
					   f, G);
}

static void
half_sweep(const WalsParams *params, const WalsCsr *R, const float *Y,
		   const float *G, float *X, float *scratch)
{
	int64_t		lo;

	for (lo = 0; lo < R->nrows; lo += BENCH_CHUNK)
	{
		int64_t		hi = lo + BENCH_CHUNK < R->nrows ? lo + BENCH_CHUNK : R->nrows;
		int64_t		bad_row;
		WalsStatus	st;

		st = wals_solve_rows(params, R, Y, G, X, lo, hi, scratch, &bad_row);
		if (st != WALS_OK)
		{
			fprintf(stderr, "solver_bench: row %lld: %s\n", (long long) bad_row,
					wals_status_string(st));
			exit(2);
		}
	}
}

static double
compute_loss(const WalsParams *params, const WalsCsr *R, const WalsCsr *Rt,
			 const float *X, const float *Y, const float *GX, const float *GY)
{
	double		loss = wals_loss_unobserved(params, GX, GY);
	int64_t		lo;

	for (lo = 0; lo < R->nrows; lo += BENCH_CHUNK * 16)
		loss += wals_loss_rows(params, R, X, Y, lo,
							   lo + BENCH_CHUNK * 16 < R->nrows ?
							   lo + BENCH_CHUNK * 16 : R->nrows);
	return loss + wals_reg_rows(params, Rt, Y, 0, Rt->nrows);
}

static void
print_machine(void)
{
	FILE	   *fp = fopen("/proc/cpuinfo", "r");
	char		line[256];

	if (fp == NULL)
		return;
	while (fgets(line, sizeof(line), fp))
		if (strncmp(line, "model name", 10) == 0)
		{
			printf("cpu:%s", strchr(line, ':') + 1);
			break;
		}
	fclose(fp);
}

/* Best seconds of each part and the loss of each iteration, for one family. */
typedef struct FamilyRun
{
	char		name[16];
	double		best[BENCH_PARTS];
	double		best_total;
	double	   *loss;
} FamilyRun;

static void
run_family(const WalsParams *params, const WalsCsr *R, const WalsCsr *Rt,
		   const int64_t *ids, int64_t users, int64_t items, int iterations,
		   float *X, float *Y, float *GX, float *GY, float *scratch,
		   FamilyRun *run)
{
	int			f = params->factors;
	int			it;
	int			p;

	wals_kernels_use(run->name);
	printf("%s kernels:\n", wals_kernels_name());
	wals_init_rows(X, ids, 0, users, f, 42, 0.01f);
	wals_init_rows(Y, ids, 0, items, f, 43, 0.01f);
	for (p = 0; p < BENCH_PARTS; p++)
		run->best[p] = INFINITY;
	run->best_total = INFINITY;
	compute_gram(Y, items, f, GY);
	for (it = 0; it < iterations; it++)
	{
		double		t[BENCH_PARTS + 1];

		t[0] = cpu_seconds();
		half_sweep(params, R, Y, GY, X, scratch);
		t[1] = cpu_seconds();
		compute_gram(X, users, f, GX);
		t[2] = cpu_seconds();
		half_sweep(params, Rt, X, GX, Y, scratch);
		t[3] = cpu_seconds();
		compute_gram(Y, items, f, GY);
		t[4] = cpu_seconds();
		run->loss[it] = compute_loss(params, R, Rt, X, Y, GX, GY);
		t[5] = cpu_seconds();

		printf("  iteration %d: %.3f s (", it + 1, t[5] - t[0]);
		for (p = 0; p < BENCH_PARTS; p++)
		{
			printf("%s%s %.3f", p ? ", " : "", part_names[p], t[p + 1] - t[p]);
			if (t[p + 1] - t[p] < run->best[p])
				run->best[p] = t[p + 1] - t[p];
		}
		printf("), loss %.8g\n", run->loss[it]);
		if (t[5] - t[0] < run->best_total)
			run->best_total = t[5] - t[0];
	}
}

int
main(int argc, char **argv)
{
	int64_t		users = argc > 1 ? atoll(argv[1]) : 138000;
	int64_t		items = argc > 2 ? atoll(argv[2]) : 27000;
	int64_t		nnz = argc > 3 ? atoll(argv[3]) : 20000000;
	int			f = argc > 4 ? atoi(argv[4]) : 64;
	const char *solver = argc > 5 ? argv[5] : "cg";
	int			steps = argc > 6 ? atoi(argv[6]) : 3;
	int			iterations = argc > 7 ? atoi(argv[7]) : 3;
	const char *only = argc > 8 ? argv[8] : NULL;
	char		families[64];
	FamilyRun	runs[WALS_ISA_COUNT];
	int			nruns = 0;
	const FamilyRun *generic = NULL;
	WalsParams	params;
	WalsCsr		R;
	WalsCsr		Rt;
	int64_t    *ids;
	float	   *X;
	float	   *Y;
	float	   *GX;
	float	   *GY;
	float	   *scratch;
	size_t		scratch_floats;
	double		t0;
	int64_t		merged;
	int64_t		r;
	char	   *name;
	int			k;
	int			it;
	int			p;

	if (users < 1 || items < 1 || nnz < 1 || f < 1 || iterations < 1 ||
		steps < 0 || (strcmp(solver, "cg") != 0 && strcmp(solver, "cholesky") != 0 &&
					  strcmp(solver, "subspace") != 0) ||
		(strcmp(solver, "subspace") == 0 && steps < 1) ||
		(only != NULL && (strcmp(only, "auto") == 0 || wals_kernels_check(only) != 1)))
	{
		fprintf(stderr, "usage: solver_bench [users items nnz f cg|cholesky|subspace steps|block_size iterations kernels]\n"
				"(kernels this CPU runs: %s)\n", wals_kernels_available());
		return 2;
	}
	snprintf(families, sizeof(families), "%s", only ? only : wals_kernels_available());
	for (name = strtok(families, ","); name != NULL; name = strtok(NULL, ","))
	{
		snprintf(runs[nruns].name, sizeof(runs[nruns].name), "%s", name);
		runs[nruns].loss = xalloc(iterations, sizeof(double));
		nruns++;
	}

	memset(&params, 0, sizeof(params));
	params.feedback = WALS_IMPLICIT;
	params.solver = strcmp(solver, "cg") == 0 ? WALS_CG :
		strcmp(solver, "subspace") == 0 ? WALS_SUBSPACE : WALS_CHOLESKY;
	params.factors = f;
	params.cg_steps = steps;
	params.block_size = steps;
	params.regularization = 0.1f;
	params.alpha = 1.0f;
	params.w0 = 1.0f;

	t0 = cpu_seconds();
	make_ratings(users, items, nnz, &R);
	merged = R.indptr[users];
	Rt.indptr = xalloc(items + 1, sizeof(int64_t));
	Rt.indices = xalloc(merged, sizeof(int32_t));
	Rt.values = xalloc(merged, sizeof(float));
	wals_csr_transpose(&R, &Rt);

	print_machine();
	printf("data: %lld users x %lld items, %lld ratings (merged), longest user row %lld, longest item row %lld, built in %.1f s\n",
		   (long long) users, (long long) items, (long long) merged,
		   (long long) max_row(&R), (long long) max_row(&Rt), cpu_seconds() - t0);
	printf("model: implicit, alpha 1, lambda 0.1, f %d, %s", f, solver);
	if (params.solver == WALS_CG)
		printf(" %d steps", steps);
	else if (params.solver == WALS_SUBSPACE)
		printf(" blocks of %d", steps);
	printf(", 1 thread, CPU seconds\n");

	ids = xalloc(users > items ? users : items, sizeof(int64_t));
	for (r = 0; r < (users > items ? users : items); r++)
		ids[r] = r + 1;
	X = xalloc_floats((size_t) users * f);
	Y = xalloc_floats((size_t) items * f);
	GX = xalloc_floats((size_t) f * f);
	GY = xalloc_floats((size_t) f * f);
	scratch_floats = wals_solve_scratch(&params,
										max_row(&R) > max_row(&Rt) ? max_row(&R) : max_row(&Rt));
	scratch = xalloc_floats(scratch_floats);
	printf("scratch: %.2f MiB\n", scratch_floats * sizeof(float) / 1048576.0);

	for (k = 0; k < nruns; k++)
	{
		run_family(&params, &R, &Rt, ids, users, items, iterations, X, Y,
				   GX, GY, scratch, &runs[k]);
		if (strcmp(runs[k].name, "generic") == 0)
			generic = &runs[k];
	}
	wals_kernels_use("auto");

	printf("\nbest iteration of each family (ratio: to the first, the widest; loss: largest relative difference from generic over the iterations)\n");
	printf("%-8s %8s %6s", "kernels", "seconds", "ratio");
	for (p = 0; p < BENCH_PARTS; p++)
		printf(" %10s", part_names[p]);
	printf(" %10s\n", "loss diff");
	for (k = 0; k < nruns; k++)
	{
		double		worst = 0.0;

		printf("%-8s %8.3f %6.2f", runs[k].name, runs[k].best_total,
			   runs[k].best_total / runs[0].best_total);
		for (p = 0; p < BENCH_PARTS; p++)
			printf(" %10.3f", runs[k].best[p]);
		for (it = 0; generic != NULL && it < iterations; it++)
		{
			double		d = fabs(runs[k].loss[it] - generic->loss[it]) / generic->loss[it];

			if (d > worst)
				worst = d;
		}
		if (generic != NULL)
			printf(" %10.1e\n", worst);
		else
			printf(" %10s\n", "-");
	}

	free(R.indptr);
	free(R.indices);
	free(R.values);
	free(Rt.indptr);
	free(Rt.indices);
	free(Rt.values);
	free(ids);
	free(X);
	free(Y);
	free(GX);
	free(GY);
	free(scratch);
	for (k = 0; k < nruns; k++)
		free(runs[k].loss);
	return 0;
}
