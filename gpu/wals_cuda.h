/*
 * wals_cuda.h
 *	  The C interface of wals_cuda.so, the CUDA engine of wals.
 *
 * wals.so never links CUDA: it opens this library when a GPU is first
 * considered and calls its one exported symbol, wals_cuda_init, which fills
 * a table of functions.  Every function reports failure through its return
 * value and a message buffer; no C++ exception ever crosses this header.
 */
#ifndef WALS_CUDA_H
#define WALS_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* Bumped whenever the table below changes, so a stale library is refused. */
#define WALS_CUDA_ABI_VERSION	1

/* What the CUDA runtime says of one device. */
typedef struct WalsCudaDevice
{
	char		name[256];
	size_t		memory_total;	/* bytes */
	size_t		memory_free;	/* bytes, when asked */
	int			cc_major;		/* compute capability */
	int			cc_minor;
	int			driver_version; /* as CUDA encodes it: 1000 major + 10 minor */
	int			runtime_version;
} WalsCudaDevice;

typedef struct WalsCudaApi
{
	int			abi_version;

	/*
	 * Number of usable devices (0 or more), or -1 when CUDA itself cannot be
	 * used (no driver, a driver older than the runtime); msg then says why.
	 */
	int			(*device_count) (char *msg, size_t msglen);

	/* Describe device index; 0 on success, -1 with msg set. */
	int			(*device_info) (int index, WalsCudaDevice *out,
								char *msg, size_t msglen);
} WalsCudaApi;

/* Fill api; returns 0, or -1 when api is NULL. */
typedef int (*WalsCudaInit) (WalsCudaApi *api);
int			wals_cuda_init(WalsCudaApi *api);

#ifdef __cplusplus
}
#endif

#endif							/* WALS_CUDA_H */
