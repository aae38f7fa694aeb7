/*
 * bench_common.h
 *	  What the benchmarks of src/core without a server share: one stream of
 *	  pseudo-random numbers from a fixed seed, so that every run draws the
 *	  same data, the samplers built on it, CPU time, allocation that stops
 *	  the program when memory runs out, and an int32 comparison for qsort.
 *	  The including file defines BENCH_NAME, the program's name.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t bench_rng_state = 42;

/* splitmix64 */
static inline uint64_t
rng_next(void)
{
	uint64_t	z = (bench_rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline double
rng_uniform(void)
{
	return (double) (rng_next() >> 11) / 9007199254740992.0;
}

/* Box-Muller; the offset keeps log away from 0. */
static inline double
rng_normal(void)
{
	double		u1 = rng_uniform() + 1e-300;
	double		u2 = rng_uniform();

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Index of the first cdf entry above u: inverse-transform sampling. */
static inline int32_t
draw(const double *cdf, int32_t n, double u)
{
	int32_t		lo = 0;
	int32_t		hi = n - 1;

	while (lo < hi)
	{
		int32_t		mid = lo + (hi - lo) / 2;

		if (cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * The process's CPU time, not the wall clock: the machines this runs on are
 * shared, and a single-threaded run's CPU time is what an idle machine's
 * clock would show, without the time spent waiting for a core.
 */
static inline double
cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Zeroed memory for n elements of size bytes, or the program exits. */
static inline void *
xalloc(size_t n, size_t size)
{
	void	   *p = calloc(n ? n : 1, size);

	if (p == NULL)
	{
		fprintf(stderr, BENCH_NAME ": out of memory\n");
		exit(2);
	}
	return p;
}

static inline int
cmp_int32(const void *a, const void *b)
{
	int32_t		x = *(const int32_t *) a;
	int32_t		y = *(const int32_t *) b;

	return (x > y) - (x < y);
}

#endif							/* BENCH_COMMON_H */
