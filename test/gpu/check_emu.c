/*
 * check_emu.c
 *	  The checks that only the emulated device of test/gpu/emu allows,
 *	  run by check_train against test/gpu/wals_cuda_emu.so: that the
 *	  emulation is honest (a barrier or a shuffle that does not wait makes
 *	  check_shape fail), that the warps' reads of the Gram in the CG kernel
 *	  coalesce, that listing the devices leaves the current one and no
 *	  context behind, that a machine without a GPU is told from a broken
 *	  CUDA, that CUDA's, cuBLAS's and cuSOLVER's own words reach the
 *	  message, and faults: every allocation, launch, cuBLAS and cuSOLVER
 *	  call of a training failing in turn, each ending the training with the
 *	  kind of failure the server maps to its SQLSTATE and nothing left on
 *	  the device; and a training whose ratings do not fit on the device,
 *	  which reads them from host memory.
 *
 * Each check turns the knobs it needs in its own child process (see
 * run_check), so none outlives it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_train.h"

static EmuSet set;
static EmuGet get;

/* Small enough for a few hundred trainings; w0 1, so the Gram is read. */
static const Shape small = {"emulation", WALS_IMPLICIT, 1.0f, 300, 100, 3000, 16, 1, -1.0f, 0.0f,
0.0f};
static const Shape tiny = {"faults", WALS_IMPLICIT, 1.0f, 40, 20, 300, 8, 2, -1.0f, 0.0f, 0.0f};

/*
 * A barrier or a shuffle that lets threads on before the others arrive
 * must make the comparison with src/core fail, or the emulation could hide
 * a kernel's missing barrier.
 */
static int
check_broken(const void *arg)
{
	const char *knob = arg;
	int			ok;

	set(knob, 1);
	quiet = 1;
	ok = check_shape(&small, WALS_CG, 0) && check_shape(&small, WALS_CHOLESKY, 0);
	quiet = 0;
	if (ok)
		say("FAIL emulation: with %s the kernels still agree with src/core\n", knob);
	return !ok;
}

/* Every load of the Gram by the CG sweeps is one transaction per warp. */
static int
check_coalesced(const void *unused)
{
	long		traced;
	long		scattered;

	(void) unused;
	set("trace_loads", 1);
	if (!check_shape(&small, WALS_CG, 0))
		return 0;
	traced = get("traced_loads", 0);
	scattered = get("uncoalesced_loads", 0);
	if (traced > 0 && scattered == 0)
		return 1;
	say("FAIL emulation: %ld of the %ld loads of the Gram by a warp span more than 128 bytes\n",
		scattered, traced);
	return 0;
}

/* A training of shape from its seeded factors; 0, or the code of err. */
static int
begin(const Shape *shape, WalsSolver solver, int block_size, int device, int vectors,
	  WalsCsr *R, WalsCsr *Rt, float **X, float **Y, void **state, WalsCudaError *err)
{
	WalsParams	params = shape_params(shape, solver, block_size);
	WalsCudaProblem problem;

	make_data(shape, R, Rt);
	*X = malloc(sizeof(float) * shape->users * shape->factors);
	*Y = malloc(sizeof(float) * shape->items * shape->factors);
	start_factors(*X, shape->users, *Y, shape->items, shape->factors);
	make_problem(&params, R, Rt, *X, *Y, vectors, &problem);
	problem.device = device;
	*state = NULL;
	return cuda.train_begin(&problem, state, err);
}

static void
done(WalsCsr *R, WalsCsr *Rt, float *X, float *Y)
{
	free_csr(R);
	free_csr(Rt);
	free(X);
	free(Y);
}

/*
 * Listing the second of two devices leaves the first current and no
 * context on the second; a training runs on the device its problem names.
 */
static int
check_devices(const void *unused)
{
	WalsCudaDevice dev;
	WalsCudaError err = {0};
	char		msg[512] = "";
	WalsCsr		R;
	WalsCsr		Rt;
	float	   *X;
	float	   *Y;
	void	   *state;
	int			ok = 1;

	(void) unused;
	set("devices", 2);
	if (cuda.device_info(1, &dev, msg, sizeof(msg)) != 0)
	{
		say("FAIL devices: the second device: %s\n", msg);
		return 0;
	}
	if (get("current_device", 0) != 0 || get("context", 1) != 0)
	{
		say("FAIL devices: listing device 1 left device %ld current and %s context on it\n",
			get("current_device", 0), get("context", 1) ? "a" : "no");
		ok = 0;
	}
	for (int device = 1; device >= 0 && ok; device--)
	{
		if (begin(&tiny, WALS_CG, 0, device, 0, &R, &Rt, &X, &Y, &state, &err) != 0)
		{
			say("FAIL devices: train_begin on device %d: %s\n", device, err.msg);
			ok = 0;
		}
		else if (get("live_bytes", device) == 0 || get("live_bytes", 1 - device) != 0)
		{
			say("FAIL devices: a training on device %d holds %ld bytes there and %ld on "
				"device %d\n", device, get("live_bytes", device),
				get("live_bytes", 1 - device), 1 - device);
			ok = 0;
		}
		cuda.train_end(state, NULL, NULL, &err);
		done(&R, &Rt, X, Y);
	}
	return ok;
}

/* What device_count says, and what check_train makes of it, in one state. */
static int
counted(const char *state, int want, DevicesVerdict verdict, const char *words)
{
	char		msg[512] = "";
	int			n = cuda.device_count(msg, sizeof(msg));

	if (n == want && devices_verdict(n) == verdict && strstr(msg, words) != NULL)
		return 1;
	say("FAIL device count with %s: %d (\"%s\"), check_train would %s; expected %d and "
		"\"%s\", and to %s\n", state, n, msg,
		devices_verdict(n) == DEVICES_RUN ? "run" :
		devices_verdict(n) == DEVICES_SKIP ? "skip" : "fail",
		want, words, verdict == DEVICES_SKIP ? "skip" : "fail");
	return 0;
}

/*
 * No driver and no device are a machine without a GPU, which may skip; a
 * driver too old is a broken CUDA, which fails, and says so.
 */
static int
check_verdicts(const void *unused)
{
	int			ok;

	(void) unused;
	set("driver", 0);
	ok = counted("no driver", 0, DEVICES_SKIP, "no NVIDIA driver is installed");
	set("driver", 2);
	ok &= counted("an old driver", -1, DEVICES_BROKEN, "driver is too old");
	set("driver", 1);
	set("devices", 0);
	ok &= counted("no device", 0, DEVICES_SKIP, "no CUDA device");
	return ok;
}

/* Whether a failed call's message has words in it. */
static int
worded(const char *what, int rc, const char *msg, const char *words)
{
	if (rc != 0 && strstr(msg, words) != NULL)
		return 1;
	say("FAIL %s gave %d (\"%s\"), not a failure saying \"%s\"\n", what, rc, msg, words);
	return 0;
}

/*
 * A failing memory query is an error, not 0 bytes free; cuBLAS's and
 * cuSOLVER's statuses reach the message.
 */
static int
check_words(const void *unused)
{
	WalsCudaDevice dev;
	WalsCudaError err = {0};
	char		msg[512] = "";
	WalsCsr		R;
	WalsCsr		Rt;
	float	   *X;
	float	   *Y;
	void	   *state;
	double		loss;
	int			ok;
	int			rc;

	(void) unused;
	set("fail_meminfo", 1);
	ok = worded("device_info with the memory query failing",
				cuda.device_info(0, &dev, msg, sizeof(msg)), msg, "busy or unavailable");
	rc = begin(&tiny, WALS_CG, 0, 0, 0, &R, &Rt, &X, &Y, &state, &err);
	ok &= worded("train_begin with the memory query failing", rc, err.msg,
				 "busy or unavailable") && err.code == WALS_CUDA_EDEVICE;
	cuda.train_end(state, NULL, NULL, &err);
	done(&R, &Rt, X, Y);
	set("fail_meminfo", 0);

	set("fail_blas_at", 2);
	if (begin(&tiny, WALS_CG, 0, 0, 0, &R, &Rt, &X, &Y, &state, &err) == 0)
		ok &= worded("a failing cuBLAS product", cuda.train_iterate(state, &loss, &err),
					 err.msg, "CUBLAS_STATUS_EXECUTION_FAILED");
	else
		ok = 0;
	cuda.train_end(state, NULL, NULL, &err);
	done(&R, &Rt, X, Y);

	set("fail_solver_at", 1);
	ok &= worded("a failing cuSOLVER start",
				 begin(&tiny, WALS_CHOLESKY, 0, 0, 0, &R, &Rt, &X, &Y, &state, &err),
				 err.msg, "CUSOLVER_STATUS_NOT_INITIALIZED");
	done(&R, &Rt, X, Y);
	set("fail_solver_at", 2);
	if (begin(&tiny, WALS_CHOLESKY, 0, 0, 0, &R, &Rt, &X, &Y, &state, &err) == 0)
		ok &= worded("a failing factorization", cuda.train_iterate(state, &loss, &err),
					 err.msg, "CUSOLVER_STATUS_EXECUTION_FAILED");
	else
		ok = 0;
	cuda.train_end(state, NULL, NULL, &err);
	done(&R, &Rt, X, Y);
	return ok;
}

/*
 * A whole accelerated training of tiny: begin, its iterations, each
 * operation, a download and the end; the first failure's code, or 0.
 */
static int
train_all(WalsSolver solver, int block_size, WalsCudaError *err)
{
	WalsCsr		R;
	WalsCsr		Rt;
	float	   *X;
	float	   *Y;
	void	   *state;
	double		loss;
	double		coef[WALS_CUDA_LINE_TERMS];
	int			rc = begin(&tiny, solver, block_size, 0, WALS_CUDA_MAX_VECTORS, &R, &Rt, &X,
						   &Y, &state, err);

	for (int it = 0; rc == 0 && it < tiny.iterations; it++)
		rc = cuda.train_iterate(state, &loss, err);
	if (rc == 0)
		rc = cuda.train_combine(state, 1, 1.0, 0, 0.0, 0, err);
	if (rc == 0)
		rc = cuda.train_dot(state, 0, 1, &loss, err);
	if (rc == 0)
		rc = cuda.train_line(state, 0, 1, coef, err);
	if (rc == 0)
		rc = cuda.train_download(state, X, Y, err);
	if (rc == 0)
		rc = cuda.train_end(state, X, Y, err);
	else if (state != NULL)
		cuda.train_end(state, NULL, NULL, err);
	done(&R, &Rt, X, Y);
	return rc;
}

/* The faults of one knob, each call in turn; see check_faults. */
static int
faults_of(const char *knob, int code, WalsSolver solver, int block_size)
{
	int			ok = 1;

	for (long at = 1; ok; at++)
	{
		WalsCudaError err = {0};
		int			rc;

		set(knob, at);
		rc = train_all(solver, block_size, &err);
		if (set(knob, 0) != 0)
		{
			if (rc != 0)
			{
				say("FAIL faults: with no %s failing, the training failed: %s\n", knob,
					err.msg);
				ok = 0;
			}
			return ok;
		}
		if (rc == 0 || err.code != code || err.side != -1 || err.row != -1)
		{
			say("FAIL faults: %s %ld (solver %d): %d, side %d, row %lld (\"%s\"); expected "
				"failure %d of no row\n", knob, at, (int) solver, rc, err.side,
				(long long) err.row, err.msg, code);
			ok = 0;
		}
		if (get("live_bytes", 0) != 0)
		{
			say("FAIL faults: %s %ld (solver %d) left %ld bytes on the device\n", knob, at,
				(int) solver, get("live_bytes", 0));
			ok = 0;
		}
	}
	return ok;
}

/*
 * Every allocation, kernel launch, cuBLAS and cuSOLVER call of a training
 * with each solver fails in turn: the training ends with the kind of the
 * failure (out of memory for an allocation, a device failure otherwise),
 * naming no row, and the device holds nothing after train_end.
 */
static int
check_faults(const void *unused)
{
	static const struct
	{
		WalsSolver	solver;
		int			block_size;
	}			solvers[] = {{WALS_CG, 0}, {WALS_CHOLESKY, 0}, {WALS_SUBSPACE, 3}};
	int			ok = 1;

	(void) unused;
	for (size_t s = 0; s < sizeof(solvers) / sizeof(solvers[0]); s++)
	{
		WalsSolver	solver = solvers[s].solver;
		int			b = solvers[s].block_size;

		ok &= faults_of("fail_malloc_at", WALS_CUDA_ENOMEM, solver, b);
		ok &= faults_of("fail_launch_at", WALS_CUDA_EDEVICE, solver, b);
		ok &= faults_of("fail_blas_at", WALS_CUDA_EDEVICE, solver, b);
		if (solver != WALS_CG)
			ok &= faults_of("fail_solver_at", WALS_CUDA_EDEVICE, solver, b);
	}
	return ok;
}

/*
 * Begin a training of shape on a device of memory bytes, its cells allowed
 * in host memory where map; *on_host says where they went and *pinned how
 * many bytes of host memory the training holds pinned.  The training is
 * ended; its code, or 0.
 */
static int
begin_in(long memory, bool map, const Shape *shape, int *on_host, long *pinned,
		 WalsCudaError *err)
{
	WalsParams	params = shape_params(shape, WALS_CG, 0);
	WalsCudaProblem problem;
	WalsCsr		R;
	WalsCsr		Rt;
	float	   *X = malloc(sizeof(float) * shape->users * shape->factors);
	float	   *Y = malloc(sizeof(float) * shape->items * shape->factors);
	void	   *state = NULL;
	int			rc;

	make_data(shape, &R, &Rt);
	start_factors(X, shape->users, Y, shape->items, shape->factors);
	make_problem(&params, &R, &Rt, X, Y, 0, &problem);
	problem.may_map_cells = map;
	set("memory", memory);
	rc = cuda.train_begin(&problem, &state, err);
	*on_host = rc == 0 ? cuda.train_cells_on_host(state) : -1;
	*pinned = get("registered_bytes", 0);
	if (state != NULL)
		cuda.train_end(state, NULL, NULL, err);
	done(&R, &Rt, X, Y);
	return rc;
}

/* The least device memory a training of shape begins in, map as begin_in. */
static long
least_memory(bool map, const Shape *shape)
{
	long		lo = 0;
	long		hi = 1L << 31;
	int			on_host;
	long		pinned;

	while (hi - lo > 1)
	{
		long		mid = lo + (hi - lo) / 2;
		WalsCudaError err = {0};

		if (begin_in(mid, map, shape, &on_host, &pinned, &err) == 0)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/*
 * A training whose cells do not fit on the device beside the rest of it,
 * and may stay in host memory, reads them there, pinned where they lie:
 * it begins in as much less device memory as its cells take, its losses
 * are src/core's with each solver (rows split across blocks among them),
 * it holds pinned just its cells while it lives and nothing after; one
 * whose cells may not stay there, or whose rest does not fit either, is
 * out of memory, saying so; a registration that fails ends the training
 * as an allocation would, nothing left pinned.
 */
static int
check_cells_on_host(const void *unused)
{
	/* users 0 to 4 rate more than 2048 items */
	static const Shape shape = {"cells on host", WALS_IMPLICIT, 1.0f, 40, 10000, 80000, 16, 2,
	-1.0f, 1.0f, 0.0f};
	WalsCsr		R;
	WalsCsr		Rt;
	WalsCudaError err = {0};
	long		full = least_memory(false, &shape);
	long		rest = least_memory(true, &shape);
	long		cells;
	long		pinned;
	int			on_host;
	int			ok = 1;

	(void) unused;
	make_data(&shape, &R, &Rt);
	cells = 2 * (long) R.indptr[R.nrows] * (long) (sizeof(int32_t) + sizeof(float));
	free_csr(&R);
	free_csr(&Rt);
	if (full - rest != cells)
	{
		say("FAIL cells on host: the training begins in %ld bytes with its cells, %ld "
			"without, %ld apart; its cells take %ld\n", full, rest, full - rest, cells);
		ok = 0;
	}
	if (begin_in(full - 1, true, &shape, &on_host, &pinned, &err) != 0 || on_host != 1 ||
		pinned != cells)
	{
		say("FAIL cells on host: a byte short, on host %d with %ld bytes pinned (%ld cells): "
			"%s\n", on_host, pinned, cells, err.msg);
		ok = 0;
	}
	if (begin_in(full, true, &shape, &on_host, &pinned, &err) != 0 || on_host != 0 ||
		pinned != 0)
	{
		say("FAIL cells on host: with room for the cells, on host %d, %ld bytes pinned\n",
			on_host, pinned);
		ok = 0;
	}
	if (begin_in(full - 1, false, &shape, &on_host, &pinned, &err) != WALS_CUDA_ENOMEM)
	{
		say("FAIL cells on host: cells that may not stay on the host do not make it out of "
			"memory: %s\n", err.msg);
		ok = 0;
	}
	if (begin_in(rest - 1, true, &shape, &on_host, &pinned, &err) != WALS_CUDA_ENOMEM ||
		strstr(err.msg, "beside its ratings") == NULL)
	{
		say("FAIL cells on host: the rest a byte short: \"%s\"\n", err.msg);
		ok = 0;
	}
	for (long at = 1; at <= 4; at++)
	{
		int			rc;

		set("fail_malloc_at", at);
		rc = begin_in(full - 1, true, &shape, &on_host, &pinned, &err);
		set("fail_malloc_at", 0);
		if (rc != WALS_CUDA_ENOMEM || get("registered_bytes", 0) != 0 ||
			get("live_bytes", 0) != 0)
		{
			say("FAIL cells on host: allocation %ld failing: %d \"%s\", %ld bytes left "
				"pinned\n", at, rc, err.msg, get("registered_bytes", 0));
			ok = 0;
		}
	}

	set("memory", full - 1);
	ok &= check_shape(&shape, WALS_CG, 0);
	ok &= check_shape(&shape, WALS_CHOLESKY, 0);
	ok &= check_shape(&shape, WALS_SUBSPACE, 6);
	if (get("registered_bytes", 0) != 0 || get("live_bytes", 0) != 0)
	{
		say("FAIL cells on host: %ld bytes left pinned, %ld on the device\n",
			get("registered_bytes", 0), get("live_bytes", 0));
		ok = 0;
	}
	return ok;
}

void
emu_checks(EmuSet emu_set, EmuGet emu_get)
{
	set = emu_set;
	get = emu_get;
	run_check(check_broken, "break_barrier");
	run_check(check_broken, "break_shuffle");
	run_check(check_coalesced, NULL);
	run_check(check_devices, NULL);
	run_check(check_verdicts, NULL);
	run_check(check_words, NULL);
	run_check(check_faults, NULL);
	run_check(check_cells_on_host, NULL);
}
