/*
 * check_train.c
 *	  The GPU engine against src/core: from the same starting factors, the
 *	  loss of every iteration must agree within 1e-4 relative, for implicit,
 *	  explicit and weighted models and odd shapes up to f = 4096, with each
 *	  solver (CG, Cholesky, and subspace with one block and with several);
 *	  a system that is not positive definite, or a residual that is not
 *	  finite (in short rows and in rows split across blocks), must fail the
 *	  iteration naming the row src/core names; and
 *	  the operations of an accelerated training (combine, dot, line) must
 *	  give what src/core's accel.c gives on the same factors.
 *
 *	  check_train PATH_TO_wals_cuda.so
 *
 * The tolerance holds because every shape is well posed: its systems are
 * conditioned so that the two engines' rounding (sums in another order)
 * moves the loss by about 1e-7, a thousandth of the tolerance, while a
 * wrong term moves it by far more.  A shape whose systems are nearly
 * singular is chaotic instead, and no tolerance fits it: with f above the
 * rows that rate (f = 256 with 300 items, f = 1024 with 40) or a single
 * user, and lambda 0.1, one ulp in the input moved the f = 256 Cholesky
 * factors by 5e-3 by the third iteration, and the loss by 3%.  Those
 * shapes are kept, for their odd sizes, with lambda 1, which bounds the
 * condition of their systems.  f = 4096 (4 users, 3 items) stays at 0.1
 * for its two iterations, where it agrees within 1e-5.  check_posed holds
 * every shape up to f = 1024 to this on the CPU: one ulp on every starting
 * factor may move src/core's loss by 1e-6 at most (the shapes here move it
 * by 2e-7 at most; the f = 256 shape at lambda 0.1 moved it by 7e-6, and
 * its Cholesky loss on the emulated device by 3% from src/core's).
 *
 * On a machine without a GPU (no device, no driver) it says so and skips
 * (exit 0), so that the suite passes there; a driver too old, a library
 * that does not load, or any other failure of CUDA fails.  Against the
 * emulated device of test/gpu/emu (make test-gpu-emu) it also runs the
 * checks of check_emu.c; as the emulation runs a block's threads one after
 * another, it compares the first two iterations of each shape there, and
 * runs every check in a child process, two at a time; check_posed, a fact
 * of src/core, is left to the run against the host stand-in
 * (test/gpu/host_engine.c), which in turn leaves out f = 4096, where it
 * would compare src/core with itself.  The last line is "N passed, N
 * failed".
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_train.h"

WalsCudaApi cuda;
int			quiet;
static int	n_passed;
static int	n_failed;
static int	jobs = 1;
static int	running_jobs;
static int	most_iterations = 1000;
static bool emulated;			/* the engine runs on test/gpu/emu's device */
static bool host_stand_in;		/* the engine is test/gpu/host_engine.c's */

/* A check's failure, unless it is expected to fail. */
void
say(const char *fmt,...)
{
	va_list		ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

static void
count(int ok)
{
	if (ok)
		n_passed++;
	else
		n_failed++;
}

/* Count a check that ended in a child; one that crashed failed. */
static void
reap_one(void)
{
	int			status;

	if (wait(&status) > 0)
	{
		running_jobs--;
		count(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

/*
 * Run a check and count it.  On the emulated device each check runs in a
 * child process, jobs at a time: the emulation is slow, and the knobs a
 * check turns end with its process.  On a real device they run in turn in
 * this process, since CUDA does not let a child use the device.
 */
void
run_check(CheckFn fn, const void *arg)
{
	pid_t		pid;

	if (jobs <= 1)
	{
		count(fn(arg));
		return;
	}
	if (running_jobs >= jobs)
		reap_one();
	fflush(stdout);
	pid = fork();
	if (pid < 0)
	{
		count(fn(arg));
		return;
	}
	if (pid == 0)
	{
		int			ok = fn(arg);

		fflush(stdout);
		_exit(ok ? 0 : 1);
	}
	running_jobs++;
}

/* Only a machine without a GPU may skip: a broken CUDA is a failure. */
DevicesVerdict
devices_verdict(int devices)
{
	return devices > 0 ? DEVICES_RUN : devices == 0 ? DEVICES_SKIP : DEVICES_BROKEN;
}

/* splitmix64: reproducible data without a library. */
static uint64_t
next_random(uint64_t *state)
{
	uint64_t	z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * Skewed random ratings, a share of them dislikes, both matrices, and the
 * seeded starting factors.
 */
void
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
		if (shape->dislikes > 0 &&
			(double) (next_random(&state) >> 11) / 9007199254740992.0 < shape->dislikes)
			val[k] = -val[k];
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
void
start_factors(float *X, int64_t users, float *Y, int64_t items, int f)
{
	for (int64_t r = 0; r < users * f; r++)
		X[r] = 0.01f * (float) ((r * 7919) % 201 - 100) / 100.0f;
	for (int64_t r = 0; r < items * f; r++)
		Y[r] = 0.01f * (float) ((r * 104729) % 201 - 100) / 100.0f;
}

/* The engine's view of the training src/core runs with params on R and Rt. */
void
make_problem(const WalsParams *params, const WalsCsr *R, const WalsCsr *Rt,
			 const float *X, const float *Y, int vectors, WalsCudaProblem *problem)
{
	memset(problem, 0, sizeof(*problem));
	problem->feedback = params->feedback == WALS_EXPLICIT;
	problem->solver = params->solver == WALS_CG ? WALS_CUDA_CG :
		params->solver == WALS_SUBSPACE ? WALS_CUDA_SUBSPACE : WALS_CUDA_CHOLESKY;
	problem->factors = params->factors;
	problem->cg_steps = params->cg_steps;
	problem->block_size = params->block_size;
	problem->vectors = vectors;
	problem->regularization = params->regularization;
	problem->alpha = params->alpha;
	problem->w0 = params->w0;
	problem->frequency_scaled = params->frequency_scaled;
	problem->reg_exponent = params->reg_exponent;
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
	problem->may_map_cells = 1;
}

/* The solver of params, as a failure names it. */
static const char *
solver_name(const WalsParams *params)
{
	static char name[64];

	if (params->solver != WALS_SUBSPACE)
		return params->solver == WALS_CG ? "CG" : "Cholesky";
	snprintf(name, sizeof(name), "subspace, blocks of %d", params->block_size);
	return name;
}

/* The params src/core trains shape with. */
WalsParams
shape_params(const Shape *shape, WalsSolver solver, int block_size)
{
	WalsParams	params = {shape->feedback, solver, shape->factors, 3,
		shape->lambda > 0.0f ? shape->lambda : 0.1f, 1.0f, shape->w0, block_size,
	shape->nu >= 0, shape->nu >= 0 ? shape->nu : 0.0f};

	return params;
}

void
free_csr(WalsCsr *R)
{
	free(R->indptr);
	free(R->indices);
	free(R->values);
}

/* The exact loss of X and Y, from their Grams (GX, GY: f x f scratch). */
static double
cpu_loss(const WalsParams *params, const WalsCsr *R, const WalsCsr *Rt,
		 const float *X, const float *Y, float *GX, float *GY)
{
	int			f = params->factors;

	memset(GX, 0, sizeof(float) * f * f);
	memset(GY, 0, sizeof(float) * f * f);
	wals_gram_rows(X, 0, R->nrows, f, GX);
	wals_gram_rows(Y, 0, Rt->nrows, f, GY);
	return wals_loss_unobserved(params, GX, GY) +
		wals_loss_rows(params, R, X, Y, 0, R->nrows) +
		wals_reg_rows(params, Rt, Y, 0, Rt->nrows);
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
	return cpu_loss(params, R, Rt, X, Y, GX, GY);
}

/*
 * Whether shape is well posed for the comparison: src/core's loss after
 * the shape's iterations with the exact solver, the most sensitive, moves
 * by at most 1e-6 relative when every starting factor moves by one ulp, a
 * hundredth of the tolerance that the two engines' different rounding
 * must stay within.  A chaotic shape fails here, on any engine, rather
 * than as a GPU that disagrees with the CPU.
 */
static int
check_posed(const void *arg)
{
	const Shape *shape = arg;
	WalsParams	params = shape_params(shape, WALS_CHOLESKY, 0);
	WalsCsr		R;
	WalsCsr		Rt;
	int			f = shape->factors;
	size_t		nx = (size_t) shape->users * f;
	size_t		ny = (size_t) shape->items * f;
	float	   *X = malloc(sizeof(float) * nx);
	float	   *Y = malloc(sizeof(float) * ny);
	float	   *GX = malloc(sizeof(float) * f * f);
	float	   *GY = malloc(sizeof(float) * f * f);
	float	   *scratch;
	double		loss[2] = {0.0, 0.0};
	double		moved;

	make_data(shape, &R, &Rt);
	scratch = malloc(sizeof(float) * (wals_solve_scratch(&params, R.indptr[R.nrows]) + 1));
	for (int run = 0; run < 2; run++)
	{
		start_factors(X, shape->users, Y, shape->items, f);
		for (size_t k = 0; k < nx && run == 1; k++)
			X[k] = nextafterf(X[k], INFINITY);
		for (size_t k = 0; k < ny && run == 1; k++)
			Y[k] = nextafterf(Y[k], INFINITY);
		for (int it = 0; it < shape->iterations; it++)
			loss[run] = cpu_iteration(&params, &R, &Rt, X, Y, GX, GY, scratch);
	}
	moved = fabs(loss[1] - loss[0]) / fmax(fabs(loss[0]), 1e-30);
	if (!(moved <= 1e-6))
		say("FAIL %s is chaotic: one ulp in the starting factors moves the loss after %d "
			"iterations by %.3g relative, beyond what the engines' rounding may\n",
			shape->name, shape->iterations, moved);
	free_csr(&R);
	free_csr(&Rt);
	free(X);
	free(Y);
	free(GX);
	free(GY);
	free(scratch);
	return moved <= 1e-6;
}

int
check_shape(const Shape *shape, WalsSolver solver, int block_size)
{
	WalsParams	params = shape_params(shape, solver, block_size);
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
	make_problem(&params, &R, &Rt, X, Y, 0, &problem);
	if (cuda.train_begin(&problem, &state, &err) != 0)
	{
		say("FAIL %s, %s: train_begin: %s\n", shape->name, solver_name(&params), err.msg);
		return 0;
	}
	double		gpu = 0.0;

	for (int it = 0; it < shape->iterations && it < most_iterations && ok; it++)
	{
		double		cpu = cpu_iteration(&params, &R, &Rt, X, Y, GX, GY, scratch);
		double		rel;

		if (cuda.train_iterate(state, &gpu, &err) != 0)
		{
			say("FAIL %s, %s: iteration %d: %s\n", shape->name, solver_name(&params),
				   it + 1, err.msg);
			ok = 0;
			break;
		}
		rel = fabs(gpu - cpu) / fmax(fabs(cpu), 1e-30);
		if (!(rel <= 1e-4))
		{
			say("FAIL %s, %s: iteration %d: loss %.9g on the GPU, %.9g on the CPU\n",
				   shape->name, solver_name(&params), it + 1, gpu, cpu);
			ok = 0;
		}
	}
	/*
	 * The factors downloaded mid-training have the loss the GPU reported,
	 * up to the rounding of the loss alone: it subtracts w0 (x.y)^2 of the
	 * observed cells from the unobserved term of all cells, both larger
	 * than the loss.
	 */
	if (ok)
	{
		double		mine;

		if (cuda.train_download(state, X, Y, &err) != 0)
		{
			say("FAIL %s, %s: train_download: %s\n", shape->name, solver_name(&params), err.msg);
			ok = 0;
		}
		else
		{
			mine = cpu_loss(&params, &R, &Rt, X, Y, GX, GY);
			if (!(fabs(mine - gpu) <= 1e-5 * fmax(fabs(gpu), 1e-30)))
			{
				say("FAIL %s, %s: downloaded factors have loss %.9g, the GPU said %.9g\n",
					   shape->name, solver_name(&params), mine, gpu);
				ok = 0;
			}
		}
	}
	cuda.train_end(state, NULL, NULL, &err);
	free_csr(&R);
	free_csr(&Rt);
	free(X);
	free(Y);
	free(GX);
	free(GY);
	free(scratch);
	return ok;
}

/*
 * A negative regularization makes every rated row's system indefinite (the
 * starting factors are near zero, so -lambda rules the diagonal).  The users
 * are shifted past a few without ratings, which are solved (to zero), not
 * failed, so that the row the engine must name is not simply the first.
 */
static int
check_indefinite(WalsSolver solver, int block_size)
{
	static const Shape shape = {"indefinite", WALS_IMPLICIT, 1.0f, 50, 20, 300, 8, 1, -1.0f, 0.0f,
	0.0f};
	const int64_t skip = 3;
	WalsParams	params = {WALS_IMPLICIT, solver, 8, 3, -1.0f, 1.0f, 1.0f, block_size, false, 0.0f};
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
	make_problem(&params, &Rs, &Rt, X, Y, 0, &problem);

	if (cuda.train_begin(&problem, &state, &err) != 0)
	{
		say("FAIL %s, %s: train_begin: %s\n", shape.name, solver_name(&params), err.msg);
		ok = 0;
	}
	else
	{
		wals_gram_rows(Y, 0, shape.items, f, GY);
		status = wals_solve_rows(&params, &Rs, Y, GY, X, 0, Rs.nrows, scratch, &bad);
		if (status != WALS_ESINGULAR || bad < skip)
		{
			say("FAIL %s, %s: src/core found no indefinite system past the empty rows\n",
				   shape.name, solver_name(&params));
			ok = 0;
		}
		else if (cuda.train_iterate(state, &loss, &err) == 0)
		{
			say("FAIL %s, %s: the iteration succeeded\n", shape.name,
				   solver_name(&params));
			ok = 0;
		}
		else if (err.code != WALS_CUDA_ESINGULAR || err.side != WALS_CUDA_USERS ||
				 err.row != bad)
		{
			say("FAIL %s, %s: failure %d of side %d, row %lld (\"%s\"); expected user "
				   "row %lld as not positive definite\n", shape.name, solver_name(&params),
				   err.code, err.side, (long long) err.row, err.msg, (long long) bad);
			ok = 0;
		}
		cuda.train_end(state, NULL, NULL, &err);
	}
	free_csr(&R);
	free(Rs.indptr);
	free_csr(&Rt);
	free(X);
	free(Y);
	free(GY);
	free(scratch);
	return ok;
}

/*
 * src/core's side of the operations, on all factors z = (X, Y) in one
 * array as the engine keeps them: the Grams of a sweep, a line.
 */
typedef struct CoreOps
{
	const WalsParams *params;
	const WalsCsr *R;
	const WalsCsr *Rt;
	int64_t		nu;
	int64_t		ni;
	int			f;
	float	   *GX;
	float	   *GY;
	float	   *M;				/* six f x f */
} CoreOps;

static void
core_line(CoreOps *c, const float *b, const float *d, double coef[WALS_LINE_TERMS])
{
	size_t		ff = (size_t) c->f * c->f;
	size_t		xs = (size_t) c->nu * c->f;
	float	   *M = c->M;

	memset(coef, 0, sizeof(double) * WALS_LINE_TERMS);
	wals_line_rows(c->params, c->R, b, d, b + xs, d + xs, 0, c->nu, coef);
	wals_line_reg_rows(c->params, c->Rt, b + xs, d + xs, 0, c->ni, coef);
	memset(M, 0, sizeof(float) * 6 * ff);
	wals_gram_rows(b, 0, c->nu, c->f, M);
	wals_cross_rows(b, d, 0, c->nu, c->f, M + ff);
	wals_gram_rows(d, 0, c->nu, c->f, M + 2 * ff);
	wals_gram_rows(b + xs, 0, c->ni, c->f, M + 3 * ff);
	wals_cross_rows(b + xs, d + xs, 0, c->ni, c->f, M + 4 * ff);
	wals_gram_rows(d + xs, 0, c->ni, c->f, M + 5 * ff);
	wals_line_unobserved(c->params, M, M + ff, M + 2 * ff, M + 3 * ff, M + 4 * ff,
						 M + 5 * ff, coef);
}

static double
dot_floats(const float *a, const float *b, size_t n)
{
	double		s = 0.0;

	for (size_t k = 0; k < n; k++)
		s += (double) a[k] * b[k];
	return s;
}

/* dst = a x + b y in float, as the engines combine. */
static void
combine_floats(float *dst, float a, const float *x, float b, const float *y, size_t n)
{
	for (size_t k = 0; k < n; k++)
		dst[k] = a * x[k] + b * y[k];
}

/* Whether a call of the engine succeeded; says which did not. */
static int
called(const char *shape, const char *what, int rc, const WalsCudaError *err)
{
	if (rc == 0)
		return 1;
	say("FAIL %s, operations: %s: %s\n", shape, what, err->msg);
	return 0;
}

/* Whether got is want within tol times scale; says by how much it is not. */
static int
near(const char *shape, const char *what, double got, double want, double scale, double tol)
{
	if (fabs(got - want) <= tol * scale)
		return 1;
	say("FAIL %s, operations: %s: %.9g on the GPU, %.9g on the CPU\n", shape, what,
		   got, want);
	return 0;
}

/*
 * The coefficients of a line, each weighed at the step the search would
 * take, tau: their terms at tau must agree within 1e-4 of the sum of all
 * terms' sizes, which float rounding of either engine stays far inside and
 * a missing or doubled term does not.
 */
static int
near_line(const char *shape, const char *what, const double *got, const double *want,
		  double tau)
{
	double		scale = 0.0;
	int			ok = 1;

	for (int k = 0; k < WALS_LINE_TERMS; k++)
		scale += fabs(want[k]) * pow(tau, k);
	for (int k = 0; k < WALS_LINE_TERMS && ok; k++)
		if (!(fabs(got[k] - want[k]) * pow(tau, k) <= 1e-4 * scale))
		{
			say("FAIL %s, operations: %s: coefficient %d is %.9g on the GPU, %.9g on "
				   "the CPU (step %g)\n", shape, what, k, got[k], want[k], tau);
			ok = 0;
		}
	return ok;
}

/*
 * The operations of an accelerated training, each against src/core, as
 * ALS-NCG's first step uses them: p = z - ALS(z), the factors before one
 * CG iteration less those after it, formed by combinations on both sides
 * (its norm, its product with the factors, and at the end the whole of
 * it, downloaded as the factors); copies and combinations (one whose
 * operand holds NaN with a coefficient 0, which must not be read); the
 * line's quartic along d = -p from a spare and from the factors; and a
 * step into the factors, from which a sweep must start (with the Grams of
 * the new factors).
 */
static int
check_ops(const Shape *shape)
{
	WalsParams	params = shape_params(shape, WALS_CG, 0);
	const char *name = shape->name;
	WalsCsr		R;
	WalsCsr		Rt;
	int			f = shape->factors;
	size_t		ff = (size_t) f * f;
	size_t		xs = (size_t) shape->users * f;
	size_t		n = (size_t) (shape->users + shape->items) * f;
	float	   *z = malloc(sizeof(float) * n);
	float	   *g = malloc(sizeof(float) * n);
	float	   *d = malloc(sizeof(float) * n);
	float	   *out = malloc(sizeof(float) * n);
	float	   *scratch;
	CoreOps		core;
	WalsCudaProblem problem;
	void	   *state = NULL;
	WalsCudaError err = {0};
	double		gpu = 0.0;
	double		cpu;
	double		got[WALS_LINE_TERMS];
	double		want[WALS_LINE_TERMS];
	double		pp;
	double		zz;
	double		zp;
	double		v;
	double		tau = 1.0;
	double		value;
	double		worst = 0.0;
	double		largest = 0.0;
	int			ok;

	make_data(shape, &R, &Rt);
	core.params = &params;
	core.R = &R;
	core.Rt = &Rt;
	core.nu = shape->users;
	core.ni = shape->items;
	core.f = f;
	core.GX = malloc(sizeof(float) * ff);
	core.GY = malloc(sizeof(float) * ff);
	core.M = malloc(sizeof(float) * 6 * ff);
	scratch = malloc(sizeof(float) * (wals_solve_scratch(&params, R.indptr[R.nrows]) + 1));
	start_factors(z, shape->users, z + xs, shape->items, f);
	make_problem(&params, &R, &Rt, z, z + xs, WALS_CUDA_MAX_VECTORS, &problem);
	ok = called(name, "train_begin", cuda.train_begin(&problem, &state, &err), &err);

	/* v1 = z; one sweep; v1 = p = v1 - z, and the same on the host in g */
	if (ok)
	{
		memcpy(g, z, sizeof(float) * n);
		cpu = cpu_iteration(&params, &R, &Rt, z, z + xs, core.GX, core.GY, scratch);
		combine_floats(g, 1.0f, g, -1.0f, z, n);
		ok = called(name, "combine", cuda.train_combine(state, 1, 1.0, 0, 0.0, 0, &err), &err) &&
			called(name, "iteration 1", cuda.train_iterate(state, &gpu, &err), &err) &&
			near(name, "loss of iteration 1", gpu, cpu, fabs(cpu), 1e-4) &&
			called(name, "combine", cuda.train_combine(state, 1, 1.0, 1, -1.0, 0, &err), &err);
	}
	if (ok)
	{
		pp = dot_floats(g, g, n);
		zz = dot_floats(z, z, n);
		zp = dot_floats(z, g, n);
		ok = called(name, "dot", cuda.train_dot(state, 1, 1, &v, &err), &err) &&
			near(name, "|p|^2", v, pp, pp, 1e-3) &&
			called(name, "dot", cuda.train_dot(state, 0, 1, &v, &err), &err) &&
			near(name, "factors . p", v, zp, sqrt(zz * pp), 1e-3) &&
			called(name, "dot", cuda.train_dot(state, 0, 0, &v, &err), &err) &&
			near(name, "|factors|^2", v, zz, zz, 1e-3);
	}

	/* v2 = z; v4 = NaN where p is not tiny; v3 = -p twice, never reading v4 */
	if (ok)
		ok = called(name, "combine", cuda.train_combine(state, 2, 1.0, 0, 0.0, 0, &err), &err) &&
			called(name, "combine", cuda.train_combine(state, 4, 1e30, 1, 0.0, 0, &err), &err) &&
			called(name, "combine", cuda.train_combine(state, 4, 1e30, 4, 0.0, 0, &err), &err) &&
			called(name, "combine", cuda.train_combine(state, 4, 1.0, 4, -1.0, 4, &err), &err) &&
			called(name, "dot", cuda.train_dot(state, 4, 4, &v, &err), &err);
	if (ok && !isnan(v))
	{
		say("FAIL %s, operations: overflowing a vector left it finite (%g)\n", name, v);
		ok = 0;
	}
	if (ok)
		ok = called(name, "combine", cuda.train_combine(state, 3, -1.0, 1, 0.0, 4, &err), &err) &&
			called(name, "dot", cuda.train_dot(state, 3, 3, &v, &err), &err) &&
			near(name, "|-p|^2 beside a NaN operand", v, pp, pp, 1e-3) &&
			called(name, "combine", cuda.train_combine(state, 3, 0.0, 4, -1.0, 1, &err), &err) &&
			called(name, "dot", cuda.train_dot(state, 3, 3, &v, &err), &err) &&
			near(name, "|-p|^2 beside a NaN operand", v, pp, pp, 1e-3) &&
			called(name, "dot", cuda.train_dot(state, 2, 3, &v, &err), &err) &&
			near(name, "copy . -p", v, -zp, sqrt(zz * pp), 1e-3);

	/* the line through z along d = -p, from the copy and from the factors */
	if (ok)
	{
		combine_floats(d, -1.0f, g, 0.0f, g, n);
		core_line(&core, z, d, want);
		if (wals_quartic_min(want, &tau, &value) != 1 || !(tau > 0))
			tau = 1.0;
		ok = called(name, "line", cuda.train_line(state, 2, 3, got, &err), &err) &&
			near_line(name, "line from a spare", got, want, tau) &&
			called(name, "line", cuda.train_line(state, 0, 3, got, &err), &err) &&
			near_line(name, "line from the factors", got, want, tau);
	}

	/* z = z + tau d, then a sweep from there */
	if (ok)
	{
		combine_floats(z, 1.0f, z, (float) tau, d, n);
		zz = dot_floats(z, z, n);
		ok = called(name, "step", cuda.train_combine(state, 0, 1.0, 2, tau, 3, &err), &err) &&
			called(name, "dot", cuda.train_dot(state, 0, 0, &v, &err), &err) &&
			near(name, "|factors|^2 after the step", v, zz, zz, 1e-3);
	}
	if (ok)
	{
		cpu = cpu_iteration(&params, &R, &Rt, z, z + xs, core.GX, core.GY, scratch);
		ok = called(name, "iteration 2", cuda.train_iterate(state, &gpu, &err), &err) &&
			near(name, "loss of the sweep after the step", gpu, cpu, fabs(cpu), 1e-4);
	}

	/* p, whole, as the factors */
	if (ok)
		ok = called(name, "combine", cuda.train_combine(state, 0, 0.0, 3, 1.0, 1, &err), &err) &&
			called(name, "train_end", cuda.train_end(state, out, out + xs, &err), &err);
	else if (state != NULL)
		cuda.train_end(state, NULL, NULL, &err);
	if (ok)
	{
		for (size_t k = 0; k < n; k++)
		{
			worst = fmax(worst, fabs(out[k] - g[k]));
			largest = fmax(largest, fabs(g[k]));
		}
		if (!(worst <= 1e-3 * largest))
		{
			say("FAIL %s, operations: p is off by %g at most, of %g\n", name,
				   worst, largest);
			ok = 0;
		}
	}
	free_csr(&R);
	free_csr(&Rt);
	free(z);
	free(g);
	free(d);
	free(out);
	free(core.GX);
	free(core.GY);
	free(core.M);
	free(scratch);
	return ok;
}

/* Whether a call was refused as it must be. */
static int
refused(const char *what, int rc, const WalsCudaError *err)
{
	if (rc == WALS_CUDA_EINVAL && err->code == WALS_CUDA_EINVAL)
		return 1;
	say("FAIL refusals: %s gave %d (\"%s\"), not EINVAL\n", what, rc, err->msg);
	return 0;
}

/*
 * Operations on a training that keeps no spares, and on vectors it does
 * not have, are refused.
 */
static int
check_refusals(const void *unused)
{
	static const Shape shape = {"refusals", WALS_IMPLICIT, 1.0f, 30, 20, 200, 4, 1, -1.0f, 0.0f,
	0.0f};
	WalsParams	params = shape_params(&shape, WALS_CG, 0);
	WalsCsr		R;
	WalsCsr		Rt;
	int			f = shape.factors;
	float	   *X = malloc(sizeof(float) * shape.users * f);
	float	   *Y = malloc(sizeof(float) * shape.items * f);
	double		coef[WALS_LINE_TERMS];
	double		v;
	WalsCudaProblem problem;
	void	   *state = NULL;
	WalsCudaError err = {0};
	int			ok = 1;

	(void) unused;
	make_data(&shape, &R, &Rt);
	start_factors(X, shape.users, Y, shape.items, f);
	for (int vectors = 0; vectors <= WALS_CUDA_MAX_VECTORS && ok;
		 vectors += WALS_CUDA_MAX_VECTORS)
	{
		make_problem(&params, &R, &Rt, X, Y, vectors, &problem);
		if (!called(shape.name, "train_begin", cuda.train_begin(&problem, &state, &err), &err))
		{
			ok = 0;
			break;
		}
		if (vectors == 0)
			ok = refused("combine without spares",
						cuda.train_combine(state, 0, 1.0, 0, 0.0, 0, &err), &err) &&
				refused("dot without spares", cuda.train_dot(state, 0, 0, &v, &err), &err) &&
				refused("line without spares", cuda.train_line(state, 0, 0, coef, &err), &err);
		else
			ok = refused("combine into vector 5",
						cuda.train_combine(state, 5, 1.0, 0, 0.0, 0, &err), &err) &&
				refused("combine of vector -1",
						cuda.train_combine(state, 1, 1.0, -1, 0.0, 0, &err), &err) &&
				refused("dot with vector 5", cuda.train_dot(state, 0, 5, &v, &err), &err) &&
				refused("line from vector -1", cuda.train_line(state, -1, 1, coef, &err), &err);
		cuda.train_end(state, NULL, NULL, &err);
	}
	free_csr(&R);
	free_csr(&Rt);
	free(X);
	free(Y);
	return ok;
}

/* Users from first, every stride, whose ratings overflow. */
typedef struct NonFinite
{
	Shape		shape;
	int64_t		first;
	int64_t		stride;
} NonFinite;

/*
 * Ratings of 1e38 make the first residual of a few users overflow, as
 * src/core's CG finds: the iteration must fail as not finite, naming the
 * lowest of those users whatever order the engine's blocks run in, among
 * short rows and among rows long enough to be split across blocks.
 */
static int
check_nonfinite(const void *arg)
{
	const NonFinite *nf = arg;
	const Shape shape = nf->shape;
	WalsParams	params = shape_params(&shape, WALS_CG, 0);
	int			f = shape.factors;
	WalsCsr		R;
	WalsCsr		Rt;
	float	   *X = malloc(sizeof(float) * shape.users * f);
	float	   *Y = malloc(sizeof(float) * shape.items * f);
	float	   *GY = calloc((size_t) f * f, sizeof(float));
	float	   *scratch;
	WalsCudaProblem problem;
	void	   *state = NULL;
	WalsCudaError err = {0};
	int64_t		bad = -1;
	double		loss = 0.0;
	int			ok = 1;

	make_data(&shape, &R, &Rt);
	for (int64_t u = nf->first; u < R.nrows; u += nf->stride)
		for (int64_t k = R.indptr[u]; k < R.indptr[u + 1]; k++)
			R.values[k] = 1e38f;
	wals_csr_transpose(&R, &Rt);
	scratch = malloc(sizeof(float) * (wals_solve_scratch(&params, R.indptr[R.nrows]) + 1));
	start_factors(X, shape.users, Y, shape.items, f);
	make_problem(&params, &R, &Rt, X, Y, 0, &problem);
	if (cuda.train_begin(&problem, &state, &err) != 0)
	{
		say("FAIL %s: train_begin: %s\n", shape.name, err.msg);
		ok = 0;
	}
	else
	{
		wals_gram_rows(Y, 0, shape.items, f, GY);
		if (wals_solve_rows(&params, &R, Y, GY, X, 0, R.nrows, scratch, &bad) != WALS_ENONFINITE)
		{
			say("FAIL %s: src/core found no row that is not finite\n", shape.name);
			ok = 0;
		}
		else if (cuda.train_iterate(state, &loss, &err) == 0)
		{
			say("FAIL %s: the iteration succeeded\n", shape.name);
			ok = 0;
		}
		else if (err.code != WALS_CUDA_ENONFINITE || err.side != WALS_CUDA_USERS ||
				 err.row != bad)
		{
			say("FAIL %s: failure %d of side %d, row %lld (\"%s\"); expected user row %lld "
				"as not finite\n", shape.name, err.code, err.side, (long long) err.row,
				err.msg, (long long) bad);
			ok = 0;
		}
		cuda.train_end(state, NULL, NULL, &err);
	}
	free_csr(&R);
	free_csr(&Rt);
	free(X);
	free(Y);
	free(GY);
	free(scratch);
	return ok;
}

/* One run of check_shape, check_ops or check_indefinite. */
typedef struct ShapeRun
{
	const Shape *shape;
	WalsSolver	solver;
	int			block_size;
} ShapeRun;

static int
run_shape(const void *arg)
{
	const ShapeRun *r = arg;

	return check_shape(r->shape, r->solver, r->block_size);
}

static int
run_ops(const void *arg)
{
	return check_ops(((const ShapeRun *) arg)->shape);
}

static int
run_indefinite(const void *arg)
{
	const ShapeRun *r = arg;

	return check_indefinite(r->solver, r->block_size);
}

/*
 * Whether the engine of path is one to check: skipped (exit 0, with the
 * closing line) where it was not built or where the machine has no GPU,
 * and a failure where it does not load or CUDA is there but broken.
 */
static int
engine_usable(const char *path, void **handle)
{
	WalsCudaInit init;
	char		msg[512] = "";
	int			devices;

	if (access(path, R_OK) != 0)
	{
		printf("check_train: skipped: %s was not built\n", path);
		return 0;
	}
	*handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	init = *handle ? (WalsCudaInit) dlsym(*handle, "wals_cuda_init") : NULL;
	if (init == NULL || init(&cuda) != 0 || cuda.abi_version != WALS_CUDA_ABI_VERSION)
	{
		printf("FAIL cannot load %s: %s\n", path,
			   *handle ? "not a CUDA engine of this version" : dlerror());
		n_failed++;
		return 0;
	}
	devices = cuda.device_count(msg, sizeof(msg));
	switch (devices_verdict(devices))
	{
		case DEVICES_RUN:
			return 1;
		case DEVICES_SKIP:
			printf("check_train: skipped: no GPU on this machine (%s)\n", msg);
			return 0;
		case DEVICES_BROKEN:
			printf("FAIL CUDA cannot be used: %s\n", msg);
			n_failed++;
			return 0;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const Shape shapes[] = {
		{"implicit f=64", WALS_IMPLICIT, 1.0f, 3000, 800, 60000, 64, 5, -1.0f, 0.0f, 0.0f},
		{"explicit f=32", WALS_EXPLICIT, 0.0f, 3000, 800, 60000, 32, 5, -1.0f, 0.0f, 0.0f},
		{"unobserved weight 0.3, f=17", WALS_IMPLICIT, 0.3f, 2000, 500, 30000, 17, 5, -1.0f,
		0.0f, 0.0f},
		{"one user", WALS_IMPLICIT, 1.0f, 1, 50, 30, 8, 5, -1.0f, 1.0f, 0.0f},
		{"f=1", WALS_IMPLICIT, 1.0f, 500, 100, 3000, 1, 5, -1.0f, 0.0f, 0.0f},
		/* a third of the ratings negative, repeated pairs summing to either sign */
		{"dislikes, f=16", WALS_IMPLICIT, 1.0f, 1000, 300, 15000, 16, 5, -1.0f, 0.0f, 0.3f},
		{"f=256, users without ratings", WALS_IMPLICIT, 1.0f, 400, 300, 2000, 256, 5, -1.0f,
		1.0f, 0.0f},
		{"explicit f=100", WALS_EXPLICIT, 0.0f, 600, 400, 12000, 100, 5, -1.0f, 0.0f, 0.0f},
		{"f=1024", WALS_IMPLICIT, 1.0f, 60, 40, 600, 1024, 5, -1.0f, 1.0f, 0.0f},
		{"f=4096", WALS_IMPLICIT, 1.0f, 4, 3, 10, 4096, 2, -1.0f, 0.0f, 0.0f},
		{"frequency-scaled, nu=1, w0 0.05, f=32", WALS_IMPLICIT, 0.05f, 2000, 500, 30000, 32, 5,
		1.0f, 0.0f, 0.0f},
		{"frequency-scaled explicit, nu=0.5, f=16", WALS_EXPLICIT, 0.0f, 1500, 400, 20000, 16, 5,
		0.5f, 0.0f, 0.0f},
		/* users 0 to 4 rate 2058 to 5516 of its 10000 items: up to three blocks a row */
		{"users of more than 2048 ratings, f=16", WALS_IMPLICIT, 1.0f, 40, 10000, 80000, 16, 5,
		-1.0f, 1.0f, 0.0f},
	};
	/*
	 * The second's users 0 to 5 rate 2100 to 7100 items, rows split across
	 * blocks; 6 to 9, fewer.
	 */
	static const NonFinite nonfinite[] = {
		{{"non-finite", WALS_IMPLICIT, 1.0f, 300, 100, 3000, 16, 1, -1.0f, 0.0f, 0.0f}, 5, 37},
		{{"non-finite, long rows", WALS_IMPLICIT, 1.0f, 10, 20000, 40000, 16, 1, -1.0f, 0.0f, 0.0f},
		1, 1},
	};
	static ShapeRun runs[sizeof(shapes) / sizeof(shapes[0]) * 4 + 2];
	int			nruns = 0;
	void	   *handle = NULL;
	EmuSet		emu_set;
	EmuGet		emu_get;

	if (argc != 2)
	{
		fprintf(stderr, "usage: check_train PATH_TO_wals_cuda.so\n");
		return 2;
	}
	if (!engine_usable(argv[1], &handle))
	{
		printf("%d passed, %d failed\n", n_passed, n_failed);
		return n_failed > 0;
	}
	emu_set = (EmuSet) dlsym(handle, "wals_emu_set");
	emu_get = (EmuGet) dlsym(handle, "wals_emu_get");
	emulated = emu_set != NULL && emu_get != NULL;
	host_stand_in = dlsym(handle, "wals_host_engine") != NULL;
	if (emulated)
	{
		jobs = 2;
		most_iterations = 2;
	}
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
	{
		const Shape *shape = &shapes[s];
		int			f = shape->factors;

		/*
		 * The emulation runs f = 4096 only with CG and the subspace solver
		 * (whose blocks of 1366 take the unbatched factorization): its f x f
		 * passes read columns, coalesced on a device and a cache miss each
		 * on the host, and the Cholesky solve and the line there would take
		 * half of its minute.
		 */
		bool		host_bound = emulated && f > 1024;

		/*
		 * The host stand-in solves with src/core itself: past f = 1024,
		 * where only a device's factorization changes, it would compare
		 * src/core with src/core for half of its run.
		 */
		if (host_stand_in && f > 1024)
			continue;

		/*
		 * Whether a shape is well posed is a fact of src/core on the CPU,
		 * which the emulation's run would only repeat: make test runs it
		 * against the host stand-in beside it (gpu-check).
		 */
		if (f <= 1024 && !emulated)
			run_check(check_posed, shape);
		runs[nruns] = (ShapeRun) {shape, WALS_CG, 0};
		run_check(run_shape, &runs[nruns++]);
		if (!host_bound)
		{
			runs[nruns] = (ShapeRun) {shape, WALS_CHOLESKY, 0};
			run_check(run_shape, &runs[nruns++]);
		}

		/*
		 * One block is the Cholesky solve, on the GPU the same batches
		 * (checked where it is cheap on the host); then three blocks, the
		 * last one shorter, past 1024 unknowns one factorization each.
		 */
		if (f <= 256)
		{
			runs[nruns] = (ShapeRun) {shape, WALS_SUBSPACE, f};
			run_check(run_shape, &runs[nruns++]);
		}
		if (f > 1)
		{
			runs[nruns] = (ShapeRun) {shape, WALS_SUBSPACE, (f + 2) / 3};
			run_check(run_shape, &runs[nruns++]);
		}
		if (!host_bound)
			run_check(run_ops, &runs[nruns - 1]);
	}
	runs[nruns] = (ShapeRun) {NULL, WALS_CHOLESKY, 0};
	run_check(run_indefinite, &runs[nruns++]);
	runs[nruns] = (ShapeRun) {NULL, WALS_SUBSPACE, 3};
	run_check(run_indefinite, &runs[nruns++]);
	run_check(check_refusals, NULL);
	run_check(check_nonfinite, &nonfinite[0]);
	run_check(check_nonfinite, &nonfinite[1]);
	if (emulated)
		emu_checks(emu_set, emu_get);
	while (running_jobs > 0)
		reap_one();
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed > 0;
}
