/*
 * wals_internal.h
 *	  Small inline helpers shared by the files of src/core, and by nothing
 *	  outside it: the solvers and the loss must weigh a cell and take a dot
 *	  product the same way, or the loss would not be the one being minimised.
 */
#ifndef WALS_INTERNAL_H
#define WALS_INTERNAL_H

#include "wals_core.h"

/*
 * splitmix64's finalizer, a full-avalanche bijection of 64 bits: it spreads
 * consecutive ids over the hash slots and turns (seed, id, k) into
 * independent-looking random bits.
 */
static inline uint64_t
wals_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Confidence c and target p of one observed cell with merged rating r. */
static inline void
wals_cell_weights(const WalsParams *params, float r, float *c, float *p)
{
	if (params->feedback == WALS_IMPLICIT)
	{
		*c = 1.0f + params->alpha * r;
		*p = 1.0f;
	}
	else
	{
		*c = 1.0f;
		*p = r;
	}
}

/*
 * Eight partial sums break the chain of dependent additions, which the
 * compiler may not reorder on its own (float addition is not associative),
 * and fill vector registers; the order is fixed, so results stay
 * reproducible.
 */
static inline float
wals_dot(const float *restrict a, const float *restrict b, int n)
{
	float		acc[8] = {0.0f};
	float		s = 0.0f;
	int			k = 0;
	int			j;

	for (; k + 8 <= n; k += 8)
		for (j = 0; j < 8; j++)
			acc[j] += a[k + j] * b[k + j];
	for (j = 0; j < 8; j++)
		s += acc[j];
	for (; k < n; k++)
		s += a[k] * b[k];
	return s;
}

#endif							/* WALS_INTERNAL_H */
