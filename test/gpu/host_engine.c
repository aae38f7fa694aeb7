/*
 * host_engine.c
 *	  A stand-in for wals_cuda.so that runs on the host, so that the
 *	  server's side of the GPU engine is tested where no GPU exists: the
 *	  choice of device, the hand-over of the problem, cancels and errors
 *	  between iterations, and the release of device memory after each.
 *
 * It fills the table of gpu/wals_cuda.h with the solvers of src/core and
 * reports one device whose free memory drops by what live trainings hold.
 * Environment variables of the server steer it:
 *	  WALS_HOST_ENGINE_MEMORY	device memory in bytes (default 1 GiB)
 *	  WALS_HOST_ENGINE_DELAY_MS	time each iteration takes at least
 *	  WALS_HOST_ENGINE_FAIL_AT	the iteration (from 1) that fails
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wals_core.h"
#include "wals_cuda.h"

typedef struct HostTraining
{
	WalsParams	params;
	WalsCsr		R;
	WalsCsr		Rt;
	float	   *X;
	float	   *Y;
	float	   *GX;
	float	   *GY;
	float	   *scratch;
	size_t		bytes;
	int			iteration;
} HostTraining;

/* What live trainings of this process hold of the "device". */
static size_t held;

static size_t
env_size(const char *name, size_t otherwise)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? (size_t) strtoull(v, NULL, 10) : otherwise;
}

static size_t
memory_total(void)
{
	return env_size("WALS_HOST_ENGINE_MEMORY", (size_t) 1 << 30);
}

static int
host_device_count(char *msg, size_t msglen)
{
	return 1;
}

static int
host_device_info(int index, WalsCudaDevice *out, char *msg, size_t msglen)
{
	if (index != 0)
	{
		snprintf(msg, msglen, "no device %d", index);
		return -1;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "wals host engine (test double)");
	out->memory_total = memory_total();
	out->memory_free = out->memory_total - held;
	out->cc_major = 9;
	out->cc_minor = 0;
	out->driver_version = 13000;
	out->runtime_version = 13000;
	return 0;
}

/* Copy n elements of size bytes each into a new buffer, counting them. */
static void *
upload(HostTraining *t, const void *src, size_t n, size_t size)
{
	void	   *dst = malloc(n * size + 1);

	if (dst != NULL && src != NULL)
		memcpy(dst, src, n * size);
	t->bytes += n * size;
	return dst;
}

static void
upload_csr(HostTraining *t, WalsCsr *dst, int64_t nrows, int64_t ncols,
		   const int64_t *indptr, const int32_t *indices, const float *values)
{
	size_t		nnz = (size_t) indptr[nrows];

	dst->nrows = nrows;
	dst->ncols = ncols;
	dst->indptr = upload(t, indptr, nrows + 1, sizeof(int64_t));
	dst->indices = upload(t, indices, nnz, sizeof(int32_t));
	dst->values = upload(t, values, nnz, sizeof(float));
}

static void
release(HostTraining *t)
{
	free(t->R.indptr);
	free(t->R.indices);
	free(t->R.values);
	free(t->Rt.indptr);
	free(t->Rt.indices);
	free(t->Rt.values);
	free(t->X);
	free(t->Y);
	free(t->GX);
	free(t->GY);
	free(t->scratch);
	held -= t->bytes;
	free(t);
}

/* Fill err as the CUDA engine would; returns its code. */
static int
failed(WalsCudaError *err, int code, int side, int64_t row, const char *why)
{
	err->code = code;
	err->side = side;
	err->row = row;
	snprintf(err->msg, sizeof(err->msg), "%s", why);
	return code;
}

static int
host_train_begin(const WalsCudaProblem *p, void **state, WalsCudaError *err)
{
	HostTraining *t = calloc(1, sizeof(HostTraining));
	size_t		f = (size_t) p->factors;
	int64_t		nnz = p->user_indptr[p->nusers];

	if (t == NULL)
		return failed(err, WALS_CUDA_ENOMEM, -1, -1, "out of host memory");
	t->params.feedback = p->feedback == 1 ? WALS_EXPLICIT : WALS_IMPLICIT;
	t->params.solver = p->solver == WALS_CUDA_CG ? WALS_CG : WALS_CHOLESKY;
	t->params.factors = p->factors;
	t->params.cg_steps = p->cg_steps;
	t->params.regularization = p->regularization;
	t->params.alpha = p->alpha;
	t->params.w0 = p->w0;

	upload_csr(t, &t->R, p->nusers, p->nitems, p->user_indptr, p->user_indices, p->user_values);
	upload_csr(t, &t->Rt, p->nitems, p->nusers, p->item_indptr, p->item_indices, p->item_values);
	t->X = upload(t, p->X, p->nusers * f, sizeof(float));
	t->Y = upload(t, p->Y, p->nitems * f, sizeof(float));
	t->GX = upload(t, NULL, f * f, sizeof(float));
	t->GY = upload(t, NULL, f * f, sizeof(float));
	t->scratch = upload(t, NULL, wals_solve_scratch(&t->params, nnz), sizeof(float));
	held += t->bytes;
	if (held > memory_total())
	{
		char		why[160];

		snprintf(why, sizeof(why), "out of device memory: the training needs %zu bytes, %zu are free",
				 t->bytes, memory_total() - (held - t->bytes));
		release(t);
		return failed(err, WALS_CUDA_ENOMEM, -1, -1, why);
	}
	*state = t;
	return 0;
}

static void
pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int
host_train_iterate(void *state, double *loss, WalsCudaError *err)
{
	HostTraining *t = state;
	int			f = t->params.factors;
	int64_t		bad = -1;
	int			side = WALS_CUDA_USERS;
	WalsStatus	st;

	t->iteration++;
	pause_ms((long) env_size("WALS_HOST_ENGINE_DELAY_MS", 0));
	if ((int) env_size("WALS_HOST_ENGINE_FAIL_AT", 0) == t->iteration)
	{
		char		why[64];

		snprintf(why, sizeof(why), "injected failure in iteration %d", t->iteration);
		return failed(err, WALS_CUDA_EDEVICE, -1, -1, why);
	}

	memset(t->GY, 0, sizeof(float) * f * f);
	wals_gram_rows(t->Y, 0, t->Rt.nrows, f, t->GY);
	st = wals_solve_rows(&t->params, &t->R, t->Y, t->GY, t->X, 0, t->R.nrows, t->scratch, &bad);
	if (st == WALS_OK)
	{
		memset(t->GX, 0, sizeof(float) * f * f);
		wals_gram_rows(t->X, 0, t->R.nrows, f, t->GX);
		side = WALS_CUDA_ITEMS;
		st = wals_solve_rows(&t->params, &t->Rt, t->X, t->GX, t->Y, 0, t->Rt.nrows,
							 t->scratch, &bad);
	}
	if (st != WALS_OK)
		return failed(err, st == WALS_ESINGULAR ? WALS_CUDA_ESINGULAR :
					  st == WALS_ENONFINITE ? WALS_CUDA_ENONFINITE : WALS_CUDA_EINVAL,
					  side, bad, wals_status_string(st));
	memset(t->GY, 0, sizeof(float) * f * f);
	wals_gram_rows(t->Y, 0, t->Rt.nrows, f, t->GY);
	*loss = wals_loss_unobserved(&t->params, t->GX, t->GY) +
		wals_loss_rows(&t->params, &t->R, t->X, t->Y, 0, t->R.nrows) +
		wals_reg_rows(&t->params, &t->Rt, t->Y, 0, t->Rt.nrows);
	return 0;
}

static int
host_train_end(void *state, float *X, float *Y, WalsCudaError *err)
{
	HostTraining *t = state;

	if (t == NULL)
		return 0;
	if (X != NULL)
		memcpy(X, t->X, sizeof(float) * t->R.nrows * t->params.factors);
	if (Y != NULL)
		memcpy(Y, t->Y, sizeof(float) * t->Rt.nrows * t->params.factors);
	release(t);
	return 0;
}

__attribute__((visibility("default"))) int
wals_cuda_init(WalsCudaApi *api)
{
	if (api == NULL)
		return -1;
	api->abi_version = WALS_CUDA_ABI_VERSION;
	api->device_count = host_device_count;
	api->device_info = host_device_info;
	api->train_begin = host_train_begin;
	api->train_iterate = host_train_iterate;
	api->train_end = host_train_end;
	return 0;
}
