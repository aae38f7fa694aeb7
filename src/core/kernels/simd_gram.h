/*
 * simd_gram.h
 *	  The Cholesky system built, for any vector width: the row's cells gathered
 *	  and weighted (chol_gather), then their Gram accumulated (gram_acc) by an
 *	  outer-product kernel on register tiles of 4 rows by SIMD_ACC / 4
 *	  vectors.  Part of the template that simd_family.h puts together once per
 *	  instruction set.
 */

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
						   wals_coef_b(coef, val[j]), wals_coef_a(coef, val[j]),
						   bv, nv, np, tail);
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
		V			s = vset1(wals_coef_b(coef, val[j]));
		V			t = vset1(wals_coef_a(coef, val[j]));

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
 * below the diagonal, which nothing reads.  A block of cells at f = 4096
 * is half a billion multiply-adds, so each band of four rows counts its
 * own towards the next poll.
 */
static SIMD_FN void
SIMD(gram_acc) (float *A, int f, const float *W, const float *Y,
				const int32_t *idx, int n)
{
	int			np = wals_pad(f) / SIMD_W;
	int64_t		work = 0;
	int			a0;
	int			c0;

#define TILE(k) SIMD(gram_tile) (A, f, a0, c0, W, Y, idx, n, k)
	for (a0 = 0; a0 < f; a0 += 4)
	{
		for (c0 = a0 / SIMD_W; c0 < np; c0 += SIMD_TILE)
			SIMD_DISPATCH(np - c0 < SIMD_TILE ? np - c0 : SIMD_TILE, SIMD_TILE, TILE);
		wals_poll_local(&work, (int64_t) 4 * SIMD_W * (np - a0 / SIMD_W) * n);
	}
	wals_poll(work);
#undef TILE
}
