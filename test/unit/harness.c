/*
 * harness.c
 *	  The test runner, its seeded generator and the brute-force references.
 *
 * The references deliberately share nothing with the code under test: they
 * visit every cell of a dense matrix in double precision, the way the
 * objective is written, not the way the core computes it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static int	n_passed;
static int	n_failed;

/* Passes are only counted: a long run's output is its failures. */
void
check_report(int ok, const char *file, int line, const char *fmt,...)
{
	va_list		ap;

	if (ok)
	{
		n_passed++;
		return;
	}
	n_failed++;
	printf("FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* splitmix64: tiny, fast and good enough for test data. */
void
rng_seed(TestRng *rng, uint64_t seed)
{
	rng->state = seed;
}

/* One splitmix64 step; the other draws derive from it. */
uint64_t
rng_next(TestRng *rng)
{
	uint64_t	z = (rng->state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* The top 53 bits, so every double in [0, 1) on the grid is reachable. */
double
rng_uniform(TestRng *rng)
{
	return (double) (rng_next(rng) >> 11) / 9007199254740992.0;
}

/* Box-Muller; the offset keeps log away from 0. */
double
rng_normal(TestRng *rng)
{
	double		u1 = rng_uniform(rng) + 1e-300;
	double		u2 = rng_uniform(rng);

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The modulo bias is negligible for the small n that tests use. */
int
rng_below(TestRng *rng, int n)
{
	return (int) (rng_next(rng) % (uint64_t) n);
}

/* Zeroed, so that a forgotten write shows as a wrong value, not noise. */
void *
test_alloc(size_t n, size_t size)
{
	void	   *p = calloc(n ? n : 1, size);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* Zeroed too; free what it returns less shift. */
void *
test_alloc_on_line(size_t bytes, size_t shift)
{
	void	   *p = NULL;

	if (posix_memalign(&p, 64, bytes + 64) != 0)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	memset(p, 0, bytes + 64);
	return (char *) p + shift;
}

const TestVariant test_variants[] = {
	{"implicit", WALS_IMPLICIT, 1.0f, 0.0},
	{"explicit", WALS_EXPLICIT, 0.0f, 0.0},
	{"implicit w0=0.3", WALS_IMPLICIT, 0.3f, 0.0},
	{"explicit w0=0.2", WALS_EXPLICIT, 0.2f, 0.0},
	{"implicit w0=5", WALS_IMPLICIT, 5.0f, 0.0},
	{"explicit w0=1.5", WALS_EXPLICIT, 1.5f, 0.0},
	{"implicit dislikes", WALS_IMPLICIT, 1.0f, 0.3},
	{"implicit w0=5 dislikes", WALS_IMPLICIT, 5.0f, 0.3},
};
const int	n_test_variants = sizeof(test_variants) / sizeof(test_variants[0]);

/*
 * Ratings go through wals_csr_from_coo with some cells repeated, so every
 * problem also exercises the merge; the dense copy is read back from the
 * merged CSR, which test_csr checks on its own against a naive merge.  A
 * share dislikes of the implicit ratings drawn is negative, so that the
 * merge also sums ratings of both signs into likes, dislikes and zeros.
 */
static void
problem_draw(TestProblem *tp, WalsFeedback feedback, float w0, double dislikes,
			 int m, int n, int f, double density, uint64_t seed)
{
	TestRng		rng;
	size_t		cap = (size_t) m * n * 2;
	int32_t    *row = test_alloc(cap, sizeof(int32_t));
	int32_t    *col = test_alloc(cap, sizeof(int32_t));
	float	   *val = test_alloc(cap, sizeof(float));
	int64_t    *tmp_indptr = test_alloc(n + 1, sizeof(int64_t));
	int32_t    *tmp_idx = test_alloc(cap, sizeof(int32_t));
	float	   *tmp_val = test_alloc(cap, sizeof(float));
	int32_t    *counts = test_alloc(cap, sizeof(int32_t));
	size_t		nc = 0;
	int64_t		nnz;
	int			u;
	int			i;
	int			k;
	WalsStatus	st;

	memset(tp, 0, sizeof(*tp));
	rng_seed(&rng, seed);
	tp->m = m;
	tp->n = n;
	tp->params.feedback = feedback;
	tp->params.solver = WALS_CHOLESKY;
	tp->params.factors = f;
	tp->params.cg_steps = 3;
	tp->params.regularization = 0.1f;
	tp->params.alpha = 2.0f;
	tp->params.w0 = w0;

	for (u = 0; u < m; u++)
		for (i = 0; i < n; i++)
		{
			if (u == 1 || i == 2 || rng_uniform(&rng) >= density)
				continue;
			do
			{
				row[nc] = u;
				col[nc] = i;
				val[nc] = feedback == WALS_IMPLICIT ?
					(float) (1 + rng_below(&rng, 5)) :
					(float) (1.0 + 4.0 * rng_uniform(&rng));
				if (dislikes > 0 && rng_uniform(&rng) < dislikes)
					val[nc] = -val[nc];
				nc++;
			} while (rng_uniform(&rng) < 0.2 && nc < cap);
		}

	tp->R.indptr = test_alloc(m + 1, sizeof(int64_t));
	tp->R.indices = test_alloc(nc, sizeof(int32_t));
	tp->R.values = test_alloc(nc, sizeof(float));
	st = wals_csr_from_coo(feedback, m, n, nc, row, col, val, &tp->R,
						   tmp_indptr, tmp_idx, tmp_val, counts);
	CHECK(st == WALS_OK, "problem_make: csr status %d", (int) st);
	nnz = tp->R.indptr[m];
	tp->Rt.indptr = test_alloc(n + 1, sizeof(int64_t));
	tp->Rt.indices = test_alloc(nnz, sizeof(int32_t));
	tp->Rt.values = test_alloc(nnz, sizeof(float));
	wals_csr_transpose(&tp->R, &tp->Rt);

	tp->dense = test_alloc((size_t) m * n, sizeof(double));
	tp->observed = test_alloc((size_t) m * n, 1);
	for (u = 0; u < m; u++)
	{
		int64_t		j;

		for (j = tp->R.indptr[u]; j < tp->R.indptr[u + 1]; j++)
		{
			tp->dense[(size_t) u * n + tp->R.indices[j]] = tp->R.values[j];
			tp->observed[(size_t) u * n + tp->R.indices[j]] = 1;
		}
	}

	tp->X = test_alloc((size_t) m * f, sizeof(float));
	tp->Y = test_alloc((size_t) n * f, sizeof(float));
	for (k = 0; k < m * f; k++)
		tp->X[k] = (float) (0.5 * rng_normal(&rng));
	for (k = 0; k < n * f; k++)
		tp->Y[k] = (float) (0.5 * rng_normal(&rng));

	free(row);
	free(col);
	free(val);
	free(tmp_indptr);
	free(tmp_idx);
	free(tmp_val);
	free(counts);
}

void
problem_make(TestProblem *tp, WalsFeedback feedback, float w0,
			 int m, int n, int f, double density, uint64_t seed)
{
	problem_draw(tp, feedback, w0, 0.0, m, n, f, density, seed);
}

void
problem_make_variant(TestProblem *tp, const TestVariant *tv,
					 int m, int n, int f, double density, uint64_t seed)
{
	problem_draw(tp, tv->feedback, tv->w0, tv->dislikes, m, n, f, density, seed);
}

/* Frees what problem_make allocated; the struct itself is the caller's. */
void
problem_free(TestProblem *tp)
{
	free(tp->R.indptr);
	free(tp->R.indices);
	free(tp->R.values);
	free(tp->Rt.indptr);
	free(tp->Rt.indices);
	free(tp->Rt.values);
	free(tp->dense);
	free(tp->observed);
	free(tp->X);
	free(tp->Y);
}

/* A linear scan: tests are small, and this stays independent of csr.c. */
int64_t
csr_max_row(const WalsCsr *csr)
{
	int64_t		best = 0;
	int64_t		u;

	for (u = 0; u < csr->nrows; u++)
		if (csr->indptr[u + 1] - csr->indptr[u] > best)
			best = csr->indptr[u + 1] - csr->indptr[u];
	return best;
}

/* Weight and target of cell (u, i) over the full matrix, as DESIGN writes L. */
static void
cell(const TestProblem *tp, int u, int i, double *c, double *p)
{
	double		r = tp->dense[(size_t) u * tp->n + i];

	if (!tp->observed[(size_t) u * tp->n + i])
	{
		*c = tp->params.w0;
		*p = 0.0;
	}
	else if (tp->params.feedback == WALS_IMPLICIT)
	{
		*c = 1.0 + (double) tp->params.alpha * fabs(r);
		*p = r >= 0.0 ? 1.0 : 0.0;
	}
	else
	{
		*c = 1.0;
		*p = r;
	}
}

static int
row_count(const TestProblem *tp, int u)
{
	int			i;
	int			cnt = 0;

	for (i = 0; i < tp->n; i++)
		cnt += tp->observed[(size_t) u * tp->n + i];
	return cnt;
}

static int
col_count(const TestProblem *tp, int i)
{
	int			u;
	int			cnt = 0;

	for (u = 0; u < tp->m; u++)
		cnt += tp->observed[(size_t) u * tp->n + i];
	return cnt;
}

/*
 * The regularisation scale of a row with count ratings, the other side
 * having others rows, written from its definition (doc/training.md)
 * rather than through wals_row_scale.
 */
static double
brute_scale(const TestProblem *tp, int count, int others)
{
	if (!tp->params.frequency_scaled)
		return tp->params.feedback == WALS_EXPLICIT ? count : 1;
	return pow(count + (double) tp->params.w0 * others, tp->params.reg_exponent);
}

/*
 * Every cell visited, each with its own weight and target, and s_u, s_i
 * counted from the dense matrix rather than from the CSR.
 */
double
brute_loss(const TestProblem *tp, const float *X, const float *Y)
{
	int			f = tp->params.factors;
	double		lam = tp->params.regularization;
	double		total = 0.0;
	int			u;
	int			i;
	int			k;

	for (u = 0; u < tp->m; u++)
		for (i = 0; i < tp->n; i++)
		{
			double		pred = 0.0;
			double		c;
			double		p;

			for (k = 0; k < f; k++)
				pred += (double) X[u * f + k] * Y[i * f + k];
			cell(tp, u, i, &c, &p);
			total += c * (p - pred) * (p - pred);
		}
	for (u = 0; u < tp->m; u++)
		for (k = 0; k < f; k++)
			total += lam * brute_scale(tp, row_count(tp, u), tp->n) *
				(double) X[u * f + k] * X[u * f + k];
	for (i = 0; i < tp->n; i++)
		for (k = 0; k < f; k++)
			total += lam * brute_scale(tp, col_count(tp, i), tp->m) *
				(double) Y[i * f + k] * Y[i * f + k];
	return total;
}

/*
 * The system is formed over all n cells with their own weights, never from
 * a Gram matrix, so that the w0 G rewriting in solve.c is what gets tested.
 */
void
brute_solve_row(const TestProblem *tp, const float *Y, int u, double *x)
{
	int			f = tp->params.factors;
	double		s = brute_scale(tp, row_count(tp, u), tp->n);
	double	   *A = test_alloc((size_t) f * (f + 1), sizeof(double));
	int			i;
	int			a;
	int			b;

	for (a = 0; a < f; a++)
		x[a] = 0.0;
	if (row_count(tp, u) == 0)
	{
		free(A);
		return;
	}

	/* A is f x (f + 1): the system with b as its last column. */
	for (a = 0; a < f; a++)
		A[a * (f + 1) + a] = tp->params.regularization * s;
	for (i = 0; i < tp->n; i++)
	{
		double		c;
		double		p;

		cell(tp, u, i, &c, &p);
		for (a = 0; a < f; a++)
		{
			for (b = 0; b < f; b++)
				A[a * (f + 1) + b] += c * Y[i * f + a] * Y[i * f + b];
			A[a * (f + 1) + f] += c * p * Y[i * f + a];
		}
	}

	for (a = 0; a < f; a++)
	{
		int			piv = a;
		int			r;

		for (r = a + 1; r < f; r++)
			if (fabs(A[r * (f + 1) + a]) > fabs(A[piv * (f + 1) + a]))
				piv = r;
		for (b = 0; b <= f; b++)
		{
			double		t = A[a * (f + 1) + b];

			A[a * (f + 1) + b] = A[piv * (f + 1) + b];
			A[piv * (f + 1) + b] = t;
		}
		for (r = a + 1; r < f; r++)
		{
			double		q = A[r * (f + 1) + a] / A[a * (f + 1) + a];

			for (b = a; b <= f; b++)
				A[r * (f + 1) + b] -= q * A[a * (f + 1) + b];
		}
	}
	for (a = f - 1; a >= 0; a--)
	{
		double		t = A[a * (f + 1) + f];

		for (b = a + 1; b < f; b++)
			t -= A[a * (f + 1) + b] * x[b];
		x[a] = t / A[a * (f + 1) + a];
	}
	free(A);
}

/* Grams come from wals_gram_rows, as training computes them. */
double
core_loss(const TestProblem *tp, const float *X, const float *Y)
{
	int			f = tp->params.factors;
	float	   *GX = test_alloc((size_t) f * f, sizeof(float));
	float	   *GY = test_alloc((size_t) f * f, sizeof(float));
	double		total;

	wals_gram_rows(X, 0, tp->m, f, GX);
	wals_gram_rows(Y, 0, tp->n, f, GY);
	total = wals_loss_rows(&tp->params, &tp->R, X, Y, 0, tp->m) +
		wals_reg_rows(&tp->params, &tp->Rt, Y, 0, tp->n) +
		wals_loss_unobserved(&tp->params, GX, GY);
	free(GX);
	free(GY);
	return total;
}

/* The suites, by the names that select them on the command line. */
static const struct
{
	const char *name;
	void		(*run) (void);
}			suites[] = {
	{"idmap", test_idmap},
	{"csr", test_csr},
	{"csr_split", test_csr_split},
	{"codes", test_codes},
	{"init", test_init},
	{"topk", test_topk},
	{"gram", test_gram},
	{"solve", test_solve},
	{"loss", test_loss},
	{"metrics", test_metrics},
	{"explain", test_explain},
	{"explain_by_hand", test_explain_by_hand},
	{"score", test_score},
	{"rated", test_rated},
	{"accel", test_accel},
	{"holdout", test_holdout},
	{"poll", test_poll},
};

#define NSUITES (sizeof(suites) / sizeof(suites[0]))

/*
 * Every suite, or those named (wals_unit score gram): make unit-arm64 runs
 * on a second CPU only the suites whose kernels that CPU changes.  The
 * last line is the summary that make and CI look for.
 */
int
main(int argc, char **argv)
{
	bool		chosen[NSUITES] = {false};

	for (int a = 1; a < argc; a++)
	{
		size_t		s = 0;

		while (s < NSUITES && strcmp(argv[a], suites[s].name) != 0)
			s++;
		if (s == NSUITES)
		{
			fprintf(stderr, "wals_unit: no suite \"%s\"; the suites are:", argv[a]);
			for (s = 0; s < NSUITES; s++)
				fprintf(stderr, " %s", suites[s].name);
			fprintf(stderr, "\n");
			return 2;
		}
		chosen[s] = true;
	}
	for (size_t s = 0; s < NSUITES; s++)
		if (argc == 1 || chosen[s])
			suites[s].run();
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
