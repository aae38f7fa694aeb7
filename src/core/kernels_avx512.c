/*
 * kernels_avx512.c
 *	  The solvers' inner loops in AVX-512 (x86-64-v4).
 *
 * A row pass reads each of the row's cells once: the dot product y_i.v and
 * the update out += t_i y_i share the loaded y_i.  Up to f = 64 the vectors
 * v and out live in registers for the whole row, and cells go four at a
 * time, so that the four horizontal sums share their shuffles and the
 * updates of out come in independent groups.  Factor rows are read in
 * place through the row's indices, with software prefetching: gathering
 * them into a contiguous copy first costs a store per cell, and made a CG
 * iteration of the 20M-rating benchmark 14% (rows of 1024 cells or more)
 * to 31% (every row) slower.
 *
 * The Cholesky system is built by blocks of gathered, weighted cells with
 * an outer-product kernel on register tiles of 4 rows by up to 64 columns,
 * and factorised here too, left-looking by panels of four rows: at f = 64
 * LAPACK's small-matrix path costs more in calls and copies than in
 * arithmetic.
 *
 * Loops over a row's vectors have trip counts that are constants once the
 * always-inline templates below are instantiated for 1 to 4 vectors; fully
 * unrolled, their arrays of vectors become registers, and only a row's
 * last vector needs a mask.  Every function carries the target attribute
 * (intrinsics must be compiled for it), so the file builds with the
 * baseline flags of PGXS; none of it runs unless kernels.c found AVX-512
 * at run time.
 */
#include <math.h>

#include "wals_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)

#include <immintrin.h>

#define WALS_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
#define WALS_AVX512_INLINE WALS_AVX512 inline __attribute__((always_inline))
#define WALS_UNROLL _Pragma("GCC unroll 4")

/* Vectors held in registers across a row: f up to 4 * 16. */
#define REG_VECS 4

/*
 * Cells ahead that prefetching asks for: four cells of f = 64 are 16 cache
 * lines, and four such groups in flight cover the latency of memory.
 */
#define PREFETCH_CELLS 16

/* Lanes of the last vector of an f-vector that hold data. */
static WALS_AVX512_INLINE __mmask16
tail_lanes(int f)
{
	int			m = f - 16 * ((f - 1) / 16);

	return m >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << m) - 1);
}

/* Vector c of an f-vector of nv vectors, masked if it is the last. */
static WALS_AVX512_INLINE __m512
ldv(const float *p, int c, int nv, __mmask16 tail)
{
	if (c < nv - 1)
		return _mm512_loadu_ps(p + 16 * c);
	return _mm512_maskz_loadu_ps(tail, p + 16 * c);
}

static WALS_AVX512_INLINE void
stv(float *p, int c, int nv, __mmask16 tail, __m512 x)
{
	if (c < nv - 1)
		_mm512_storeu_ps(p + 16 * c, x);
	else
		_mm512_mask_storeu_ps(p + 16 * c, tail, x);
}

/*
 * Ask for a factor row some cells ahead of its use.  A row's cells point
 * all over Y, which defeats the hardware prefetcher, and an item's users
 * are spread over more than the last-level cache holds, so without this
 * the first pass over a row waits on memory cell after cell.  The last
 * line is asked for on its own: rows need not start on a line.
 */
static WALS_AVX512_INLINE void
prefetch_row(const float *y, int f, int nv)
{
	int			c;

	WALS_UNROLL
	for (c = 0; c < nv; c++)
		_mm_prefetch((const char *) (y + 16 * c), _MM_HINT_T0);
	_mm_prefetch((const char *) (y + f - 1), _MM_HINT_T0);
}

/* The four cells' rows PREFETCH_CELLS ahead of cell i, if the row has them. */
static WALS_AVX512_INLINE void
prefetch_ahead(const float *Y, const int32_t *idx, int i, int n, int f, int nv)
{
	const int32_t *ahead = idx + i + PREFETCH_CELLS;

	if (i + PREFETCH_CELLS + 4 > n)
		return;
	prefetch_row(Y + (size_t) ahead[0] * f, f, nv);
	prefetch_row(Y + (size_t) ahead[1] * f, f, nv);
	prefetch_row(Y + (size_t) ahead[2] * f, f, nv);
	prefetch_row(Y + (size_t) ahead[3] * f, f, nv);
}

/* The four horizontal sums of a, b, c, d, sharing their shuffles. */
static WALS_AVX512_INLINE __m128
sum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
	__m512		ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b),
								   _mm512_unpackhi_ps(a, b));
	__m512		cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d),
								   _mm512_unpackhi_ps(c, d));
	__m512d		lo = _mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd));
	__m512d		hi = _mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd));
	__m512		s = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
	__m256		h = _mm256_add_ps(_mm512_castps512_ps256(s),
								  _mm512_extractf32x8_ps(s, 1));

	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* Lane k of t in every lane. */
static WALS_AVX512_INLINE __m512
lane(__m128 t, int k)
{
	return _mm512_permutexvar_ps(_mm512_set1_epi32(k), _mm512_castps128_ps512(t));
}

/* t_i of four cells from their ratings r and dot products d. */
static WALS_AVX512_INLINE __m128
pass_factor4(const WalsPassCoef *coef, __m128 r, __m128 d)
{
	__m128		a = _mm_fmadd_ps(_mm_set1_ps(coef->a1), r, _mm_set1_ps(coef->a0));
	__m128		b = _mm_fmadd_ps(_mm_set1_ps(coef->b1), r, _mm_set1_ps(coef->b0));

	return _mm_fmadd_ps(b, d, a);
}

/* The same for one cell, with the same roundings. */
static WALS_AVX512_INLINE float
pass_factor1(const WalsPassCoef *coef, float r, float d)
{
	return fmaf(fmaf(coef->b1, r, coef->b0), d, fmaf(coef->a1, r, coef->a0));
}

/*
 * The last one to three cells of a row as a group of four: the missing
 * cells repeat the first one's row, with a factor of zero, so short rows
 * take no slower path.
 */
static WALS_AVX512_INLINE __mmask8
short_group(const float *Y, const int32_t *idx, int i, int n, int f,
			const float **y)
{
	int			k;

	for (k = 0; k < 4; k++)
		y[k] = Y + (size_t) idx[i + (i + k < n ? k : 0)] * f;
	return (__mmask8) ((1u << (n - i < 4 ? n - i : 4)) - 1);
}

/*
 * One group of four cells of a row pass: their dot products with v, their
 * factors from the ratings r (zero where live is clear), and their terms
 * added to o.
 */
static WALS_AVX512_INLINE void
row_group(const float *const *y, __m128 r, __mmask8 live,
		  const WalsPassCoef *coef, const __m512 *vv, __m512 *o,
		  const int nv, __mmask16 tail)
{
	__m512		d0 = _mm512_setzero_ps();
	__m512		d1 = _mm512_setzero_ps();
	__m512		d2 = _mm512_setzero_ps();
	__m512		d3 = _mm512_setzero_ps();
	__m128		t;
	__m512		t0;
	__m512		t1;
	__m512		t2;
	__m512		t3;
	int			c;

	WALS_UNROLL
	for (c = 0; c < nv; c++)
	{
		d0 = _mm512_fmadd_ps(ldv(y[0], c, nv, tail), vv[c], d0);
		d1 = _mm512_fmadd_ps(ldv(y[1], c, nv, tail), vv[c], d1);
		d2 = _mm512_fmadd_ps(ldv(y[2], c, nv, tail), vv[c], d2);
		d3 = _mm512_fmadd_ps(ldv(y[3], c, nv, tail), vv[c], d3);
	}
	t = _mm_maskz_mov_ps(live, pass_factor4(coef, r, sum4(d0, d1, d2, d3)));
	t0 = lane(t, 0);
	t1 = lane(t, 1);
	t2 = lane(t, 2);
	t3 = lane(t, 3);
	WALS_UNROLL
	for (c = 0; c < nv; c++)
	{
		o[c] = _mm512_fmadd_ps(t0, ldv(y[0], c, nv, tail), o[c]);
		o[c] = _mm512_fmadd_ps(t1, ldv(y[1], c, nv, tail), o[c]);
		o[c] = _mm512_fmadd_ps(t2, ldv(y[2], c, nv, tail), o[c]);
		o[c] = _mm512_fmadd_ps(t3, ldv(y[3], c, nv, tail), o[c]);
	}
}

/*
 * Row pass with v and out in registers, nv vectors (a constant).  One set
 * of accumulators: their chains of four dependent FMAs per group take as
 * long as the group's arithmetic, and a second set would push vectors out
 * of the 32 registers.
 */
static WALS_AVX512_INLINE void
row_pass_reg(const float *Y, const int32_t *idx, const float *val, int n,
			 int f, const WalsPassCoef *coef, const float *v, float *out,
			 const int nv)
{
	__mmask16	tail = tail_lanes(f);
	__m512		vv[REG_VECS];
	__m512		o[REG_VECS];
	const float *y[4];
	int			i = 0;
	int			c;

	WALS_UNROLL
	for (c = 0; c < nv; c++)
	{
		vv[c] = ldv(v, c, nv, tail);
		o[c] = _mm512_setzero_ps();
	}
	for (; i + 4 <= n; i += 4)
	{
		y[0] = Y + (size_t) idx[i] * f;
		y[1] = Y + (size_t) idx[i + 1] * f;
		y[2] = Y + (size_t) idx[i + 2] * f;
		y[3] = Y + (size_t) idx[i + 3] * f;
		prefetch_ahead(Y, idx, i, n, f, nv);
		row_group(y, _mm_loadu_ps(val + i), 0x0f, coef, vv, o, nv, tail);
	}
	if (i < n)
	{
		__mmask8	live = short_group(Y, idx, i, n, f, y);

		row_group(y, _mm_maskz_loadu_ps(live, val + i), live, coef, vv, o,
				  nv, tail);
	}
	WALS_UNROLL
	for (c = 0; c < nv; c++)
		stv(out, c, nv, tail, o[c]);
}

/*
 * Wider rows: v and out stay in memory (in L1), still four cells per trip
 * through the row.
 */
static WALS_AVX512 void
row_pass_mem(const float *Y, const int32_t *idx, const float *val, int n,
			 int f, const WalsPassCoef *coef, const float *v, float *out)
{
	__mmask16	tail = tail_lanes(f);
	int			nv = (f + 15) / 16;
	int			i = 0;
	int			c;

	for (c = 0; c < nv; c++)
		stv(out, c, nv, tail, _mm512_setzero_ps());
	for (; i + 4 <= n; i += 4)
	{
		const float *y0 = Y + (size_t) idx[i] * f;
		const float *y1 = Y + (size_t) idx[i + 1] * f;
		const float *y2 = Y + (size_t) idx[i + 2] * f;
		const float *y3 = Y + (size_t) idx[i + 3] * f;
		__m512		d0 = _mm512_setzero_ps();
		__m512		d1 = _mm512_setzero_ps();
		__m512		d2 = _mm512_setzero_ps();
		__m512		d3 = _mm512_setzero_ps();
		__m128		t;
		__m512		t0;
		__m512		t1;
		__m512		t2;
		__m512		t3;

		for (c = 0; c < nv; c++)
		{
			__m512		vc = ldv(v, c, nv, tail);

			d0 = _mm512_fmadd_ps(ldv(y0, c, nv, tail), vc, d0);
			d1 = _mm512_fmadd_ps(ldv(y1, c, nv, tail), vc, d1);
			d2 = _mm512_fmadd_ps(ldv(y2, c, nv, tail), vc, d2);
			d3 = _mm512_fmadd_ps(ldv(y3, c, nv, tail), vc, d3);
		}
		t = pass_factor4(coef, _mm_loadu_ps(val + i), sum4(d0, d1, d2, d3));
		t0 = lane(t, 0);
		t1 = lane(t, 1);
		t2 = lane(t, 2);
		t3 = lane(t, 3);
		for (c = 0; c < nv; c++)
		{
			__m512		o = ldv(out, c, nv, tail);

			o = _mm512_fmadd_ps(t0, ldv(y0, c, nv, tail), o);
			o = _mm512_fmadd_ps(t1, ldv(y1, c, nv, tail), o);
			o = _mm512_fmadd_ps(t2, ldv(y2, c, nv, tail), o);
			o = _mm512_fmadd_ps(t3, ldv(y3, c, nv, tail), o);
			stv(out, c, nv, tail, o);
		}
	}
	for (; i < n; i++)
	{
		const float *y = Y + (size_t) idx[i] * f;
		__m512		d = _mm512_setzero_ps();
		__m512		t;

		for (c = 0; c < nv; c++)
			d = _mm512_fmadd_ps(ldv(y, c, nv, tail), ldv(v, c, nv, tail), d);
		t = _mm512_set1_ps(pass_factor1(coef, val[i], _mm512_reduce_add_ps(d)));
		for (c = 0; c < nv; c++)
			stv(out, c, nv, tail,
				_mm512_fmadd_ps(t, ldv(y, c, nv, tail), ldv(out, c, nv, tail)));
	}
}

static WALS_AVX512 void
row_pass_avx512(const float *Y, const int32_t *idx, const float *val, int n,
				int f, const WalsPassCoef *coef, const float *v, float *out)
{
	switch ((f + 15) / 16)
	{
		case 1:
			row_pass_reg(Y, idx, val, n, f, coef, v, out, 1);
			break;
		case 2:
			row_pass_reg(Y, idx, val, n, f, coef, v, out, 2);
			break;
		case 3:
			row_pass_reg(Y, idx, val, n, f, coef, v, out, 3);
			break;
		case 4:
			row_pass_reg(Y, idx, val, n, f, coef, v, out, 4);
			break;
		default:
			row_pass_mem(Y, idx, val, n, f, coef, v, out);
			break;
	}
}

/*
 * out += alpha G v over w vectors of columns from vector c0, as a
 * combination of G's rows (G is symmetric): the columns' sums stay in
 * registers while every row streams by, in two sets for latency.
 */
static WALS_AVX512_INLINE void
symv_cols(const float *G, int f, int c0, float alpha, const float *v,
		  float *out, const int w)
{
	int			nv = (f + 15) / 16;
	__mmask16	tail = tail_lanes(f);
	__mmask16	mk[REG_VECS];
	__m512		acc0[REG_VECS];
	__m512		acc1[REG_VECS];
	int			k = 0;
	int			c;

	WALS_UNROLL
	for (c = 0; c < w; c++)
	{
		mk[c] = c0 + c < nv - 1 ? (__mmask16) 0xffff : tail;
		acc0[c] = _mm512_setzero_ps();
		acc1[c] = _mm512_setzero_ps();
	}
	for (; k + 2 <= f; k += 2)
	{
		__m512		t0 = _mm512_set1_ps(alpha * v[k]);
		__m512		t1 = _mm512_set1_ps(alpha * v[k + 1]);
		const float *g0 = G + (size_t) k * f + 16 * c0;
		const float *g1 = g0 + f;

		WALS_UNROLL
		for (c = 0; c < w; c++)
		{
			acc0[c] = _mm512_fmadd_ps(t0, _mm512_maskz_loadu_ps(mk[c], g0 + 16 * c), acc0[c]);
			acc1[c] = _mm512_fmadd_ps(t1, _mm512_maskz_loadu_ps(mk[c], g1 + 16 * c), acc1[c]);
		}
	}
	if (k < f)
	{
		__m512		t0 = _mm512_set1_ps(alpha * v[k]);
		const float *g0 = G + (size_t) k * f + 16 * c0;

		WALS_UNROLL
		for (c = 0; c < w; c++)
			acc0[c] = _mm512_fmadd_ps(t0, _mm512_maskz_loadu_ps(mk[c], g0 + 16 * c), acc0[c]);
	}
	WALS_UNROLL
	for (c = 0; c < w; c++)
	{
		float	   *o = out + 16 * (c0 + c);

		_mm512_mask_storeu_ps(o, mk[c],
							  _mm512_add_ps(_mm512_maskz_loadu_ps(mk[c], o),
											_mm512_add_ps(acc0[c], acc1[c])));
	}
}

static WALS_AVX512 void
symv_avx512(const float *G, int f, float alpha, const float *v, float *out)
{
	int			nv = (f + 15) / 16;
	int			c0;

	for (c0 = 0; c0 < nv; c0 += REG_VECS)
	{
		switch (nv - c0 < REG_VECS ? nv - c0 : REG_VECS)
		{
			case 1:
				symv_cols(G, f, c0, alpha, v, out, 1);
				break;
			case 2:
				symv_cols(G, f, c0, alpha, v, out, 2);
				break;
			case 3:
				symv_cols(G, f, c0, alpha, v, out, 3);
				break;
			default:
				symv_cols(G, f, c0, alpha, v, out, 4);
				break;
		}
	}
}

/* x.y_i of four cells at a time, x in registers (nv a constant). */
static WALS_AVX512_INLINE void
dots_reg(const float *Y, const int32_t *idx, int n, int f, const float *x,
		 float *out, const int nv)
{
	__mmask16	tail = tail_lanes(f);
	__m512		xv[REG_VECS];
	int			i;
	int			c;

	WALS_UNROLL
	for (c = 0; c < nv; c++)
		xv[c] = ldv(x, c, nv, tail);
	for (i = 0; i < n; i += 4)
	{
		const float *y[4];
		__mmask8	live = 0x0f;
		__m512		d0 = _mm512_setzero_ps();
		__m512		d1 = _mm512_setzero_ps();
		__m512		d2 = _mm512_setzero_ps();
		__m512		d3 = _mm512_setzero_ps();

		if (i + 4 <= n)
		{
			y[0] = Y + (size_t) idx[i] * f;
			y[1] = Y + (size_t) idx[i + 1] * f;
			y[2] = Y + (size_t) idx[i + 2] * f;
			y[3] = Y + (size_t) idx[i + 3] * f;
			prefetch_ahead(Y, idx, i, n, f, nv);
		}
		else
			live = short_group(Y, idx, i, n, f, y);
		WALS_UNROLL
		for (c = 0; c < nv; c++)
		{
			d0 = _mm512_fmadd_ps(ldv(y[0], c, nv, tail), xv[c], d0);
			d1 = _mm512_fmadd_ps(ldv(y[1], c, nv, tail), xv[c], d1);
			d2 = _mm512_fmadd_ps(ldv(y[2], c, nv, tail), xv[c], d2);
			d3 = _mm512_fmadd_ps(ldv(y[3], c, nv, tail), xv[c], d3);
		}
		_mm_mask_storeu_ps(out + i, live, sum4(d0, d1, d2, d3));
	}
}

static WALS_AVX512 void
dots_mem(const float *Y, const int32_t *idx, int n, int f, const float *x,
		 float *out)
{
	__mmask16	tail = tail_lanes(f);
	int			nv = (f + 15) / 16;
	int			i;
	int			c;

	for (i = 0; i < n; i++)
	{
		const float *y = Y + (size_t) idx[i] * f;
		__m512		d = _mm512_setzero_ps();

		for (c = 0; c < nv; c++)
			d = _mm512_fmadd_ps(ldv(y, c, nv, tail), ldv(x, c, nv, tail), d);
		out[i] = _mm512_reduce_add_ps(d);
	}
}

static WALS_AVX512 void
dots_avx512(const float *Y, const int32_t *idx, int n, int f, const float *x,
			float *out)
{
	switch ((f + 15) / 16)
	{
		case 1:
			dots_reg(Y, idx, n, f, x, out, 1);
			break;
		case 2:
			dots_reg(Y, idx, n, f, x, out, 2);
			break;
		case 3:
			dots_reg(Y, idx, n, f, x, out, 3);
			break;
		case 4:
			dots_reg(Y, idx, n, f, x, out, 4);
			break;
		default:
			dots_mem(Y, idx, n, f, x, out);
			break;
	}
}

/* Two partial sums, for the latency of the dependent additions. */
static WALS_AVX512 float
dot_avx512(const float *a, const float *b, int f)
{
	__mmask16	tail = tail_lanes(f);
	int			nv = (f + 15) / 16;
	__m512		s0 = _mm512_setzero_ps();
	__m512		s1 = _mm512_setzero_ps();
	int			c = 0;

	for (; c + 2 < nv; c += 2)
	{
		s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + 16 * c), _mm512_loadu_ps(b + 16 * c), s0);
		s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + 16 * c + 16),
							 _mm512_loadu_ps(b + 16 * c + 16), s1);
	}
	for (; c < nv; c++)
		s0 = _mm512_fmadd_ps(ldv(a, c, nv, tail), ldv(b, c, nv, tail), s0);
	return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static WALS_AVX512 void
axpy_avx512(float t, const float *a, float *b, int f)
{
	__mmask16	tail = tail_lanes(f);
	int			nv = (f + 15) / 16;
	__m512		tv = _mm512_set1_ps(t);
	int			c;

	for (c = 0; c < nv; c++)
		stv(b, c, nv, tail, _mm512_fmadd_ps(tv, ldv(a, c, nv, tail), ldv(b, c, nv, tail)));
}

static WALS_AVX512 void
xpay_avx512(const float *a, float t, float *b, int f)
{
	__mmask16	tail = tail_lanes(f);
	int			nv = (f + 15) / 16;
	__m512		tv = _mm512_set1_ps(t);
	int			c;

	for (c = 0; c < nv; c++)
		stv(b, c, nv, tail, _mm512_fmadd_ps(tv, ldv(b, c, nv, tail), ldv(a, c, nv, tail)));
}

/* b stays in registers across the cells (nv a constant). */
static WALS_AVX512_INLINE void
chol_gather_reg(const float *Y, const int32_t *idx, const float *val, int n,
				int f, const WalsPassCoef *coef, float *W, float *b,
				const int nv)
{
	__mmask16	tail = tail_lanes(f);
	__m512		bv[REG_VECS];
	int			j;
	int			c;

	WALS_UNROLL
	for (c = 0; c < nv; c++)
		bv[c] = _mm512_load_ps(b + 16 * c);
	for (j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		float	   *w = W + (size_t) j * 16 * nv;
		__m512		s = _mm512_set1_ps(fmaf(coef->a1, val[j], coef->a0));
		__m512		t = _mm512_set1_ps(fmaf(coef->b1, val[j], coef->b0));

		if ((j & 3) == 0)
			prefetch_ahead(Y, idx, j, n, f, nv);
		WALS_UNROLL
		for (c = 0; c < nv; c++)
		{
			__m512		yc = ldv(y, c, nv, tail);

			_mm512_store_ps(w + 16 * c, _mm512_mul_ps(s, yc));
			bv[c] = _mm512_fmadd_ps(t, yc, bv[c]);
		}
	}
	WALS_UNROLL
	for (c = 0; c < nv; c++)
		_mm512_store_ps(b + 16 * c, bv[c]);
}

static WALS_AVX512 void
chol_gather_avx512(const float *Y, const int32_t *idx, const float *val,
				   int n, int f, const WalsPassCoef *coef, float *W, float *b)
{
	__mmask16	tail = tail_lanes(f);
	int			nv = (f + 15) / 16;
	int			j;
	int			c;

	switch (nv)
	{
		case 1:
			chol_gather_reg(Y, idx, val, n, f, coef, W, b, 1);
			return;
		case 2:
			chol_gather_reg(Y, idx, val, n, f, coef, W, b, 2);
			return;
		case 3:
			chol_gather_reg(Y, idx, val, n, f, coef, W, b, 3);
			return;
		case 4:
			chol_gather_reg(Y, idx, val, n, f, coef, W, b, 4);
			return;
		default:
			break;
	}
	for (j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		float	   *w = W + (size_t) j * 16 * nv;
		__m512		s = _mm512_set1_ps(fmaf(coef->a1, val[j], coef->a0));
		__m512		t = _mm512_set1_ps(fmaf(coef->b1, val[j], coef->b0));

		for (c = 0; c < nv; c++)
		{
			__m512		yc = ldv(y, c, nv, tail);

			_mm512_store_ps(w + 16 * c, _mm512_mul_ps(s, yc));
			_mm512_store_ps(b + 16 * c, _mm512_fmadd_ps(t, yc, _mm512_load_ps(b + 16 * c)));
		}
	}
}

/*
 * Rows a0..a0+3 of A by w vectors from column 16 c0, over the n cells: 4 w
 * accumulators, and per cell w loads and 4 broadcasts for 4 w FMAs.  Rows
 * past f (when f is not a multiple of 4) repeat row a0's broadcast, which
 * stays inside y_j, and are not stored.
 */
static WALS_AVX512_INLINE void
gram_tile(float *A, int f, int a0, int c0, const float *W, const float *Y,
		  const int32_t *idx, int n, const int w)
{
	int			fp = wals_pad(f);
	int			nr = f - a0 < 4 ? f - a0 : 4;
	int			off[4];
	__m512		acc[4][REG_VECS];
	int			j;
	int			r;
	int			c;

	WALS_UNROLL
	for (r = 0; r < 4; r++)
	{
		off[r] = a0 + (r < nr ? r : 0);
		WALS_UNROLL
		for (c = 0; c < w; c++)
			acc[r][c] = r < nr ?
				_mm512_load_ps(A + (size_t) (a0 + r) * fp + 16 * (c0 + c)) :
				_mm512_setzero_ps();
	}
	for (j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		const float *wj = W + (size_t) j * fp + 16 * c0;
		__m512		b0 = _mm512_set1_ps(y[off[0]]);
		__m512		b1 = _mm512_set1_ps(y[off[1]]);
		__m512		b2 = _mm512_set1_ps(y[off[2]]);
		__m512		b3 = _mm512_set1_ps(y[off[3]]);

		WALS_UNROLL
		for (c = 0; c < w; c++)
		{
			__m512		wc = _mm512_load_ps(wj + 16 * c);

			acc[0][c] = _mm512_fmadd_ps(b0, wc, acc[0][c]);
			acc[1][c] = _mm512_fmadd_ps(b1, wc, acc[1][c]);
			acc[2][c] = _mm512_fmadd_ps(b2, wc, acc[2][c]);
			acc[3][c] = _mm512_fmadd_ps(b3, wc, acc[3][c]);
		}
	}
	WALS_UNROLL
	for (r = 0; r < 4; r++)
		WALS_UNROLL
		for (c = 0; c < w; c++)
			if (r < nr)
				_mm512_store_ps(A + (size_t) (a0 + r) * fp + 16 * (c0 + c), acc[r][c]);
}

/*
 * Tiles cover the upper triangle: rows a0..a0+3 need the vectors from the
 * one holding column a0 on, so the diagonal tiles also write some entries
 * below the diagonal, which nothing reads.
 */
static WALS_AVX512 void
gram_acc_avx512(float *A, int f, const float *W, const float *Y,
				const int32_t *idx, int n)
{
	int			nv = wals_pad(f) / 16;
	int			a0;
	int			c0;

	for (a0 = 0; a0 < f; a0 += 4)
	{
		for (c0 = a0 / 16; c0 < nv; c0 += REG_VECS)
		{
			switch (nv - c0 < REG_VECS ? nv - c0 : REG_VECS)
			{
				case 1:
					gram_tile(A, f, a0, c0, W, Y, idx, n, 1);
					break;
				case 2:
					gram_tile(A, f, a0, c0, W, Y, idx, n, 2);
					break;
				case 3:
					gram_tile(A, f, a0, c0, W, Y, idx, n, 3);
					break;
				default:
					gram_tile(A, f, a0, c0, W, Y, idx, n, 4);
					break;
			}
		}
	}
}

/* Lane k of x in every lane. */
static WALS_AVX512_INLINE __m512
lane_all(__m512 x, int k)
{
	return _mm512_permutexvar_ps(_mm512_set1_epi32(k), x);
}

/*
 * 1 / sqrt(d) in every lane, from the 14-bit estimate and one Newton step
 * (float precision, within an ulp or two): the pivots form the one chain
 * of dependent steps through the factorisation, and this is about half
 * as long as a square root and a division.
 */
static WALS_AVX512_INLINE __m512
inv_sqrt(__m512 d)
{
	__m512		y = _mm512_rsqrt14_ps(d);
	__m512		e = _mm512_fnmadd_ps(_mm512_mul_ps(d, y), y, _mm512_set1_ps(3.0f));

	return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), y), e);
}

/*
 * Rows kb..kb+3 of U, over the w vectors from column 16 cs: A's rows less
 * the contributions of the finished rows above, accumulated in registers
 * (left-looking: each entry of U is stored once), then the four rows
 * finished one after the other.  Narrow chunks split the accumulation over
 * rows m into 4 / w sets of partial sums: their chains of kb dependent FMAs
 * would otherwise set the pace.  The chunk that holds the diagonal comes
 * first and records the four pivots' inverses and the couplings between the
 * four rows, which the chunks right of it apply in the same order.  A
 * pivot's inverse replaces it on the diagonal, since the substitutions
 * only ever divide by it.  Rows past f are computed from row kb and not
 * stored; reading up to column kb + 3 stays inside the padded rows.
 */
static WALS_AVX512_INLINE int
chol_chunk(float *A, int f, int kb, int cs, int first, float *inv,
		   float coup[4][4], const int w)
{
	int			fp = wals_pad(f);
	int			nr = f - kb < 4 ? f - kb : 4;
	const int	sets = w == 1 ? 4 : w == 2 ? 2 : 1;
	__m512		part[4][4][REG_VECS];
	__m512		(*acc)[REG_VECS] = part[0];
	int			m;
	int			g;
	int			r;
	int			q;
	int			c;

	WALS_UNROLL
	for (g = 0; g < sets; g++)
		WALS_UNROLL
		for (r = 0; r < 4; r++)
			WALS_UNROLL
			for (c = 0; c < w; c++)
				part[g][r][c] = g > 0 ? _mm512_setzero_ps() :
					_mm512_load_ps(A + (size_t) (kb + (r < nr ? r : 0)) * fp +
								   16 * (cs + c));
	for (m = 0; m < kb; m += sets)
	{
		WALS_UNROLL
		for (g = 0; g < sets; g++)
		{
			const float *um = A + (size_t) (m + g) * fp;
			__m512		b0 = _mm512_set1_ps(um[kb]);
			__m512		b1 = _mm512_set1_ps(um[kb + 1]);
			__m512		b2 = _mm512_set1_ps(um[kb + 2]);
			__m512		b3 = _mm512_set1_ps(um[kb + 3]);

			WALS_UNROLL
			for (c = 0; c < w; c++)
			{
				__m512		u = _mm512_load_ps(um + 16 * (cs + c));

				part[g][0][c] = _mm512_fnmadd_ps(b0, u, part[g][0][c]);
				part[g][1][c] = _mm512_fnmadd_ps(b1, u, part[g][1][c]);
				part[g][2][c] = _mm512_fnmadd_ps(b2, u, part[g][2][c]);
				part[g][3][c] = _mm512_fnmadd_ps(b3, u, part[g][3][c]);
			}
		}
	}
	WALS_UNROLL
	for (g = 1; g < sets; g++)
		WALS_UNROLL
		for (r = 0; r < 4; r++)
			WALS_UNROLL
			for (c = 0; c < w; c++)
				acc[r][c] = _mm512_add_ps(acc[r][c], part[g][r][c]);
	WALS_UNROLL
	for (r = 0; r < 4; r++)
	{
		int			k = kb + r;
		__m512		s;

		if (r >= nr)
			break;
		if (first)
		{
			__m512		d = lane_all(acc[r][k / 16 - cs], k % 16);

			if (!(_mm512_cvtss_f32(d) > 0.0f))
				return 0;
			s = inv_sqrt(d);
			inv[r] = _mm512_cvtss_f32(s);
		}
		else
			s = _mm512_set1_ps(inv[r]);
		WALS_UNROLL
		for (c = 0; c < w; c++)
			acc[r][c] = _mm512_mul_ps(s, acc[r][c]);
		WALS_UNROLL
		for (q = r + 1; q < 4; q++)
		{
			if (q >= nr)
				break;
			if (first)
			{
				s = lane_all(acc[r][(kb + q) / 16 - cs], (kb + q) % 16);
				coup[r][q] = _mm512_cvtss_f32(s);
			}
			else
				s = _mm512_set1_ps(coup[r][q]);
			WALS_UNROLL
			for (c = 0; c < w; c++)
				acc[q][c] = _mm512_fnmadd_ps(s, acc[r][c], acc[q][c]);
		}
	}
	WALS_UNROLL
	for (r = 0; r < 4; r++)
		WALS_UNROLL
		for (c = 0; c < w; c++)
			if (r < nr)
				_mm512_store_ps(A + (size_t) (kb + r) * fp + 16 * (cs + c), acc[r][c]);
	if (first)
		for (r = 0; r < nr; r++)
			A[(size_t) (kb + r) * fp + kb + r] = inv[r];
	return 1;
}

/* A = U^T U, U upper with inverted diagonal, by panels of four rows. */
static WALS_AVX512 int
chol_factor(float *A, int f)
{
	int			nv = wals_pad(f) / 16;
	int			kb;

	for (kb = 0; kb < f; kb += 4)
	{
		float		inv[4] = {0.0f};
		float		coup[4][4] = {{0.0f}};
		int			cs;

		for (cs = kb / 16; cs < nv; cs += REG_VECS)
		{
			int			first = cs == kb / 16;
			int			ok;

			switch (nv - cs < REG_VECS ? nv - cs : REG_VECS)
			{
				case 1:
					ok = chol_chunk(A, f, kb, cs, first, inv, coup, 1);
					break;
				case 2:
					ok = chol_chunk(A, f, kb, cs, first, inv, coup, 2);
					break;
				case 3:
					ok = chol_chunk(A, f, kb, cs, first, inv, coup, 3);
					break;
				default:
					ok = chol_chunk(A, f, kb, cs, first, inv, coup, 4);
					break;
			}
			if (!ok)
				return 0;
		}
	}
	return 1;
}

/*
 * Lanes of vector c that lie strictly right of column k: the backward
 * substitution's dot products must skip the lower triangle's garbage.
 */
static WALS_AVX512_INLINE __mmask16
right_of(int k, int c)
{
	int			first = k + 1 - 16 * c;

	if (first <= 0)
		return (__mmask16) 0xffff;
	if (first >= 16)
		return 0;
	return (__mmask16) (0xffff << first);
}

/*
 * U^T z = b forward with b and z in registers (nv a constant): each step
 * takes z_k from its lane of b and subtracts z_k times row k from what is
 * left, so the steps' chain is a lane broadcast, a multiply and an FMA.
 * z replaces b.
 */
static WALS_AVX512_INLINE void
forward_reg(const float *A, int f, float *b, const int nv)
{
	int			fp = 16 * nv;
	__m512		bv[REG_VECS];
	__m512		zv[REG_VECS];
	int			q;
	int			c;

	WALS_UNROLL
	for (c = 0; c < nv; c++)
	{
		bv[c] = _mm512_load_ps(b + 16 * c);
		zv[c] = _mm512_setzero_ps();
	}
	WALS_UNROLL
	for (q = 0; q < nv; q++)
	{
		int			last = f - 16 * q < 16 ? f - 16 * q : 16;
		int			kk;

		for (kk = 0; kk < last; kk++)
		{
			const float *rk = A + (size_t) (16 * q + kk) * fp;
			__m512		t = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_set1_epi32(kk), bv[q]),
										  _mm512_set1_ps(rk[16 * q + kk]));

			zv[q] = _mm512_mask_mov_ps(zv[q], (__mmask16) (1u << kk), t);
			WALS_UNROLL
			for (c = q; c < nv; c++)
				bv[c] = _mm512_fnmadd_ps(t, _mm512_load_ps(rk + 16 * c), bv[c]);
		}
	}
	WALS_UNROLL
	for (c = 0; c < nv; c++)
		_mm512_store_ps(b + 16 * c, zv[c]);
}

/*
 * U x = z backward with x in registers (nv a constant), four rows at a
 * time: their dot products with the finished part of x share one set of
 * horizontal sums, and only the 4 x 4 triangle between them is solved one
 * row after the other.  The lanes up to the group's last row are masked
 * off: they hold no x yet, and U's lower triangle holds garbage.
 */
static WALS_AVX512_INLINE void
backward_reg(const float *A, int f, const float *z, float *x, const int nv)
{
	int			fp = 16 * nv;
	__m512		xv[REG_VECS];
	int			q;
	int			c;

	WALS_UNROLL
	for (c = 0; c < nv; c++)
		xv[c] = _mm512_setzero_ps();
	WALS_UNROLL
	for (q = nv - 1; q >= 0; q--)
	{
		int			k0;

		for (k0 = 16 * q + 12; k0 >= 16 * q; k0 -= 4)
		{
			__mmask16	right = (__mmask16) (0xffffu << (k0 % 16 + 4));
			const float *u[4];
			__m512		d[4];
			float		sv[4];
			float		xs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			int			nr;
			int			r;
			int			j;

			if (k0 >= f)
				continue;
			nr = f - k0 < 4 ? f - k0 : 4;
			WALS_UNROLL
			for (r = 0; r < 4; r++)
			{
				u[r] = A + (size_t) (k0 + (r < nr ? r : 0)) * fp;
				d[r] = _mm512_maskz_mul_ps(right, _mm512_load_ps(u[r] + 16 * q), xv[q]);
				WALS_UNROLL
				for (c = q + 1; c < nv; c++)
					d[r] = _mm512_fmadd_ps(_mm512_load_ps(u[r] + 16 * c), xv[c], d[r]);
			}
			_mm_storeu_ps(sv, sum4(d[0], d[1], d[2], d[3]));
			WALS_UNROLL
			for (r = 3; r >= 0; r--)
			{
				float		acc;

				if (r >= nr)
					continue;
				acc = z[k0 + r] - sv[r];
				WALS_UNROLL
				for (j = r + 1; j < 4; j++)
					if (j < nr)
						acc -= u[r][k0 + j] * xs[j];
				xs[r] = acc * u[r][k0 + r];
				x[k0 + r] = xs[r];
			}
			xv[q] = _mm512_mask_broadcast_f32x4(xv[q],
												(__mmask16) (((1u << nr) - 1) << (k0 % 16)),
												_mm_loadu_ps(xs));
		}
	}
}

/*
 * The same substitutions for wider systems, on b in memory: forward as row
 * operations on b (whole vectors: the lanes at or left of k are spent, and
 * z goes to x), backward as dot products with the finished part of x, kept
 * aligned in b.
 */
static WALS_AVX512 void
substitute_mem(const float *A, int f, float *b, float *x)
{
	int			fp = wals_pad(f);
	int			nv = fp / 16;
	int			k;
	int			c;

	for (k = 0; k < f; k++)
	{
		const float *rk = A + (size_t) k * fp;
		float		z = b[k] * rk[k];
		__m512		t = _mm512_set1_ps(z);

		x[k] = z;
		for (c = k / 16; c < nv; c++)
			_mm512_store_ps(b + 16 * c,
							_mm512_fnmadd_ps(t, _mm512_load_ps(rk + 16 * c),
											 _mm512_load_ps(b + 16 * c)));
	}
	for (k = f - 1; k >= 0; k--)
	{
		const float *rk = A + (size_t) k * fp;
		__m512		s = _mm512_setzero_ps();

		for (c = k / 16; c < nv; c++)
			s = _mm512_mask3_fmadd_ps(_mm512_load_ps(rk + 16 * c),
									  _mm512_load_ps(b + 16 * c), s,
									  right_of(k, c));
		b[k] = x[k] = (x[k] - _mm512_reduce_add_ps(s)) * rk[k];
	}
}

static WALS_AVX512 int
chol_solve_avx512(float *A, int f, float *b, float *x)
{
	if (!chol_factor(A, f))
		return 0;
	switch (wals_pad(f) / 16)
	{
		case 1:
			forward_reg(A, f, b, 1);
			backward_reg(A, f, b, x, 1);
			break;
		case 2:
			forward_reg(A, f, b, 2);
			backward_reg(A, f, b, x, 2);
			break;
		case 3:
			forward_reg(A, f, b, 3);
			backward_reg(A, f, b, x, 3);
			break;
		case 4:
			forward_reg(A, f, b, 4);
			backward_reg(A, f, b, x, 4);
			break;
		default:
			substitute_mem(A, f, b, x);
			break;
	}
	return 1;
}

static const WalsKernels avx512_kernels = {
	"avx512",
	WALS_ISA_AVX512,
	row_pass_avx512,
	symv_avx512,
	dots_avx512,
	dot_avx512,
	axpy_avx512,
	xpay_avx512,
	chol_gather_avx512,
	gram_acc_avx512,
	chol_solve_avx512
};

const WalsKernels *
wals_kernels_avx512(void)
{
	return &avx512_kernels;
}

#else

const WalsKernels *
wals_kernels_avx512(void)
{
	return NULL;
}

#endif
