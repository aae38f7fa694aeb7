/*
 * train.cu
 *	  Whole trainings on a CUDA device: both matrices uploaded once, every
 *	  half-sweep and the loss on the device, the factors downloaded once.
 *
 * The objective and the conjugate gradient steps are those of src/core
 * (solve.c): row u solves
 *
 *	  (w0 G + sum_i (c_i - w0) y_i y_i^T + lambda s_u I) x_u = sum_i c_i p_i y_i
 *
 * with cg_steps steps warm started from the current x_u, G = Y^T Y computed
 * once per half-sweep with cuBLAS.  One thread block solves one row: its
 * threads share the f-vectors of the row in shared memory, and each warp
 * takes cells of the row in turn for the dot products y_i.v, so that a
 * popular item with 100k ratings is one long block rather than a lane of
 * one.  The Cholesky solver (cholesky.cu) solves the same systems exactly,
 * forming them a batch of rows at a time.
 */
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "engine.h"

#define WALS_CUDA_THREADS	128
#define WALS_CUDA_WARPS		(WALS_CUDA_THREADS / 32)
#define WALS_CUDA_CG_TINY	1e-20f

/* The per-row weights of src/core's wals_cell_weights. */
struct Weights
{
	int			implicit;
	float		alpha;
	float		w0;
	float		lambda;
};

__device__ inline void
cell_weights(const Weights &w, float r, float *c, float *p)
{
	if (w.implicit)
	{
		*c = 1.0f + w.alpha * r;
		*p = 1.0f;
	}
	else
	{
		*c = 1.0f;
		*p = r;
	}
}

/* a.b over f floats by one warp; lane 0 gets the result. */
__device__ inline float
warp_dot(const float *a, const float *b, int f, int lane)
{
	float		d = 0.0f;

	for (int k = lane; k < f; k += 32)
		d += a[k] * b[k];
	for (int off = 16; off > 0; off >>= 1)
		d += __shfl_down_sync(0xffffffffu, d, off);
	return d;
}

/* Sum of v over the block; every thread gets the result. */
__device__ float
block_sum(float v, float *red)
{
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, off);
	__syncthreads();
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	v = 0.0f;
	for (int w = 0; w < WALS_CUDA_WARPS; w++)
		v += red[w];
	return v;
}

/*
 * out = sum over the row's cells of t_i y_i, with t_i = a_i - b_i d_i and
 * d_i = y_i.v: (a, b) = (c p, c - w0) gives the first residual's sparse
 * part, (0, -(c - w0)) the sparse part of A v.  Cells go a tile at a time:
 * each warp computes the dots of its cells of the tile, then every thread
 * accumulates its components over the tile.
 */
__device__ void
row_pass(const Weights &w, const float *__restrict__ Y, const int *__restrict__ idx,
		 const float *__restrict__ val, int nnz, int f, const float *v,
		 bool residual, float *out, float *tile)
{
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	for (int k = threadIdx.x; k < f; k += blockDim.x)
		out[k] = 0.0f;
	for (int start = 0; start < nnz; start += 32)
	{
		int			n = min(32, nnz - start);

		__syncthreads();
		for (int i = warp; i < n; i += WALS_CUDA_WARPS)
		{
			float		d = warp_dot(Y + (size_t) idx[start + i] * f, v, f, lane);

			if (lane == 0)
			{
				float		c;
				float		p;

				cell_weights(w, val[start + i], &c, &p);
				tile[i] = residual ? c * p - (c - w.w0) * d : (c - w.w0) * d;
			}
		}
		__syncthreads();
		for (int k = threadIdx.x; k < f; k += blockDim.x)
		{
			float		acc = out[k];

			for (int i = 0; i < n; i++)
				acc += tile[i] * Y[(size_t) idx[start + i] * f + k];
			out[k] = acc;
		}
	}
	__syncthreads();
}

/* out += alpha G v, G full symmetric f x f. */
__device__ void
symv(const float *__restrict__ G, int f, float alpha, const float *v, float *out)
{
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		float		acc = 0.0f;

		for (int j = 0; j < f; j++)
			acc += G[(size_t) k * f + j] * v[j];
		out[k] += alpha * acc;
	}
	__syncthreads();
}

/*
 * Conjugate gradient for each row of X, one block a row.  Shared memory:
 * x, r, p, Ap (f each), the tile's 32 weights and the warps' partial sums.
 * A non-finite result lowers *bad to its row, so that the lowest failing
 * row is named, as the CPU names it.
 */
__global__ void
cg_rows(Weights w, int explicit_scale, int cg_steps, const long long *__restrict__ indptr,
		const int *__restrict__ indices, const float *__restrict__ values,
		const float *__restrict__ Y, const float *__restrict__ G, float *X,
		long long nrows, int f, unsigned long long *bad)
{
	extern __shared__ float shm[];
	float	   *x = shm;
	float	   *r = x + f;
	float	   *p = r + f;
	float	   *ap = p + f;
	float	   *tile = ap + f;
	float	   *red = tile + 32;
	long long	u = blockIdx.x;
	long long	start;
	int			nnz;
	float		s;
	float		rsold;

	if (u >= nrows)
		return;
	start = indptr[u];
	nnz = (int) (indptr[u + 1] - start);
	if (nnz == 0)
	{
		for (int k = threadIdx.x; k < f; k += blockDim.x)
			X[(size_t) u * f + k] = 0.0f;
		return;
	}
	s = explicit_scale ? (float) nnz : 1.0f;
	for (int k = threadIdx.x; k < f; k += blockDim.x)
		x[k] = X[(size_t) u * f + k];
	__syncthreads();

	row_pass(w, Y, indices + start, values + start, nnz, f, x, true, r, tile);
	if (w.w0 != 0.0f)
		symv(G, f, -w.w0, x, r);
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		r[k] -= w.lambda * s * x[k];
		p[k] = r[k];
	}
	__syncthreads();
	{
		float		part = 0.0f;

		for (int k = threadIdx.x; k < f; k += blockDim.x)
			part += r[k] * r[k];
		rsold = block_sum(part, red);
	}

	for (int step = 0; step < cg_steps && rsold >= WALS_CUDA_CG_TINY && isfinite(rsold); step++)
	{
		float		pap;
		float		a;
		float		rsnew;
		float		part = 0.0f;

		row_pass(w, Y, indices + start, values + start, nnz, f, p, false, ap, tile);
		if (w.w0 != 0.0f)
			symv(G, f, w.w0, p, ap);
		for (int k = threadIdx.x; k < f; k += blockDim.x)
		{
			ap[k] += w.lambda * s * p[k];
			part += p[k] * ap[k];
		}
		pap = block_sum(part, red);
		if (!(pap > 0.0f))
			break;
		a = rsold / pap;
		part = 0.0f;
		for (int k = threadIdx.x; k < f; k += blockDim.x)
		{
			x[k] += a * p[k];
			r[k] -= a * ap[k];
			part += r[k] * r[k];
		}
		rsnew = block_sum(part, red);
		for (int k = threadIdx.x; k < f; k += blockDim.x)
			p[k] = r[k] + (rsnew / rsold) * p[k];
		__syncthreads();
		rsold = rsnew;
	}
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		if (!isfinite(x[k]))
			atomicMin(bad, (unsigned long long) u);
		X[(size_t) u * f + k] = x[k];
	}
}

/*
 * Each row's part of the loss, in double as src/core sums it: over its cells
 * c (p - x.y)^2 - w0 (x.y)^2, plus lambda s |x|^2; with cells == false only
 * the regularisation (the item side's share).
 */
__global__ void
loss_rows(Weights w, int explicit_scale, bool cells, const long long *__restrict__ indptr,
		  const int *__restrict__ indices, const float *__restrict__ values,
		  const float *__restrict__ X, const float *__restrict__ Y,
		  long long nrows, int f, double *out)
{
	__shared__ double red[WALS_CUDA_WARPS];
	long long	u = blockIdx.x;
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	long long	start;
	int			nnz;
	double		total = 0.0;
	const float *x;

	if (u >= nrows)
		return;
	start = indptr[u];
	nnz = (int) (indptr[u + 1] - start);
	x = X + (size_t) u * f;
	if (cells)
		for (int i = warp; i < nnz; i += WALS_CUDA_WARPS)
		{
			float		d = warp_dot(x, Y + (size_t) indices[start + i] * f, f, lane);

			if (lane == 0)
			{
				float		c;
				float		p;

				cell_weights(w, values[start + i], &c, &p);
				total += (double) c * ((double) p - d) * ((double) p - d) -
					(double) w.w0 * d * d;
			}
		}
	if (threadIdx.x < 32)
	{
		double		sq = 0.0;
		double		s = explicit_scale ? (double) nnz : 1.0;

		for (int k = lane; k < f; k += 32)
			sq += (double) x[k] * x[k];
		for (int off = 16; off > 0; off >>= 1)
			sq += __shfl_down_sync(0xffffffffu, sq, off);
		if (lane == 0)
			total += w.lambda * s * sq;
	}
	if (lane == 0)
		red[warp] = total;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		double		sum = 0.0;

		for (int i = 0; i < WALS_CUDA_WARPS; i++)
			sum += red[i];
		out[u] = sum;
	}
}

/* One sparse matrix on the device. */
struct DeviceCsr
{
	long long	nrows;
	long long  *indptr;
	int		   *indices;
	float	   *values;
};

struct Training
{
	WalsCudaProblem prob;
	Weights		weights;
	cublasHandle_t blas;
	DeviceCsr	by_user;
	DeviceCsr	by_item;
	float	   *X;
	float	   *Y;
	float	   *GX;
	float	   *GY;
	double	   *parts;
	unsigned long long *bad;
	CholeskySolver *cholesky;	/* with the Cholesky solver only */
	std::vector<double> host_parts;
};

#define BLAS_TRY(call, what) \
	do { \
		cublasStatus_t st_ = (call); \
		if (st_ != CUBLAS_STATUS_SUCCESS) \
		{ \
			char		why_[48]; \
			snprintf(why_, sizeof(why_), "cuBLAS status %d", (int) st_); \
			return fail(err, st_ == CUBLAS_STATUS_ALLOC_FAILED ? WALS_CUDA_ENOMEM : \
						WALS_CUDA_EDEVICE, (what), why_); \
		} \
	} while (0)

static int
upload_csr(DeviceCsr *d, long long nrows, const int64_t *indptr, const int32_t *indices,
		   const float *values, WalsCudaError *err)
{
	long long	nnz = indptr[nrows];

	d->nrows = nrows;
	CUDA_TRY(cudaMalloc(&d->indptr, sizeof(long long) * (nrows + 1)), "allocating a matrix");
	CUDA_TRY(cudaMalloc(&d->indices, sizeof(int) * (nnz > 0 ? nnz : 1)), "allocating a matrix");
	CUDA_TRY(cudaMalloc(&d->values, sizeof(float) * (nnz > 0 ? nnz : 1)), "allocating a matrix");
	CUDA_TRY(cudaMemcpy(d->indptr, indptr, sizeof(long long) * (nrows + 1),
						cudaMemcpyHostToDevice), "uploading a matrix");
	CUDA_TRY(cudaMemcpy(d->indices, indices, sizeof(int) * nnz, cudaMemcpyHostToDevice),
			 "uploading a matrix");
	CUDA_TRY(cudaMemcpy(d->values, values, sizeof(float) * nnz, cudaMemcpyHostToDevice),
			 "uploading a matrix");
	return 0;
}

static void
release(Training *t)
{
	cudaFree(t->by_user.indptr);
	cudaFree(t->by_user.indices);
	cudaFree(t->by_user.values);
	cudaFree(t->by_item.indptr);
	cudaFree(t->by_item.indices);
	cudaFree(t->by_item.values);
	cudaFree(t->X);
	cudaFree(t->Y);
	cudaFree(t->GX);
	cudaFree(t->GY);
	cudaFree(t->parts);
	cudaFree(t->bad);
	wals_cuda_cholesky_end(t->cholesky);
	if (t->blas != NULL)
		cublasDestroy(t->blas);
	delete t;
}

/* G = Y^T Y: row-major Y (n x f) is column-major f x n, and G is symmetric. */
static int
gram(Training *t, const float *Y, long long n, float *G, WalsCudaError *err)
{
	const float one = 1.0f;
	const float zero = 0.0f;
	int			f = t->prob.factors;

	BLAS_TRY(cublasSgemm(t->blas, CUBLAS_OP_N, CUBLAS_OP_T, f, f, (int) n, &one, Y, f, Y, f,
						 &zero, G, f), "computing a Gram matrix");
	return 0;
}

static int
half_sweep(Training *t, const DeviceCsr *R, const float *Y, const float *G, float *X,
		   int side, WalsCudaError *err)
{
	int			f = t->prob.factors;
	size_t		shared = sizeof(float) * (4 * (size_t) f + 32 + WALS_CUDA_WARPS);
	unsigned long long bad = ~0ULL;
	const char *what = side == WALS_CUDA_USERS ? "solving user factors" : "solving item factors";

	if (R->nrows == 0)
		return 0;
	if (t->cholesky != NULL)
		return wals_cuda_cholesky_solve(t->cholesky, R->nrows, R->indptr, R->indices,
										R->values, Y, G, X, side, what, err);
	CUDA_TRY(cudaMemset(t->bad, 0xff, sizeof(*t->bad)), what);
	cg_rows<<<(unsigned int) R->nrows, WALS_CUDA_THREADS, shared>>>(
		t->weights, t->prob.feedback != 0, t->prob.cg_steps, R->indptr, R->indices,
		R->values, Y, G, X, R->nrows, f, t->bad);
	CUDA_TRY(cudaGetLastError(), what);
	CUDA_TRY(cudaMemcpy(&bad, t->bad, sizeof(bad), cudaMemcpyDeviceToHost), what);
	if (bad != ~0ULL)
		return fail_row(err, WALS_CUDA_ENONFINITE, side, (long long) bad, what);
	return 0;
}

static int
sum_parts(Training *t, const DeviceCsr *R, bool cells, const float *X, const float *Y,
		  double *total, WalsCudaError *err)
{
	if (R->nrows == 0)
		return 0;
	loss_rows<<<(unsigned int) R->nrows, WALS_CUDA_THREADS>>>(
		t->weights, t->prob.feedback != 0, cells, R->indptr, R->indices, R->values,
		X, Y, R->nrows, t->prob.factors, t->parts);
	CUDA_TRY(cudaGetLastError(), "computing the loss");
	t->host_parts.resize((size_t) R->nrows);
	CUDA_TRY(cudaMemcpy(t->host_parts.data(), t->parts, sizeof(double) * R->nrows,
						cudaMemcpyDeviceToHost), "computing the loss");
	for (double part : t->host_parts)
		*total += part;
	return 0;
}

/* w0 sum_ab GX_ab GY_ab, the loss of every unobserved cell at once. */
static int
unobserved(Training *t, double *total, WalsCudaError *err)
{
	int			f = t->prob.factors;
	std::vector<float> gx((size_t) f * f);
	std::vector<float> gy((size_t) f * f);
	double		sum = 0.0;

	if (t->weights.w0 == 0.0f)
		return 0;
	CUDA_TRY(cudaMemcpy(gx.data(), t->GX, sizeof(float) * f * f, cudaMemcpyDeviceToHost),
			 "computing the loss");
	CUDA_TRY(cudaMemcpy(gy.data(), t->GY, sizeof(float) * f * f, cudaMemcpyDeviceToHost),
			 "computing the loss");
	for (size_t k = 0; k < gx.size(); k++)
		sum += (double) gx[k] * gy[k];
	*total += t->weights.w0 * sum;
	return 0;
}

/*
 * Device memory of a training: both matrices, both factor matrices, the two
 * Grams, the per-row loss and, for the Cholesky solver, one row's system
 * (the batch grows into what is left), checked against what is free before
 * anything is uploaded.
 */
static size_t
needed_bytes(const WalsCudaProblem *p)
{
	size_t		nnz = (size_t) p->user_indptr[p->nusers];
	size_t		rows = (size_t) (p->nusers + p->nitems);
	size_t		most = (size_t) (p->nusers > p->nitems ? p->nusers : p->nitems);
	size_t		f = (size_t) p->factors;
	size_t		cholesky = p->solver == WALS_CUDA_CHOLESKY ?
		wals_cuda_cholesky_bytes(p->factors, 1) : 0;

	return 2 * nnz * (sizeof(int) + sizeof(float)) + (rows + 2) * sizeof(long long) +
		rows * f * sizeof(float) + 2 * f * f * sizeof(float) + most * sizeof(double) +
		cholesky;
}

static int
train_begin(const WalsCudaProblem *p, void **state, WalsCudaError *err)
{
	Training   *t = new (std::nothrow) Training();
	int			f = p->factors;
	size_t		xs = sizeof(float) * (size_t) p->nusers * f;
	size_t		ys = sizeof(float) * (size_t) p->nitems * f;
	long long	most = p->nusers > p->nitems ? p->nusers : p->nitems;
	long long	batch = 0;
	int			rc;

	*state = NULL;
	if (t == NULL)
		return fail(err, WALS_CUDA_ENOMEM, "starting a GPU training", "out of host memory");
	if (f < 1 || f > 1024 ||
		(p->solver != WALS_CUDA_CG && p->solver != WALS_CUDA_CHOLESKY))
	{
		delete t;
		return fail(err, WALS_CUDA_EINVAL, "starting a GPU training", "unsupported factors or solver");
	}
	{
		size_t		free_bytes = 0;
		size_t		total_bytes = 0;
		size_t		need = needed_bytes(p);

		cudaError_t info = cudaMemGetInfo(&free_bytes, &total_bytes);

		if (info != cudaSuccess || need > free_bytes)
		{
			char		why[128];

			snprintf(why, sizeof(why), "it needs %zu bytes of device memory, %zu are free",
					 need, free_bytes);
			delete t;
			if (info != cudaSuccess)
				return fail(err, WALS_CUDA_EDEVICE, "asking the free device memory",
							cudaGetErrorString(info));
			return fail(err, WALS_CUDA_ENOMEM, "starting a GPU training", why);
		}
		if (p->solver == WALS_CUDA_CHOLESKY)
			batch = wals_cuda_cholesky_rows(f, most, free_bytes - need);
	}
	t->prob = *p;
	t->weights.implicit = p->feedback == 0;
	t->weights.alpha = p->alpha;
	t->weights.w0 = p->w0;
	t->weights.lambda = p->regularization;

	rc = cublasCreate(&t->blas) == CUBLAS_STATUS_SUCCESS ? 0 :
		fail(err, WALS_CUDA_EDEVICE, "starting cuBLAS", "cublasCreate failed");
	if (rc == 0)
		rc = upload_csr(&t->by_user, p->nusers, p->user_indptr, p->user_indices,
						p->user_values, err);
	if (rc == 0)
		rc = upload_csr(&t->by_item, p->nitems, p->item_indptr, p->item_indices,
						p->item_values, err);
	if (rc == 0)
		rc = [&]() -> int {
			CUDA_TRY(cudaMalloc(&t->X, xs > 0 ? xs : 1), "allocating the factors");
			CUDA_TRY(cudaMalloc(&t->Y, ys > 0 ? ys : 1), "allocating the factors");
			CUDA_TRY(cudaMalloc(&t->GX, sizeof(float) * f * f), "allocating the factors");
			CUDA_TRY(cudaMalloc(&t->GY, sizeof(float) * f * f), "allocating the factors");
			CUDA_TRY(cudaMalloc(&t->parts, sizeof(double) * (most > 0 ? most : 1)),
					 "allocating the loss");
			CUDA_TRY(cudaMalloc(&t->bad, sizeof(*t->bad)), "allocating the factors");
			CUDA_TRY(cudaMemcpy(t->X, p->X, xs, cudaMemcpyHostToDevice), "uploading the factors");
			CUDA_TRY(cudaMemcpy(t->Y, p->Y, ys, cudaMemcpyHostToDevice), "uploading the factors");
			return 0;
		}();
	if (rc == 0 && p->solver == WALS_CUDA_CHOLESKY)
		rc = wals_cuda_cholesky_begin(p, batch, &t->cholesky, err);
	if (rc != 0)
	{
		release(t);
		return rc;
	}
	*state = t;
	return 0;
}

static int
iterate(Training *t, double *loss, WalsCudaError *err)
{
	double		total = 0.0;

	if (gram(t, t->Y, t->prob.nitems, t->GY, err) != 0 ||
		half_sweep(t, &t->by_user, t->Y, t->GY, t->X, WALS_CUDA_USERS, err) != 0 ||
		gram(t, t->X, t->prob.nusers, t->GX, err) != 0 ||
		half_sweep(t, &t->by_item, t->X, t->GX, t->Y, WALS_CUDA_ITEMS, err) != 0 ||
		gram(t, t->Y, t->prob.nitems, t->GY, err) != 0 ||
		sum_parts(t, &t->by_user, true, t->X, t->Y, &total, err) != 0 ||
		sum_parts(t, &t->by_item, false, t->Y, t->X, &total, err) != 0 ||
		unobserved(t, &total, err) != 0)
		return err->code;
	*loss = total;
	return 0;
}

/* The loss's host buffers may throw, and no exception may reach the caller. */
static int
train_iterate(void *state, double *loss, WalsCudaError *err)
{
	try
	{
		return iterate((Training *) state, loss, err);
	}
	catch (const std::bad_alloc &)
	{
		return fail(err, WALS_CUDA_ENOMEM, "training on the GPU", "out of host memory");
	}
	catch (...)
	{
		return fail(err, WALS_CUDA_EDEVICE, "training on the GPU", "unexpected C++ exception");
	}
}

static int
train_end(void *state, float *X, float *Y, WalsCudaError *err)
{
	Training   *t = (Training *) state;
	int			rc = 0;

	if (t == NULL)
		return 0;
	if (X != NULL && Y != NULL)
		rc = [&]() -> int {
			CUDA_TRY(cudaMemcpy(X, t->X, sizeof(float) * t->prob.nusers * t->prob.factors,
								cudaMemcpyDeviceToHost), "downloading the factors");
			CUDA_TRY(cudaMemcpy(Y, t->Y, sizeof(float) * t->prob.nitems * t->prob.factors,
								cudaMemcpyDeviceToHost), "downloading the factors");
			return 0;
		}();
	release(t);
	return rc;
}

/* The training entries of the table that wals_cuda_init fills. */
void
wals_cuda_train_api(WalsCudaApi *api)
{
	api->train_begin = train_begin;
	api->train_iterate = train_iterate;
	api->train_end = train_end;
}
