/*
 * emu.cc
 *	  The emulated CUDA device of wals_emu.h: the fibers that run a block's
 *	  threads, the barriers and shuffles between them, the launches, the
 *	  runtime's devices and memory, cuBLAS and cuSOLVER on OpenBLAS, and
 *	  the knobs with which check_train injects faults.
 *
 * A block's threads are fibers switched by hand (a few instructions on
 * x86-64, ucontext elsewhere), one at a time on the calling thread: a
 * kernel's sweep over a few thousand rows takes tens of millions of
 * switches, which ucontext's signal-mask system call would make minutes.
 *
 * What a real device would do with a bad call, the emulation does too, or
 * stops with a message when CUDA leaves it undefined: a launch outside
 * the limits fails, as one asking more than 48 KiB of dynamic shared
 * memory without cudaFuncSetAttribute; a copy or a cuBLAS operand that is
 * not device memory fails; threads of a block that reach different
 * barriers, or a warp whose lanes shuffle apart, stop the process.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <sys/mman.h>

#include <cblas.h>

#include "cusolverDn.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

extern "C"
{
	void		spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
	void		spotrs_(const char *uplo, const int *n, const int *nrhs, const float *a,
						const int *lda, float *b, const int *ldb, int *info);
}

#define EMU_MAX_THREADS		1024
#define EMU_MAX_DEVICES		16
#define EMU_STACK			(64 * 1024)
#define EMU_SHARED_DEFAULT	(48 * 1024)
#define EMU_SHARED_MAX		(227 * 1024)
#define EMU_DRIVER_OK		13000
#define EMU_DRIVER_OLD		11040

/*
 * The knobs, set and read through wals_emu_set and wals_emu_get.  A fault
 * "at" n makes the n-th such call from the setting fail, once.
 */
struct Knobs
{
	long		devices = 1;
	long		driver = 1;			/* 0: none installed, 1: current, 2: too old */
	long		memory = 2L << 30;	/* bytes of each device */
	long		fail_malloc_at = 0;
	long		fail_launch_at = 0;
	long		fail_blas_at = 0;
	long		fail_solver_at = 0;
	long		fail_meminfo = 0;
	long		break_barrier = 0;	/* __syncthreads does not wait */
	long		break_shuffle = 0;	/* a shuffle does not wait for the other lanes */
	long		trace_loads = 0;
};

static Knobs knobs;

/* A counted fault: true on the call that must fail. */
static bool
fault(long *at)
{
	return *at > 0 && --*at == 0;
}

/* ---------------------------------------------------------------------------
 * Fibers
 */

#if defined(__x86_64__)
/* Save the callee-saved registers on this stack, store it in *from, run to. */
extern "C" void emu_switch(void **from, void *to);
__asm__(".text\n"
		".p2align 4\n"
		".type emu_switch,@function\n"
		"emu_switch:\n"
		"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
		"\tmovq %rsp, (%rdi)\n"
		"\tmovq %rsi, %rsp\n"
		"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
		"\tret\n"
		".size emu_switch, .-emu_switch\n");
#endif

struct Fiber
{
	WalsEmuThread thread;
	bool		done;
	Fiber	   *next;			/* the live threads of the block, in a ring */
	Fiber	   *prev;
	char	   *stack;
#if defined(__x86_64__)
	void	   *sp;
#else
	ucontext_t	context;
#endif
};

/* The lanes of a warp meeting at a shuffle: two rounds of slots in turn. */
struct Warp
{
	unsigned int round;
	int			arrived;
	int			lanes;
	int			delta;
	uint64_t	slots[2][32];
};

WalsEmuThread *wals_emu_self;
dim3		wals_emu_block_idx;
dim3		wals_emu_block_dim;
dim3		wals_emu_grid_dim;
bool		wals_emu_tracing;

static Fiber fibers[EMU_MAX_THREADS];
static Warp warps[EMU_MAX_THREADS / 32];
static Fiber *running;
static int	nthreads;
static int	alive;
static unsigned int barrier_round;
static int	barrier_arrived;
static int	idle;				/* resumptions since a thread last moved on */
static WalsEmuBody *body;
static const void *kernel_running;
alignas(16) static unsigned char dynamic_shared[EMU_SHARED_MAX];

#if defined(__x86_64__)
static void *scheduler_sp;
#else
static ucontext_t scheduler_context;
#endif

static void __attribute__((noreturn))
stop(const char *why)
{
	fprintf(stderr, "wals emulated device: %s (block %u of kernel %p)\n", why,
			wals_emu_block_idx.x, kernel_running);
	abort();
}

/*
 * From the running thread straight to the next live one of the block, or
 * back to run_block when none is left.  A thread that only waits makes no
 * progress; a whole round of them is a block that can never finish.
 */
static inline void __attribute__((always_inline))
switch_to(Fiber *from, Fiber *to)
{
	running = to;
	wals_emu_self = to != NULL ? &to->thread : NULL;
#if defined(__x86_64__)
	emu_switch(&from->sp, to != NULL ? to->sp : scheduler_sp);
#else
	swapcontext(&from->context, to != NULL ? &to->context : &scheduler_context);
#endif
}

static inline void __attribute__((always_inline))
yield(void)
{
	if (++idle > 2 * alive)
		stop(barrier_arrived > 0 ?
			 "threads of a block wait at __syncthreads that others never reach" :
			 "lanes of a warp wait at a shuffle that others never reach");
	switch_to(running, running->next);
}

static void
fiber_main(void)
{
	Fiber	   *self = running;

	body->run();
	self->done = true;
	self->prev->next = self->next;
	self->next->prev = self->prev;
	idle = 0;
	switch_to(self, --alive > 0 ? self->next : NULL);
	stop("a finished thread was resumed");
}

static void
fiber_start(Fiber *f)
{
	if (f->stack == NULL)
	{
		f->stack = (char *) mmap(NULL, EMU_STACK, PROT_READ | PROT_WRITE,
								 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (f->stack == MAP_FAILED)
			stop("cannot map a thread's stack");
	}
	f->done = false;
#if defined(__x86_64__)
	{
		/*
		 * The six registers emu_switch pops, then fiber_main as the return
		 * address of its ret, above it a null return address for
		 * fiber_main, so that it starts with the stack as a call leaves it.
		 */
		void	  **top = (void **) (f->stack + EMU_STACK);

		top[-1] = NULL;
		top[-2] = (void *) fiber_main;
		for (int k = 3; k <= 8; k++)
			top[-k] = NULL;
		f->sp = top - 8;
	}
#else
	getcontext(&f->context);
	f->context.uc_stack.ss_sp = f->stack;
	f->context.uc_stack.ss_size = EMU_STACK;
	f->context.uc_link = NULL;
	makecontext(&f->context, fiber_main, 0);
#endif
}

void
wals_emu_syncthreads(void)
{
	unsigned int round = barrier_round;

	if (knobs.break_barrier)
		return;
	idle = 0;
	if (++barrier_arrived == nthreads)
	{
		barrier_arrived = 0;
		barrier_round++;
		return;
	}
	while (barrier_round == round)
		yield();
}

uint64_t
wals_emu_shfl_down(unsigned int mask, uint64_t bits, int delta)
{
	Warp	   *w = &warps[running->thread.warp];
	int			lane = running->thread.lane;
	unsigned int round = w->round;
	int			src = lane + delta;

	if (mask != 0xffffffffu || w->lanes != 32)
		stop("a shuffle of a partial warp");
	if (knobs.break_shuffle)
	{
		w->slots[round & 1][lane] = bits;
		return src < 32 ? w->slots[round & 1][src] : bits;
	}
	if (w->arrived == 0)
		w->delta = delta;
	else if (w->delta != delta)
		stop("lanes of a warp shuffle by different offsets");
	w->slots[round & 1][lane] = bits;
	idle = 0;
	if (++w->arrived == w->lanes)
	{
		w->arrived = 0;
		w->round++;
	}
	else
		while (w->round == round)
			yield();
	return src < 32 ? w->slots[round & 1][src] : bits;
}

void *
wals_emu_dynamic_shared(void)
{
	return dynamic_shared;
}

/* ---------------------------------------------------------------------------
 * Traced loads: the span of the addresses that a warp's lanes read with
 * their n-th __ldg of a block, which one transaction covers when it is
 * within 128 bytes.
 */
struct Span
{
	uintptr_t	lo;
	uintptr_t	hi;
};

static std::vector<Span> spans[EMU_MAX_THREADS / 32];
static int	loads_of[EMU_MAX_THREADS];
static long traced_loads;
static long uncoalesced_loads;

void
wals_emu_trace_load(const void *address)
{
	int			t = (int) (running - fibers);
	std::vector<Span> &s = spans[running->thread.warp];
	size_t		n = (size_t) loads_of[t]++;
	uintptr_t	a = (uintptr_t) address;

	if (n == s.size())
		s.push_back(Span{a, a});
	else if (a < s[n].lo)
		s[n].lo = a;
	else if (a > s[n].hi)
		s[n].hi = a;
}

static void
count_spans(void)
{
	for (int w = 0; w < (nthreads + 31) / 32; w++)
	{
		for (const Span &s : spans[w])
		{
			traced_loads++;
			if (s.hi - s.lo >= 128)
				uncoalesced_loads++;
		}
		spans[w].clear();
	}
	memset(loads_of, 0, sizeof(int) * nthreads);
}

/* ---------------------------------------------------------------------------
 * Blocks and launches
 */

static void
run_block(unsigned int b)
{
	wals_emu_block_idx = dim3(b);
	barrier_round = 0;
	barrier_arrived = 0;
	for (int w = 0; w < (nthreads + 31) / 32; w++)
	{
		warps[w].arrived = 0;
		warps[w].lanes = nthreads - 32 * w < 32 ? nthreads - 32 * w : 32;
	}
	for (int t = 0; t < nthreads; t++)
	{
		fiber_start(&fibers[t]);
		fibers[t].next = &fibers[t > 0 ? t - 1 : nthreads - 1];
		fibers[t].prev = &fibers[t < nthreads - 1 ? t + 1 : 0];
	}
	alive = nthreads;
	idle = 0;
	running = &fibers[nthreads - 1];
	wals_emu_self = &running->thread;
#if defined(__x86_64__)
	emu_switch(&scheduler_sp, running->sp);
#else
	swapcontext(&scheduler_context, &running->context);
#endif
	if (wals_emu_tracing)
		count_spans();
}

/*
 * The order in which the blocks of a grid of n run: a stride through them
 * from the last, coprime to n so that every block runs once.
 */
static unsigned int
block_stride(unsigned int n)
{
	unsigned int s = n / 2 + 1;

	while (s > 1)
	{
		unsigned int a = n;
		unsigned int b = s;

		while (b != 0)
		{
			unsigned int r = a % b;

			a = b;
			b = r;
		}
		if (a == 1)
			return s;
		s--;
	}
	return 1;
}

static cudaError_t last_error = cudaSuccess;
static int	current_device;
static bool context[EMU_MAX_DEVICES];
static std::map<const void *, int> shared_allowed;

static void
launch_failed(cudaError_t err)
{
	if (last_error == cudaSuccess)
		last_error = err;
}

void
wals_emu_launch(const void *kernel, dim3 grid, dim3 block, size_t shared, WalsEmuBody *b)
{
	std::map<const void *, int>::iterator allowed = shared_allowed.find(kernel);
	size_t		limit = allowed != shared_allowed.end() ? (size_t) allowed->second :
		EMU_SHARED_DEFAULT;
	unsigned int stride;

	if (knobs.driver != 1 || knobs.devices < 1)
	{
		launch_failed(knobs.driver != 1 ? cudaErrorInsufficientDriver : cudaErrorNoDevice);
		return;
	}
	context[current_device] = true;
	if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1)
		stop("only one-dimensional grids and blocks are emulated");
	if (grid.x < 1 || grid.x > 0x7fffffffu || block.x < 1 || block.x > EMU_MAX_THREADS)
	{
		launch_failed(cudaErrorInvalidConfiguration);
		return;
	}
	if (shared > limit || shared > EMU_SHARED_MAX)
	{
		launch_failed(cudaErrorInvalidValue);
		return;
	}
	if (fault(&knobs.fail_launch_at))
	{
		launch_failed(cudaErrorLaunchOutOfResources);
		return;
	}
	body = b;
	kernel_running = kernel;
	nthreads = (int) block.x;
	wals_emu_block_dim = block;
	wals_emu_grid_dim = grid;
	wals_emu_tracing = knobs.trace_loads != 0;
	for (int t = 0; t < nthreads; t++)
	{
		fibers[t].thread.tid = dim3((unsigned int) t);
		fibers[t].thread.lane = t % 32;
		fibers[t].thread.warp = t / 32;
	}
	stride = block_stride(grid.x);
	for (unsigned int i = 0; i < grid.x; i++)
	{
		/* shared memory holds garbage when a block starts: NaN */
		memset(dynamic_shared, 0xff, shared);
		run_block(grid.x - 1 - (unsigned int) (((unsigned long) i * stride) % grid.x));
	}
	wals_emu_self = NULL;
}

/* ---------------------------------------------------------------------------
 * The runtime: devices, memory, errors
 */

struct Allocation
{
	size_t		bytes;
	int			device;
};

static std::map<uintptr_t, Allocation> allocations;
static size_t live[EMU_MAX_DEVICES];

/* Whether [p, p + bytes) lies in one allocation of the device. */
static bool
on_device(const void *p, size_t bytes)
{
	std::map<uintptr_t, Allocation>::iterator it = allocations.upper_bound((uintptr_t) p);

	if (it == allocations.begin())
		return false;
	--it;
	return (uintptr_t) p + bytes <= it->first + it->second.bytes;
}

static cudaError_t
usable(void)
{
	if (knobs.driver != 1)
		return cudaErrorInsufficientDriver;
	if (knobs.devices < 1)
		return cudaErrorNoDevice;
	context[current_device] = true;
	return cudaSuccess;
}

cudaError_t
cudaGetDeviceCount(int *count)
{
	*count = 0;
	if (knobs.driver != 1)
		return cudaErrorInsufficientDriver;
	if (knobs.devices < 1)
		return cudaErrorNoDevice;
	*count = (int) knobs.devices;
	return cudaSuccess;
}

cudaError_t
cudaGetDevice(int *device)
{
	*device = current_device;
	return knobs.driver != 1 ? cudaErrorInsufficientDriver : cudaSuccess;
}

/* As CUDA 12 on, selecting a device starts its context. */
cudaError_t
cudaSetDevice(int device)
{
	if (knobs.driver != 1)
		return cudaErrorInsufficientDriver;
	if (device < 0 || device >= knobs.devices)
		return cudaErrorInvalidDevice;
	current_device = device;
	context[device] = true;
	return cudaSuccess;
}

/* Ends the current device's context, freeing its memory. */
cudaError_t
cudaDeviceReset(void)
{
	cudaError_t err = usable();

	if (err != cudaSuccess)
		return err;
	for (std::map<uintptr_t, Allocation>::iterator it = allocations.begin();
		 it != allocations.end();)
		if (it->second.device == current_device)
		{
			live[current_device] -= it->second.bytes;
			free((void *) it->first);
			it = allocations.erase(it);
		}
		else
			++it;
	context[current_device] = false;
	return cudaSuccess;
}

cudaError_t
cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
	if (knobs.driver != 1)
		return cudaErrorInsufficientDriver;
	if (device < 0 || device >= knobs.devices)
		return cudaErrorInvalidDevice;
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "wals emulated device %d", device);
	prop->totalGlobalMem = (size_t) knobs.memory;
	prop->major = 9;
	prop->minor = 0;
	return cudaSuccess;
}

cudaError_t
cudaDriverGetVersion(int *version)
{
	*version = knobs.driver == 0 ? 0 : knobs.driver == 2 ? EMU_DRIVER_OLD : EMU_DRIVER_OK;
	return cudaSuccess;
}

cudaError_t
cudaRuntimeGetVersion(int *version)
{
	*version = EMU_DRIVER_OK;
	return cudaSuccess;
}

cudaError_t
cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	cudaError_t err = usable();

	if (err != cudaSuccess)
		return err;
	if (knobs.fail_meminfo)
		return cudaErrorDevicesUnavailable;
	*total_bytes = (size_t) knobs.memory;
	*free_bytes = (size_t) knobs.memory - live[current_device];
	return cudaSuccess;
}

cudaError_t
cudaMalloc(void **p, size_t bytes)
{
	cudaError_t err = usable();

	*p = NULL;
	if (err != cudaSuccess)
		return err;
	if (fault(&knobs.fail_malloc_at) ||
		live[current_device] + bytes > (size_t) knobs.memory)
		return cudaErrorMemoryAllocation;
	*p = malloc(bytes > 0 ? bytes : 1);
	if (*p == NULL)
		return cudaErrorMemoryAllocation;
	allocations[(uintptr_t) *p] = Allocation{bytes, current_device};
	live[current_device] += bytes;
	return cudaSuccess;
}

cudaError_t
cudaFree(void *p)
{
	std::map<uintptr_t, Allocation>::iterator it;

	if (p == NULL)
		return cudaSuccess;
	it = allocations.find((uintptr_t) p);
	if (it == allocations.end())
		return cudaErrorInvalidValue;
	live[it->second.device] -= it->second.bytes;
	allocations.erase(it);
	free(p);
	return cudaSuccess;
}

cudaError_t
cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
	cudaError_t err = usable();
	bool		from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	bool		to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;

	if (err != cudaSuccess)
		return err;
	if (bytes == 0)
		return cudaSuccess;
	if (on_device(src, bytes) != from_device || on_device(dst, bytes) != to_device)
		return cudaErrorInvalidValue;
	memmove(dst, src, bytes);
	return cudaSuccess;
}

/*
 * Host memory pinned and mapped: the emulated kernels read host memory
 * anyway, so what is checked is the bookkeeping a device does, that a
 * range is registered once, mapped only once registered, and unregistered
 * by its start.  Each registration may fail as an allocation does
 * (fail_malloc_at); none counts against the device's memory.
 */
static std::map<uintptr_t, size_t> registered;

/* The registration [p, p + bytes) overlaps, or registered.end(). */
static std::map<uintptr_t, size_t>::iterator
registration_of(const void *p, size_t bytes)
{
	std::map<uintptr_t, size_t>::iterator it = registered.upper_bound((uintptr_t) p + bytes - 1);

	if (it == registered.begin())
		return registered.end();
	--it;
	return it->first + it->second > (uintptr_t) p ? it : registered.end();
}

cudaError_t
cudaHostRegister(void *p, size_t bytes, unsigned int flags)
{
	cudaError_t err = usable();

	if (err != cudaSuccess)
		return err;
	if (p == NULL || bytes == 0 || flags != cudaHostRegisterMapped)
		return cudaErrorInvalidValue;
	if (registration_of(p, bytes) != registered.end())
		return cudaErrorHostMemoryAlreadyRegistered;
	if (fault(&knobs.fail_malloc_at))
		return cudaErrorMemoryAllocation;
	registered[(uintptr_t) p] = bytes;
	return cudaSuccess;
}

cudaError_t
cudaHostGetDevicePointer(void **device, void *host, unsigned int flags)
{
	cudaError_t err = usable();

	*device = NULL;
	if (err != cudaSuccess)
		return err;
	if (flags != 0 || registration_of(host, 1) == registered.end())
		return cudaErrorInvalidValue;
	*device = host;
	return cudaSuccess;
}

cudaError_t
cudaHostUnregister(void *p)
{
	std::map<uintptr_t, size_t>::iterator it = registered.find((uintptr_t) p);

	if (it == registered.end())
		return cudaErrorHostMemoryNotRegistered;
	registered.erase(it);
	return cudaSuccess;
}

cudaError_t
cudaMemset(void *p, int value, size_t bytes)
{
	cudaError_t err = usable();

	if (err != cudaSuccess)
		return err;
	if (bytes > 0 && !on_device(p, bytes))
		return cudaErrorInvalidValue;
	memset(p, value, bytes);
	return cudaSuccess;
}

cudaError_t
cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t)
{
	return cudaMemset(p, value, bytes);
}

cudaError_t
cudaDeviceSynchronize(void)
{
	return usable();
}

cudaError_t
cudaGetLastError(void)
{
	cudaError_t err = last_error;

	last_error = cudaSuccess;
	return err;
}

cudaError_t
cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value)
{
	cudaError_t err = usable();

	if (err != cudaSuccess)
		return err;
	if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
		value > EMU_SHARED_MAX)
		return cudaErrorInvalidValue;
	shared_allowed[kernel] = value;
	return cudaSuccess;
}

const char *
cudaGetErrorString(cudaError_t err)
{
	switch (err)
	{
		case cudaSuccess:
			return "no error";
		case cudaErrorInvalidValue:
			return "invalid argument";
		case cudaErrorMemoryAllocation:
			return "out of memory";
		case cudaErrorInsufficientDriver:
			return "CUDA driver version is insufficient for CUDA runtime version";
		case cudaErrorNoDevice:
			return "no CUDA-capable device is detected";
		case cudaErrorInvalidDevice:
			return "invalid device ordinal";
		case cudaErrorLaunchOutOfResources:
			return "too many resources requested for launch";
		case cudaErrorInvalidConfiguration:
			return "invalid configuration argument";
		case cudaErrorDevicesUnavailable:
			return "CUDA-capable device(s) is/are busy or unavailable";
		case cudaErrorHostMemoryAlreadyRegistered:
			return "part or all of the requested memory range is already mapped";
		case cudaErrorHostMemoryNotRegistered:
			return "pointer does not correspond to a registered memory region";
	}
	return "unrecognized error code";
}

/* ---------------------------------------------------------------------------
 * cuBLAS and cuSOLVER
 */

/* Handles hold nothing: the emulation keeps no state per handle. */
struct WalsEmuBlas
{
};

struct WalsEmuSolver
{
};

cublasStatus_t
cublasCreate(cublasHandle_t *handle)
{
	if (usable() != cudaSuccess || fault(&knobs.fail_blas_at))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*handle = new WalsEmuBlas();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasDestroy(cublasHandle_t handle)
{
	delete handle;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
			int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
			const float *beta, float *C, int ldc)
{
	size_t		a_cols = (size_t) (ta == CUBLAS_OP_N ? k : m);
	size_t		b_cols = (size_t) (tb == CUBLAS_OP_N ? n : k);

	if (handle == NULL || m < 0 || n < 0 || k < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (fault(&knobs.fail_blas_at))
		return CUBLAS_STATUS_EXECUTION_FAILED;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	if ((k > 0 && (!on_device(A, sizeof(float) * lda * a_cols) ||
				   !on_device(B, sizeof(float) * ldb * b_cols))) ||
		!on_device(C, sizeof(float) * ldc * (size_t) n))
		return CUBLAS_STATUS_INVALID_VALUE;
	cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
				tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, *alpha, A, lda, B,
				ldb, *beta, C, ldc);
	return CUBLAS_STATUS_SUCCESS;
}

const char *
cublasGetStatusString(cublasStatus_t status)
{
	switch (status)
	{
		case CUBLAS_STATUS_SUCCESS:
			return "CUBLAS_STATUS_SUCCESS";
		case CUBLAS_STATUS_NOT_INITIALIZED:
			return "CUBLAS_STATUS_NOT_INITIALIZED";
		case CUBLAS_STATUS_ALLOC_FAILED:
			return "CUBLAS_STATUS_ALLOC_FAILED";
		case CUBLAS_STATUS_INVALID_VALUE:
			return "CUBLAS_STATUS_INVALID_VALUE";
		case CUBLAS_STATUS_EXECUTION_FAILED:
			return "CUBLAS_STATUS_EXECUTION_FAILED";
	}
	return "CUBLAS_STATUS_UNKNOWN";
}

cusolverStatus_t
cusolverDnCreate(cusolverDnHandle_t *handle)
{
	if (usable() != cudaSuccess || fault(&knobs.fail_solver_at))
		return CUSOLVER_STATUS_NOT_INITIALIZED;
	*handle = new WalsEmuSolver();
	return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t
cusolverDnDestroy(cusolverDnHandle_t handle)
{
	delete handle;
	return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t
cusolverDnSpotrf_bufferSize(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, float *,
							int lda, int *lwork)
{
	if (handle == NULL || uplo != CUBLAS_FILL_MODE_LOWER || n < 0 || lda < n)
		return CUSOLVER_STATUS_INVALID_VALUE;
	if (fault(&knobs.fail_solver_at))
		return CUSOLVER_STATUS_EXECUTION_FAILED;
	*lwork = 64 * (n > 0 ? n : 1);
	return CUSOLVER_STATUS_SUCCESS;
}

/* One factorization: info into device memory, as cuSOLVER leaves it. */
static cusolverStatus_t
potrf(int n, float *A, int lda, int *info)
{
	int			result = 0;

	if (!on_device(A, sizeof(float) * lda * (size_t) n) || !on_device(info, sizeof(int)))
		return CUSOLVER_STATUS_INVALID_VALUE;
	spotrf_("L", &n, A, &lda, &result);
	*info = result;
	return CUSOLVER_STATUS_SUCCESS;
}

static cusolverStatus_t
potrs(int n, int nrhs, const float *A, int lda, float *B, int ldb, int *info)
{
	int			result = 0;

	if (!on_device(A, sizeof(float) * lda * (size_t) n) ||
		!on_device(B, sizeof(float) * ldb * (size_t) nrhs))
		return CUSOLVER_STATUS_INVALID_VALUE;
	spotrs_("L", &n, &nrhs, A, &lda, B, &ldb, &result);
	if (info != NULL)
		*info = result;
	return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t
cusolverDnSpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, float *A, int lda,
				 float *work, int lwork, int *info)
{
	if (handle == NULL || uplo != CUBLAS_FILL_MODE_LOWER || n < 0 || lda < n ||
		lwork < 64 * n || !on_device(work, sizeof(float) * (size_t) lwork))
		return CUSOLVER_STATUS_INVALID_VALUE;
	if (fault(&knobs.fail_solver_at))
		return CUSOLVER_STATUS_EXECUTION_FAILED;
	return potrf(n, A, lda, info);
}

cusolverStatus_t
cusolverDnSpotrs(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, int nrhs,
				 const float *A, int lda, float *B, int ldb, int *info)
{
	if (handle == NULL || uplo != CUBLAS_FILL_MODE_LOWER || n < 0 || lda < n || ldb < n ||
		!on_device(info, sizeof(int)))
		return CUSOLVER_STATUS_INVALID_VALUE;
	if (fault(&knobs.fail_solver_at))
		return CUSOLVER_STATUS_EXECUTION_FAILED;
	return potrs(n, nrhs, A, lda, B, ldb, info);
}

cusolverStatus_t
cusolverDnSpotrfBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n,
						float *Aarray[], int lda, int *info, int batch)
{
	if (handle == NULL || uplo != CUBLAS_FILL_MODE_LOWER || n < 0 || lda < n || batch < 0 ||
		!on_device(Aarray, sizeof(float *) * (size_t) batch) ||
		!on_device(info, sizeof(int) * (size_t) batch))
		return CUSOLVER_STATUS_INVALID_VALUE;
	if (fault(&knobs.fail_solver_at))
		return CUSOLVER_STATUS_EXECUTION_FAILED;
	for (int j = 0; j < batch; j++)
		if (potrf(n, Aarray[j], lda, info + j) != CUSOLVER_STATUS_SUCCESS)
			return CUSOLVER_STATUS_INVALID_VALUE;
	return CUSOLVER_STATUS_SUCCESS;
}

/* As cuSOLVER's, one right-hand side only; it solves whatever potrf left. */
cusolverStatus_t
cusolverDnSpotrsBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, int nrhs,
						float *Aarray[], int lda, float *Barray[], int ldb, int *info,
						int batch)
{
	if (handle == NULL || uplo != CUBLAS_FILL_MODE_LOWER || n < 0 || nrhs != 1 || lda < n ||
		ldb < n || batch < 0 || !on_device(Aarray, sizeof(float *) * (size_t) batch) ||
		!on_device(Barray, sizeof(float *) * (size_t) batch) || !on_device(info, sizeof(int)))
		return CUSOLVER_STATUS_INVALID_VALUE;
	if (fault(&knobs.fail_solver_at))
		return CUSOLVER_STATUS_EXECUTION_FAILED;
	*info = 0;
	for (int j = 0; j < batch; j++)
		if (potrs(n, nrhs, Aarray[j], lda, Barray[j], ldb, NULL) != CUSOLVER_STATUS_SUCCESS)
			return CUSOLVER_STATUS_INVALID_VALUE;
	return CUSOLVER_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------------------
 * The knobs, for check_train
 */

static long *
knob(const char *name)
{
	static const struct
	{
		const char *name;
		long	   *value;
	}			table[] = {
		{"devices", &knobs.devices},
		{"driver", &knobs.driver},
		{"memory", &knobs.memory},
		{"fail_malloc_at", &knobs.fail_malloc_at},
		{"fail_launch_at", &knobs.fail_launch_at},
		{"fail_blas_at", &knobs.fail_blas_at},
		{"fail_solver_at", &knobs.fail_solver_at},
		{"fail_meminfo", &knobs.fail_meminfo},
		{"break_barrier", &knobs.break_barrier},
		{"break_shuffle", &knobs.break_shuffle},
		{"trace_loads", &knobs.trace_loads},
	};

	for (size_t k = 0; k < sizeof(table) / sizeof(table[0]); k++)
		if (strcmp(table[k].name, name) == 0)
			return table[k].value;
	fprintf(stderr, "wals emulated device: no knob \"%s\"\n", name);
	abort();
}

/* Set a knob; returns its value before. */
extern "C" __attribute__((visibility("default"))) long
wals_emu_set(const char *name, long value)
{
	long	   *k = knob(name);
	long		old = *k;

	if (k == &knobs.devices && (value < 0 || value > EMU_MAX_DEVICES))
	{
		fprintf(stderr, "wals emulated device: %ld devices, not 0 to %d\n", value,
				EMU_MAX_DEVICES);
		abort();
	}
	*k = value;
	if (strcmp(name, "trace_loads") == 0)
	{
		traced_loads = 0;
		uncoalesced_loads = 0;
	}
	return old;
}

/*
 * The knobs of a process that loads the library without calling
 * wals_emu_set, a server backend: WALS_EMU="fail_launch_at=40,memory=1000"
 * sets them when the library is loaded, so each backend counts its faults
 * from its own first call.
 */
__attribute__((constructor)) static void
knobs_from_environment(void)
{
	const char *spec = getenv("WALS_EMU");
	char		name[32];
	long		value;
	int			used;

	while (spec != NULL && sscanf(spec, " %31[a-z_] = %ld%n", name, &value, &used) == 2)
	{
		wals_emu_set(name, value);
		spec += used;
		spec = *spec == ',' ? spec + 1 : NULL;
	}
}

/*
 * What the device holds: "live_bytes" of device arg, "context" (whether
 * device arg has one), "current_device", "registered_bytes" of host memory
 * pinned, and of the loads traced since trace_loads was set,
 * "traced_loads" and "uncoalesced_loads".
 */
extern "C" __attribute__((visibility("default"))) long
wals_emu_get(const char *name, long arg)
{
	if (strcmp(name, "live_bytes") == 0)
		return arg >= 0 && arg < EMU_MAX_DEVICES ? (long) live[arg] : -1;
	if (strcmp(name, "context") == 0)
		return arg >= 0 && arg < EMU_MAX_DEVICES ? context[arg] : -1;
	if (strcmp(name, "current_device") == 0)
		return current_device;
	if (strcmp(name, "registered_bytes") == 0)
	{
		long		bytes = 0;

		for (std::map<uintptr_t, size_t>::iterator it = registered.begin();
			 it != registered.end(); ++it)
			bytes += (long) it->second;
		return bytes;
	}
	if (strcmp(name, "traced_loads") == 0)
		return traced_loads;
	if (strcmp(name, "uncoalesced_loads") == 0)
		return uncoalesced_loads;
	return *knob(name);
}
