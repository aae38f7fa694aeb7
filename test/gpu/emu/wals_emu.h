/*
 * wals_emu.h
 *	  The CUDA device, emulated on the host, for the kernels of gpu/: what
 *	  they use of CUDA C++ (the built-in indices, shared memory,
 *	  __syncthreads, warp shuffles, atomics, launches), so that the sources
 *	  of gpu/ compile unchanged with g++ into a library of the same table as
 *	  wals_cuda.so, and check_train runs them without a GPU.
 *
 * Every CUDA thread of a block is a fiber of its own, with its own stack,
 * so a kernel's code runs as written, thread by thread: a fiber runs until
 * it reaches __syncthreads or a shuffle, where it waits, and the next one
 * runs.  A barrier lets its threads go only when every thread of the block
 * has reached it, and a shuffle reads the other lane's value only once
 * every lane of the warp has given its own, so a kernel that counts on a
 * barrier or a shuffle it lacks reads what it must not, and the comparison
 * with src/core fails (check_train shows it does, by breaking either on
 * purpose).  Threads that reach different barriers, or a shuffle with a
 * lane missing, stop the process with a message: that is a kernel bug.
 *
 * Blocks run one after another in a scrambled order, as a device may run
 * them, so that a kernel that counts on the order of its blocks is seen.
 * __shared__ arrays are static: one block runs at a time.  Loads through
 * __ldg can be traced, to count the warps' reads that are not coalesced.
 */
#ifndef WALS_EMU_H
#define WALS_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

struct dim3
{
	unsigned int x;
	unsigned int y;
	unsigned int z;

	constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
		: x(x_), y(y_), z(z_)
	{
	}
};

#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static

/* The running thread of the emulated device. */
struct WalsEmuThread
{
	dim3		tid;
	int			lane;
	int			warp;
};

extern WalsEmuThread *wals_emu_self;
extern dim3 wals_emu_block_idx;
extern dim3 wals_emu_block_dim;
extern dim3 wals_emu_grid_dim;

#define threadIdx (wals_emu_self->tid)
#define blockIdx (wals_emu_block_idx)
#define blockDim (wals_emu_block_dim)
#define gridDim (wals_emu_grid_dim)

void		wals_emu_syncthreads(void);
uint64_t	wals_emu_shfl_down(unsigned int mask, uint64_t bits, int delta);
void	   *wals_emu_dynamic_shared(void);
void		wals_emu_trace_load(const void *address);
extern bool wals_emu_tracing;

#define __syncthreads() wals_emu_syncthreads()
#define WALS_DYNAMIC_SHARED(type, name) type *name = (type *) wals_emu_dynamic_shared()

/* A shuffle moves the bits of a 4- or 8-byte value. */
template <typename T>
inline T
__shfl_down_sync(unsigned int mask, T v, int delta)
{
	static_assert(sizeof(T) == 4 || sizeof(T) == 8, "a shuffle moves 4 or 8 bytes");
	uint64_t	bits = 0;

	__builtin_memcpy(&bits, &v, sizeof(T));
	bits = wals_emu_shfl_down(mask, bits, delta);
	__builtin_memcpy(&v, &bits, sizeof(T));
	return v;
}

template <typename T>
inline T
__ldg(const T *p)
{
	if (wals_emu_tracing)
		wals_emu_trace_load(p);
	return *p;
}

inline unsigned long long
atomicMin(unsigned long long *address, unsigned long long v)
{
	unsigned long long old = __atomic_load_n(address, __ATOMIC_RELAXED);

	while (v < old &&
		   !__atomic_compare_exchange_n(address, &old, v, true, __ATOMIC_RELAXED,
										__ATOMIC_RELAXED))
		;
	return old;
}

inline unsigned long long
atomicCAS(unsigned long long *address, unsigned long long compare, unsigned long long v)
{
	__atomic_compare_exchange_n(address, &compare, v, false, __ATOMIC_RELAXED,
								__ATOMIC_RELAXED);
	return compare;
}

using std::isfinite;

inline int
min(int a, int b)
{
	return a < b ? a : b;
}

/*
 * kernel<<<grid, block, shared>>>(args), spelled WALS_LAUNCH(kernel, grid,
 * block, shared)(args) by gpu/engine.h: the arguments become the kernel's
 * parameters once, and every thread of every block gets a copy.
 */
struct WalsEmuBody
{
	virtual void run() = 0;
};

void		wals_emu_launch(const void *kernel, dim3 grid, dim3 block, size_t shared,
							WalsEmuBody *body);

template <typename... P>
struct WalsEmuLaunch
{
	void		(*kernel) (P...);
	dim3		grid;
	dim3		block;
	size_t		shared;

	void operator() (P... args)
	{
		struct Body : WalsEmuBody
		{
			void		(*kernel) (P...);
			std::tuple<P...> args;

			Body(void (*k) (P...), P... a) : kernel(k), args(a...)
			{
			}
			void run() override
			{
				std::apply(kernel, args);
			}
		}			body(kernel, args...);

		wals_emu_launch((const void *) kernel, grid, block, shared, &body);
	}
};

template <typename... P>
inline WalsEmuLaunch<P...>
wals_emu_kernel(void (*kernel) (P...), dim3 grid, dim3 block, size_t shared)
{
	return WalsEmuLaunch<P...>{kernel, grid, block, shared};
}

#define WALS_LAUNCH(kernel, grid, block, shared) \
	wals_emu_kernel((kernel), (grid), (block), (shared))

#endif							/* WALS_EMU_H */
