/*
 * kernels_simd.h
 *	  The solvers' inner loops, written once for any vector width;
 *	  kernels_simd.c instantiates them for AVX-512, AVX2 and NEON.
 *
 * A row pass reads each of the row's cells once: the dot product y_i.v and
 * the update out += t_i y_i share the loaded y_i.  While v fits in the
 * registers it stays there for the whole row, and so does out where both
 * fit (up to f = 64 on AVX-512, 32 on NEON, 16 on AVX2; on AVX2's sixteen
 * registers f = 64 is eight vectors each, so out goes to a buffer in L1,
 * read and written once per group of four cells).  Cells go four at a time, so
 * that the four horizontal sums share their shuffles and the updates of
 * out come in independent groups.  Factor rows are read in place through
 * the row's indices, with software prefetching: gathering them into a
 * contiguous copy first costs a store per cell, and made a CG iteration of
 * the 20M-rating benchmark 14% (rows of 1024 cells or more) to 31% (every
 * row) slower.
 *
 * The Cholesky system is built by blocks of gathered, weighted cells with
 * an outer-product kernel on register tiles of 4 rows by SIMD_ACC / 4
 * vectors, and factorised here too, left-looking by panels of four rows:
 * at f = 64 LAPACK's small-matrix path costs more in calls and copies than
 * in arithmetic.
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
 * always-inline functions below are instantiated for 1 to SIMD_ONE
 * vectors, and once more for rows of whole vectors (f a multiple of the
 * width, as f = 32, 64, 128 are), which need no short loads at all; fully
 * unrolled, their arrays of vectors become registers.
 *
 * The including file defines, before including this one:
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

/* o[c] += t0 y0 + t1 y1 + t2 y2 + t3 y3 over the nv vectors. */
static SIMD_INLINE void
SIMD(update4) (const float *const *y, const V *t, V *o, int nv, int tail)
{
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
	{
		o[c] = vfma(t[0], SIMD(ldv) (y[0], c, nv, tail), o[c]);
		o[c] = vfma(t[1], SIMD(ldv) (y[1], c, nv, tail), o[c]);
		o[c] = vfma(t[2], SIMD(ldv) (y[2], c, nv, tail), o[c]);
		o[c] = vfma(t[3], SIMD(ldv) (y[3], c, nv, tail), o[c]);
	}
}

/*
 * The same, out in a buffer of whole vectors: each vector of it is read
 * and written once for the four cells.
 */
static SIMD_INLINE void
SIMD(update4_mem) (const float *const *y, const V *t, float *o, int nv,
				   int tail)
{
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
	{
		V			oc = vld(o + SIMD_W * c);

		oc = vfma(t[0], SIMD(ldv) (y[0], c, nv, tail), oc);
		oc = vfma(t[1], SIMD(ldv) (y[1], c, nv, tail), oc);
		oc = vfma(t[2], SIMD(ldv) (y[2], c, nv, tail), oc);
		oc = vfma(t[3], SIMD(ldv) (y[3], c, nv, tail), oc);
		vst(o + SIMD_W * c, oc);
	}
}

/*
 * Row pass with v in registers (nv a constant), and out too if both.  One
 * set of accumulators: their chains of four dependent FMAs per group take
 * as long as the group's arithmetic, and a second set would push vectors
 * out of the registers.
 */
static SIMD_INLINE void
SIMD(row_pass_reg) (const float *Y, const int32_t *idx, const float *val,
					int n, int f, const WalsPassCoef *coef, const float *v,
					float *out, const int nv, const int both, const int whole)
{
	int			tail = whole ? SIMD_W : SIMD(tail_of) (f);
	V			vv[SIMD_ONE];
	V			o[SIMD_ONE];
	float		acc[SIMD_ONE * SIMD_W] __attribute__((aligned(64)));
	const float *y[4];
	V			d[4];
	V			t[4];
	int			i;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
	{
		vv[c] = SIMD(ldv) (v, c, nv, tail);
		o[c] = vzero();
		if (!both)
			vst(acc + SIMD_W * c, vzero());
	}
	for (i = 0; i < n; i += 4)
	{
		int			live = n - i < 4 ? n - i : 4;

		if (live == 4)
		{
			SIMD(group_rows) (Y, idx, i, f, 4, y);
			SIMD(prefetch_ahead) (Y, idx, i, n, f, nv);
			SIMD(dots4) (y, vv, nv, tail, d);
			vfactors4(coef, val + i, 4, d, t);
		}
		else
		{
			SIMD(group_rows) (Y, idx, i, f, live, y);
			SIMD(dots4) (y, vv, nv, tail, d);
			vfactors4(coef, val + i, live, d, t);
		}
		if (both)
			SIMD(update4) (y, t, o, nv, tail);
		else
			SIMD(update4_mem) (y, t, acc, nv, tail);
	}
	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		SIMD(stv) (out, c, nv, tail, both ? o[c] : vld(acc + SIMD_W * c));
}

/*
 * Wider rows: v and out stay in memory (in L1), still four cells per trip
 * through the row.
 */
static SIMD_FN void
SIMD(row_pass_mem) (const float *Y, const int32_t *idx, const float *val,
					int n, int f, const WalsPassCoef *coef, const float *v,
					float *out)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	const float *y[4];
	V			t[4];
	int			i;
	int			c;

	for (c = 0; c < nv; c++)
		SIMD(stv) (out, c, nv, tail, vzero());
	for (i = 0; i < n; i += 4)
	{
		int			live = n - i < 4 ? n - i : 4;
		V			d[4] = {vzero(), vzero(), vzero(), vzero()};

		SIMD(group_rows) (Y, idx, i, f, live, y);
		SIMD(prefetch_ahead) (Y, idx, i, n, f, nv);
		for (c = 0; c < nv; c++)
		{
			V			vc = SIMD(ldv) (v, c, nv, tail);

			d[0] = vfma(SIMD(ldv) (y[0], c, nv, tail), vc, d[0]);
			d[1] = vfma(SIMD(ldv) (y[1], c, nv, tail), vc, d[1]);
			d[2] = vfma(SIMD(ldv) (y[2], c, nv, tail), vc, d[2]);
			d[3] = vfma(SIMD(ldv) (y[3], c, nv, tail), vc, d[3]);
		}
		vfactors4(coef, val + i, live, d, t);
		for (c = 0; c < nv; c++)
		{
			V			o = SIMD(ldv) (out, c, nv, tail);

			o = vfma(t[0], SIMD(ldv) (y[0], c, nv, tail), o);
			o = vfma(t[1], SIMD(ldv) (y[1], c, nv, tail), o);
			o = vfma(t[2], SIMD(ldv) (y[2], c, nv, tail), o);
			o = vfma(t[3], SIMD(ldv) (y[3], c, nv, tail), o);
			SIMD(stv) (out, c, nv, tail, o);
		}
	}
}

static SIMD_FN void
SIMD(row_pass) (const float *Y, const int32_t *idx, const float *val, int n,
				int f, const WalsPassCoef *coef, const float *v, float *out)
{
	int			nv = (f + SIMD_W - 1) / SIMD_W;

#define ROW_BOTH(k) SIMD(row_pass_reg) (Y, idx, val, n, f, coef, v, out, k, 1, whole)
#define ROW_ONE(k) SIMD(row_pass_reg) (Y, idx, val, n, f, coef, v, out, k, 0, whole)
	if (nv <= SIMD_BOTH)
		SIMD_DISPATCH_F(f, nv, SIMD_BOTH, ROW_BOTH);
	else if (nv <= SIMD_ONE)
		SIMD_DISPATCH_F(f, nv, SIMD_ONE, ROW_ONE);
	else
		SIMD(row_pass_mem) (Y, idx, val, n, f, coef, v, out);
#undef ROW_BOTH
#undef ROW_ONE
}

/*
 * out += alpha G v over w vectors of columns from vector c0, as a
 * combination of G's rows (G is symmetric): the columns' sums stay in
 * registers while every row streams by, in two sets for latency.
 */
static SIMD_INLINE void
SIMD(symv_cols) (const float *G, int f, int c0, float alpha, const float *v,
				 float *out, const int w)
{
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	int			tail = SIMD(tail_of) (f);
	V			acc0[SIMD_TILE];
	V			acc1[SIMD_TILE];
	int			k = 0;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < w; c++)
	{
		acc0[c] = vzero();
		acc1[c] = vzero();
	}
	for (; k + 2 <= f; k += 2)
	{
		V			t0 = vset1(alpha * v[k]);
		V			t1 = vset1(alpha * v[k + 1]);
		const float *g0 = G + (size_t) k * f;
		const float *g1 = g0 + f;

		SIMD_UNROLL
		for (c = 0; c < w; c++)
		{
			acc0[c] = vfma(t0, SIMD(ldv) (g0, c0 + c, nv, tail), acc0[c]);
			acc1[c] = vfma(t1, SIMD(ldv) (g1, c0 + c, nv, tail), acc1[c]);
		}
	}
	if (k < f)
	{
		V			t0 = vset1(alpha * v[k]);
		const float *g0 = G + (size_t) k * f;

		SIMD_UNROLL
		for (c = 0; c < w; c++)
			acc0[c] = vfma(t0, SIMD(ldv) (g0, c0 + c, nv, tail), acc0[c]);
	}
	SIMD_UNROLL
	for (c = 0; c < w; c++)
		SIMD(stv) (out, c0 + c, nv, tail,
				   vadd(SIMD(ldv) (out, c0 + c, nv, tail), vadd(acc0[c], acc1[c])));
}

static SIMD_FN void
SIMD(symv) (const float *G, int f, float alpha, const float *v, float *out)
{
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	int			c0;

#define SYMV(k) SIMD(symv_cols) (G, f, c0, alpha, v, out, k)
	for (c0 = 0; c0 < nv; c0 += SIMD_TILE)
		SIMD_DISPATCH(nv - c0 < SIMD_TILE ? nv - c0 : SIMD_TILE, SIMD_TILE, SYMV);
#undef SYMV
}

/* x.y_i of four cells at a time, x in registers (nv a constant). */
static SIMD_INLINE void
SIMD(dots_reg) (const float *Y, const int32_t *idx, int n, int f,
				const float *x, float *out, const int nv, const int whole)
{
	int			tail = whole ? SIMD_W : SIMD(tail_of) (f);
	V			xv[SIMD_ONE];
	const float *y[4];
	V			d[4];
	float		sums[4];
	int			i;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		xv[c] = SIMD(ldv) (x, c, nv, tail);
	for (i = 0; i + 4 <= n; i += 4)
	{
		SIMD(group_rows) (Y, idx, i, f, 4, y);
		SIMD(prefetch_ahead) (Y, idx, i, n, f, nv);
		SIMD(dots4) (y, xv, nv, tail, d);
		vsum4(d[0], d[1], d[2], d[3], out + i);
	}
	if (i < n)
	{
		SIMD(group_rows) (Y, idx, i, f, n - i, y);
		SIMD(dots4) (y, xv, nv, tail, d);
		vsum4(d[0], d[1], d[2], d[3], sums);
		for (c = 0; c < n - i; c++)
			out[i + c] = sums[c];
	}
}

/*
 * Wider rows: x in memory (in L1), still four cells per trip, each with
 * two partial sums, so that eight chains of FMAs are in flight rather
 * than one (at f = 512 a single chain made the subspace solver's
 * predictions take four times as long).
 */
static SIMD_FN void
SIMD(dots_mem) (const float *Y, const int32_t *idx, int n, int f,
				const float *x, float *out)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	const float *y[4];
	float		sums[4];
	int			i;
	int			c;
	int			k;

	for (i = 0; i < n; i += 4)
	{
		V			d[4] = {vzero(), vzero(), vzero(), vzero()};
		V			e[4] = {vzero(), vzero(), vzero(), vzero()};

		SIMD(group_rows) (Y, idx, i, f, n - i < 4 ? n - i : 4, y);
		SIMD(prefetch_ahead) (Y, idx, i, n, f, nv);
		for (c = 0; c + 2 <= nv; c += 2)
		{
			V			x0 = vld(x + SIMD_W * c);
			V			x1 = SIMD(ldv) (x, c + 1, nv, tail);

			SIMD_UNROLL
			for (k = 0; k < 4; k++)
			{
				d[k] = vfma(vld(y[k] + SIMD_W * c), x0, d[k]);
				e[k] = vfma(SIMD(ldv) (y[k], c + 1, nv, tail), x1, e[k]);
			}
		}
		if (c < nv)
		{
			V			xc = SIMD(ldv) (x, c, nv, tail);

			SIMD_UNROLL
			for (k = 0; k < 4; k++)
				d[k] = vfma(SIMD(ldv) (y[k], c, nv, tail), xc, d[k]);
		}
		vsum4(vadd(d[0], e[0]), vadd(d[1], e[1]), vadd(d[2], e[2]),
			  vadd(d[3], e[3]), sums);
		for (k = 0; k < 4 && i + k < n; k++)
			out[i + k] = sums[k];
	}
}

static SIMD_FN void
SIMD(dots) (const float *Y, const int32_t *idx, int n, int f, const float *x,
			float *out)
{
	int			nv = (f + SIMD_W - 1) / SIMD_W;

#define DOTS(k) SIMD(dots_reg) (Y, idx, n, f, x, out, k, whole)
	if (nv <= SIMD_ONE)
		SIMD_DISPATCH_F(f, nv, SIMD_ONE, DOTS);
	else
		SIMD(dots_mem) (Y, idx, n, f, x, out);
#undef DOTS
}

/*
 * The scores go across the lanes, one relevant score at a time: a load and
 * two comparisons count a vector of items, where broadcasting each item
 * against a vector of relevant scores (the portable C's way) cost an
 * instruction per item and left the lanes idle whenever a user had fewer
 * relevant items than a vector has lanes, as most have.  GCC's vector
 * comparisons give -1 where true, which the counts take away.
 */
typedef int32_t SIMD(counts) __attribute__((vector_size(sizeof(V))));

static SIMD_FN void
SIMD(rank_counts) (const float *s, int64_t n, const float *r, int nr,
				   int64_t *below, int64_t *equal)
{
	int			p;

	for (p = 0; p < nr; p++)
	{
		V			rv = vset1(r[p]);
		SIMD(counts) lt = {0};
		SIMD(counts) eq = {0};
		int64_t		i;
		int			k;

		for (i = 0; i + SIMD_W <= n; i += SIMD_W)
		{
			V			x = vld(s + i);

			lt -= (SIMD(counts)) (x < rv);
			eq -= (SIMD(counts)) (x == rv);
		}
		below[p] = 0;
		equal[p] = 0;
		for (k = 0; k < SIMD_W; k++)
		{
			below[p] += lt[k];
			equal[p] += eq[k];
		}
		for (; i < n; i++)
		{
			below[p] += s[i] < r[p];
			equal[p] += s[i] == r[p];
		}
	}
}

/*
 * Two vectors against the same rows, a and b read from L1 by every group:
 * eight chains of FMAs in flight, on any f, and each row of Y loaded from
 * memory once where two calls of dots would load it twice.
 */
static SIMD_FN void
SIMD(dots2) (const float *Y, const int32_t *idx, int n, int f, const float *a,
			 const float *b, float *outa, float *outb)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	const float *y[4];
	float		sa[4];
	float		sb[4];
	int			i;
	int			c;
	int			k;

	for (i = 0; i < n; i += 4)
	{
		V			da[4] = {vzero(), vzero(), vzero(), vzero()};
		V			db[4] = {vzero(), vzero(), vzero(), vzero()};
		int			live = n - i < 4 ? n - i : 4;

		SIMD(group_rows) (Y, idx, i, f, live, y);
		SIMD(prefetch_ahead) (Y, idx, i, n, f, nv);
		for (c = 0; c < nv; c++)
		{
			V			va = SIMD(ldv) (a, c, nv, tail);
			V			vb = SIMD(ldv) (b, c, nv, tail);

			SIMD_UNROLL
			for (k = 0; k < 4; k++)
			{
				V			yk = SIMD(ldv) (y[k], c, nv, tail);

				da[k] = vfma(yk, va, da[k]);
				db[k] = vfma(yk, vb, db[k]);
			}
		}
		vsum4(da[0], da[1], da[2], da[3], sa);
		vsum4(db[0], db[1], db[2], db[3], sb);
		for (k = 0; k < live; k++)
		{
			outa[i + k] = sa[k];
			outb[i + k] = sb[k];
		}
	}
}

/*
 * gemm_nt on a tile of four rows of M (mr of them real: the others repeat
 * the first and are not stored) by nx rows of X (a constant, 1 to 4):
 * every entry one chain of FMAs over the vectors of f, then the horizontal
 * sum at the place of its row of M in the tile, which is its row's place
 * in M modulo four.  So an entry is summed the same way whatever nx and
 * whichever rows of X share the tile.
 */
static SIMD_INLINE void
SIMD(gemm_tile) (const float *M, int mr, const float *X, int f, float *out,
				 int ldo, const int nx)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	const float *m[4];
	V			acc[4][4];
	float		sums[4];
	int			c;
	int			j;
	int			r;

	SIMD_UNROLL
	for (j = 0; j < 4; j++)
	{
		m[j] = M + (size_t) (j < mr ? j : 0) * f;
		SIMD_UNROLL
		for (r = 0; r < nx; r++)
			acc[j][r] = vzero();
	}
	for (c = 0; c < nv; c++)
	{
		V			xv[4];

		SIMD_UNROLL
		for (r = 0; r < nx; r++)
			xv[r] = SIMD(ldv) (X + (size_t) r * f, c, nv, tail);
		SIMD_UNROLL
		for (j = 0; j < 4; j++)
		{
			V			mv = SIMD(ldv) (m[j], c, nv, tail);

			SIMD_UNROLL
			for (r = 0; r < nx; r++)
				acc[j][r] = vfma(mv, xv[r], acc[j][r]);
		}
	}
	SIMD_UNROLL
	for (r = 0; r < nx; r++)
	{
		vsum4(acc[0][r], acc[1][r], acc[2][r], acc[3][r], sums);
		for (j = 0; j < mr; j++)
			out[(size_t) j * ldo + r] = sums[j];
	}
}

static SIMD_FN void
SIMD(gemm_nt) (const float *M, int m, const float *X, int nx, int f,
			   float *out)
{
	int			j;
	int			r;

#define TILE(k) SIMD(gemm_tile) (M + (size_t) j * f, m - j < 4 ? m - j : 4, \
								 X + (size_t) r * f, f, out + (size_t) j * nx + r, nx, k)
	for (j = 0; j < m; j += 4)
		for (r = 0; r < nx; r += 4)
			SIMD_DISPATCH(nx - r < 4 ? nx - r : 4, 4, TILE);
#undef TILE
}

/* Two partial sums, for the latency of the dependent additions. */
static SIMD_FN float
SIMD(dot) (const float *a, const float *b, int f)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	V			s0 = vzero();
	V			s1 = vzero();
	int			c = 0;

	for (; c + 2 < nv; c += 2)
	{
		s0 = vfma(vld(a + SIMD_W * c), vld(b + SIMD_W * c), s0);
		s1 = vfma(vld(a + SIMD_W * c + SIMD_W), vld(b + SIMD_W * c + SIMD_W), s1);
	}
	for (; c < nv; c++)
		s0 = vfma(SIMD(ldv) (a, c, nv, tail), SIMD(ldv) (b, c, nv, tail), s0);
	return vreduce(vadd(s0, s1));
}

static SIMD_FN void
SIMD(axpy) (float t, const float *a, float *b, int f)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	V			tv = vset1(t);
	int			c;

	for (c = 0; c < nv; c++)
		SIMD(stv) (b, c, nv, tail,
				   vfma(tv, SIMD(ldv) (a, c, nv, tail), SIMD(ldv) (b, c, nv, tail)));
}

static SIMD_FN void
SIMD(xpay) (const float *a, float t, float *b, int f)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	V			tv = vset1(t);
	int			c;

	for (c = 0; c < nv; c++)
		SIMD(stv) (b, c, nv, tail,
				   vfma(tv, SIMD(ldv) (b, c, nv, tail), SIMD(ldv) (a, c, nv, tail)));
}

/*
 * Cell j of the Cholesky gather: w = s y in whole vectors (the padding
 * zero), and b += t y.
 */
static SIMD_INLINE void
SIMD(gather_cell) (const float *y, float *w, float s, float t, V *bv, int nv,
				   int np, int tail)
{
	V			sv = vset1(s);
	V			tv = vset1(t);
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
	{
		V			yc = SIMD(ldv) (y, c, nv, tail);

		vst(w + SIMD_W * c, vmul(sv, yc));
		bv[c] = vfma(tv, yc, bv[c]);
	}
	SIMD_UNROLL
	for (c = nv; c < np; c++)
		vst(w + SIMD_W * c, vzero());
}

/* b stays in registers across the cells (nv a constant). */
static SIMD_INLINE void
SIMD(chol_gather_reg) (const float *Y, const int32_t *idx, const float *val,
					   int n, int f, const WalsPassCoef *coef, float *W,
					   float *b, const int nv, const int whole)
{
	int			tail = whole ? SIMD_W : SIMD(tail_of) (f);
	int			np = wals_pad(f) / SIMD_W;
	V			bv[SIMD_ONE];
	int			j;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		bv[c] = vld(b + SIMD_W * c);
	for (j = 0; j < n; j++)
	{
		if ((j & 3) == 0)
			SIMD(prefetch_ahead) (Y, idx, j, n, f, nv);
		SIMD(gather_cell) (Y + (size_t) idx[j] * f, W + (size_t) j * SIMD_W * np,
						   fmaf(coef->a1, val[j], coef->a0),
						   fmaf(coef->b1, val[j], coef->b0), bv, nv, np, tail);
	}
	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		vst(b + SIMD_W * c, bv[c]);
}

static SIMD_FN void
SIMD(chol_gather) (const float *Y, const int32_t *idx, const float *val,
				   int n, int f, const WalsPassCoef *coef, float *W, float *b)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	int			np = wals_pad(f) / SIMD_W;
	int			j;
	int			c;

#define GATHER(k) SIMD(chol_gather_reg) (Y, idx, val, n, f, coef, W, b, k, whole)
	if (nv <= SIMD_ONE)
	{
		SIMD_DISPATCH_F(f, nv, SIMD_ONE, GATHER);
		return;
	}
#undef GATHER
	for (j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		float	   *w = W + (size_t) j * SIMD_W * np;
		V			s = vset1(fmaf(coef->a1, val[j], coef->a0));
		V			t = vset1(fmaf(coef->b1, val[j], coef->b0));

		for (c = 0; c < nv; c++)
		{
			V			yc = SIMD(ldv) (y, c, nv, tail);

			vst(w + SIMD_W * c, vmul(s, yc));
			vst(b + SIMD_W * c, vfma(t, yc, vld(b + SIMD_W * c)));
		}
		for (; c < np; c++)
			vst(w + SIMD_W * c, vzero());
	}
}

/*
 * Rows a0..a0+3 of A by w vectors from column SIMD_W c0, over the n
 * cells: 4 w accumulators, and per cell w loads and 4 broadcasts for 4 w
 * FMAs.  Rows past f (when f is not a multiple of 4) repeat row a0's
 * broadcast, which stays inside y_j, and are not stored.
 */
static SIMD_INLINE void
SIMD(gram_tile) (float *A, int f, int a0, int c0, const float *W,
				 const float *Y, const int32_t *idx, int n, const int w)
{
	int			fp = wals_pad(f);
	int			nr = f - a0 < 4 ? f - a0 : 4;
	int			off[4];
	V			acc[4][SIMD_TILE];
	int			j;
	int			r;
	int			c;

	SIMD_UNROLL
	for (r = 0; r < 4; r++)
	{
		off[r] = a0 + (r < nr ? r : 0);
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			acc[r][c] = r < nr ?
				vld(A + (size_t) (a0 + r) * fp + SIMD_W * (c0 + c)) : vzero();
	}
	for (j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		const float *wj = W + (size_t) j * fp + SIMD_W * c0;
		V			b0 = vset1(y[off[0]]);
		V			b1 = vset1(y[off[1]]);
		V			b2 = vset1(y[off[2]]);
		V			b3 = vset1(y[off[3]]);

		SIMD_UNROLL
		for (c = 0; c < w; c++)
		{
			V			wc = vld(wj + SIMD_W * c);

			acc[0][c] = vfma(b0, wc, acc[0][c]);
			acc[1][c] = vfma(b1, wc, acc[1][c]);
			acc[2][c] = vfma(b2, wc, acc[2][c]);
			acc[3][c] = vfma(b3, wc, acc[3][c]);
		}
	}
	SIMD_UNROLL
	for (r = 0; r < 4; r++)
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			if (r < nr)
				vst(A + (size_t) (a0 + r) * fp + SIMD_W * (c0 + c), acc[r][c]);
}

/*
 * Tiles cover the upper triangle: rows a0..a0+3 need the vectors from the
 * one holding column a0 on, so the diagonal tiles also write some entries
 * below the diagonal, which nothing reads.
 */
static SIMD_FN void
SIMD(gram_acc) (float *A, int f, const float *W, const float *Y,
				const int32_t *idx, int n)
{
	int			np = wals_pad(f) / SIMD_W;
	int			a0;
	int			c0;

#define TILE(k) SIMD(gram_tile) (A, f, a0, c0, W, Y, idx, n, k)
	for (a0 = 0; a0 < f; a0 += 4)
		for (c0 = a0 / SIMD_W; c0 < np; c0 += SIMD_TILE)
			SIMD_DISPATCH(np - c0 < SIMD_TILE ? np - c0 : SIMD_TILE, SIMD_TILE, TILE);
#undef TILE
}

/*
 * Rows kb..kb+3 of U, over the w vectors from column SIMD_W cs: A's rows
 * less the contributions of the finished rows above, accumulated in
 * registers (left-looking: each entry of U is stored once), then the four
 * rows finished one after the other.  Narrow chunks split the
 * accumulation over rows m into sets of partial sums, as many as the
 * accumulators allow: their chains of kb dependent FMAs would otherwise
 * set the pace.  The chunk that holds the diagonal comes first and records
 * the four pivots' inverses and the couplings between the four rows,
 * which the chunks right of it apply in the same order.  A pivot's inverse
 * replaces it on the diagonal, since the substitutions only ever divide
 * by it.  Rows past f are computed from row kb and not stored; reading up
 * to column kb + 3 stays inside the padded rows.  It stays one function of
 * about a hundred lines: its accumulators are one register tile that the
 * accumulation fills and the finishing reads, which a split would have to
 * hand over through memory.
 */
static SIMD_INLINE int
SIMD(chol_chunk) (float *A, int f, int kb, int cs, int first, float *inv,
				  float coup[4][4], const int w)
{
	int			fp = wals_pad(f);
	int			nr = f - kb < 4 ? f - kb : 4;
	const int	sets = SIMD_TILE / w > 1 ? SIMD_TILE / w : 1;
	V			part[SIMD_TILE][4][SIMD_TILE];
	V			(*acc)[SIMD_TILE] = part[0];
	int			m;
	int			g;
	int			r;
	int			q;
	int			c;

	SIMD_UNROLL
	for (g = 0; g < sets; g++)
		SIMD_UNROLL
		for (r = 0; r < 4; r++)
			SIMD_UNROLL
			for (c = 0; c < w; c++)
				part[g][r][c] = g > 0 ? vzero() :
					vld(A + (size_t) (kb + (r < nr ? r : 0)) * fp + SIMD_W * (cs + c));
	for (m = 0; m < kb; m += sets)
	{
		SIMD_UNROLL
		for (g = 0; g < sets; g++)
		{
			const float *um = A + (size_t) (m + g) * fp;
			V			b0 = vset1(um[kb]);
			V			b1 = vset1(um[kb + 1]);
			V			b2 = vset1(um[kb + 2]);
			V			b3 = vset1(um[kb + 3]);

			SIMD_UNROLL
			for (c = 0; c < w; c++)
			{
				V			u = vld(um + SIMD_W * (cs + c));

				part[g][0][c] = vfnma(b0, u, part[g][0][c]);
				part[g][1][c] = vfnma(b1, u, part[g][1][c]);
				part[g][2][c] = vfnma(b2, u, part[g][2][c]);
				part[g][3][c] = vfnma(b3, u, part[g][3][c]);
			}
		}
	}
	SIMD_UNROLL
	for (g = 1; g < sets; g++)
		SIMD_UNROLL
		for (r = 0; r < 4; r++)
			SIMD_UNROLL
			for (c = 0; c < w; c++)
				acc[r][c] = vadd(acc[r][c], part[g][r][c]);
	SIMD_UNROLL
	for (r = 0; r < 4; r++)
	{
		int			k = kb + r;
		V			s;

		if (r >= nr)
			break;
		if (first)
		{
			V			d = vlane(acc[r][k / SIMD_W - cs], k % SIMD_W);

			if (!wals_pivot_ok(vfirst(d)))
				return 0;
			s = vrsqrt(d);
			inv[r] = vfirst(s);
		}
		else
			s = vset1(inv[r]);
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			acc[r][c] = vmul(s, acc[r][c]);
		SIMD_UNROLL
		for (q = r + 1; q < 4; q++)
		{
			if (q >= nr)
				break;
			if (first)
			{
				s = vlane(acc[r][(kb + q) / SIMD_W - cs], (kb + q) % SIMD_W);
				coup[r][q] = vfirst(s);
			}
			else
				s = vset1(coup[r][q]);
			SIMD_UNROLL
			for (c = 0; c < w; c++)
				acc[q][c] = vfnma(s, acc[r][c], acc[q][c]);
		}
	}
	SIMD_UNROLL
	for (r = 0; r < 4; r++)
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			if (r < nr)
				vst(A + (size_t) (kb + r) * fp + SIMD_W * (cs + c), acc[r][c]);
	if (first)
		for (r = 0; r < nr; r++)
			A[(size_t) (kb + r) * fp + kb + r] = inv[r];
	return 1;
}

/* A = U^T U, U upper with inverted diagonal, by panels of four rows. */
static SIMD_FN int
SIMD(chol_factor) (float *A, int f)
{
	int			np = wals_pad(f) / SIMD_W;
	int			kb;

	for (kb = 0; kb < f; kb += 4)
	{
		float		inv[4] = {0.0f};
		float		coup[4][4] = {{0.0f}};
		int			cs;

		for (cs = kb / SIMD_W; cs < np; cs += SIMD_TILE)
		{
			int			first = cs == kb / SIMD_W;
			int			ok = 0;

#define CHUNK(k) ok = SIMD(chol_chunk) (A, f, kb, cs, first, inv, coup, k)
			SIMD_DISPATCH(np - cs < SIMD_TILE ? np - cs : SIMD_TILE, SIMD_TILE, CHUNK);
#undef CHUNK
			if (!ok)
				return 0;
		}
	}
	return 1;
}

/*
 * U^T z = b forward with b in registers (nv a constant): each step takes
 * z_k from its lane of b and subtracts z_k times row k from what is left,
 * so the steps' chain is a lane broadcast, a multiply and an FMA.  z
 * replaces b.
 */
static SIMD_INLINE void
SIMD(forward_reg) (const float *A, int f, float *b, const int nv)
{
	int			fp = SIMD_W * nv;
	V			bv[SIMD_ONE];
	int			q;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		bv[c] = vld(b + SIMD_W * c);
	SIMD_UNROLL
	for (q = 0; q < nv; q++)
	{
		int			last = f - SIMD_W * q < SIMD_W ? f - SIMD_W * q : SIMD_W;
		int			kk;

		for (kk = 0; kk < last; kk++)
		{
			const float *rk = A + (size_t) (SIMD_W * q + kk) * fp;
			V			t = vmul(vlane(bv[q], kk), vset1(rk[SIMD_W * q + kk]));

			b[SIMD_W * q + kk] = vfirst(t);
			SIMD_UNROLL
			for (c = q; c < nv; c++)
				bv[c] = vfnma(t, vld(rk + SIMD_W * c), bv[c]);
		}
	}
}

/*
 * U x = z backward with x in registers (nv a constant), four rows at a
 * time: their dot products with the finished part of x share one set of
 * horizontal sums, and only the 4 x 4 triangle between them is solved one
 * row after the other.  The lanes up to the group's last row are dropped:
 * they hold no x yet, and U's lower triangle holds garbage.
 */
static SIMD_INLINE void
SIMD(backward_reg) (const float *A, int f, const float *z, float *x,
					const int nv)
{
	int			fp = SIMD_W * nv;
	V			xv[SIMD_ONE];
	int			q;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		xv[c] = vzero();
	SIMD_UNROLL
	for (q = nv - 1; q >= 0; q--)
	{
		int			k0;

		for (k0 = SIMD_W * q + SIMD_W - 4; k0 >= SIMD_W * q; k0 -= 4)
		{
			const float *u[4];
			V			d[4];
			float		sv[4];
			float		xs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			int			nr;
			int			r;
			int			j;

			if (k0 >= f)
				continue;
			nr = f - k0 < 4 ? f - k0 : 4;
			SIMD_UNROLL
			for (r = 0; r < 4; r++)
			{
				u[r] = A + (size_t) (k0 + (r < nr ? r : 0)) * fp;
				d[r] = vmul(vkeep_from(vld(u[r] + SIMD_W * q), k0 % SIMD_W + 4), xv[q]);
				SIMD_UNROLL
				for (c = q + 1; c < nv; c++)
					d[r] = vfma(vld(u[r] + SIMD_W * c), xv[c], d[r]);
			}
			vsum4(d[0], d[1], d[2], d[3], sv);
			SIMD_UNROLL
			for (r = 3; r >= 0; r--)
			{
				float		acc;

				if (r >= nr)
					continue;
				acc = z[k0 + r] - sv[r];
				SIMD_UNROLL
				for (j = r + 1; j < 4; j++)
					if (j < nr)
						acc -= u[r][k0 + j] * xs[j];
				xs[r] = acc * u[r][k0 + r];
				x[k0 + r] = xs[r];
			}
			xv[q] = vput(xv[q], k0 % SIMD_W, nr, xs);
		}
	}
}

/*
 * The same substitutions for wider systems, on b in memory: forward as row
 * operations on b (whole vectors: the lanes at or left of k are spent, and
 * z goes to x), backward as dot products with the finished part of x, kept
 * aligned in b.  The spent lanes of b may hold anything, so the products,
 * not U's entries, are dropped there.
 */
static SIMD_FN void
SIMD(substitute_mem) (const float *A, int f, float *b, float *x)
{
	int			fp = wals_pad(f);
	int			np = fp / SIMD_W;
	int			k;
	int			c;

	for (k = 0; k < f; k++)
	{
		const float *rk = A + (size_t) k * fp;
		float		z = b[k] * rk[k];
		V			t = vset1(z);

		x[k] = z;
		for (c = k / SIMD_W; c < np; c++)
			vst(b + SIMD_W * c, vfnma(t, vld(rk + SIMD_W * c), vld(b + SIMD_W * c)));
	}
	for (k = f - 1; k >= 0; k--)
	{
		const float *rk = A + (size_t) k * fp;
		V			s = vzero();

		for (c = k / SIMD_W; c < np; c++)
			s = vadd(s, vkeep_from(vmul(vld(rk + SIMD_W * c), vld(b + SIMD_W * c)),
								   k + 1 - SIMD_W * c));
		b[k] = x[k] = (x[k] - vreduce(s)) * rk[k];
	}
}

/*
 * chol_factor for systems of one vector (n = f <= SIMD_W, a constant),
 * right-looking with every row in a register: the chain of dependent
 * steps from one pivot to the next is a lane broadcast, the inverse
 * square root, a multiply, a broadcast and one FMA, without the panels'
 * trips through memory and their 4 x 4 couplings.  The subspace solver's
 * blocks of 16 make this its most frequent call; a solve of 16 takes
 * 350 ns instead of 450 on AVX-512.
 */
static SIMD_INLINE int
SIMD(chol_factor_one) (float *A, int f, const int n)
{
	int			fp = wals_pad(f);
	V			a[SIMD_W];
	float		inv[SIMD_W];
	int			k;
	int			j;

	SIMD_UNROLL
	for (k = 0; k < n; k++)
		a[k] = vld(A + (size_t) k * fp);
	SIMD_UNROLL
	for (k = 0; k < n; k++)
	{
		V			d = vlane(a[k], k);
		V			s;

		if (!wals_pivot_ok(vfirst(d)))
			return 0;
		s = vrsqrt(d);
		inv[k] = vfirst(s);
		a[k] = vmul(a[k], s);
		SIMD_UNROLL
		for (j = k + 1; j < n; j++)
			a[j] = vfnma(vlane(a[k], j), a[k], a[j]);
	}
	SIMD_UNROLL
	for (k = 0; k < n; k++)
	{
		vst(A + (size_t) k * fp, a[k]);
		A[(size_t) k * fp + k] = inv[k];
	}
	return 1;
}

static SIMD_FN int
SIMD(chol_solve) (float *A, int f, float *b, float *x)
{
	int			np = wals_pad(f) / SIMD_W;
	int			ok = 0;

#define FACTOR_ONE(k) ok = SIMD(chol_factor_one) (A, f, k)
	if (f <= SIMD_W)
		SIMD_DISPATCH(f, SIMD_W, FACTOR_ONE);
	else
		ok = SIMD(chol_factor) (A, f);
#undef FACTOR_ONE
	if (!ok)
		return 0;
#define SUBST(k) do { \
		SIMD(forward_reg) (A, f, b, k); \
		SIMD(backward_reg) (A, f, b, x, k); \
	} while (0)
	if (np <= SIMD_ONE)
		SIMD_DISPATCH(np, SIMD_ONE, SUBST);
	else
		SIMD(substitute_mem) (A, f, b, x);
#undef SUBST
	return 1;
}

/*
 * The subspace solver's pass over a row's cells for a block B = [k0,
 * k0 + b) of dimensions (see subspace.c).  Each cell reads two short
 * pieces of its factor row in place: the previous block's, to bring its
 * prediction up to date with that block's step, and this block's, for
 * the right-hand side and the block's Gram.  Every piece is read once per
 * block: the Gram's register tiles go over a chunk of gathered pieces in
 * L1, not over the rows, since at f = 512 the other side's factors miss
 * the TLB, and a second visit to a row's page costs as much as the first.
 * Prefetching asks for the pieces alone, not for whole rows.
 */
static SIMD_INLINE void
SIMD(prefetch_span) (const float *p, int len)
{
	uintptr_t	line = (uintptr_t) p & ~(uintptr_t) 63;
	uintptr_t	last = (uintptr_t) (p + len - 1);

	for (; line <= last; line += 64)
		__builtin_prefetch((const void *) line, 0, 3);
}

/*
 * The pieces of the four cells PREFETCH_CELLS ahead of cell i: the
 * previous block is the one before this, so the two are one span.
 */
static SIMD_INLINE void
SIMD(prefetch_block) (const float *Y, const int32_t *idx, int i, int n,
					  int f, int p0, int pb, int k0, int b)
{
	const int32_t *ahead = idx + i + PREFETCH_CELLS;
	int			from = pb > 0 ? p0 : k0;
	int			len = k0 + b - from;

	if (i + PREFETCH_CELLS + 4 > n)
		return;
	SIMD(prefetch_span) (Y + (size_t) ahead[0] * f + from, len);
	SIMD(prefetch_span) (Y + (size_t) ahead[1] * f + from, len);
	SIMD(prefetch_span) (Y + (size_t) ahead[2] * f + from, len);
	SIMD(prefetch_span) (Y + (size_t) ahead[3] * f + from, len);
}

/*
 * The first half of a group's work in the subspace pass: the four cells'
 * dot products with the previous step (zero for the first block) become
 * their updated predictions and from them the factors of the right-hand
 * side, t, and of the Gram, s = c - w0 = -(b0 + b1 r), the slope of t in
 * the prediction, so that one set of coefficients serves both
 * (vsubfactors4: ts[0..3] = t, ts[4..7] = s, zero past live).
 */
static SIMD_INLINE void
SIMD(sub_group) (const float *Y, const int32_t *idx, const float *val,
				 int n, int f, const WalsPassCoef *coef, float *yhat,
				 const V *dv, int p0, int pb, int k0, int b, int i, int nv,
				 int ptail, const float **y, float *ts)
{
	int			live = n - i < 4 ? n - i : 4;
	V			d[4] = {vzero(), vzero(), vzero(), vzero()};

	SIMD(group_rows) (Y, idx, i, f, live, y);
	SIMD(prefetch_block) (Y, idx, i, n, f, p0, pb, k0, b);
	if (pb > 0)
	{
		const float *yp[4] = {y[0] + p0, y[1] + p0, y[2] + p0, y[3] + p0};

		SIMD(dots4) (yp, dv, nv, ptail, d);
	}
	vsubfactors4(coef, val + i, yhat + i, live, d, ts);
}

/*
 * The pass over n cells with the previous step and the right-hand side in
 * registers (nv a constant, the vectors of both blocks).  With rows > 0 (a
 * constant: b, when the block is one vector and its rows fit in the
 * accumulators) A's rows are in registers too and the pass does the
 * block's whole work; otherwise each cell's piece and its weighted copy
 * go to row j of the chunk buffers yc and wc (stride SIMD_W nv) for
 * sub_gram.
 */
static SIMD_INLINE void
SIMD(sub_pass_reg) (const float *Y, const int32_t *idx, const float *val,
					int n, int f, const WalsPassCoef *coef, float *yhat,
					const float *dp, int p0, int pb, int k0, int b, float *A,
					float *rhs, float *yc, float *wc, const int nv,
					const int rows)
{
	int			tail = SIMD(tail_of) (b);
	int			ptail = pb > 0 ? SIMD(tail_of) (pb) : SIMD_W;
	int			bp = wals_pad(b);
	V			dv[SIMD_ONE];
	V			rv[SIMD_ONE];
	V			acc[SIMD_ACC];
	const float *y[4];
	float		ts[8];
	int			i;
	int			c;
	int			k;
	int			r;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
	{
		rv[c] = SIMD(ldv) (rhs, c, nv, tail);
		dv[c] = pb > 0 ? SIMD(ldv) (dp, c, nv, ptail) : vzero();
	}
	SIMD_UNROLL
	for (r = 0; r < rows; r++)
		acc[r] = vld(A + (size_t) r * bp);
	for (i = 0; i < n; i += 4)
	{
		int			live = n - i < 4 ? n - i : 4;

		SIMD(sub_group) (Y, idx, val, n, f, coef, yhat, dv, p0, pb, k0, b, i,
						 nv, ptail, y, ts);
		SIMD_UNROLL
		for (k = 0; k < 4; k++)
		{
			const float *yb = y[k] + k0;
			V			tk = vset1(ts[k]);
			V			sk = vset1(ts[4 + k]);

			if (rows > 0)
			{
				V			y0 = SIMD(ldv) (yb, 0, 1, tail);
				V			wy = vmul(sk, y0);

				rv[0] = vfma(tk, y0, rv[0]);
				SIMD_UNROLL
				for (r = 0; r < rows; r++)
					acc[r] = vfma(vset1(yb[r]), wy, acc[r]);
			}
			else if (k < live)
			{
				float	   *ycj = yc + (size_t) (i + k) * SIMD_W * nv;
				float	   *wcj = wc + (size_t) (i + k) * SIMD_W * nv;

				SIMD_UNROLL
				for (c = 0; c < nv; c++)
				{
					V			yv = SIMD(ldv) (yb, c, nv, tail);

					rv[c] = vfma(tk, yv, rv[c]);
					vst(ycj + SIMD_W * c, yv);
					vst(wcj + SIMD_W * c, vmul(sk, yv));
				}
			}
		}
	}
	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		SIMD(stv) (rhs, c, nv, tail, rv[c]);
	SIMD_UNROLL
	for (r = 0; r < rows; r++)
		vst(A + (size_t) r * bp, acc[r]);
}

/*
 * Wider blocks, or a narrow last block after a wider one: the step and
 * the right-hand side stay in memory (in L1), still four cells a trip,
 * and the pieces go to the chunk buffers as above.  The FMAs per cell are
 * many here, so the factors' chain needs no head start.
 */
static SIMD_FN void
SIMD(sub_pass_mem) (const float *Y, const int32_t *idx, const float *val,
					int n, int f, const WalsPassCoef *coef, float *yhat,
					const float *dp, int p0, int pb, int k0, int b, float *rhs,
					float *yc, float *wc)
{
	int			tail = SIMD(tail_of) (b);
	int			nv = (b + SIMD_W - 1) / SIMD_W;
	int			ptail = pb > 0 ? SIMD(tail_of) (pb) : SIMD_W;
	int			nvp = (pb + SIMD_W - 1) / SIMD_W;
	float		ts[8];
	int			i;
	int			c;
	int			k;

	for (i = 0; i < n; i += 4)
	{
		int			live = n - i < 4 ? n - i : 4;
		const float *y[4];
		V			d[4] = {vzero(), vzero(), vzero(), vzero()};

		SIMD(group_rows) (Y, idx, i, f, live, y);
		SIMD(prefetch_block) (Y, idx, i, n, f, p0, pb, k0, b);
		for (c = 0; c < nvp; c++)
		{
			V			dc = SIMD(ldv) (dp, c, nvp, ptail);

			SIMD_UNROLL
			for (k = 0; k < 4; k++)
				d[k] = vfma(SIMD(ldv) (y[k] + p0, c, nvp, ptail), dc, d[k]);
		}
		vsubfactors4(coef, val + i, yhat + i, live, d, ts);
		for (c = 0; c < nv; c++)
		{
			V			o = vld(rhs + SIMD_W * c);

			SIMD_UNROLL
			for (k = 0; k < 4; k++)
			{
				V			yv = SIMD(ldv) (y[k] + k0, c, nv, tail);

				o = vfma(vset1(ts[k]), yv, o);
				if (k < live)
				{
					vst(yc + (size_t) (i + k) * SIMD_W * nv + SIMD_W * c, yv);
					vst(wc + (size_t) (i + k) * SIMD_W * nv + SIMD_W * c,
						vmul(vset1(ts[4 + k]), yv));
				}
			}
			vst(rhs + SIMD_W * c, o);
		}
	}
}

/*
 * Rows a0..a0+R-1 of a block's Gram by w vectors from the block's vector
 * c0, over the m gathered cells: R w accumulators, and per cell w loads
 * and R broadcasts for R w FMAs.  Rows past b repeat row a0's broadcast
 * and are not stored.
 */
static SIMD_INLINE void
SIMD(sub_gram_tile) (float *A, int b, const float *yc, const float *wc,
					 int m, int a0, int c0, const int R, const int w)
{
	int			nv = (b + SIMD_W - 1) / SIMD_W;
	int			bp = wals_pad(b);
	int			nr = b - a0 < R ? b - a0 : R;
	int			off[16];
	V			acc[16][SIMD_TILE];
	int			j;
	int			r;
	int			c;

	SIMD_UNROLL
	for (r = 0; r < R; r++)
	{
		off[r] = a0 + (r < nr ? r : 0);
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			acc[r][c] = r < nr ?
				vld(A + (size_t) (a0 + r) * bp + SIMD_W * (c0 + c)) : vzero();
	}
	for (j = 0; j < m; j++)
	{
		const float *yj = yc + (size_t) j * SIMD_W * nv;
		const float *wj = wc + (size_t) j * SIMD_W * nv + SIMD_W * c0;

		SIMD_UNROLL
		for (r = 0; r < R; r++)
		{
			V			yr = vset1(yj[off[r]]);

			SIMD_UNROLL
			for (c = 0; c < w; c++)
				acc[r][c] = vfma(yr, vld(wj + SIMD_W * c), acc[r][c]);
		}
	}
	SIMD_UNROLL
	for (r = 0; r < R; r++)
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			if (r < nr)
				vst(A + (size_t) (a0 + r) * bp + SIMD_W * (c0 + c), acc[r][c]);
}

/*
 * A += the Gram of m gathered cells, by tiles over its upper triangle:
 * rows from a0 need the vectors from the one holding column a0 on, and
 * tiles take as many rows as the accumulators hold for that many vectors
 * (16, 8 or 4), so that narrow blocks take few tiles.
 */
static SIMD_FN void
SIMD(sub_gram) (float *A, int b, const float *yc, const float *wc, int m)
{
	int			nv = (b + SIMD_W - 1) / SIMD_W;
	int			rows;
	int			a0;
	int			c0;

#define GRAM_TILE(rr, ww) SIMD(sub_gram_tile) (A, b, yc, wc, m, a0, c0, rr, ww)
#define GRAM_TILE4(k) GRAM_TILE(4, k)
	for (a0 = 0; a0 < b; a0 += rows)
	{
		int			need = nv - a0 / SIMD_W;

		rows = need * 16 <= SIMD_ACC ? 16 : need * 8 <= SIMD_ACC ? 8 : 4;
		for (c0 = a0 / SIMD_W; c0 < nv; c0 += SIMD_ACC / rows)
		{
			int			w = nv - c0 < SIMD_ACC / rows ? nv - c0 : SIMD_ACC / rows;

			if (rows == 16)
				GRAM_TILE(16, 1);
			else if (rows == 8 && w == 1)
				GRAM_TILE(8, 1);
			else if (rows == 8)
				GRAM_TILE(8, 2);
			else
				SIMD_DISPATCH(w, SIMD_TILE, GRAM_TILE4);
		}
	}
#undef GRAM_TILE4
#undef GRAM_TILE
}

/*
 * Blocks whose rows fit in the accumulators take one pass; the others go
 * by chunks of WALS_SUB_CHUNK cells, gathered, then multiplied out.
 */
static SIMD_FN void
SIMD(sub_block) (const float *Y, const int32_t *idx, const float *val, int n,
				 int f, const WalsPassCoef *coef, float *yhat, const float *dp,
				 int p0, int pb, int k0, int b, float *A, float *rhs,
				 float *work)
{
	int			nv = (b + SIMD_W - 1) / SIMD_W;
	int			same = pb == 0 || (pb + SIMD_W - 1) / SIMD_W == nv;
	float	   *yc = work;
	float	   *wc = work + (size_t) WALS_SUB_CHUNK * SIMD_W * nv;
	int			i0;

#define PASS_ROWS(k) \
	SIMD(sub_pass_reg) (Y, idx, val, n, f, coef, yhat, dp, p0, pb, k0, b, \
						A, rhs, NULL, NULL, 1, k)
#define PASS(k) \
	SIMD(sub_pass_reg) (Y, idx + i0, val + i0, m, f, coef, yhat + i0, dp, \
						p0, pb, k0, b, A, rhs, yc, wc, k, 0)
	if (nv == 1 && b <= SIMD_ACC && same)
	{
		SIMD_DISPATCH(b, SIMD_ACC, PASS_ROWS);
		return;
	}
	for (i0 = 0; i0 < n; i0 += WALS_SUB_CHUNK)
	{
		int			m = n - i0 < WALS_SUB_CHUNK ? n - i0 : WALS_SUB_CHUNK;

		if (nv <= SIMD_ONE && same)
			SIMD_DISPATCH(nv, SIMD_ONE, PASS);
		else
			SIMD(sub_pass_mem) (Y, idx + i0, val + i0, m, f, coef, yhat + i0,
								dp, p0, pb, k0, b, rhs, yc, wc);
		SIMD(sub_gram) (A, b, yc, wc, m);
	}
#undef PASS
#undef PASS_ROWS
}

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
