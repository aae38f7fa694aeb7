/*
 * score_x86.c
 *	  The first pass on x86: AVX-512 with VNNI (vpdpbusd), and AVX2
 *	  (vpmaddubsw), which AVX-512 without VNNI uses too, with the order of
 *	  a query's groups that the AVX2 path reads.
 *
 * On its own because its functions are compiled for their instruction
 * sets through target attributes, with intrinsics that only x86 compilers
 * know; on other machines the file compiles to nothing.
 */
#include <stdlib.h>
#include <string.h>

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
 * Whether block_avx2 may add vpmaddubsw's int16 lanes of groups a and b
 * of query bytes (b may be none) without saturating or wrapping, as the
 * head of score_query.c explains (Paths).  A lane adds the products of bytes 0
 * and 1 of a group, or of bytes 2 and 3.
 */
static int
lanes_fit(const int8_t *a, const int8_t *b)
{
	int			h;
	int			j;

	for (h = 0; h < 4; h += 2)
	{
		int			pos = 0;
		int			neg = 0;

		for (j = h; j < h + 2; j++)
		{
			pos += (a[j] > 0 ? a[j] : 0) + (b[j] > 0 ? b[j] : 0);
			neg += (a[j] < 0 ? a[j] : 0) + (b[j] < 0 ? b[j] : 0);
		}
		if (pos > 128 || neg < -128)
			return 0;
	}
	return 1;
}

/*
 * Narrow groups a group tries as partners: enough to pair nearly as many
 * as trying all of them does, in time linear in f.
 */
#define PAIR_WINDOW 8

/*
 * The AVX2 path's PrepareFn: the groups of query bytes q8 ordered for
 * block_avx2, pairs of narrow groups that fit one lane together, then the
 * other narrow groups, then the wide ones; the scratch receives their
 * offsets in a block, their bytes, and the bytes' absolute values.
 * q->paired and q->narrow count the groups before the others and before
 * the wide ones; q->corr_narrow is the narrow groups' share of corr.
 */
void
wals_score_prepare_avx2(const int8_t *q8, int groups, const QueryScratch *qs,
						Query *q)
{
	static const int8_t none[4] = {0};
	int32_t    *order = qs->offset; /* group numbers, offsets at the end */
	int			front = 0;
	int			back;
	int			n = 0;
	int			i;
	int			j;

	for (i = 0; i < groups; i++)
		if (lanes_fit(q8 + 4 * i, none))
			order[n++] = i;
	q->narrow = back = n;
	for (i = 0; i < groups; i++)
		if (!lanes_fit(q8 + 4 * i, none))
			order[n++] = i;

	/* Pairs gather at the front, narrow groups left alone at the back. */
	while (front < back)
	{
		int32_t		g = order[front];

		for (j = front + 1; j < back && j <= front + PAIR_WINDOW; j++)
			if (lanes_fit(q8 + 4 * g, q8 + 4 * order[j]))
				break;
		if (j < back && j <= front + PAIR_WINDOW)
		{
			order[front] = order[j];
			order[j] = order[front + 1];
			order[front + 1] = g;
			front += 2;
		}
		else
		{
			order[front] = order[--back];
			order[back] = g;
		}
	}
	q->paired = front;

	q->corr_narrow = 0;
	for (i = 0; i < groups; i++)
	{
		const int8_t *x = q8 + 4 * order[i];
		uint8_t    *xabs = (uint8_t *) &qs->qabs_ordered[i];

		memcpy(&qs->qx_ordered[i], x, 4);
		for (j = 0; j < 4; j++)
		{
			xabs[j] = (uint8_t) abs(x[j]);
			if (i < q->narrow)
				q->corr_narrow -= 128 * x[j];
		}
		order[i] *= 64;
	}
	q->offset = qs->offset;
	q->qx_ordered = qs->qx_ordered;
	q->qabs_ordered = qs->qabs_ordered;
}

/*
 * block_portable in AVX2, eight items a vector, in the order of
 * wals_score_prepare_avx2 (above); why no int16 lane saturates or wraps
 * is told at the head of score_query.c (Paths).  Per vector, a pair of narrow
 * groups costs two vpmaddubsw, a vpaddw and one vpmaddwd, a wide group a
 * vpxor, a vpsignb, a vpmaddubsw and a vpmaddwd; only ports 0 and 1 run
 * the multiplies and vpsignb, so those counts bound the loop.
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
