/*
 * host_engine.c
 *	  A stand-in for wals_cuda.so that runs on the host, so that the
 *	  server's side of the GPU engine is tested where no GPU exists: the
 *	  choice of device, the hand-over of the problem, cancels and errors
 *	  between iterations, and the release of device memory after each.
 *
 * It fills the table of gpu/wals_cuda.h with the solvers of src/core, and
 * the operations of an accelerated training with its acceleration
 * functions (accel.c), and reports one device whose free memory drops by
 * what live trainings hold; as the CUDA engine, a training whose cells do
 * not fit beside the rest, and may be read from host memory, holds the
 * rest alone.
 * Environment variables of the server steer it:
 *	  WALS_HOST_ENGINE_MEMORY	device memory in bytes (default 1 GiB)
 *	  WALS_HOST_ENGINE_DELAY_MS	time each iteration takes at least
 *	  WALS_HOST_ENGINE_FAIL_AT	the iteration (from 1) that fails
 *	  WALS_HOST_ENGINE_CC		the device's compute capability (default 9.0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wals_core.h"
#include "wals_cuda.h"

/*
 * A training: as the CUDA engine, spare vector k (1 to vectors) holds the
 * user factors' part and then the item factors', and GX and GY are the
 * Grams of the factors between calls whenever there are spares.
 */
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
	int			vectors;
	float	   *V[WALS_CUDA_MAX_VECTORS + 1];
	float	   *grams;			/* with spares: the six f x f of a line */
	size_t		bytes;
	int			iteration;
	int			cells_on_host;
} HostTraining;

/* The line's quartic has as many terms in src/core as in the table. */
typedef char host_line_terms[WALS_LINE_TERMS == WALS_CUDA_LINE_TERMS ? 1 : -1];

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
	if (getenv("WALS_HOST_ENGINE_CC") != NULL)
		sscanf(getenv("WALS_HOST_ENGINE_CC"), "%d.%d", &out->cc_major, &out->cc_minor);
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
	for (int k = 1; k <= WALS_CUDA_MAX_VECTORS; k++)
		free(t->V[k]);
	free(t->grams);
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

/* G = Y^T Y over n rows. */
static void
gram(const float *Y, int64_t n, int f, float *G)
{
	memset(G, 0, sizeof(float) * f * f);
	wals_gram_rows(Y, 0, n, f, G);
}

static int
host_train_begin(const WalsCudaProblem *p, void **state, WalsCudaError *err)
{
	HostTraining *t;
	size_t		f = (size_t) p->factors;
	size_t		n = (size_t) (p->nusers + p->nitems) * f;
	int64_t		nnz = p->user_indptr[p->nusers];

	if (p->device != 0 || p->factors < 1 || p->factors > WALS_CUDA_MAX_FACTORS ||
		(p->solver != WALS_CUDA_CG && p->solver != WALS_CUDA_CHOLESKY &&
		 p->solver != WALS_CUDA_SUBSPACE) ||
		(p->solver == WALS_CUDA_SUBSPACE && p->block_size < 1) ||
		p->vectors < 0 || p->vectors > WALS_CUDA_MAX_VECTORS)
		return failed(err, WALS_CUDA_EINVAL, -1, -1, "a problem this engine cannot train");
	t = calloc(1, sizeof(HostTraining));
	if (t == NULL)
		return failed(err, WALS_CUDA_ENOMEM, -1, -1, "out of host memory");
	t->params.feedback = p->feedback == 1 ? WALS_EXPLICIT : WALS_IMPLICIT;
	t->params.solver = p->solver == WALS_CUDA_CG ? WALS_CG :
		p->solver == WALS_CUDA_SUBSPACE ? WALS_SUBSPACE : WALS_CHOLESKY;
	t->params.factors = p->factors;
	t->params.cg_steps = p->cg_steps;
	t->params.regularization = p->regularization;
	t->params.alpha = p->alpha;
	t->params.w0 = p->w0;
	t->params.frequency_scaled = p->frequency_scaled != 0;
	t->params.reg_exponent = p->reg_exponent;
	t->params.block_size = p->block_size;
	t->vectors = p->vectors;

	upload_csr(t, &t->R, p->nusers, p->nitems, p->user_indptr, p->user_indices, p->user_values);
	upload_csr(t, &t->Rt, p->nitems, p->nusers, p->item_indptr, p->item_indices, p->item_values);
	t->X = upload(t, p->X, p->nusers * f, sizeof(float));
	t->Y = upload(t, p->Y, p->nitems * f, sizeof(float));
	t->GX = upload(t, NULL, f * f, sizeof(float));
	t->GY = upload(t, NULL, f * f, sizeof(float));
	t->scratch = upload(t, NULL, wals_solve_scratch(&t->params, nnz), sizeof(float));
	for (int k = 1; k <= t->vectors; k++)
		t->V[k] = upload(t, NULL, n, sizeof(float));
	if (t->vectors > 0)
		t->grams = upload(t, NULL, 6 * f * f, sizeof(float));
	held += t->bytes;
	if (held > memory_total() && p->may_map_cells && nnz > 0)
	{
		size_t		cells = 2 * (size_t) nnz * (sizeof(int32_t) + sizeof(float));

		t->bytes -= cells;
		held -= cells;
		t->cells_on_host = 1;
	}
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

	gram(t->Y, t->Rt.nrows, f, t->GY);
	st = wals_solve_rows(&t->params, &t->R, t->Y, t->GY, t->X, 0, t->R.nrows, t->scratch, &bad);
	if (st == WALS_OK)
	{
		gram(t->X, t->R.nrows, f, t->GX);
		side = WALS_CUDA_ITEMS;
		st = wals_solve_rows(&t->params, &t->Rt, t->X, t->GX, t->Y, 0, t->Rt.nrows,
							 t->scratch, &bad);
	}
	if (st != WALS_OK)
		return failed(err, st == WALS_ESINGULAR ? WALS_CUDA_ESINGULAR :
					  st == WALS_ENONFINITE ? WALS_CUDA_ENONFINITE : WALS_CUDA_EINVAL,
					  side, bad, wals_status_string(st));
	gram(t->Y, t->Rt.nrows, f, t->GY);
	*loss = wals_loss_unobserved(&t->params, t->GX, t->GY) +
		wals_loss_rows(&t->params, &t->R, t->X, t->Y, 0, t->R.nrows) +
		wals_reg_rows(&t->params, &t->Rt, t->Y, 0, t->Rt.nrows);
	return 0;
}

/*
 * 0 when vector k is one the training keeps, the factors (0) to its last
 * spare; else WALS_CUDA_EINVAL, as the CUDA engine.
 */
static int
check_vector(const HostTraining *t, int k, WalsCudaError *err)
{
	char		why[96];

	if (t->vectors <= 0)
		return failed(err, WALS_CUDA_EINVAL, -1, -1, "the training keeps no spare vectors");
	if (k >= 0 && k <= t->vectors)
		return 0;
	snprintf(why, sizeof(why), "vector %d is not one of 0 to %d", k, t->vectors);
	return failed(err, WALS_CUDA_EINVAL, -1, -1, why);
}

/* The user and the item part of vector k. */
static float *
vec_x(HostTraining *t, int k)
{
	return k == 0 ? t->X : t->V[k];
}

static float *
vec_y(HostTraining *t, int k)
{
	return k == 0 ? t->Y : t->V[k] + t->R.nrows * t->params.factors;
}

/* dst = a x + b y in float, as the CUDA engine, not reading what a 0 scales. */
static void
combine_floats(float *dst, double a, const float *x, double b, const float *y, size_t n)
{
	float		fa = (float) a;
	float		fb = (float) b;

	for (size_t k = 0; k < n; k++)
	{
		float		v = 0.0f;

		if (a != 0.0)
			v += fa * x[k];
		if (b != 0.0)
			v += fb * y[k];
		dst[k] = v;
	}
}

static int
host_train_combine(void *state, int dst, double a, int x, double b, int y, WalsCudaError *err)
{
	HostTraining *t = state;
	int			f = t->params.factors;

	if (check_vector(t, dst, err) != 0 ||
		(a != 0.0 && check_vector(t, x, err) != 0) ||
		(b != 0.0 && check_vector(t, y, err) != 0))
		return err->code;
	combine_floats(vec_x(t, dst), a, a != 0.0 ? vec_x(t, x) : NULL,
				   b, b != 0.0 ? vec_x(t, y) : NULL, (size_t) t->R.nrows * f);
	combine_floats(vec_y(t, dst), a, a != 0.0 ? vec_y(t, x) : NULL,
				   b, b != 0.0 ? vec_y(t, y) : NULL, (size_t) t->Rt.nrows * f);
	return 0;
}

static int
host_train_dot(void *state, int x, int y, double *out, WalsCudaError *err)
{
	HostTraining *t = state;
	size_t		nx = (size_t) t->R.nrows * t->params.factors;
	size_t		ny = (size_t) t->Rt.nrows * t->params.factors;
	const float *xx;
	const float *yx;
	const float *xy;
	const float *yy;
	double		sum = 0.0;

	if (check_vector(t, x, err) != 0 || check_vector(t, y, err) != 0)
		return err->code;
	xx = vec_x(t, x);
	yx = vec_x(t, y);
	xy = vec_y(t, x);
	yy = vec_y(t, y);
	for (size_t k = 0; k < nx; k++)
		sum += (double) xx[k] * yx[k];
	for (size_t k = 0; k < ny; k++)
		sum += (double) xy[k] * yy[k];
	*out = sum;
	return 0;
}

static int
host_train_line(void *state, int base, int dir, double coef[WALS_CUDA_LINE_TERMS],
				WalsCudaError *err)
{
	HostTraining *t = state;
	const WalsParams *params = &t->params;
	int			f = params->factors;
	size_t		ff = (size_t) f * f;
	float	   *M = t->grams;
	int64_t		nu = t->R.nrows;
	int64_t		ni = t->Rt.nrows;

	if (check_vector(t, base, err) != 0 || check_vector(t, dir, err) != 0)
		return err->code;
	memset(coef, 0, sizeof(double) * WALS_CUDA_LINE_TERMS);
	wals_line_rows(params, &t->R, vec_x(t, base), vec_x(t, dir), vec_y(t, base),
				   vec_y(t, dir), 0, nu, coef);
	wals_line_reg_rows(params, &t->Rt, vec_y(t, base), vec_y(t, dir), 0, ni, coef);
	memset(M, 0, sizeof(float) * 6 * ff);
	wals_gram_rows(vec_x(t, base), 0, nu, f, M);
	wals_cross_rows(vec_x(t, base), vec_x(t, dir), 0, nu, f, M + ff);
	wals_gram_rows(vec_x(t, dir), 0, nu, f, M + 2 * ff);
	wals_gram_rows(vec_y(t, base), 0, ni, f, M + 3 * ff);
	wals_cross_rows(vec_y(t, base), vec_y(t, dir), 0, ni, f, M + 4 * ff);
	wals_gram_rows(vec_y(t, dir), 0, ni, f, M + 5 * ff);
	wals_line_unobserved(params, M, M + ff, M + 2 * ff, M + 3 * ff, M + 4 * ff, M + 5 * ff,
						 coef);
	return 0;
}

static int
host_train_download(void *state, float *X, float *Y, WalsCudaError *err)
{
	HostTraining *t = state;

	memcpy(X, t->X, sizeof(float) * t->R.nrows * t->params.factors);
	memcpy(Y, t->Y, sizeof(float) * t->Rt.nrows * t->params.factors);
	return 0;
}

static int
host_train_cells_on_host(void *state)
{
	return ((HostTraining *) state)->cells_on_host;
}

static int
host_train_end(void *state, float *X, float *Y, WalsCudaError *err)
{
	HostTraining *t = state;

	if (t == NULL)
		return 0;
	if (X != NULL && Y != NULL)
		host_train_download(state, X, Y, err);
	release(t);
	return 0;
}

/*
 * Marks the stand-in for check_train, which compares an engine with
 * src/core: here the two sides run the same solvers, so it leaves out the
 * shapes kept for what only a device does differently at their size.
 */
__attribute__((visibility("default"))) const int wals_host_engine = 1;

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
	api->train_download = host_train_download;
	api->train_cells_on_host = host_train_cells_on_host;
	api->train_combine = host_train_combine;
	api->train_dot = host_train_dot;
	api->train_line = host_train_line;
	return 0;
}
