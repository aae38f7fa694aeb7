/*
 * csr_bench.c
 *	  Seconds of each pass of the matrix build of a training, single-
 *	  threaded, on synthetic coordinates of a given shape, without a server.
 *
 *	  csr_bench [users items draws order pages reps]
 *	  (defaults: 138000 27000 18800000 sorted huge 5: 15.2 million
 *	  ratings, the shape of the reference data set of test/bench/train.sh;
 *	  order: sorted, user or random; pages: huge or 4k)
 *
 * Degrees follow gen_ratings.py: log-normal user activity and Zipf(0.9)
 * item popularity over shuffled item ids, each user's draws deduplicated,
 * as the generator merges them, so that fewer ratings than draws remain.
 * The order is the scan order of the table:
 * "sorted" by user, then item, as the generator writes its CSV and COPY
 * lays it out; "user" by user with items shuffled within a user; "random"
 * for a table filled in no particular order.
 *
 * Each repetition runs wals_build_matrices' three passes in turn: the
 * scatter by item, the merging transpose to the matrix by user, the
 * transpose back to the matrix by item.  They run once through the
 * one-level counting sort (no scratch), once through the two-level one,
 * and once with the first pass grouping a copy of the coordinates by item
 * in place (wals_csr_group_in_place) instead of scattering them, the
 * transposes taking two levels; all must give the same matrices, and the
 * grouping's time is given as a multiple of the two-level scatter's.
 * A fourth way takes the two levels to the matrix by user, then sorts the
 * rows of the scattered matrix by item where they lie and merges their
 * repeats (wals_csr_sort_merge) instead of transposing back, as a build
 * without a validation split does; its time is given as a multiple of
 * the transpose back's.
 * Buffers are faulted in before the clock starts, as ingest.c does;
 * "huge" asks for transparent huge pages as ingest.c does for private
 * memory, "4k" leaves them off, as for the shared segment of a training
 * with workers where the kernel gives shared memory none (shmem_enabled
 * "never", the default).
 */
/* madvise and its MADV_ flags, which strict POSIX leaves out. */
#define _DEFAULT_SOURCE

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "wals_core.h"
#define BENCH_NAME "csr_bench"
#include "bench_common.h"

#define BENCH_PASSES 3
#define BENCH_PATHS 4
#define BENCH_MAX_REPS 50

/* Huge pages are 2 MB where there are any. */
#define BENCH_HUGE_PAGE ((size_t) 2 << 20)

static const char *const pass_names[BENCH_PASSES] = {
	"scatter/group by item", "transpose+merge", "transpose/sort rows"
};

/* The ways through the build; the last groups the coordinates in place. */
enum
{
	PATH_ONE_LEVEL,
	PATH_TWO_LEVEL,
	PATH_IN_PLACE,
	PATH_SORT_ROWS
};

static const char *const path_names[BENCH_PATHS] = {
	"one-level", "two-level", "in-place", "sort rows"
};

/*
 * The coordinates as the in-place path finds them: a fresh copy each time,
 * since the grouping reorders them and spends the items, and the scratch
 * of the grouping.
 */
typedef struct GroupCopy
{
	int32_t    *u;
	int32_t    *i;
	float	   *v;
	void	   *scratch;
	size_t		bytes;
} GroupCopy;

/*
 * Zeroed memory on whole huge pages, faulted in now so that no pass pays
 * for the faults; huge pages asked for or not.
 */
static void *
bench_alloc(size_t bytes, int huge)
{
	size_t		pages = (bytes + BENCH_HUGE_PAGE - 1) / BENCH_HUGE_PAGE;
	size_t		size = pages * BENCH_HUGE_PAGE;
	void	   *p = NULL;

	if (size == 0)
		size = BENCH_HUGE_PAGE;
	if (posix_memalign(&p, BENCH_HUGE_PAGE, size) != 0)
	{
		fprintf(stderr, "csr_bench: out of memory\n");
		exit(2);
	}
	(void) madvise(p, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(p, 0, size);
	return p;
}

/* Swap cells a and b of the coordinates. */
static void
swap_cells(int32_t *u, int32_t *i, float *v, size_t a, size_t b)
{
	int32_t		t = u[a];
	float		f = v[a];

	u[a] = u[b];
	u[b] = t;
	t = i[a];
	i[a] = i[b];
	i[b] = t;
	v[a] = v[b];
	v[b] = f;
}

/*
 * Coordinates from that many draws, fewer once each user's repeats are dropped,
 * with ratings 1 to 5, sorted by user and item; returns how many.
 */
static size_t
generate(int32_t users, int32_t items, size_t draws, int huge,
		 int32_t **u_out, int32_t **i_out, float **v_out)
{
	double	   *cdf = calloc(items, sizeof(double));
	double	   *activity = malloc(sizeof(double) * users);
	int32_t    *picks = malloc(sizeof(int32_t) * (items / 2 + 1));
	int32_t    *u = bench_alloc(draws * sizeof(int32_t), huge);
	int32_t    *i = bench_alloc(draws * sizeof(int32_t), huge);
	float	   *v = bench_alloc(draws * sizeof(float), huge);
	double		total = 0.0;
	size_t		n = 0;
	int32_t		k;

	if (cdf == NULL || activity == NULL || picks == NULL)
	{
		fprintf(stderr, "csr_bench: out of memory\n");
		exit(2);
	}
	for (k = 0; k < items; k++)
	{
		int32_t		j = (int32_t) (rng_next() % (uint64_t) (k + 1));

		/* An inside-out shuffle of the Zipf popularities. */
		cdf[k] = cdf[j];
		cdf[j] = pow((double) k + 1.0, -0.9);
	}
	for (k = 0; k < items; k++)
		cdf[k] = (total += cdf[k]);
	for (k = 0; k < items; k++)
		cdf[k] /= total;
	total = 0.0;
	for (k = 0; k < users; k++)
		total += (activity[k] = exp(rng_normal()));

	for (k = 0; k < users && n < draws; k++)
	{
		int64_t		want = llround(activity[k] / total * (double) draws);
		int64_t		d;

		want = want < 1 ? 1 : want > items / 2 ? items / 2 : want;
		for (d = 0; d < want; d++)
			picks[d] = draw(cdf, items, rng_uniform());
		qsort(picks, want, sizeof(int32_t), cmp_int32);
		for (d = 0; d < want && n < draws; d++)
		{
			if (d > 0 && picks[d] == picks[d - 1])
				continue;
			u[n] = k;
			i[n] = picks[d];
			v[n++] = (float) (1 + rng_next() % 5);
		}
	}
	free(cdf);
	free(activity);
	free(picks);
	*u_out = u;
	*i_out = i;
	*v_out = v;
	return n;
}

/* Put the coordinates sorted by user and item in the scan order asked for. */
static void
reorder(const char *order, size_t n, int32_t *u, int32_t *i, float *v)
{
	size_t		k;

	if (strcmp(order, "random") == 0)
	{
		for (k = n; k > 1; k--)
			swap_cells(u, i, v, k - 1, rng_next() % k);
	}
	else if (strcmp(order, "user") == 0)
	{
		size_t		start = 0;

		for (k = 1; k <= n; k++)
		{
			size_t		j;

			if (k < n && u[k] == u[start])
				continue;
			for (j = k; j > start + 1; j--)
				swap_cells(u, i, v, j - 1, start + rng_next() % (j - start));
			start = k;
		}
	}
}

/* FNV-1a over a CSR, to check that both paths build the same matrices. */
static uint64_t
csr_hash(uint64_t h, const WalsCsr *c)
{
	const unsigned char *parts[3];
	size_t		sizes[3];
	int			p;

	parts[0] = (const unsigned char *) c->indptr;
	sizes[0] = (c->nrows + 1) * sizeof(int64_t);
	parts[1] = (const unsigned char *) c->indices;
	sizes[1] = c->indptr[c->nrows] * sizeof(int32_t);
	parts[2] = (const unsigned char *) c->values;
	sizes[2] = c->indptr[c->nrows] * sizeof(float);
	for (p = 0; p < 3; p++)
	{
		size_t		k;

		for (k = 0; k < sizes[p]; k++)
			h = (h ^ parts[p][k]) * UINT64_C(0x100000001b3);
	}
	return h;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static void
print_machine(void)
{
	FILE	   *fp = fopen("/proc/cpuinfo", "r");
	char		line[512];

	if (fp == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (strncmp(line, "model name", 10) == 0)
		{
			printf("cpu:%s", strchr(line, ':') + 1);
			break;
		}
	fclose(fp);
}

/*
 * The three passes of wals_build_matrices, timed, the first a scatter or,
 * on the in-place path, a grouping of gc's copy, whose copying is not
 * timed; exits on an error.
 */
static void
build_once(int path, size_t n, int32_t users, int32_t items,
		   const int32_t *u, const int32_t *i, const float *v, GroupCopy *gc,
		   WalsCsr *by_item, WalsCsr *by_user, void *scratch, size_t bytes,
		   double *secs)
{
	WalsCsr		grouped = {items, users, by_item->indptr, gc->u, gc->v};
	const WalsCsr *first = path == PATH_IN_PLACE ? &grouped : by_item;
	double		t0;
	double		t1;
	double		t2;
	WalsStatus	status;

	if (path == PATH_IN_PLACE)
	{
		memcpy(gc->u, u, n * sizeof(int32_t));
		memcpy(gc->i, i, n * sizeof(int32_t));
		memcpy(gc->v, v, n * sizeof(float));
	}
	t0 = cpu_seconds();
	if (path == PATH_IN_PLACE)
		status = wals_csr_group_in_place(items, users, n, gc->i, gc->u, gc->v,
										 by_item->indptr, gc->scratch, gc->bytes);
	else
		status = wals_csr_scatter(items, users, n, i, u, v, by_item,
								  scratch, bytes);
	if (status != WALS_OK)
	{
		fprintf(stderr, "csr_bench: %s first pass failed\n", path_names[path]);
		exit(1);
	}
	t1 = cpu_seconds();
	if (wals_csr_transpose_merge(WALS_IMPLICIT, first, by_user,
								 scratch, bytes) != WALS_OK)
	{
		fprintf(stderr, "csr_bench: %s merge failed\n", path_names[path]);
		exit(1);
	}
	t2 = cpu_seconds();
	if (path != PATH_SORT_ROWS)
		wals_csr_transpose_with(by_user, by_item, scratch, bytes);
	else if (wals_csr_sort_merge(WALS_IMPLICIT, by_item, scratch, bytes) != WALS_OK)
	{
		fprintf(stderr, "csr_bench: sorting the rows failed\n");
		exit(1);
	}
	secs[0] = t1 - t0;
	secs[1] = t2 - t1;
	secs[2] = cpu_seconds() - t2;
}

int
main(int argc, char **argv)
{
	int32_t		users = argc > 1 ? atoi(argv[1]) : 138000;
	int32_t		items = argc > 2 ? atoi(argv[2]) : 27000;
	size_t		draws = argc > 3 ? (size_t) atoll(argv[3]) : 18800000;
	const char *order = argc > 4 ? argv[4] : "sorted";
	int			huge = argc > 5 ? strcmp(argv[5], "4k") != 0 : 1;
	int			reps = argc > 6 ? atoi(argv[6]) : 5;
	int32_t    *u;
	int32_t    *i;
	float	   *v;
	size_t		n;
	size_t		bytes;
	void	   *scratch;
	WalsCsr		by_item;
	WalsCsr		by_user;
	GroupCopy	gc;
	uint64_t	hash[BENCH_PATHS];
	double		best_first[BENCH_PATHS];
	double		best_third[BENCH_PATHS];
	int			path;
	int			p;

	if (users < 1 || items < 2 || draws < 1 || reps < 1 || reps > BENCH_MAX_REPS ||
		(strcmp(order, "sorted") != 0 && strcmp(order, "user") != 0 &&
		 strcmp(order, "random") != 0))
	{
		fprintf(stderr, "usage: csr_bench [users items draws "
				"sorted|user|random huge|4k reps(1..%d)]\n", BENCH_MAX_REPS);
		return 2;
	}
	n = generate(users, items, draws, huge, &u, &i, &v);
	reorder(order, n, u, i, v);
	bytes = wals_csr_scratch_bytes(n);
	scratch = bench_alloc(bytes, huge);
	by_item.indptr = bench_alloc((items + 1) * sizeof(int64_t), huge);
	by_item.indices = bench_alloc(n * sizeof(int32_t), huge);
	by_item.values = bench_alloc(n * sizeof(float), huge);
	by_user.indptr = bench_alloc((users + 1) * sizeof(int64_t), huge);
	by_user.indices = bench_alloc(n * sizeof(int32_t), huge);
	by_user.values = bench_alloc(n * sizeof(float), huge);
	gc.u = bench_alloc(n * sizeof(int32_t), huge);
	gc.i = bench_alloc(n * sizeof(int32_t), huge);
	gc.v = bench_alloc(n * sizeof(float), huge);
	gc.bytes = wals_csr_group_scratch_bytes(items);
	gc.scratch = bench_alloc(gc.bytes, huge);

	print_machine();
	printf("ratings: %zu (%d users, %d items), order %s, %s pages, scratch %zu bytes\n",
		   n, users, items, order, huge ? "huge" : "4k", bytes);
	printf("each pass: best and median CPU seconds of %d, best ns per rating\n", reps);
	printf("%-10s", "path");
	for (p = 0; p < BENCH_PASSES; p++)
		printf(" %24s", pass_names[p]);
	printf(" %24s\n", "total");

	for (path = 0; path < BENCH_PATHS; path++)
	{
		int			one = path == PATH_ONE_LEVEL;
		double		secs[BENCH_PASSES + 1][BENCH_MAX_REPS];
		int			r;

		for (r = 0; r < reps; r++)
		{
			double		s[BENCH_PASSES];

			build_once(path, n, users, items, u, i, v, &gc, &by_item, &by_user,
					   one ? NULL : scratch, one ? 0 : bytes, s);
			secs[BENCH_PASSES][r] = 0.0;
			for (p = 0; p < BENCH_PASSES; p++)
			{
				secs[p][r] = s[p];
				secs[BENCH_PASSES][r] += s[p];
			}
		}
		hash[path] = csr_hash(csr_hash(UINT64_C(0xcbf29ce484222325), &by_user),
							  &by_item);
		printf("%-10s", path_names[path]);
		for (p = 0; p <= BENCH_PASSES; p++)
		{
			qsort(secs[p], reps, sizeof(double), cmp_double);
			printf("    %6.3f %6.3f %5.1fns", secs[p][0], secs[p][reps / 2],
				   secs[p][0] / (double) n * 1e9);
		}
		printf("\n");
		best_first[path] = secs[0][0];
		best_third[path] = secs[2][0];
	}
	if (hash[PATH_TWO_LEVEL] != hash[PATH_ONE_LEVEL] ||
		hash[PATH_IN_PLACE] != hash[PATH_ONE_LEVEL] ||
		hash[PATH_SORT_ROWS] != hash[PATH_ONE_LEVEL])
	{
		fprintf(stderr, "csr_bench: the paths built different matrices\n");
		return 1;
	}
	printf("grouping in place: %.2fx the two-level scatter's time\n",
		   best_first[PATH_IN_PLACE] / best_first[PATH_TWO_LEVEL]);
	printf("sorting the rows: %.2fx the transpose back's time\n",
		   best_third[PATH_SORT_ROWS] / best_third[PATH_TWO_LEVEL]);
	printf("merged ratings: %lld; all paths built the same matrices\n",
		   (long long) by_user.indptr[users]);
	return 0;
}
