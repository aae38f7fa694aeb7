/*
 * simd_dots.h
 *	  The predictions of a row's cells, for any vector width: x.y_i (the loss,
 *	  the subspace solver's start) and two vectors at once (the line search of
 *	  accel.c).  Part of the template that simd_family.h puts together once per
 *	  instruction set.
 */

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
