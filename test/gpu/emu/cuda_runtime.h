/*
 * cuda_runtime.h
 *	  The CUDA runtime as the emulated device of wals_emu.h offers it: what
 *	  the sources of gpu/ call, with CUDA's names, codes and messages.
 *	  Device memory is host memory that the emulation counts and checks;
 *	  host memory registered as mapped is read by the kernels in place.
 */
#ifndef WALS_EMU_CUDA_RUNTIME_H
#define WALS_EMU_CUDA_RUNTIME_H

#include <cstddef>

#include "wals_emu.h"

enum cudaError_t
{
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInsufficientDriver = 35,
	cudaErrorNoDevice = 100,
	cudaErrorInvalidDevice = 101,
	cudaErrorLaunchOutOfResources = 701,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorDevicesUnavailable = 46,
	cudaErrorHostMemoryAlreadyRegistered = 712,
	cudaErrorHostMemoryNotRegistered = 713
};

#define cudaHostRegisterMapped	0x02

enum cudaMemcpyKind
{
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3
};

enum cudaFuncAttribute
{
	cudaFuncAttributeMaxDynamicSharedMemorySize = 8
};

typedef struct WalsEmuStream *cudaStream_t;

struct cudaDeviceProp
{
	char		name[256];
	size_t		totalGlobalMem;
	int			major;
	int			minor;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned int flags);
cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned int flags);
cudaError_t cudaHostUnregister(void *p);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream = 0);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value);
const char *cudaGetErrorString(cudaError_t err);

template <typename T>
inline cudaError_t
cudaMalloc(T **p, size_t bytes)
{
	return cudaMalloc((void **) p, bytes);
}

#endif							/* WALS_EMU_CUDA_RUNTIME_H */
