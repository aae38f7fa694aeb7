/*
 * kernels.c
 *	  The choice of kernels for the CPU at hand.
 *
 * PGXS compiles for the baseline instruction set (SSE2 on x86-64), while
 * nearly all of a sweep's time goes to a few loops over the cells of a row.
 * Those loops exist for each instruction set with vector registers in
 * kernels_simd.c (AVX-512, AVX2, NEON), and once more in portable C in
 * kernels_generic.c: the kernels of any other CPU, and the reference the
 * others are tested against.
 *
 * The choice is made once per process from what the CPU and the operating
 * system support; every row of a sweep uses the same kernels, so rows stay
 * independent of how they are split between workers.
 */
#include <string.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "wals_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define WALS_X86 1
#endif

#ifdef WALS_X86

/*
 * __builtin_cpu_supports also checks that the operating system saves the
 * wide registers, not only that the CPU has them.
 */
static int
cpu_has(WalsIsa isa)
{
	__builtin_cpu_init();
	switch (isa)
	{
		case WALS_ISA_AVX512:
			return __builtin_cpu_supports("avx512f") &&
				__builtin_cpu_supports("avx512dq") &&
				__builtin_cpu_supports("avx512vl") &&
				__builtin_cpu_supports("avx512bw");
		case WALS_ISA_AVX2:
			return __builtin_cpu_supports("avx2") &&
				__builtin_cpu_supports("fma");
		case WALS_ISA_GENERIC:
			return 1;
		default:
			return 0;
	}
}

int
wals_cpu_feature(WalsCpuFeature feature)
{
	__builtin_cpu_init();
	return feature == WALS_CPU_VNNI && cpu_has(WALS_ISA_AVX512) &&
		__builtin_cpu_supports("avx512vnni");
}
#elif defined(__aarch64__) && defined(__linux__)

/* Advanced SIMD is part of every AArch64 CPU; SDOT (dotprod) is not. */
static int
cpu_has(WalsIsa isa)
{
	return isa == WALS_ISA_NEON || isa == WALS_ISA_GENERIC;
}

int
wals_cpu_feature(WalsCpuFeature feature)
{
	return feature == WALS_CPU_DOTPROD &&
		(getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
}
#else
static int
cpu_has(WalsIsa isa)
{
	return isa == WALS_ISA_GENERIC;
}

int
wals_cpu_feature(WalsCpuFeature feature)
{
	return 0;
}
#endif

static const char *const isa_names[WALS_ISA_COUNT] = {
	"avx512", "avx2", "neon", "generic"
};

static const WalsKernels *
kernels_built(WalsIsa isa)
{
	switch (isa)
	{
		case WALS_ISA_GENERIC:
			return &wals_generic_kernels;
		default:
			return wals_kernels_simd(isa);
	}
}

const WalsKernels *
wals_kernels_isa(WalsIsa isa)
{
	if ((int) isa < 0 || isa >= WALS_ISA_COUNT || !cpu_has(isa))
		return NULL;
	return kernels_built(isa);
}

static const WalsKernels *chosen;

/*
 * A race between threads on the first call is benign: each stores the same
 * pointer.  Backends are single-threaded anyway.
 */
const WalsKernels *
wals_kernels(void)
{
	int			isa;

	for (isa = 0; chosen == NULL && isa < WALS_ISA_COUNT; isa++)
		chosen = wals_kernels_isa((WalsIsa) isa);
	return chosen;
}

void
wals_kernels_force(const WalsKernels *kernels)
{
	chosen = kernels;
}

const char *
wals_kernels_name(void)
{
	return wals_kernels()->name;
}

/* The instruction set a family name stands for, or WALS_ISA_COUNT. */
static WalsIsa
isa_named(const char *name)
{
	int			isa;

	for (isa = 0; isa < WALS_ISA_COUNT; isa++)
		if (strcmp(name, isa_names[isa]) == 0)
			break;
	return (WalsIsa) isa;
}

int
wals_kernels_check(const char *name)
{
	WalsIsa		isa = isa_named(name);

	if (strcmp(name, "auto") == 0)
		return 1;
	if (isa == WALS_ISA_COUNT)
		return -1;
	return wals_kernels_isa(isa) != NULL;
}

/* "auto", or a family the CPU cannot run, leaves the choice to wals_kernels(). */
void
wals_kernels_use(const char *name)
{
	chosen = wals_kernels_isa(isa_named(name));
}

const char *
wals_kernels_available(void)
{
	static char list[64];
	int			isa;

	if (list[0] == '\0')
		for (isa = 0; isa < WALS_ISA_COUNT; isa++)
			if (wals_kernels_isa((WalsIsa) isa) != NULL)
			{
				if (list[0] != '\0')
					strcat(list, ",");
				strcat(list, isa_names[isa]);
			}
	return list;
}
