/*
 * kernels_generic.c
 *	  The solvers' inner loops in portable C: the generic family of
 *	  kernels, which runs on any CPU, and the reference the vector families
 *	  of kernels_simd.c are tested against.
 *
 * The bodies use the compiler's vector types where it has them, and keep
 * partial sums in a fixed order, so that results are reproducible.
 */
#include <string.h>

#include "wals_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define WALS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define WALS_ALWAYS_INLINE inline
#endif

#ifdef __GNUC__

/*
 * Eight floats as one value: the compiler maps its arithmetic onto the
 * vector unit of the function being compiled (two SSE registers, or one
 * AVX register), with no reliance on its loop vectorizer, which at -O2
 * leaves loops of unknown length scalar.  aligned(4) admits any float
 * address, may_alias reading float arrays through it.
 */
typedef float WalsV8 __attribute__((vector_size(32), aligned(4), may_alias));

#define V8(p) (*(const WalsV8 *) (p))
#define V8W(p) (*(WalsV8 *) (p))

/* x.y in two vector partial sums, reduced pairwise in a fixed order. */
static WALS_ALWAYS_INLINE float
dot_body(const float *x, const float *y, int f)
{
	WalsV8		a0 = {0.0f};
	WalsV8		a1 = {0.0f};
	float		s;
	int			k = 0;

	for (; k + 16 <= f; k += 16)
	{
		a0 += V8(x + k) * V8(y + k);
		a1 += V8(x + k + 8) * V8(y + k + 8);
	}
	if (k + 8 <= f)
	{
		a0 += V8(x + k) * V8(y + k);
		k += 8;
	}
	a0 += a1;
	s = ((a0[0] + a0[4]) + (a0[2] + a0[6])) + ((a0[1] + a0[5]) + (a0[3] + a0[7]));
	for (; k < f; k++)
		s += x[k] * y[k];
	return s;
}

/* out[0..f) += t y */
static WALS_ALWAYS_INLINE void
axpy_body(float t, const float *y, float *out, int f)
{
	int			k = 0;

	for (; k + 8 <= f; k += 8)
		V8W(out + k) += t * V8(y + k);
	for (; k < f; k++)
		out[k] += t * y[k];
}

/* b = a + t b */
static WALS_ALWAYS_INLINE void
xpay_body(const float *a, float t, float *b, int f)
{
	int			k = 0;

	for (; k + 8 <= f; k += 8)
		V8W(b + k) = V8(a + k) + t * V8(b + k);
	for (; k < f; k++)
		b[k] = a[k] + t * b[k];
}

/* The eight lanes of a added pairwise, in a fixed order. */
static WALS_ALWAYS_INLINE float
hsum8(WalsV8 a)
{
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* d[j] = y_j.v for four rows at once, which interleaves their chains. */
static WALS_ALWAYS_INLINE void
dot4_body(const float *y0, const float *y1, const float *y2, const float *y3,
		  const float *v, int f, float *d)
{
	WalsV8		a0 = {0.0f};
	WalsV8		a1 = {0.0f};
	WalsV8		a2 = {0.0f};
	WalsV8		a3 = {0.0f};
	int			k = 0;

	for (; k + 8 <= f; k += 8)
	{
		WalsV8		vk = V8(v + k);

		a0 += V8(y0 + k) * vk;
		a1 += V8(y1 + k) * vk;
		a2 += V8(y2 + k) * vk;
		a3 += V8(y3 + k) * vk;
	}
	d[0] = hsum8(a0);
	d[1] = hsum8(a1);
	d[2] = hsum8(a2);
	d[3] = hsum8(a3);
	for (; k < f; k++)
	{
		d[0] += y0[k] * v[k];
		d[1] += y1[k] * v[k];
		d[2] += y2[k] * v[k];
		d[3] += y3[k] * v[k];
	}
}

/* row[from..to) += t0 w0 + t1 w1 + t2 w2 + t3 w3 */
static WALS_ALWAYS_INLINE void
axpy4_body(float t0, float t1, float t2, float t3, const float *w0,
		   const float *w1, const float *w2, const float *w3, float *row,
		   int from, int to)
{
	int			c = from;

	for (; c + 8 <= to; c += 8)
		V8W(row + c) += t0 * V8(w0 + c) + t1 * V8(w1 + c) +
			t2 * V8(w2 + c) + t3 * V8(w3 + c);
	for (; c < to; c++)
		row[c] += t0 * w0[c] + t1 * w1[c] + t2 * w2[c] + t3 * w3[c];
}

#else

/* Plain loops for compilers without vector extensions. */
static WALS_ALWAYS_INLINE float
dot_body(const float *x, const float *y, int f)
{
	float		s = 0.0f;
	int			k;

	for (k = 0; k < f; k++)
		s += x[k] * y[k];
	return s;
}

static WALS_ALWAYS_INLINE void
axpy_body(float t, const float *y, float *out, int f)
{
	int			k;

	for (k = 0; k < f; k++)
		out[k] += t * y[k];
}

static WALS_ALWAYS_INLINE void
xpay_body(const float *a, float t, float *b, int f)
{
	int			k;

	for (k = 0; k < f; k++)
		b[k] = a[k] + t * b[k];
}

static WALS_ALWAYS_INLINE void
dot4_body(const float *y0, const float *y1, const float *y2, const float *y3,
		  const float *v, int f, float *d)
{
	d[0] = dot_body(y0, v, f);
	d[1] = dot_body(y1, v, f);
	d[2] = dot_body(y2, v, f);
	d[3] = dot_body(y3, v, f);
}

static WALS_ALWAYS_INLINE void
axpy4_body(float t0, float t1, float t2, float t3, const float *w0,
		   const float *w1, const float *w2, const float *w3, float *row,
		   int from, int to)
{
	int			c;

	for (c = from; c < to; c++)
		row[c] += t0 * w0[c] + t1 * w1[c] + t2 * w2[c] + t3 * w3[c];
}

#endif

/*
 * Four cells per trip: their dot products interleave, and out is read and
 * written once for the four of them.
 */
static WALS_ALWAYS_INLINE void
row_pass_body(const float *Y, const int32_t *idx, const float *val, int n,
			  int f, const WalsPassCoef *coef, const float *v, float *out)
{
	int64_t		work = 0;
	int			i = 0;

	memset(out, 0, sizeof(float) * f);
	for (; i + 4 <= n; i += 4)
	{
		const float *y0 = Y + (size_t) idx[i] * f;
		const float *y1 = Y + (size_t) idx[i + 1] * f;
		const float *y2 = Y + (size_t) idx[i + 2] * f;
		const float *y3 = Y + (size_t) idx[i + 3] * f;
		float		d[4];
		float		t[4];
		int			j;

		dot4_body(y0, y1, y2, y3, v, f, d);
		for (j = 0; j < 4; j++)
			t[j] = wals_coef_a(coef, val[i + j]) +
				wals_coef_b(coef, val[i + j]) * d[j];
		axpy4_body(t[0], t[1], t[2], t[3], y0, y1, y2, y3, out, 0, f);
		wals_poll_local(&work, (int64_t) 8 * f);
	}
	wals_poll(work);
	for (; i < n; i++)
	{
		const float *y = Y + (size_t) idx[i] * f;
		float		r = val[i];
		float		t = wals_coef_a(coef, r) + wals_coef_b(coef, r) * dot_body(y, v, f);

		axpy_body(t, y, out, f);
	}
}

/* G is symmetric, so G v is a combination of its rows: no reductions. */
static WALS_ALWAYS_INLINE void
symv_body(const float *G, int f, float alpha, const float *v, float *out)
{
	int			k;

	for (k = 0; k < f; k++)
		axpy_body(alpha * v[k], G + (size_t) k * f, out, f);
}

static WALS_ALWAYS_INLINE void
dots_body(const float *Y, const int32_t *idx, int n, int f, const float *x,
		  float *out)
{
	int			i = 0;

	for (; i + 4 <= n; i += 4)
		dot4_body(Y + (size_t) idx[i] * f, Y + (size_t) idx[i + 1] * f,
				  Y + (size_t) idx[i + 2] * f, Y + (size_t) idx[i + 3] * f,
				  x, f, out + i);
	for (; i < n; i++)
		out[i] = dot_body(x, Y + (size_t) idx[i] * f, f);
}

static WALS_ALWAYS_INLINE void
chol_gather_body(const float *Y, const int32_t *idx, const float *val, int n,
				 int f, const WalsPassCoef *coef, float *W, float *rhs)
{
	int			fp = wals_pad(f);
	int			j;

	for (j = 0; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		float	   *w = W + (size_t) j * fp;

		memset(w, 0, sizeof(float) * fp);
		axpy_body(wals_coef_b(coef, val[j]), y, w, f);
		axpy_body(wals_coef_a(coef, val[j]), y, rhs, f);
	}
}

/*
 * Four cells per sweep over A: each row of A is read and written once for
 * four rank-one terms, which A's loads and stores, not the arithmetic,
 * would otherwise limit.  Row a is updated from the block holding its
 * diagonal to the padded end, whole blocks only: the entries left of the
 * diagonal may take anything, and the weighted rows' padding is zero.
 */
static WALS_ALWAYS_INLINE void
gram_acc_body(float *A, int f, const float *W, const float *Y,
			  const int32_t *idx, int n)
{
	int			fp = wals_pad(f);
	int64_t		work = 0;
	int			j = 0;
	int			a;

	for (; j + 4 <= n; j += 4)
	{
		const float *y0 = Y + (size_t) idx[j] * f;
		const float *y1 = Y + (size_t) idx[j + 1] * f;
		const float *y2 = Y + (size_t) idx[j + 2] * f;
		const float *y3 = Y + (size_t) idx[j + 3] * f;
		const float *w0 = W + (size_t) j * fp;
		const float *w1 = w0 + fp;
		const float *w2 = w1 + fp;
		const float *w3 = w2 + fp;

		for (a = 0; a < f; a++)
			axpy4_body(y0[a], y1[a], y2[a], y3[a], w0, w1, w2, w3,
					   A + (size_t) a * fp, a / WALS_VEC * WALS_VEC, fp);
		wals_poll_local(&work, (int64_t) 2 * f * fp);
	}
	for (; j < n; j++)
	{
		const float *y = Y + (size_t) idx[j] * f;
		const float *w = W + (size_t) j * fp;

		for (a = 0; a < f; a++)
		{
			int			c0 = a / WALS_VEC * WALS_VEC;

			axpy_body(y[a], w + c0, A + (size_t) a * fp + c0, fp - c0);
		}
		wals_poll_local(&work, (int64_t) f * fp / 2);
	}
	wals_poll(work);
}

/*
 * The subspace solver's block pass, by chunks of cells as the vector
 * kernels go: each cell's prediction and its share of the right-hand
 * side, its piece and weighted piece gathered; then the chunk's Gram four
 * cells per sweep over A, as gram_acc_body, on the upper triangle only
 * (LAPACK reads no more).
 */
static WALS_ALWAYS_INLINE void
sub_block_body(const float *Y, const int32_t *idx, const float *val, int n,
			   int f, const WalsPassCoef *coef, float *yhat, const float *dp,
			   int p0, int pb, int k0, int b, float *A, float *rhs,
			   float *work)
{
	int			bp = wals_pad(b);
	float	   *yc = work;
	float	   *wc = work + (size_t) WALS_SUB_CHUNK * bp;
	int			i0;

	for (i0 = 0; i0 < n; i0 += WALS_SUB_CHUNK)
	{
		int			m = n - i0 < WALS_SUB_CHUNK ? n - i0 : WALS_SUB_CHUNK;
		int			j;
		int			a;
		int			c;

		for (j = 0; j < m; j++)
		{
			const float *y = Y + (size_t) idx[i0 + j] * f;
			float		r = val[i0 + j];
			float		slope = wals_coef_b(coef, r);

			if (pb > 0)
				yhat[i0 + j] += dot_body(y + p0, dp, pb);
			axpy_body(wals_coef_a(coef, r) + slope * yhat[i0 + j], y + k0,
					  rhs, b);
			for (c = 0; c < b; c++)
			{
				yc[(size_t) j * bp + c] = y[k0 + c];
				wc[(size_t) j * bp + c] = -slope * y[k0 + c];
			}
		}
		wals_poll((int64_t) 2 * m * (b + pb));
		for (j = 0; j + 4 <= m; j += 4)
		{
			const float *y0 = yc + (size_t) j * bp;
			const float *w0 = wc + (size_t) j * bp;

			for (a = 0; a < b; a++)
				axpy4_body(y0[a], y0[bp + a], y0[2 * bp + a], y0[3 * bp + a],
						   w0, w0 + bp, w0 + 2 * bp, w0 + 3 * bp,
						   A + (size_t) a * bp, a, b);
			wals_poll((int64_t) 2 * b * b);
		}
		for (; j < m; j++)
		{
			for (a = 0; a < b; a++)
				axpy_body(yc[(size_t) j * bp + a], wc + (size_t) j * bp + a,
						  A + (size_t) a * bp + a, b - a);
			wals_poll((int64_t) b * b / 2);
		}
	}
}

/*
 * Columns of a panel of the blocked factorisation below: spotrf on the
 * panel's diagonal block, strsm below it, and the trailing update by
 * wals_syrk_pieces.
 */
#define CHOL_PANEL 128

/*
 * A = L L^T in LAPACK's lower triangle (lda fp), by panels of CHOL_PANEL
 * columns, so that no call into LAPACK or BLAS exceeds WALS_BLAS_PIECE
 * and the poll hook comes between them; 0 where a pivot is not
 * positive.  It rounds otherwise than one spotrf, so it is only taken
 * where spotrf alone would run too long.
 */
static int
chol_factor_panels(float *A, int f, int fp)
{
	int			j;

	for (j = 0; j < f; j += CHOL_PANEL)
	{
		int			jb = f - j < CHOL_PANEL ? f - j : CHOL_PANEL;
		int			rest = f - j - jb;
		float	   *Ajj = A + (size_t) j * fp + j;
		int			info = 0;

		wals_blas()->spotrf("L", &jb, Ajj, &fp, &info);
		if (info != 0)
			return 0;
		if (rest > 0)
		{
			wals_blas()->strsm(CblasColMajor, CblasRight, CblasLower, CblasTrans,
						       CblasNonUnit, rest, jb, 1.0f, Ajj, fp, Ajj + jb, fp);
			wals_poll((int64_t) jb * jb * rest / 2);
			wals_syrk_pieces(rest, jb, -1.0f, Ajj + jb, fp,
							 Ajj + jb + (size_t) jb * fp, fp);
		}
	}
	return 1;
}

/*
 * LAPACK reads column-major, so our row-major upper triangle is its lower
 * one, with the padded stride as leading dimension.  spotrf's blocked code
 * only pays off well above the usual f, but the portable kernels are the
 * fallback, where a well-tested factorisation matters more than speed.
 * Above f = 1476, where spotrf alone is more than WALS_BLAS_PIECE
 * multiply-adds (f^3 / 6), the factorisation goes by panels instead.
 *
 * OpenBLAS's spotrf lets a NaN or infinite pivot through (its test is
 * pivot <= 0): its factor's diagonal, the pivots' square roots, is checked
 * as the vector kernels check the pivots (wals_pivot_ok).
 */
static int
chol_solve_lapack(float *A, int f, float *b, float *x)
{
	int			fp = wals_pad(f);
	int			one = 1;
	int			info = 0;
	int			k;

	if ((int64_t) f * f / 6 * f <= WALS_BLAS_PIECE)
		wals_blas()->spotrf("L", &f, A, &fp, &info);
	else if (!chol_factor_panels(A, f, fp))
		return 0;
	if (info != 0)
		return 0;
	for (k = 0; k < f; k++)
		if (!wals_pivot_ok(A[(size_t) k * fp + k]))
			return 0;
	wals_blas()->spotrs("L", &f, &one, A, &fp, b, &f, &info);
	memcpy(x, b, sizeof(float) * f);
	return 1;
}

static void
row_pass_generic(const float *Y, const int32_t *idx, const float *val, int n,
				 int f, const WalsPassCoef *coef, const float *v, float *out)
{
	row_pass_body(Y, idx, val, n, f, coef, v, out);
}

static void
symv_generic(const float *G, int f, float alpha, const float *v, float *out)
{
	symv_body(G, f, alpha, v, out);
}

static void
dots_generic(const float *Y, const int32_t *idx, int n, int f, const float *x,
			 float *out)
{
	dots_body(Y, idx, n, f, x, out);
}

static void
dots2_generic(const float *Y, const int32_t *idx, int n, int f, const float *a,
			  const float *b, float *outa, float *outb)
{
	dots_body(Y, idx, n, f, a, outa);
	dots_body(Y, idx, n, f, b, outb);
}

/*
 * Four scores a vector of GCC's extension, which every target compiles
 * (SSE2 on x86-64, NEON on Arm, pairs of scalars elsewhere), comparisons
 * giving -1 where true; see the vector families' own in simd_rank.h.
 */
typedef float RankScores __attribute__((vector_size(16)));
typedef int32_t RankCounts __attribute__((vector_size(16)));

static void
rank_counts_generic(const float *s, int64_t n, const float *r, int nr,
					int64_t *below, int64_t *equal)
{
	int			p;

	for (p = 0; p < nr; p++)
	{
		RankScores	rv = {r[p], r[p], r[p], r[p]};
		RankCounts	lt = {0, 0, 0, 0};
		RankCounts	eq = {0, 0, 0, 0};
		int64_t		i;

		for (i = 0; i + 4 <= n; i += 4)
		{
			RankScores	x;

			memcpy(&x, s + i, sizeof(x));
			lt -= (RankCounts) (x < rv);
			eq -= (RankCounts) (x == rv);
		}
		below[p] = (int64_t) lt[0] + lt[1] + lt[2] + lt[3];
		equal[p] = (int64_t) eq[0] + eq[1] + eq[2] + eq[3];
		for (; i < n; i++)
		{
			below[p] += s[i] < r[p];
			equal[p] += s[i] == r[p];
		}
	}
}

static float
dot_generic(const float *a, const float *b, int f)
{
	return dot_body(a, b, f);
}

static void
axpy_generic(float t, const float *a, float *b, int f)
{
	axpy_body(t, a, b, f);
}

static void
xpay_generic(const float *a, float t, float *b, int f)
{
	xpay_body(a, t, b, f);
}

static void
chol_gather_generic(const float *Y, const int32_t *idx, const float *val,
					int n, int f, const WalsPassCoef *coef, float *W, float *b)
{
	chol_gather_body(Y, idx, val, n, f, coef, W, b);
}

static void
gram_acc_generic(float *A, int f, const float *W, const float *Y,
				 const int32_t *idx, int n)
{
	gram_acc_body(A, f, W, Y, idx, n);
}

/* One dot product per entry, the same whatever m and nx. */
static void
gemm_nt_generic(const float *M, int m, const float *X, int nx, int f,
				float *out)
{
	int			j;
	int			r;

	for (j = 0; j < m; j++)
		for (r = 0; r < nx; r++)
			out[(size_t) j * nx + r] = dot_body(M + (size_t) j * f,
												X + (size_t) r * f, f);
}

static void
sub_block_generic(const float *Y, const int32_t *idx, const float *val, int n,
				  int f, const WalsPassCoef *coef, float *yhat, const float *dp,
				  int p0, int pb, int k0, int b, float *A, float *rhs,
				  float *work)
{
	sub_block_body(Y, idx, val, n, f, coef, yhat, dp, p0, pb, k0, b, A, rhs,
				   work);
}

const WalsKernels wals_generic_kernels = {
	"generic",
	WALS_ISA_GENERIC,
	row_pass_generic,
	symv_generic,
	dots_generic,
	dots2_generic,
	dot_generic,
	axpy_generic,
	xpay_generic,
	chol_gather_generic,
	gram_acc_generic,
	chol_solve_lapack,
	gemm_nt_generic,
	sub_block_generic,
	rank_counts_generic
};
