/*
 * simd_subspace.h
 *	  The subspace solver's kernels (see subspace.c), for any vector width: the
 *	  product of a block of the Gram with the rows of X (gemm_nt) and the block
 *	  pass over a row's cells (sub_block).  Part of the template that
 *	  simd_family.h puts together once per instruction set.
 *
 * The block pass goes over a row's cells once for each block B = [k0,
 * k0 + b) of dimensions.  Each cell reads two short pieces of its factor
 * row in place: the previous block's, to bring its prediction up to date
 * with that block's step, and this block's, for the right-hand side and
 * the block's Gram.  Every piece is read once per block: the Gram's
 * register tiles go over a chunk of gathered pieces in L1, not over the
 * rows, since at f = 512 the other side's factors miss the TLB, and a
 * second visit to a row's page costs as much as the first.  Prefetching
 * asks for the pieces alone, not for whole rows.
 */

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

/* Every line of one piece of a row, and none of the rest of it. */
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
 * side, t, and of the Gram, s = c - w0 = -b(r), the slope of t in
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
 * (16, 8 or 4), so that narrow blocks take few tiles.  A chunk of a block
 * of 4096 is half a billion multiply-adds: each band of rows counts its
 * own towards the next poll.
 */
static SIMD_FN void
SIMD(sub_gram) (float *A, int b, const float *yc, const float *wc, int m)
{
	int			nv = (b + SIMD_W - 1) / SIMD_W;
	int64_t		work = 0;
	int			rows;
	int			a0;
	int			c0;

#define GRAM_TILE(rr, ww) SIMD(sub_gram_tile) (A, b, yc, wc, m, a0, c0, rr, ww)
#define GRAM_TILE4(k) GRAM_TILE(4, k)
	for (a0 = 0; a0 < b; a0 += rows)
	{
		int			need = nv - a0 / SIMD_W;

		rows = need * 16 <= SIMD_ACC ? 16 : need * 8 <= SIMD_ACC ? 8 : 4;
		wals_poll_local(&work, (int64_t) rows * SIMD_W * need * m);
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
	wals_poll(work);
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
		wals_poll((int64_t) 2 * m * (b + pb));
		SIMD(sub_gram) (A, b, yc, wc, m);
	}
#undef PASS
#undef PASS_ROWS
}
