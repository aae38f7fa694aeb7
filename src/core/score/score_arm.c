/*
 * score_arm.c
 *	  The first pass on AArch64: NEON with SDOT (Arm's dotprod), and NEON
 *	  without it.
 *
 * On its own because its functions use intrinsics that only AArch64
 * compilers know, and those with SDOT are compiled for a target of their
 * own (WALS_DOTPROD, in score_internal.h); on other machines the file
 * compiles to nothing.
 */
#include "score_internal.h"

#ifdef SCORE_NEON

#include <arm_neon.h>

#define WALS_NEON_INLINE inline __attribute__((always_inline))

/*
 * The bounds of four items from their sums, as block_vnni (score_x86.c)
 * forms them.
 */
static WALS_NEON_INLINE uint32_t
bounds4_neon(int32x4_t sums, const float *meta, const Query *q,
			 float threshold, float *lower, float *upper)
{
	static const uint32_t lane_bits[4] = {1, 2, 4, 8};
	float32x4_t a = vmulq_f32(vcvtq_f32_s32(sums),
							  vmulq_n_f32(vld1q_f32(meta), q->sx));
	float32x4_t e = vfmaq_n_f32(vfmaq_n_f32(vdupq_n_f32(q->eta),
											vld1q_f32(meta + 2 * BLOCK), q->B),
								vld1q_f32(meta + BLOCK), q->A);
	float32x4_t up = vaddq_f32(a, e);

	vst1q_f32(lower, vsubq_f32(a, e));
	vst1q_f32(upper, up);
	return vaddvq_u32(vandq_u32(vcgeq_f32(up, vdupq_n_f32(threshold)),
								vld1q_u32(lane_bits)));
}

/* The candidates among 16 items from their sums, four to a vector. */
static WALS_NEON_INLINE uint32_t
bounds16_neon(const int32x4_t *sums, const unsigned char *blk, int groups,
			  const Query *q, float threshold, uint32_t eligible,
			  float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	uint32_t	cand = 0;
	int			c;

	for (c = 0; c < 4; c++)
		cand |= bounds4_neon(sums[c], meta + 4 * c, q, threshold,
							 lower + 4 * c, upper + 4 * c) << (4 * c);
	return cand & eligible;
}

/*
 * block_portable in NEON without SDOT.  Bytes made signed again (q_y)
 * times q_x in vmull_s8 are products of at most 127^2 in int16 lanes;
 * vmlal_s8 adds those of the next group, at most 32258 in all, still
 * exact; vpadalq_s16 adds adjacent lanes into int32, two per item, which
 * vpaddq_s32 adds at the end.
 */
static WALS_NEON_INLINE uint32_t
block_neon(const unsigned char *blk, int groups, const Query *q,
		   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const uint8x16_t flip = vdupq_n_u8(0x80);
	int32x4_t	lo[4];
	int32x4_t	hi[4];
	int32x4_t	sums[4];
	int			g;
	int			c;

	for (c = 0; c < 4; c++)
		lo[c] = hi[c] = vdupq_n_s32(0);
	for (g = 0; g + 2 <= groups; g += 2)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));
		int8x16_t	x1 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g + 1]));

		for (c = 0; c < 4; c++)
		{
			int8x16_t	y0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip));
			int8x16_t	y1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 64 + 16 * c), flip));

			lo[c] = vpadalq_s16(lo[c], vmlal_s8(vmull_s8(vget_low_s8(y0), vget_low_s8(x0)),
												vget_low_s8(y1), vget_low_s8(x1)));
			hi[c] = vpadalq_s16(hi[c], vmlal_high_s8(vmull_high_s8(y0, x0), y1, x1));
		}
	}
	if (g < groups)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));

		for (c = 0; c < 4; c++)
		{
			int8x16_t	y0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip));

			lo[c] = vpadalq_s16(lo[c], vmull_s8(vget_low_s8(y0), vget_low_s8(x0)));
			hi[c] = vpadalq_s16(hi[c], vmull_high_s8(y0, x0));
		}
	}
	for (c = 0; c < 4; c++)
		sums[c] = vpaddq_s32(lo[c], hi[c]);
	return bounds16_neon(sums, blk, groups, q, threshold, eligible, lower,
						 upper);
}

void
wals_score_scan_neon(const WalsScoreIndex *ix, const Query *q,
					 Scan *st, int nu)
{
	scan_body(ix, q, st, nu, block_neon);
}

void
wals_score_bounds_neon(const WalsScoreIndex *ix, const Query *q, float *lower,
					   float *upper)
{
	bounds_body(ix, q, lower, upper, block_neon);
}

#ifdef SCORE_DOTPROD

/*
 * block_portable with SDOT, which adds four products of signed bytes into
 * each int32 lane: q_y (the stored byte made signed again) times q_x,
 * exact.  Two sets of accumulators alternate between groups, so that no
 * SDOT waits for the one before.
 */
static WALS_DOTPROD WALS_NEON_INLINE uint32_t
block_dotprod(const unsigned char *blk, int groups, const Query *q,
			  float threshold, uint32_t eligible, float *lower, float *upper)
{
	const uint8x16_t flip = vdupq_n_u8(0x80);
	int32x4_t	even[4];
	int32x4_t	odd[4];
	int32x4_t	sums[4];
	int			g;
	int			c;

	for (c = 0; c < 4; c++)
		even[c] = odd[c] = vdupq_n_s32(0);
	for (g = 0; g + 2 <= groups; g += 2)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));
		int8x16_t	x1 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g + 1]));

		for (c = 0; c < 4; c++)
		{
			even[c] = vdotq_s32(even[c], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip)), x0);
			odd[c] = vdotq_s32(odd[c], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 64 + 16 * c), flip)), x1);
		}
	}
	if (g < groups)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));

		for (c = 0; c < 4; c++)
			even[c] = vdotq_s32(even[c], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip)), x0);
	}
	for (c = 0; c < 4; c++)
		sums[c] = vaddq_s32(even[c], odd[c]);
	return bounds16_neon(sums, blk, groups, q, threshold, eligible, lower,
						 upper);
}

WALS_DOTPROD void
wals_score_scan_dotprod(const WalsScoreIndex *ix, const Query *q,
						Scan *st, int nu)
{
	scan_body(ix, q, st, nu, block_dotprod);
}

WALS_DOTPROD void
wals_score_bounds_dotprod(const WalsScoreIndex *ix, const Query *q,
						  float *lower, float *upper)
{
	bounds_body(ix, q, lower, upper, block_dotprod);
}
#endif							/* SCORE_DOTPROD */

#endif							/* SCORE_NEON */
