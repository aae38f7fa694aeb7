/*
 * simd_cg.h
 *	  The conjugate-gradient sweep's kernels, for any vector width: the row
 *	  pass (a row's cells' share of A v), the product with the Gram (symv), and
 *	  CG's own steps on f-vectors (dot, axpy, xpay).  Part of the template that
 *	  simd_family.h puts together once per instruction set.
 *
 * A row pass reads each of the row's cells once: the dot product y_i.v and
 * the update out += t_i y_i share the loaded y_i.  While v fits in the
 * registers it stays there for the whole row, and so does out where both
 * fit (up to f = 64 on AVX-512, 32 on NEON, 16 on AVX2; on AVX2's sixteen
 * registers f = 64 is eight vectors each, so out goes to a buffer in L1,
 * read and written once per group of four cells).
 */

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
 * through the row.  A row of 12,000 cells at f = 4096 is 100 million
 * multiply-adds a pass, so each group counts its own towards the next
 * poll; out is a plain running sum, so a poll between groups changes
 * nothing.
 */
static SIMD_FN void
SIMD(row_pass_mem) (const float *Y, const int32_t *idx, const float *val,
					int n, int f, const WalsPassCoef *coef, const float *v,
					float *out)
{
	int			tail = SIMD(tail_of) (f);
	int			nv = (f + SIMD_W - 1) / SIMD_W;
	int64_t		work = 0;
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
		wals_poll_local(&work, (int64_t) 8 * f);
	}
	wals_poll(work);
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
