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

/* Record what failed in msg; returns -1 so callers can return it. */
static inline int
fail(char *msg, size_t msglen, const char *what, const char *why)
{
	if (msg != NULL && msglen > 0)
		snprintf(msg, msglen, "%s: %s", what, why);
	return -1;
}

/* Return fail() from the enclosing function, which has msg and msglen. */
#define CUDA_TRY(call, what) \
	do { \
		cudaError_t err_ = (call); \
		if (err_ != cudaSuccess) \
			return fail(msg, msglen, (what), cudaGetErrorString(err_)); \
	} while (0)

/* cholesky.cu */
struct CholeskySolver;
size_t		wals_cuda_cholesky_bytes(int f, long long rows);
long long	wals_cuda_cholesky_rows(int f, long long most, size_t spare);
int			wals_cuda_cholesky_begin(const WalsCudaProblem *p, long long rows,
									 CholeskySolver **out, char *msg, size_t msglen);
int			wals_cuda_cholesky_solve(CholeskySolver *c, long long nrows,
									 const long long *indptr, const int *indices,
									 const float *values, const float *Y, const float *G,
									 float *X, const char *what, char *msg, size_t msglen);
void		wals_cuda_cholesky_end(CholeskySolver *c);

#endif							/* WALS_CUDA_ENGINE_H */
