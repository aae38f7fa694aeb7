/*
 * gram.c
 *	  The Gram matrix Y^T Y of a factor block.
 *
 * Every row's system starts from w0 Y^T Y, so it is computed once per
 * half-sweep; per range, so that parallel workers each add their slice.
 */
#include <cblas.h>

#include "wals_core.h"

/*
 * ssyrk does half the flops of a general product.  It writes one triangle
 * only, so the other is mirrored here: the solvers and the loss read G as a
 * plain full matrix.  G stays symmetric before and after, so mirroring the
 * accumulated upper triangle is exact.
 */
void
wals_gram_rows(const float *Y, int64_t lo, int64_t hi, int f, float *G)
{
	int			a;
	int			b;

	if (hi <= lo || f <= 0)
		return;
	cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, f, (int) (hi - lo),
				1.0f, Y + lo * f, f, 1.0f, G, f);
	for (a = 0; a < f; a++)
		for (b = 0; b < a; b++)
			G[a * f + b] = G[b * f + a];
}
