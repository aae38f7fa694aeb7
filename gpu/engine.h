/*
 * engine.h
 *	  What the CUDA sources of the engine share among themselves, and no
 *	  caller sees: the Cholesky solver's entry points (cholesky.cu) for the
 *	  training (train.cu), and the one way both report a failed call.
 */
#ifndef WALS_CUDA_ENGINE_H
#define WALS_CUDA_ENGINE_H

#include <cstdio>

#include <cuda_runtime.h>

#include "wals_cuda.h"

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

/* cholesky.cu */
struct CholeskySolver;
size_t		wals_cuda_cholesky_bytes(int f, long long rows);
long long	wals_cuda_cholesky_rows(int f, long long most, size_t spare);
int			wals_cuda_cholesky_begin(const WalsCudaProblem *p, long long rows,
									 CholeskySolver **out, WalsCudaError *err);
int			wals_cuda_cholesky_solve(CholeskySolver *c, long long nrows,
									 const long long *indptr, const int *indices,
									 const float *values, const float *Y, const float *G,
									 float *X, int side, const char *what,
									 WalsCudaError *err);
void		wals_cuda_cholesky_end(CholeskySolver *c);

#endif							/* WALS_CUDA_ENGINE_H */
