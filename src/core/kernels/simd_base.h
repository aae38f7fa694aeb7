/*
 * simd_base.h
 *	  The base of the solvers' inner loops, written once for any vector
 *	  width: what every operation of the template builds on (simd_family.h
 *	  puts them together, and kernels_simd.c instantiates the family for
 *	  AVX-512, AVX2 and NEON).
 *
 * This file holds what the operations share: the checks of the including
 * file's budgets, the dispatch on constant widths, and the reading of a
 * row's cells.  Each operation is a file of its own, which simd_family.h
 * includes after this one: the CG sweep (simd_cg.h), the predictions of a
 * row's cells (simd_dots.h), the ranks the metrics count (simd_rank.h),
 * the Cholesky system's gather and Gram (simd_gram.h), its factorisation
 * and substitutions (simd_chol.h), and the subspace solver's block pass
 * (simd_subspace.h).
 *
 * A pass over a row's cells takes them four at a time (group_rows, dots4
 * below), so that the four horizontal sums share their shuffles and the
 * updates that follow come in independent groups.  Factor rows are read in
 * place through the row's indices, with software prefetching: gathering
 * them into a contiguous copy first costs a store per cell, and made a CG
 * iteration of the 20M-rating benchmark 14% (rows of 1024 cells or more)
 * to 31% (every row) slower.
 *
 * Why one template and not one file of intrinsics per instruction set:
 * the kernels differ between AVX-512, AVX2 and NEON only in the width of a
 * vector and in how many of them the registers hold, so the algorithm is
 * written here once and each instruction set supplies a dozen primitives
 * (loads with a short tail, fused multiply-adds, horizontal sums, a lane
 * broadcast, an approximate inverse square root) and three register
 * budgets.  Instantiated for AVX-512 it runs the 20M-rating benchmark as
 * fast as the hand-written file it replaced (doc/performance.md).
 *
 * Loops over a row's vectors have trip counts that are constants once the
 * always-inline functions are instantiated for 1 to SIMD_ONE vectors
 * (SIMD_DISPATCH below), and once more for rows of whole vectors (f a
 * multiple of the width, as f = 32, 64, 128 are), which need no short
 * loads at all; fully unrolled, their arrays of vectors become registers.
 *
 * The file that includes simd_family.h defines, before it:
 *	 SIMD_W			floats per vector
 *	 V				the vector type
 *	 SIMD_FN		the attributes of every function (its target)
 *	 SIMD(x)		x with the instruction set's suffix
 *	 SIMD_ISA, SIMD_NAME	the table's WalsIsa and name
 *	 SIMD_ONE		vectors of one f-vector kept in registers at most
 *	 SIMD_BOTH		the same when a row pass keeps two, v and out
 *	 SIMD_ACC		accumulators of a register tile: 4, 8 or 16
 * and the primitives vzero, vset1, vld, vst, vldn, vstn, vfma, vfnma,
 * vmul, vadd, vlane, vfirst, vrsqrt, vsum4, vreduce, vkeep_from, vput,
 * vfactors4 (a group's four factors from its sums, broadcast) and
 * vsubfactors4 (the same for the subspace pass, with its predictions).
 */

/* A tile's rows of partial sums (chol_chunk) must divide a panel's four. */
#if SIMD_ACC != 4 && SIMD_ACC != 8 && SIMD_ACC != 16
#error "SIMD_ACC must be 4, 8 or 16"
#endif

#define SIMD_INLINE SIMD_FN inline __attribute__((always_inline))
#define SIMD_UNROLL _Pragma("GCC unroll 16")
#define SIMD_TILE (SIMD_ACC / 4)

/*
 * Cells ahead that prefetching asks for: four cells of f = 64 are 16 cache
 * lines, and four such groups in flight cover the latency of memory.
 */
#define PREFETCH_CELLS 16

/* Floats of a row that prefetch_row asks for at most: four lines. */
#define PREFETCH_FLOATS 64

/*
 * CALL(k) for k = n, with k a constant, for n up to limit (itself a
 * constant, at most 16): the calls past limit are dropped at compile time.
 */
#define SIMD_DISPATCH(n, limit, CALL) \
	do { \
		switch (n) \
		{ \
			case 1: CALL(1); break; \
			case 2: if (2 <= (limit)) CALL(2); break; \
			case 3: if (3 <= (limit)) CALL(3); break; \
			case 4: if (4 <= (limit)) CALL(4); break; \
			case 5: if (5 <= (limit)) CALL(5); break; \
			case 6: if (6 <= (limit)) CALL(6); break; \
			case 7: if (7 <= (limit)) CALL(7); break; \
			case 8: if (8 <= (limit)) CALL(8); break; \
			case 9: if (9 <= (limit)) CALL(9); break; \
			case 10: if (10 <= (limit)) CALL(10); break; \
			case 11: if (11 <= (limit)) CALL(11); break; \
			case 12: if (12 <= (limit)) CALL(12); break; \
			case 13: if (13 <= (limit)) CALL(13); break; \
			case 14: if (14 <= (limit)) CALL(14); break; \
			case 15: if (15 <= (limit)) CALL(15); break; \
			case 16: if (16 <= (limit)) CALL(16); break; \
		} \
	} while (0)

/*
 * The same, with whole, a constant in CALL's scope, telling whether f is a
 * multiple of the width: rows of whole vectors then need no short loads.
 */
#define SIMD_DISPATCH_F(f, n, limit, CALL) \
	do { \
		if ((f) % SIMD_W == 0) \
		{ \
			const int	whole = 1; \
			SIMD_DISPATCH(n, limit, CALL); \
		} \
		else \
		{ \
			const int	whole = 0; \
			SIMD_DISPATCH(n, limit, CALL); \
		} \
	} while (0)

/* Floats in the last vector of an f-vector, 1 to SIMD_W. */
static SIMD_INLINE int
SIMD(tail_of) (int f)
{
	return f - SIMD_W * ((f - 1) / SIMD_W);
}

/* Vector c of an f-vector of nv vectors, short if it is the last. */
static SIMD_INLINE V
SIMD(ldv) (const float *p, int c, int nv, int tail)
{
	if (c < nv - 1 || tail == SIMD_W)
		return vld(p + SIMD_W * c);
	return vldn(p + SIMD_W * c, tail);
}

static SIMD_INLINE void
SIMD(stv) (float *p, int c, int nv, int tail, V x)
{
	if (c < nv - 1 || tail == SIMD_W)
		vst(p + SIMD_W * c, x);
	else
		vstn(p + SIMD_W * c, tail, x);
}

/*
 * Ask for a factor row some cells ahead of its use.  A row's cells point
 * all over Y, which defeats the hardware prefetcher, and an item's users
 * are spread over more than the last-level cache holds, so without this
 * the first pass over a row waits on memory cell after cell.  The last
 * line is asked for on its own: rows need not start on a line.  Of a row
 * longer than PREFETCH_FLOATS only the start is asked for: the hardware's
 * streamer follows a row once it has begun, and asking for all of it (32
 * lines at f = 512, for four cells at a time) filled the line buffers, so
 * that the prefetches themselves waited: reading rows of f = 512 from
 * memory went 60% faster with the start alone.
 */
static SIMD_INLINE void
SIMD(prefetch_row) (const float *y, int f, int nv)
{
	int			len = nv * SIMD_W < PREFETCH_FLOATS ? nv * SIMD_W : PREFETCH_FLOATS;
	int			k;

	SIMD_UNROLL
	for (k = 0; k < len; k += 16)
		__builtin_prefetch(y + k, 0, 3);
	__builtin_prefetch(y + (f <= PREFETCH_FLOATS ? f - 1 : PREFETCH_FLOATS), 0, 3);
}

/* The four cells' rows PREFETCH_CELLS ahead of cell i, if the row has them. */
static SIMD_INLINE void
SIMD(prefetch_ahead) (const float *Y, const int32_t *idx, int i, int n, int f,
					  int nv)
{
	const int32_t *ahead = idx + i + PREFETCH_CELLS;

	if (i + PREFETCH_CELLS + 4 > n)
		return;
	SIMD(prefetch_row) (Y + (size_t) ahead[0] * f, f, nv);
	SIMD(prefetch_row) (Y + (size_t) ahead[1] * f, f, nv);
	SIMD(prefetch_row) (Y + (size_t) ahead[2] * f, f, nv);
	SIMD(prefetch_row) (Y + (size_t) ahead[3] * f, f, nv);
}

/*
 * The rows of cells i..i+3 of a row; past the row's end, in its last group
 * (live, the group's cells in the row, below four), they repeat cell i's
 * row, which the factors then weigh with zero, so short rows take no
 * slower path.  Full groups pass a constant four, and the test goes.
 */
static SIMD_INLINE void
SIMD(group_rows) (const float *Y, const int32_t *idx, int i, int f, int live,
				  const float **y)
{
	int			k;

	SIMD_UNROLL
	for (k = 0; k < 4; k++)
		y[k] = Y + (size_t) idx[i + (k < live ? k : 0)] * f;
}

/*
 * The dot products y_k.v of the four rows of a group, as four vectors of
 * partial sums, v in nv vectors (in registers when the caller's array is).
 */
static SIMD_INLINE void
SIMD(dots4) (const float *const *y, const V *vv, int nv, int tail, V *d)
{
	int			c;
	int			k;

	SIMD_UNROLL
	for (k = 0; k < 4; k++)
		d[k] = vzero();
	SIMD_UNROLL
	for (c = 0; c < nv; c++)
	{
		d[0] = vfma(SIMD(ldv) (y[0], c, nv, tail), vv[c], d[0]);
		d[1] = vfma(SIMD(ldv) (y[1], c, nv, tail), vv[c], d[1]);
		d[2] = vfma(SIMD(ldv) (y[2], c, nv, tail), vv[c], d[2]);
		d[3] = vfma(SIMD(ldv) (y[3], c, nv, tail), vv[c], d[3]);
	}
}
