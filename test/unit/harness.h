/*
 * harness.h
 *	  A minimal unit-test harness for src/core, and the shared test fixtures.
 *
 * No framework: the core has no dependencies beyond BLAS, and its tests
 * should not grow any.  A failing check prints one line naming the file and
 * line; the run ends with "N passed, N failed" and a non-zero exit status on
 * any failure, which is all that make and CI need.
 */
#ifndef WALS_HARNESS_H
#define WALS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "wals_core.h"

/* The condition is evaluated once; the message is printf-style. */
#define CHECK(cond, ...) \
	check_report((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

extern void check_report(int ok, const char *file, int line,
						 const char *fmt,...);

/* A seeded generator, so that every run draws the same "random" problems. */
typedef struct TestRng
{
	uint64_t	state;
} TestRng;

extern void rng_seed(TestRng *rng, uint64_t seed);
extern uint64_t rng_next(TestRng *rng);
extern double rng_uniform(TestRng *rng);
extern double rng_normal(TestRng *rng);
extern int	rng_below(TestRng *rng, int n);

/* calloc that aborts the run on failure: tests have no way to recover. */
extern void *test_alloc(size_t n, size_t size);

/*
 * bytes on a 64-byte line, then shift bytes past it, where the builds of
 * csr.c write whole lines or must not.
 */
extern void *test_alloc_on_line(size_t bytes, size_t shift);

/*
 * A small rating problem with its merged CSR, transpose and factors, plus a
 * dense copy of the merged ratings, which the brute-force references read.
 * Row 1 and column 2 are always empty, to exercise those paths.
 */
typedef struct TestProblem
{
	WalsParams	params;
	int			m;
	int			n;
	WalsCsr		R;
	WalsCsr		Rt;
	float	   *X;
	float	   *Y;
	double	   *dense;			/* m x n merged ratings */
	unsigned char *observed;	/* m x n */
} TestProblem;

/*
 * The model variants every solver and loss check runs over: the two
 * defaults, WALS with a small unobserved weight on each feedback, an
 * unobserved weight above the observed confidences, whose negative c - w0
 * takes the solver's general-product path, and implicit feedback with
 * dislikes (negative ratings: target 0, confidence from |r|).
 */
typedef struct TestVariant
{
	const char *name;
	WalsFeedback feedback;
	float		w0;
	double		dislikes;		/* share of the ratings drawn negative */
} TestVariant;

extern const TestVariant test_variants[];
extern const int n_test_variants;

extern void problem_make(TestProblem *tp, WalsFeedback feedback, float w0,
						 int m, int n, int f, double density, uint64_t seed);

/* problem_make for one of test_variants, its dislikes included. */
extern void problem_make_variant(TestProblem *tp, const TestVariant *tv,
								 int m, int n, int f, double density, uint64_t seed);
extern void problem_free(TestProblem *tp);

/*
 * The longest row of a CSR, for wals_solve_scratch: exact rather than
 * generous, so that valgrind sees any overrun of the scratch it sizes.
 */
extern int64_t csr_max_row(const WalsCsr *csr);

/* The full loss summed over every cell of the dense matrix, in double. */
extern double brute_loss(const TestProblem *tp, const float *X, const float *Y);

/*
 * Row u of X solved from the dense normal equations over all n cells, in
 * double, by Gaussian elimination; the zero vector for a row without ratings.
 */
extern void brute_solve_row(const TestProblem *tp, const float *Y, int u,
							double *x);

/* The loss as training computes it: the sum of the core's three parts. */
extern double core_loss(const TestProblem *tp, const float *X, const float *Y);

extern void test_idmap(void);
extern void test_csr(void);
extern void test_csr_split(void);
extern void test_codes(void);
extern void test_init(void);
extern void test_topk(void);
extern void test_gram(void);
extern void test_solve(void);
extern void test_loss(void);
extern void test_metrics(void);
extern void test_explain(void);
extern void test_explain_by_hand(void);
extern void test_score(void);
extern void test_rated(void);
extern void test_accel(void);
extern void test_holdout(void);
extern void test_poll(void);

#endif							/* WALS_HARNESS_H */
