/*
 * kernels_simd.c
 *	  The kernels of the template (simd_family.h) for each instruction
 *	  set with vector registers: the primitives it is written in, its
 *	  register budgets, and one inclusion of the template.
 *
 * Every function carries its target attribute (intrinsics must be compiled
 * for it), so the file builds with the baseline flags of PGXS; none of it
 * runs unless kernels.c found the instruction set at run time.  The
 * budgets say how many vectors the register file holds at once: AVX-512
 * and NEON have 32 registers, AVX2 16 (see simd_base.h).
 */
#include <math.h>
#include <string.h>

#include "wals_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)

#include <immintrin.h>

/*
 * a(r) and b(r) of WalsPassCoef for four cells, as the x86 families'
 * factors4 take them: a comparison's mask zeroes a below a_from, and
 * clearing the sign bit gives |r|.
 */
static __attribute__((target("avx2,fma"))) inline __attribute__((always_inline)) __m128
coef_a_x86(const WalsPassCoef *coef, __m128 r)
{
	__m128		a = _mm_fmadd_ps(_mm_set1_ps(coef->a1), r, _mm_set1_ps(coef->a0));

	return _mm_and_ps(a, _mm_cmp_ps(r, _mm_set1_ps(coef->a_from), _CMP_GE_OQ));
}

static __attribute__((target("avx2,fma"))) inline __attribute__((always_inline)) __m128
coef_b_x86(const WalsPassCoef *coef, __m128 r)
{
	return _mm_fmadd_ps(_mm_set1_ps(coef->b1), _mm_andnot_ps(_mm_set1_ps(-0.0f), r),
						_mm_set1_ps(coef->b0));
}

/* ---------- AVX-512 (x86-64-v4) ---------- */

#define SIMD_W 16
#define V __m512
#define SIMD_FN __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
#define SIMD(x) x##_avx512
#define SIMD_ISA WALS_ISA_AVX512
#define SIMD_NAME "avx512"
#define SIMD_ONE 4
#define SIMD_BOTH 4
#define SIMD_ACC 16

#define vzero() _mm512_setzero_ps()
#define vset1(x) _mm512_set1_ps(x)
#define vld(p) _mm512_loadu_ps(p)
#define vst(p, x) _mm512_storeu_ps((p), (x))
#define vldn(p, n) _mm512_maskz_loadu_ps((__mmask16) ((1u << (n)) - 1), (p))
#define vstn(p, n, x) _mm512_mask_storeu_ps((p), (__mmask16) ((1u << (n)) - 1), (x))
#define vfma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define vfnma(a, b, c) _mm512_fnmadd_ps((a), (b), (c))
#define vmul(a, b) _mm512_mul_ps((a), (b))
#define vadd(a, b) _mm512_add_ps((a), (b))
#define vlane(x, k) _mm512_permutexvar_ps(_mm512_set1_epi32(k), (x))
#define vfirst(x) _mm512_cvtss_f32(x)
#define vrsqrt(d) rsqrt_avx512(d)
#define vsum4(a, b, c, d, out) _mm_storeu_ps((out), sum4_avx512((a), (b), (c), (d)))
#define vreduce(x) _mm512_reduce_add_ps(x)
#define vkeep_from(x, first) _mm512_maskz_mov_ps(from_avx512(first), (x))
#define vput(x, pos, n, xs) \
	_mm512_mask_broadcast_f32x4((x), (__mmask16) (((1u << (n)) - 1) << (pos)), \
								_mm_loadu_ps(xs))
#define vfactors4(coef, val, live, d, t) factors4_avx512((coef), (val), (live), (d), (t))
#define vsubfactors4(coef, val, yhat, live, d, ts) \
	subfactors4_avx512((coef), (val), (yhat), (live), (d), (ts))

/*
 * 1 / sqrt(d) in every lane, from the 14-bit estimate and one Newton step
 * (float precision, within an ulp or two): the pivots form the one chain
 * of dependent steps through the factorisation, and this is about half
 * as long as a square root and a division.
 */
static SIMD_FN inline __attribute__((always_inline)) __m512
rsqrt_avx512(__m512 d)
{
	__m512		y = _mm512_rsqrt14_ps(d);
	__m512		e = _mm512_fnmadd_ps(_mm512_mul_ps(d, y), y, _mm512_set1_ps(3.0f));

	return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), y), e);
}

/* The four horizontal sums of a, b, c, d, sharing their shuffles. */
static SIMD_FN inline __attribute__((always_inline)) __m128
sum4_avx512(__m512 a, __m512 b, __m512 c, __m512 d)
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

/*
 * t_k = a(r_k) + b(r_k) d_k (WalsPassCoef) for the four cells of a group,
 * in one vector (zero past live, the group's cells in the row), each then
 * broadcast.
 */
static SIMD_FN inline __attribute__((always_inline)) void
factors4_avx512(const WalsPassCoef *coef, const float *val, int live,
				const __m512 *d, __m512 *t)
{
	__mmask8	m = (__mmask8) ((1u << live) - 1);
	__m128		r = _mm_maskz_loadu_ps(m, val);
	__m128		a = coef_a_x86(coef, r);
	__m128		b = coef_b_x86(coef, r);
	__m512		tt = _mm512_castps128_ps512(
		_mm_maskz_mov_ps(m, _mm_fmadd_ps(b, sum4_avx512(d[0], d[1], d[2], d[3]), a)));

	t[0] = _mm512_permutexvar_ps(_mm512_set1_epi32(0), tt);
	t[1] = _mm512_permutexvar_ps(_mm512_set1_epi32(1), tt);
	t[2] = _mm512_permutexvar_ps(_mm512_set1_epi32(2), tt);
	t[3] = _mm512_permutexvar_ps(_mm512_set1_epi32(3), tt);
}

/*
 * The subspace pass's factors of a group (see sub_group in simd_subspace.h)
 * with the four sums and predictions in one vector, as factors4_avx512.
 */
static SIMD_FN inline __attribute__((always_inline)) void
subfactors4_avx512(const WalsPassCoef *coef, const float *val, float *yhat,
				   int live, const __m512 *d, float *ts)
{
	__mmask8	m = (__mmask8) ((1u << live) - 1);
	__m128		r = _mm_maskz_loadu_ps(m, val);
	__m128		yh = _mm_add_ps(_mm_maskz_loadu_ps(m, yhat),
								sum4_avx512(d[0], d[1], d[2], d[3]));
	__m128		slope = coef_b_x86(coef, r);
	__m128		a = coef_a_x86(coef, r);

	_mm_mask_storeu_ps(yhat, m, yh);
	_mm_storeu_ps(ts, _mm_maskz_mov_ps(m, _mm_fmadd_ps(slope, yh, a)));
	_mm_storeu_ps(ts + 4, _mm_maskz_sub_ps(m, _mm_setzero_ps(), slope));
}

/* Lanes from first on (none when first is 16 or more). */
static SIMD_FN inline __attribute__((always_inline)) __mmask16
from_avx512(int first)
{
	if (first <= 0)
		return (__mmask16) 0xffff;
	if (first >= 16)
		return 0;
	return (__mmask16) (0xffffu << first);
}

#include "simd_family.h"

/* ---------- AVX2 with FMA (x86-64-v3) ---------- */

#define SIMD_W 8
#define V __m256
#define SIMD_FN __attribute__((target("avx2,fma")))
#define SIMD(x) x##_avx2
#define SIMD_ISA WALS_ISA_AVX2
#define SIMD_NAME "avx2"
#define SIMD_ONE 8
#define SIMD_BOTH 2
#define SIMD_ACC 8

#define vzero() _mm256_setzero_ps()
#define vset1(x) _mm256_set1_ps(x)
#define vld(p) _mm256_loadu_ps(p)
#define vst(p, x) _mm256_storeu_ps((p), (x))
#define vldn(p, n) _mm256_maskload_ps((p), first_lanes_avx2(n))
#define vstn(p, n, x) _mm256_maskstore_ps((p), first_lanes_avx2(n), (x))
#define vfma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define vfnma(a, b, c) _mm256_fnmadd_ps((a), (b), (c))
#define vmul(a, b) _mm256_mul_ps((a), (b))
#define vadd(a, b) _mm256_add_ps((a), (b))
#define vlane(x, k) _mm256_permutevar8x32_ps((x), _mm256_set1_epi32(k))
#define vfirst(x) _mm256_cvtss_f32(x)
#define vrsqrt(d) rsqrt_avx2(d)
#define vsum4(a, b, c, d, out) _mm_storeu_ps((out), sum4_avx2((a), (b), (c), (d)))
#define vreduce(x) reduce_avx2(x)
#define vkeep_from(x, first) \
	_mm256_and_ps((x), _mm256_castsi256_ps(_mm256_cmpgt_epi32( \
		_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((first) - 1))))
#define vput(x, pos, n, xs) put_avx2((x), (pos), (n), (xs))
#define vfactors4(coef, val, live, d, t) factors4_avx2((coef), (val), (live), (d), (t))
#define vsubfactors4(coef, val, yhat, live, d, ts) \
	subfactors4_avx2((coef), (val), (yhat), (live), (d), (ts))

/* The first n lanes, as the masked loads and stores want them. */
static SIMD_FN inline __attribute__((always_inline)) __m256i
first_lanes_avx2(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
							  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/*
 * The 12-bit estimate and one Newton step: about 22 bits, an ulp or two
 * short of a correctly rounded 1 / sqrt(d), as in the AVX-512 kernels.
 */
static SIMD_FN inline __attribute__((always_inline)) __m256
rsqrt_avx2(__m256 d)
{
	__m256		y = _mm256_rsqrt_ps(d);
	__m256		e = _mm256_fnmadd_ps(_mm256_mul_ps(d, y), y, _mm256_set1_ps(3.0f));

	return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), y), e);
}

static SIMD_FN inline __attribute__((always_inline)) __m128
sum4_avx2(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256		ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
	__m256		cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
	__m256d		lo = _mm256_unpacklo_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd));
	__m256d		hi = _mm256_unpackhi_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd));
	__m256		s = _mm256_add_ps(_mm256_castpd_ps(lo), _mm256_castpd_ps(hi));

	return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

static SIMD_FN inline __attribute__((always_inline)) float
reduce_avx2(__m256 x)
{
	__m128		s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* As factors4_avx512. */
static SIMD_FN inline __attribute__((always_inline)) void
factors4_avx2(const WalsPassCoef *coef, const float *val, int live,
			  const __m256 *d, __m256 *t)
{
	__m128i		m = _mm_cmpgt_epi32(_mm_set1_epi32(live), _mm_setr_epi32(0, 1, 2, 3));
	__m128		r = _mm_maskload_ps(val, m);
	__m128		a = coef_a_x86(coef, r);
	__m128		b = coef_b_x86(coef, r);
	__m128		tt = _mm_and_ps(_mm_fmadd_ps(b, sum4_avx2(d[0], d[1], d[2], d[3]), a),
								_mm_castsi128_ps(m));

	t[0] = _mm256_broadcastss_ps(tt);
	t[1] = _mm256_broadcastss_ps(_mm_shuffle_ps(tt, tt, 0x55));
	t[2] = _mm256_broadcastss_ps(_mm_shuffle_ps(tt, tt, 0xaa));
	t[3] = _mm256_broadcastss_ps(_mm_shuffle_ps(tt, tt, 0xff));
}

/* As subfactors4_avx512. */
static SIMD_FN inline __attribute__((always_inline)) void
subfactors4_avx2(const WalsPassCoef *coef, const float *val, float *yhat,
				 int live, const __m256 *d, float *ts)
{
	__m128i		m = _mm_cmpgt_epi32(_mm_set1_epi32(live), _mm_setr_epi32(0, 1, 2, 3));
	__m128		r = _mm_maskload_ps(val, m);
	__m128		yh = _mm_add_ps(_mm_maskload_ps(yhat, m),
								sum4_avx2(d[0], d[1], d[2], d[3]));
	__m128		slope = coef_b_x86(coef, r);
	__m128		a = coef_a_x86(coef, r);

	_mm_maskstore_ps(yhat, m, yh);
	_mm_storeu_ps(ts, _mm_and_ps(_mm_fmadd_ps(slope, yh, a), _mm_castsi128_ps(m)));
	_mm_storeu_ps(ts + 4, _mm_and_ps(_mm_sub_ps(_mm_setzero_ps(), slope),
									 _mm_castsi128_ps(m)));
}

/* Lanes pos..pos+n-1 of x replaced by xs[0..n). */
static SIMD_FN inline __attribute__((always_inline)) __m256
put_avx2(__m256 x, int pos, int n, const float *xs)
{
	float		t[8];

	_mm256_storeu_ps(t, x);
	memcpy(t + pos, xs, sizeof(float) * n);
	return _mm256_loadu_ps(t);
}

#include "simd_family.h"

const WalsKernels *
wals_kernels_simd(WalsIsa isa)
{
	switch (isa)
	{
		case WALS_ISA_AVX512:
			return &kernels_avx512;
		case WALS_ISA_AVX2:
			return &kernels_avx2;
		default:
			return NULL;
	}
}

#elif defined(__aarch64__) && defined(__GNUC__)

#include <arm_neon.h>

/* ---------- NEON (Advanced SIMD, every AArch64 CPU) ---------- */

#define SIMD_W 4
#define V float32x4_t
#define SIMD_FN
#define SIMD(x) x##_neon
#define SIMD_ISA WALS_ISA_NEON
#define SIMD_NAME "neon"
#define SIMD_ONE 16
#define SIMD_BOTH 8
#define SIMD_ACC 16

#define vzero() vdupq_n_f32(0.0f)
#define vset1(x) vdupq_n_f32(x)
#define vld(p) vld1q_f32(p)
#define vst(p, x) vst1q_f32((p), (x))
#define vldn(p, n) ldn_neon((p), (n))
#define vstn(p, n, x) stn_neon((p), (n), (x))
#define vfma(a, b, c) vfmaq_f32((c), (a), (b))
#define vfnma(a, b, c) vfmsq_f32((c), (a), (b))
#define vmul(a, b) vmulq_f32((a), (b))
#define vadd(a, b) vaddq_f32((a), (b))
#define vlane(x, k) vdupq_n_f32((x)[k])
#define vfirst(x) vgetq_lane_f32((x), 0)
#define vrsqrt(d) rsqrt_neon(d)
#define vsum4(a, b, c, d, out) \
	vst1q_f32((out), vpaddq_f32(vpaddq_f32((a), (b)), vpaddq_f32((c), (d))))
#define vreduce(x) vaddvq_f32(x)
#define vkeep_from(x, first) \
	vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), \
		vcgtq_s32(lanes_neon(), vdupq_n_s32((first) - 1))))
#define vput(x, pos, n, xs) put_neon((x), (pos), (n), (xs))
#define vfactors4(coef, val, live, d, t) factors4_neon((coef), (val), (live), (d), (t))
#define vsubfactors4(coef, val, yhat, live, d, ts) \
	subfactors4_neon((coef), (val), (yhat), (live), (d), (ts))

static inline __attribute__((always_inline)) int32x4_t
lanes_neon(void)
{
	static const int32_t lanes[4] = {0, 1, 2, 3};

	return vld1q_s32(lanes);
}

static inline __attribute__((always_inline)) float32x4_t
ldn_neon(const float *p, int n)
{
	float		t[4] = {0.0f, 0.0f, 0.0f, 0.0f};

	memcpy(t, p, sizeof(float) * n);
	return vld1q_f32(t);
}

static inline __attribute__((always_inline)) void
stn_neon(float *p, int n, float32x4_t x)
{
	float		t[4];

	vst1q_f32(t, x);
	memcpy(p, t, sizeof(float) * n);
}

/* The 8-bit estimate and two Newton steps: about 23 bits. */
static inline __attribute__((always_inline)) float32x4_t
rsqrt_neon(float32x4_t d)
{
	float32x4_t y = vrsqrteq_f32(d);

	y = vmulq_f32(y, vrsqrtsq_f32(vmulq_f32(d, y), y));
	return vmulq_f32(y, vrsqrtsq_f32(vmulq_f32(d, y), y));
}

/* As on x86, lane by lane. */
static inline __attribute__((always_inline)) void
factors4_neon(const WalsPassCoef *coef, const float *val, int live,
			  const float32x4_t *d, float32x4_t *t)
{
	float		s[4];
	int			k;

	vst1q_f32(s, vpaddq_f32(vpaddq_f32(d[0], d[1]), vpaddq_f32(d[2], d[3])));
	for (k = 0; k < 4; k++)
		t[k] = vdupq_n_f32(k < live ?
						   fmaf(wals_coef_b(coef, val[k]), s[k],
								wals_coef_a(coef, val[k])) : 0.0f);
}

/* As on x86, lane by lane. */
static inline __attribute__((always_inline)) void
subfactors4_neon(const WalsPassCoef *coef, const float *val, float *yhat,
				 int live, const float32x4_t *d, float *ts)
{
	float		sums[4];
	int			k;

	vst1q_f32(sums, vpaddq_f32(vpaddq_f32(d[0], d[1]), vpaddq_f32(d[2], d[3])));
	for (k = 0; k < 4; k++)
	{
		float		slope;
		float		yh;

		ts[k] = ts[4 + k] = 0.0f;
		if (k >= live)
			continue;
		slope = wals_coef_b(coef, val[k]);
		yh = yhat[k] + sums[k];
		yhat[k] = yh;
		ts[k] = fmaf(slope, yh, wals_coef_a(coef, val[k]));
		ts[4 + k] = -slope;
	}
}

static inline __attribute__((always_inline)) float32x4_t
put_neon(float32x4_t x, int pos, int n, const float *xs)
{
	float		t[4];

	vst1q_f32(t, x);
	memcpy(t + pos, xs, sizeof(float) * n);
	return vld1q_f32(t);
}

#include "simd_family.h"

const WalsKernels *
wals_kernels_simd(WalsIsa isa)
{
	return isa == WALS_ISA_NEON ? &kernels_neon : NULL;
}

#else

const WalsKernels *
wals_kernels_simd(WalsIsa isa)
{
	return NULL;
}

#endif
