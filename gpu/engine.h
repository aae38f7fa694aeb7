/*
 * engine.h
 *	  What the CUDA sources of the engine share among themselves, and no
 *	  caller sees: the exact solvers' entry points (cholesky.cu) for the
 *	  training (train.cu), a warp's dot product, and the one way all of
 *	  them report a failed call.
 */
#ifndef WALS_CUDA_ENGINE_H
#define WALS_CUDA_ENGINE_H

#include <cstdio>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "wals_cuda.h"

/*
 * kernel<<<grid, block, shared>>>(args) and a kernel's dynamic shared
 * array, spelled so that test/gpu/emu (which defines both) compiles these
 * sources unchanged as C++ and runs the kernels on the host.
 */
#ifndef WALS_LAUNCH
#define WALS_LAUNCH(kernel, grid, block, shared) kernel<<<(grid), (block), (shared)>>>
#define WALS_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

/*
 * Record in err what failed, of which kind; returns the kind, so callers
 * can return it.
 */
static inline int
fail(WalsCudaError *err, int code, const char *what, const char *why)
{
	err->code = code;
	err->side = -1;
	err->row = -1;
	snprintf(err->msg, sizeof(err->msg), "%s: %s", what, why);
	return code;
}

/* A row of side whose solution failed; the kind says how. */
static inline int
fail_row(WalsCudaError *err, int code, int side, long long row, const char *what)
{
	fail(err, code, what, code == WALS_CUDA_ESINGULAR ?
		 "a system is not positive definite" : "a solution is not finite");
	err->side = side;
	err->row = row;
	return code;
}

/* Return fail() from the enclosing function, which has err. */
#define CUDA_TRY(call, what) \
	do { \
		cudaError_t err_ = (call); \
		if (err_ != cudaSuccess) \
			return fail(err, err_ == cudaErrorMemoryAllocation ? WALS_CUDA_ENOMEM : \
						WALS_CUDA_EDEVICE, (what), cudaGetErrorString(err_)); \
	} while (0)

/* Return fail() from the enclosing function, which has err, for cuBLAS. */
#define BLAS_TRY(call, what) \
	do { \
		cublasStatus_t st_ = (call); \
		if (st_ != CUBLAS_STATUS_SUCCESS) \
			return fail(err, st_ == CUBLAS_STATUS_ALLOC_FAILED ? WALS_CUDA_ENOMEM : \
						WALS_CUDA_EDEVICE, (what), cublasGetStatusString(st_)); \
	} while (0)

/* a.b over n floats by one warp; lane 0 gets the result. */
__device__ inline float
wals_cuda_warp_dot(const float *a, const float *b, int n, int lane)
{
	float		d = 0.0f;

	for (int k = lane; k < n; k += 32)
		d += a[k] * b[k];
	for (int off = 16; off > 0; off >>= 1)
		d += __shfl_down_sync(0xffffffffu, d, off);
	return d;
}

/*
 * The unknowns of one system of the exact solvers: all f (Cholesky, and
 * the subspace solver with block_size >= f, which is the same solve), or
 * the subspace solver's blocks.
 */
static inline int
wals_cuda_block_dim(const WalsCudaProblem *p)
{
	return p->solver == WALS_CUDA_SUBSPACE && p->block_size < p->factors ?
		p->block_size : p->factors;
}

/*
 * What a row's system takes from the training's parameters, and the
 * confidence c and target p of a cell with merged rating r: src/core's
 * wals_cell_weights, for the CG kernels (cg.cu) and the exact ones
 * (cholesky.cu) alike.
 */
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
		*c = 1.0f + w.alpha * fabsf(r);
		*p = r >= 0.0f ? 1.0f : 0.0f;
	}
	else
	{
		*c = 1.0f;
		*p = r;
	}
}

static inline Weights
wals_cuda_weights(const WalsCudaProblem *p)
{
	Weights		w = {p->feedback == 0, p->alpha, p->w0, p->regularization};

	return w;
}

/*
 * The scale s of a row's regularisation, lambda s |x|^2: src/core's
 * wals_row_scale, with the other side's row count of the matrix solved.
 */
struct RowScale
{
	int			frequency;		/* (n + w0 ncols)^nu, else the classic s */
	int			explicit_n;		/* classic: n for explicit feedback, else 1 */
	float		nu;
	float		w0;
	long long	ncols;
};

__device__ inline double
row_scale(const RowScale &rs, long long n)
{
	double		base;

	if (!rs.frequency)
		return rs.explicit_n ? (double) n : 1.0;
	if (rs.nu == 0.0f)
		return 1.0;
	base = (double) n + (double) rs.w0 * (double) rs.ncols;
	return rs.nu == 1.0f ? base : pow(base, (double) rs.nu);
}

static inline RowScale
wals_cuda_row_scale(const WalsCudaProblem *p, long long ncols)
{
	RowScale	rs = {p->frequency_scaled != 0, p->feedback != 0, p->reg_exponent, p->w0, ncols};

	return rs;
}

/* cholesky.cu: the Cholesky and subspace solvers */
struct CholeskySolver;
size_t		wals_cuda_cholesky_bytes(const WalsCudaProblem *p, long long rows);
long long	wals_cuda_cholesky_rows(const WalsCudaProblem *p, long long most, size_t spare);
int			wals_cuda_cholesky_begin(const WalsCudaProblem *p, cublasHandle_t blas,
									 long long rows, CholeskySolver **out,
									 WalsCudaError *err);
int			wals_cuda_cholesky_solve(CholeskySolver *c, long long nrows, long long ncols,
									 const long long *indptr, const int *indices,
									 const float *values, const float *Y, const float *G,
									 float *X, int side, const char *what,
									 WalsCudaError *err);
void		wals_cuda_cholesky_end(CholeskySolver *c);

#endif							/* WALS_CUDA_ENGINE_H */
