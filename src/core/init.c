/*
 * init.c
 *	  Deterministic random starting factors.
 *
 * Each entry is a pure function of (seed, id, k): no generator state runs
 * through the rows, so parallel workers can each fill their own range, and
 * a user keeps the same start whether the table holds ten users or ten
 * million, and in whatever order they were scanned.
 */
#include <math.h>

#include "wals_internal.h"

#define WALS_TWO_PI 6.283185307179586476925

/*
 * Chaining the mixer keeps the inputs' roles apart, where a plain xor of
 * their hashes would give (seed, id) and (id, seed) the same stream; the odd
 * offsets keep zero inputs away from the mixer's fixed point at 0.
 */
static inline uint64_t
hash3(uint64_t seed, uint64_t id, uint64_t k)
{
	const uint64_t gamma = UINT64_C(0x9e3779b97f4a7c15);
	uint64_t	h = wals_mix64(seed + gamma);

	h = wals_mix64(h ^ (id + gamma));
	return wals_mix64(h ^ (k + gamma));
}

/*
 * Box-Muller on two uniforms from the top 53 bits of two hashes.  The first
 * uniform lies in (0, 1], never 0, so the logarithm stays finite.
 */
void
wals_init_rows(float *X, const int64_t *ids, int64_t lo, int64_t hi,
			   int f, uint64_t seed, float scale)
{
	const double ulp = 1.0 / 9007199254740992.0;
	int64_t		r;
	int			k;

	for (r = lo; r < hi; r++)
	{
		for (k = 0; k < f; k++)
		{
			uint64_t	a = hash3(seed, (uint64_t) ids[r], 2 * (uint64_t) k);
			uint64_t	b = hash3(seed, (uint64_t) ids[r], 2 * (uint64_t) k + 1);
			double		u1 = ((double) (a >> 11) + 1.0) * ulp;
			double		u2 = (double) (b >> 11) * ulp;

			X[r * f + k] = (float) (scale * sqrt(-2.0 * log(u1)) *
									cos(WALS_TWO_PI * u2));
		}
		/* six hashes, a logarithm and a cosine an entry: some 30 ns */
		wals_poll((int64_t) 128 * f);
	}
}
