/*
 * simd_rank.h
 *	  The ranks of relevant items among all the scores of a user, which the
 *	  metrics count (metrics.c), for any vector width.  Part of the template
 *	  that simd_family.h puts together once per instruction set.
 */

/*
 * The scores go across the lanes, one relevant score at a time: a load and
 * two comparisons count a vector of items, where broadcasting each item
 * against a vector of relevant scores (the portable C's way) cost an
 * instruction per item and left the lanes idle whenever a user had fewer
 * relevant items than a vector has lanes, as most have.  GCC's vector
 * comparisons give -1 where true, which the counts take away.
 */
typedef int32_t SIMD(counts) __attribute__((vector_size(sizeof(V))));

static SIMD_FN void
SIMD(rank_counts) (const float *s, int64_t n, const float *r, int nr,
				   int64_t *below, int64_t *equal)
{
	int			p;

	for (p = 0; p < nr; p++)
	{
		V			rv = vset1(r[p]);
		SIMD(counts) lt = {0};
		SIMD(counts) eq = {0};
		int64_t		i;
		int			k;

		for (i = 0; i + SIMD_W <= n; i += SIMD_W)
		{
			V			x = vld(s + i);

			lt -= (SIMD(counts)) (x < rv);
			eq -= (SIMD(counts)) (x == rv);
		}
		below[p] = 0;
		equal[p] = 0;
		for (k = 0; k < SIMD_W; k++)
		{
			below[p] += lt[k];
			equal[p] += eq[k];
		}
		for (; i < n; i++)
		{
			below[p] += s[i] < r[p];
			equal[p] += s[i] == r[p];
		}
	}
}
