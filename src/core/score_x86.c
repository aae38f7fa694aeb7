/*
 * score_x86.c
 *	  The first pass on x86: AVX-512 with VNNI (vpdpbusd), and AVX2
 *	  (vpmaddubsw), which AVX-512 without VNNI uses too.
 *
 * On its own because its functions are compiled for their instruction
 * sets through target attributes, with intrinsics that only x86 compilers
 * know; on other machines the file compiles to nothing.
 */
#include "score_internal.h"

#ifdef SCORE_X86

#include <immintrin.h>

#define WALS_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))
#define WALS_VNNI_INLINE WALS_VNNI inline __attribute__((always_inline))
#define WALS_AVX2 __attribute__((target("avx2,fma")))
#define WALS_AVX2_INLINE WALS_AVX2 inline __attribute__((always_inline))

/*
 * block_portable in vectors: one vpdpbusd per group adds four products to
 * each of the 16 item sums.  Four accumulators break the chain of
 * dependent vpdpbusd; integer sums do not depend on their order.
 */
static WALS_VNNI_INLINE uint32_t
block_vnni(const unsigned char *blk, int groups, const Query *q,
		   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	__m512i		a0 = _mm512_set1_epi32(q->corr);
	__m512i		a1 = _mm512_setzero_si512();
	__m512i		a2 = _mm512_setzero_si512();
	__m512i		a3 = _mm512_setzero_si512();
	__m512		a;
	__m512		e;
	__m512		lo;
	__m512		up;
	__mmask16	cand;
	int			g = 0;

	for (; g + 4 <= groups; g += 4)
	{
		const unsigned char *p = blk + 64 * (size_t) g;

		a0 = _mm512_dpbusd_epi32(a0, _mm512_load_si512(p), _mm512_set1_epi32(q->qx[g]));
		a1 = _mm512_dpbusd_epi32(a1, _mm512_load_si512(p + 64), _mm512_set1_epi32(q->qx[g + 1]));
		a2 = _mm512_dpbusd_epi32(a2, _mm512_load_si512(p + 128), _mm512_set1_epi32(q->qx[g + 2]));
		a3 = _mm512_dpbusd_epi32(a3, _mm512_load_si512(p + 192), _mm512_set1_epi32(q->qx[g + 3]));
	}
	for (; g < groups; g++)
		a0 = _mm512_dpbusd_epi32(a0, _mm512_load_si512(blk + 64 * (size_t) g),
								 _mm512_set1_epi32(q->qx[g]));
	a0 = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
	a = _mm512_mul_ps(_mm512_cvtepi32_ps(a0),
					  _mm512_mul_ps(_mm512_set1_ps(q->sx), _mm512_load_ps(meta)));
	e = _mm512_fmadd_ps(_mm512_set1_ps(q->A), _mm512_load_ps(meta + BLOCK),
						_mm512_fmadd_ps(_mm512_set1_ps(q->B),
										_mm512_load_ps(meta + 2 * BLOCK),
										_mm512_set1_ps(q->eta)));
	lo = _mm512_sub_ps(a, e);
	up = _mm512_add_ps(a, e);
	cand = _mm512_mask_cmp_ps_mask((__mmask16) eligible, up,
								   _mm512_set1_ps(threshold), _CMP_GE_OQ);
	if (cand)
	{
		_mm512_storeu_ps(lower, lo);
		_mm512_storeu_ps(upper, up);
	}
	return cand;
}

WALS_VNNI void
wals_score_scan_vnni(const WalsScoreIndex *ix, const Query *q,
					 Scan *st, int nu)
{
	scan_body(ix, q, st, nu, block_vnni);
}

WALS_VNNI void
wals_score_bounds_vnni(const WalsScoreIndex *ix, const Query *q, float *lower,
					   float *upper)
{
	bounds_body(ix, q, lower, upper, block_vnni);
}

/* The bounds of eight items from their sums, as block_vnni forms them. */
static WALS_AVX2_INLINE uint32_t
bounds8_avx2(__m256i sums, const float *meta, const Query *q,
			 float threshold, float *lower, float *upper)
{
	__m256		a = _mm256_mul_ps(_mm256_cvtepi32_ps(sums),
								  _mm256_mul_ps(_mm256_set1_ps(q->sx),
												_mm256_loadu_ps(meta)));
	__m256		e = _mm256_fmadd_ps(_mm256_set1_ps(q->A),
									_mm256_loadu_ps(meta + BLOCK),
									_mm256_fmadd_ps(_mm256_set1_ps(q->B),
													_mm256_loadu_ps(meta + 2 * BLOCK),
													_mm256_set1_ps(q->eta)));
	__m256		up = _mm256_add_ps(a, e);

	_mm256_storeu_ps(lower, _mm256_sub_ps(a, e));
	_mm256_storeu_ps(upper, up);
	return (uint32_t) _mm256_movemask_ps(_mm256_cmp_ps(up, _mm256_set1_ps(threshold),
													   _CMP_GE_OQ));
}

/*
 * block_portable in AVX2, eight items a vector, in the order of
 * order_groups (score.c); why no int16 lane saturates or wraps is told
 * at the head of score.c (Paths).  Per vector, a pair of narrow groups
 * costs two vpmaddubsw, a vpaddw and one vpmaddwd, a wide group a vpxor, a
 * vpsignb, a vpmaddubsw and a vpmaddwd; only ports 0 and 1 run the
 * multiplies and vpsignb, so those counts bound the loop.
 */
static WALS_AVX2_INLINE uint32_t
block_avx2(const unsigned char *blk, int groups, const Query *q,
		   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	const __m256i flip = _mm256_set1_epi8((char) 0x80);
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i		lo = _mm256_set1_epi32(q->corr_narrow);
	__m256i		hi = lo;
	uint32_t	cand;
	int			i;

	for (i = 0; i < q->paired; i += 2)
	{
		const __m256i *p = (const __m256i *) (blk + q->offset[i]);
		const __m256i *r = (const __m256i *) (blk + q->offset[i + 1]);
		__m256i		xp = _mm256_set1_epi32(q->qx_ordered[i]);
		__m256i		xr = _mm256_set1_epi32(q->qx_ordered[i + 1]);

		lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p), xp),
																	 _mm256_maddubs_epi16(_mm256_load_si256(r), xr)),
													ones));
		hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p + 1), xp),
																	 _mm256_maddubs_epi16(_mm256_load_si256(r + 1), xr)),
													ones));
	}
	for (; i < q->narrow; i++)
	{
		const __m256i *p = (const __m256i *) (blk + q->offset[i]);
		__m256i		x = _mm256_set1_epi32(q->qx_ordered[i]);

		lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p), x), ones));
		hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p + 1), x), ones));
	}
	for (; i < groups; i++)
	{
		const __m256i *p = (const __m256i *) (blk + q->offset[i]);
		__m256i		x = _mm256_set1_epi32(q->qx_ordered[i]);
		__m256i		xabs = _mm256_set1_epi32(q->qabs_ordered[i]);
		__m256i		y0 = _mm256_xor_si256(_mm256_load_si256(p), flip);
		__m256i		y1 = _mm256_xor_si256(_mm256_load_si256(p + 1), flip);

		lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(xabs, _mm256_sign_epi8(y0, x)), ones));
		hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(xabs, _mm256_sign_epi8(y1, x)), ones));
	}
	cand = bounds8_avx2(lo, meta, q, threshold, lower, upper);
	cand |= bounds8_avx2(hi, meta + 8, q, threshold, lower + 8, upper + 8) << 8;
	return cand & eligible;
}

WALS_AVX2 void
wals_score_scan_avx2(const WalsScoreIndex *ix, const Query *q,
					 Scan *st, int nu)
{
	scan_body(ix, q, st, nu, block_avx2);
}

WALS_AVX2 void
wals_score_bounds_avx2(const WalsScoreIndex *ix, const Query *q, float *lower,
					   float *upper)
{
	bounds_body(ix, q, lower, upper, block_avx2);
}

#endif							/* SCORE_X86 */
