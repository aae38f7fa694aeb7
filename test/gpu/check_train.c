/*
 * check_train.c
 *	  The GPU engine against src/core: from the same starting factors, the
 *	  loss of every iteration must agree within 1e-4 relative, for implicit,
 *	  explicit and weighted models and odd shapes, with each solver (CG and
 *	  Cholesky); and a system that is not positive definite must fail the
 *	  iteration naming the row src/core names.
 *
 *	  check_train PATH_TO_wals_cuda.so
 *
 * Where no GPU is usable it says why and skips (exit 0), so that the suite
 * passes on machines without one; the last line is "N passed, N failed".
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wals_core.h"
#include "wals_cuda.h"

static int	n_passed;
static int	n_failed;
static WalsCudaApi cuda;

/* splitmix64: reproducible data without a library. */
static uint64_t
next_random(uint64_t *state)
{
	uint64_t	z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

typedef struct Shape
{
	const char *name;
	WalsFeedback feedback;
	float		w0;
	int64_t		users;
	int64_t		items;
	size_t		ratings;
	int			factors;
} Shape;

/* Skewed random ratings, both matrices, and the seeded starting factors. */
static void
make_data(const Shape *shape, WalsCsr *R, WalsCsr *Rt)
{
	size_t		n = shape->ratings;
	int32_t    *row = malloc(sizeof(int32_t) * (n + 1));
	int32_t    *col = malloc(sizeof(int32_t) * (n + 1));
	float	   *val = malloc(sizeof(float) * (n + 1));
	uint64_t	state = 42;

	for (size_t k = 0; k < n; k++)
	{
		double		a = (double) (next_random(&state) >> 11) / 9007199254740992.0;
		double		b = (double) (next_random(&state) >> 11) / 9007199254740992.0;

		row[k] = (int32_t) (shape->users * a * a);
		col[k] = (int32_t) (shape->items * b * b * b);
		val[k] = (float) (1 + next_random(&state) % 5);
	}
	R->indptr = malloc(sizeof(int64_t) * (shape->users + 1));
	R->indices = malloc(sizeof(int32_t) * (n + 1));
	R->values = malloc(sizeof(float) * (n + 1));
	Rt->indptr = malloc(sizeof(int64_t) * (shape->items + 1));
	Rt->indices = malloc(sizeof(int32_t) * (n + 1));
	Rt->values = malloc(sizeof(float) * (n + 1));
	if (wals_csr_from_coo(shape->feedback, shape->users, shape->items, n, row, col, val, R,
						  Rt->indptr, Rt->indices, Rt->values, NULL) != WALS_OK)
	{
		printf("check_train: could not build the matrices of %s\n", shape->name);
		exit(1);
	}
	wals_csr_transpose(R, Rt);
	free(row);
	free(col);
	free(val);
}

/* The seeded starting factors, the same for both engines. */
static void
start_factors(float *X, int64_t users, float *Y, int64_t items, int f)
{
	for (int64_t r = 0; r < users * f; r++)
		X[r] = 0.01f * (float) ((r * 7919) % 201 - 100) / 100.0f;
	for (int64_t r = 0; r < items * f; r++)
		Y[r] = 0.01f * (float) ((r * 104729) % 201 - 100) / 100.0f;
}

/* The engine's view of the training src/core runs with params on R and Rt. */
static void
make_problem(const WalsParams *params, const WalsCsr *R, const WalsCsr *Rt,
			 const float *X, const float *Y, WalsCudaProblem *problem)
{
	memset(problem, 0, sizeof(*problem));
	problem->feedback = params->feedback == WALS_EXPLICIT;
	problem->solver = params->solver == WALS_CG ? WALS_CUDA_CG : WALS_CUDA_CHOLESKY;
	problem->factors = params->factors;
	problem->cg_steps = params->cg_steps;
	problem->regularization = params->regularization;
	problem->alpha = params->alpha;
	problem->w0 = params->w0;
	problem->nusers = R->nrows;
	problem->nitems = Rt->nrows;
	problem->user_indptr = R->indptr;
	problem->user_indices = R->indices;
	problem->user_values = R->values;
	problem->item_indptr = Rt->indptr;
	problem->item_indices = Rt->indices;
	problem->item_values = Rt->values;
	problem->X = X;
	problem->Y = Y;
}

static const char *
solver_name(WalsSolver solver)
{
	return solver == WALS_CG ? "CG" : "Cholesky";
}

/*
 * The loss after one iteration on the CPU; NaN, which no GPU loss matches,
 * when a row fails to solve.
 */
static double
cpu_iteration(const WalsParams *params, const WalsCsr *R, const WalsCsr *Rt,
			  float *X, float *Y, float *GX, float *GY, float *scratch)
{
	int			f = params->factors;
	int64_t		bad;

	memset(GY, 0, sizeof(float) * f * f);
	wals_gram_rows(Y, 0, Rt->nrows, f, GY);
	if (wals_solve_rows(params, R, Y, GY, X, 0, R->nrows, scratch, &bad) != WALS_OK)
		return NAN;
	memset(GX, 0, sizeof(float) * f * f);
	wals_gram_rows(X, 0, R->nrows, f, GX);
	if (wals_solve_rows(params, Rt, X, GX, Y, 0, Rt->nrows, scratch, &bad) != WALS_OK)
		return NAN;
	memset(GY, 0, sizeof(float) * f * f);
	wals_gram_rows(Y, 0, Rt->nrows, f, GY);
	return wals_loss_unobserved(params, GX, GY) +
		wals_loss_rows(params, R, X, Y, 0, R->nrows) +
		wals_reg_rows(params, Rt, Y, 0, Rt->nrows);
}

static void
check_shape(const Shape *shape, WalsSolver solver)
{
	WalsParams	params = {shape->feedback, solver, shape->factors, 3, 0.1f, 1.0f, shape->w0};
	WalsCsr		R;
	WalsCsr		Rt;
	int			f = shape->factors;
	float	   *X = malloc(sizeof(float) * shape->users * f);
	float	   *Y = malloc(sizeof(float) * shape->items * f);
	float	   *GX = malloc(sizeof(float) * f * f);
	float	   *GY = malloc(sizeof(float) * f * f);
	float	   *scratch;
	WalsCudaProblem problem;
	void	   *state = NULL;
	WalsCudaError err = {0};
	int			ok = 1;

	make_data(shape, &R, &Rt);
	/* Every cell bounds the longest row, which is all the scratch needs. */
	scratch = malloc(sizeof(float) * (wals_solve_scratch(&params, R.indptr[R.nrows]) + 1));
	start_factors(X, shape->users, Y, shape->items, f);
	make_problem(&params, &R, &Rt, X, Y, &problem);
	if (cuda.train_begin(&problem, &state, &err) != 0)
	{
		printf("FAIL %s, %s: train_begin: %s\n", shape->name, solver_name(solver), err.msg);
		n_failed++;
		return;
	}
	for (int it = 0; it < 5 && ok; it++)
	{
		double		gpu = 0.0;
		double		cpu = cpu_iteration(&params, &R, &Rt, X, Y, GX, GY, scratch);
		double		rel;

		if (cuda.train_iterate(state, &gpu, &err) != 0)
		{
			printf("FAIL %s, %s: iteration %d: %s\n", shape->name, solver_name(solver),
				   it + 1, err.msg);
			ok = 0;
			break;
		}
		rel = fabs(gpu - cpu) / fmax(fabs(cpu), 1e-30);
		if (!(rel <= 1e-4))
		{
			printf("FAIL %s, %s: iteration %d: loss %.9g on the GPU, %.9g on the CPU\n",
				   shape->name, solver_name(solver), it + 1, gpu, cpu);
			ok = 0;
		}
	}
	cuda.train_end(state, NULL, NULL, &err);
	free(R.indptr);
	free(R.indices);
	free(R.values);
	free(Rt.indptr);
	free(Rt.indices);
	free(Rt.values);
	free(X);
	free(Y);
	free(GX);
	free(GY);
	free(scratch);
	if (ok)
		n_passed++;
	else
		n_failed++;
}

/*
 * A negative regularization makes every rated row's system indefinite (the
 * starting factors are near zero, so -lambda rules the diagonal).  The users
 * are shifted past a few without ratings, which are solved (to zero), not
 * failed, so that the row the engine must name is not simply the first.
 */
static void
check_indefinite(void)
{
	static const Shape shape = {"indefinite", WALS_IMPLICIT, 1.0f, 50, 20, 300, 8};
	const int64_t skip = 3;
	WalsParams	params = {WALS_IMPLICIT, WALS_CHOLESKY, 8, 3, -1.0f, 1.0f, 1.0f};
	int			f = params.factors;
	WalsCsr		R;
	WalsCsr		Rt;
	WalsCsr		Rs;
	float	   *X = malloc(sizeof(float) * (shape.users + skip) * f);
	float	   *Y = malloc(sizeof(float) * shape.items * f);
	float	   *GY = calloc((size_t) f * f, sizeof(float));
	float	   *scratch;
	WalsCudaProblem problem;
	void	   *state = NULL;
	WalsCudaError err = {0};
	int64_t		bad = -1;
	WalsStatus	status;
	double		loss = 0.0;
	int			ok = 1;

	make_data(&shape, &R, &Rt);
	Rs = R;
	Rs.nrows = R.nrows + skip;
	Rs.indptr = malloc(sizeof(int64_t) * (Rs.nrows + 1));
	for (int64_t r = 0; r <= Rs.nrows; r++)
		Rs.indptr[r] = r < skip ? 0 : R.indptr[r - skip];
	for (int64_t k = 0; k < Rt.indptr[Rt.nrows]; k++)
		Rt.indices[k] += (int32_t) skip;
	scratch = malloc(sizeof(float) * (wals_solve_scratch(&params, R.indptr[R.nrows]) + 1));
	start_factors(X, Rs.nrows, Y, shape.items, f);
	make_problem(&params, &Rs, &Rt, X, Y, &problem);

	if (cuda.train_begin(&problem, &state, &err) != 0)
	{
		printf("FAIL %s: train_begin: %s\n", shape.name, err.msg);
		ok = 0;
	}
	else
	{
		wals_gram_rows(Y, 0, shape.items, f, GY);
		status = wals_solve_rows(&params, &Rs, Y, GY, X, 0, Rs.nrows, scratch, &bad);
		if (status != WALS_ESINGULAR || bad < skip)
		{
			printf("FAIL %s: src/core found no indefinite system past the empty rows\n",
				   shape.name);
			ok = 0;
		}
		else if (cuda.train_iterate(state, &loss, &err) == 0)
		{
			printf("FAIL %s: the iteration succeeded\n", shape.name);
			ok = 0;
		}
		else if (err.code != WALS_CUDA_ESINGULAR || err.side != WALS_CUDA_USERS ||
				 err.row != bad)
		{
			printf("FAIL %s: failure %d of side %d, row %lld (\"%s\"); expected user row %lld "
				   "as not positive definite\n", shape.name, err.code, err.side,
				   (long long) err.row, err.msg, (long long) bad);
			ok = 0;
		}
		cuda.train_end(state, NULL, NULL, &err);
	}
	free(R.indptr);
	free(R.indices);
	free(R.values);
	free(Rs.indptr);
	free(Rt.indptr);
	free(Rt.indices);
	free(Rt.values);
	free(X);
	free(Y);
	free(GY);
	free(scratch);
	if (ok)
		n_passed++;
	else
		n_failed++;
}

int
main(int argc, char **argv)
{
	static const Shape shapes[] = {
		{"implicit f=64", WALS_IMPLICIT, 1.0f, 3000, 800, 60000, 64},
		{"explicit f=32", WALS_EXPLICIT, 0.0f, 3000, 800, 60000, 32},
		{"unobserved weight 0.3, f=17", WALS_IMPLICIT, 0.3f, 2000, 500, 30000, 17},
		{"one user", WALS_IMPLICIT, 1.0f, 1, 50, 30, 8},
		{"f=1", WALS_IMPLICIT, 1.0f, 500, 100, 3000, 1},
		{"f=256, users without ratings", WALS_IMPLICIT, 1.0f, 400, 300, 2000, 256},
		{"explicit f=100", WALS_EXPLICIT, 0.0f, 600, 400, 12000, 100},
		{"f=1024", WALS_IMPLICIT, 1.0f, 60, 40, 600, 1024},
	};
	void	   *handle;
	WalsCudaInit init;
	char		msg[512] = "";
	int			devices;

	if (argc != 2)
	{
		fprintf(stderr, "usage: check_train PATH_TO_wals_cuda.so\n");
		return 2;
	}
	handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	init = handle ? (WalsCudaInit) dlsym(handle, "wals_cuda_init") : NULL;
	if (init == NULL || init(&cuda) != 0 || cuda.abi_version != WALS_CUDA_ABI_VERSION)
	{
		printf("check_train: skipped: cannot load %s: %s\n", argv[1],
			   handle ? "not a CUDA engine of this version" : dlerror());
		printf("0 passed, 0 failed\n");
		return 0;
	}
	devices = cuda.device_count(msg, sizeof(msg));
	if (devices <= 0)
	{
		printf("check_train: skipped: no usable GPU (%s)\n",
			   devices < 0 ? msg : "no CUDA device is visible");
		printf("0 passed, 0 failed\n");
		return 0;
	}
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
	{
		check_shape(&shapes[s], WALS_CG);
		check_shape(&shapes[s], WALS_CHOLESKY);
	}
	check_indefinite();
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed > 0;
}
