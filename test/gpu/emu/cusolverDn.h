/*
 * cusolverDn.h
 *	  What the sources of gpu/ call of cuSOLVER, on the emulated device of wals_emu.h:
 *	  OpenBLAS's LAPACK does the arithmetic.
 */
#ifndef WALS_EMU_CUSOLVERDN_H
#define WALS_EMU_CUSOLVERDN_H

#include "cublas_v2.h"

typedef struct WalsEmuSolver *cusolverDnHandle_t;

enum cusolverStatus_t
{
	CUSOLVER_STATUS_SUCCESS = 0,
	CUSOLVER_STATUS_NOT_INITIALIZED = 1,
	CUSOLVER_STATUS_ALLOC_FAILED = 2,
	CUSOLVER_STATUS_INVALID_VALUE = 3,
	CUSOLVER_STATUS_EXECUTION_FAILED = 6
};

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle);
cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle);
cusolverStatus_t cusolverDnSpotrf_bufferSize(cusolverDnHandle_t handle, cublasFillMode_t uplo,
											 int n, float *A, int lda, int *lwork);
cusolverStatus_t cusolverDnSpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n,
								  float *A, int lda, float *work, int lwork, int *info);
cusolverStatus_t cusolverDnSpotrs(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n,
								  int nrhs, const float *A, int lda, float *B, int ldb,
								  int *info);
cusolverStatus_t cusolverDnSpotrfBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo,
										 int n, float *Aarray[], int lda, int *info,
										 int batch);
cusolverStatus_t cusolverDnSpotrsBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo,
										 int n, int nrhs, float *Aarray[], int lda,
										 float *Barray[], int ldb, int *info, int batch);

#endif							/* WALS_EMU_CUSOLVERDN_H */
