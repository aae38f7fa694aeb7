/*
 * simd_family.h
 *	  One family of the solvers' kernels, for the vector width and
 *	  primitives that the including file defines (simd_base.h lists them):
 *	  the base, every operation's file, and the family's table.
 *	  kernels_simd.c includes it once per instruction set.
 *
 * The operations come in this order because each may use only what an
 * earlier one defined, and the table, last, names them all; the names the
 * including file defined are undefined at the end, so that the next
 * instruction set defines its own.
 */
#include "simd_base.h"
#include "simd_cg.h"
#include "simd_dots.h"
#include "simd_rank.h"
#include "simd_gram.h"
#include "simd_chol.h"
#include "simd_subspace.h"

static const WalsKernels SIMD(kernels) = {
	SIMD_NAME,
	SIMD_ISA,
	SIMD(row_pass),
	SIMD(symv),
	SIMD(dots),
	SIMD(dots2),
	SIMD(dot),
	SIMD(axpy),
	SIMD(xpay),
	SIMD(chol_gather),
	SIMD(gram_acc),
	SIMD(chol_solve),
	SIMD(gemm_nt),
	SIMD(sub_block),
	SIMD(rank_counts)
};

#undef SIMD_INLINE
#undef SIMD_UNROLL
#undef SIMD_TILE
#undef PREFETCH_CELLS
#undef PREFETCH_FLOATS
#undef SIMD_DISPATCH
#undef SIMD_DISPATCH_F
#undef SIMD_W
#undef V
#undef SIMD_FN
#undef SIMD
#undef SIMD_ISA
#undef SIMD_NAME
#undef SIMD_ONE
#undef SIMD_BOTH
#undef SIMD_ACC
#undef vzero
#undef vset1
#undef vld
#undef vst
#undef vldn
#undef vstn
#undef vfma
#undef vfnma
#undef vmul
#undef vadd
#undef vlane
#undef vfirst
#undef vrsqrt
#undef vsum4
#undef vreduce
#undef vkeep_from
#undef vput
#undef vfactors4
#undef vsubfactors4
