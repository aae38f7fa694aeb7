/*
 * device.cu
 *	  Finding and describing CUDA devices for wals.so.
 *
 * The runtime is linked statically, so the library needs only the driver
 * (libcuda.so) on the machine that runs it, and a machine without one gets
 * an error message from device_count rather than a failure to load.
 */
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include "wals_cuda.h"

/* train.cu */
void		wals_cuda_train_api(WalsCudaApi *api);

static void
set_msg(char *msg, size_t msglen, const char *what, cudaError_t err)
{
	if (msg != NULL && msglen > 0)
		snprintf(msg, msglen, "%s: %s", what, cudaGetErrorString(err));
}

/*
 * No driver and no device both count 0 devices, with msg saying which: a
 * machine without a GPU.  A driver older than the runtime this library
 * was built with, or any other failure, is -1: CUDA is there but broken,
 * which check_train must not take for a machine without a GPU.
 */
static int
device_count(char *msg, size_t msglen)
{
	int			n = 0;
	int			driver = 0;
	int			runtime = 0;
	cudaError_t err = cudaGetDeviceCount(&n);

	if (err == cudaErrorNoDevice)
	{
		snprintf(msg, msglen, "no CUDA device is visible");
		return 0;
	}
	/* the runtime reports a missing driver as one too old */
	if (err == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
		cudaRuntimeGetVersion(&runtime) == cudaSuccess)
	{
		if (driver == 0)
		{
			snprintf(msg, msglen, "no NVIDIA driver is installed (libcuda.so.1 was not found)");
			return 0;
		}
		snprintf(msg, msglen, "the NVIDIA driver is too old: it supports CUDA %d.%d, and "
				 "wals_cuda.so was built with CUDA %d.%d",
				 driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
		return -1;
	}
	if (err != cudaSuccess)
	{
		set_msg(msg, msglen, "CUDA cannot be used", err);
		return -1;
	}
	return n;
}

/*
 * The free memory needs the device's context, which selecting it starts:
 * the device that was current is selected again after, and the context
 * of any other is ended, so that listing the devices neither leaves a
 * context (and the memory it holds) on each of them nor moves this
 * process's next training to the last one listed.  A training is never
 * under way while the devices are listed: a backend does one at a time.
 */
static int
device_info(int index, WalsCudaDevice *out, char *msg, size_t msglen)
{
	cudaDeviceProp prop;
	cudaError_t err;
	size_t		free_bytes = 0;
	size_t		total_bytes = 0;
	int			current = 0;

	memset(out, 0, sizeof(*out));
	err = cudaGetDeviceProperties(&prop, index);
	if (err != cudaSuccess)
	{
		set_msg(msg, msglen, "cannot describe the device", err);
		return -1;
	}
	snprintf(out->name, sizeof(out->name), "%s", prop.name);
	out->cc_major = prop.major;
	out->cc_minor = prop.minor;
	out->memory_total = prop.totalGlobalMem;
	cudaDriverGetVersion(&out->driver_version);
	cudaRuntimeGetVersion(&out->runtime_version);

	err = cudaGetDevice(&current);
	if (err == cudaSuccess)
		err = cudaSetDevice(index);
	if (err == cudaSuccess)
	{
		cudaError_t back;

		err = cudaMemGetInfo(&free_bytes, &total_bytes);
		if (index != current)
			cudaDeviceReset();
		back = cudaSetDevice(current);
		if (err == cudaSuccess)
			err = back;
	}
	if (err != cudaSuccess)
	{
		set_msg(msg, msglen, "cannot query the device's memory", err);
		return -1;
	}
	out->memory_free = free_bytes;
	out->memory_total = total_bytes;
	return 0;
}

/* The library's one exported symbol; everything else is hidden. */
extern "C" __attribute__((visibility("default"))) int
wals_cuda_init(WalsCudaApi *api)
{
	if (api == NULL)
		return -1;
	memset(api, 0, sizeof(*api));
	api->abi_version = WALS_CUDA_ABI_VERSION;
	api->device_count = device_count;
	api->device_info = device_info;
	wals_cuda_train_api(api);
	return 0;
}
