/*
 * cublas_v2.h
 *	  What the sources of gpu/ call of cuBLAS, on the emulated device of wals_emu.h:
 *	  OpenBLAS does the arithmetic.
 */
#ifndef WALS_EMU_CUBLAS_V2_H
#define WALS_EMU_CUBLAS_V2_H

#include "cuda_runtime.h"

typedef struct WalsEmuBlas *cublasHandle_t;

enum cublasStatus_t
{
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_NOT_INITIALIZED = 1,
	CUBLAS_STATUS_ALLOC_FAILED = 3,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_EXECUTION_FAILED = 13
};

enum cublasOperation_t
{
	CUBLAS_OP_N = 0,
	CUBLAS_OP_T = 1
};

enum cublasFillMode_t
{
	CUBLAS_FILL_MODE_LOWER = 0
};

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
						   int m, int n, int k, const float *alpha, const float *A, int lda,
						   const float *B, int ldb, const float *beta, float *C, int ldc);
const char *cublasGetStatusString(cublasStatus_t status);

#endif							/* WALS_EMU_CUBLAS_V2_H */
