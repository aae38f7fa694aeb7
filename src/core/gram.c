/*
 * gram.c
 *	  The Gram matrix Y^T Y of a factor block, and the symmetric products
 *	  of BLAS cut into pieces that the poll hook can come between.
 *
 * Every row's system starts from w0 Y^T Y, so it is computed once per
 * half-sweep; per range, so that parallel workers each add their slice.
 *
 * One ssyrk of 20,000 rows at f = 4096 is 4 to 9 s of arithmetic that no
 * cancel can interrupt.  wals_syrk_pieces keeps such a product as one call
 * where it is within WALS_BLAS_PIECE multiply-adds, as every Gram up to
 * f = 512 is in the slices of 4096 rows that training computes, so that
 * its result does not change; beyond, it cuts the rows into pieces, and
 * where pieces of PIECE_MIN_ROWS rows would still cost too much (f^2 / 2
 * per row: above f = 1448), the
 * triangle into stripes of columns, each a small ssyrk on the diagonal
 * block and an sgemm below it.  Stripes rather than fewer rows per piece:
 * every call reads and writes its part of C once, and with pieces of 64
 * rows at f = 4096 that traffic made the Gram five times slower, where
 * stripes of 512 rows cost nothing measurable (DEVELOPERS.md, Interrupts).
 */
#include "wals_internal.h"

/*
 * Rows a piece of a product takes at least, where it must be cut into
 * stripes: fewer read and write C too often for their arithmetic.
 */
#define PIECE_MIN_ROWS 512

/* Columns of a stripe are a multiple of this, for BLAS's aligned tiles. */
#define PIECE_STRIPE_ALIGN 16

int64_t
wals_piece_rows(int64_t row_work, int n, int64_t k, int *stripe)
{
	int64_t		rows = k < PIECE_MIN_ROWS ? k : PIECE_MIN_ROWS;
	int64_t		w;

	*stripe = n;
	if (row_work * rows <= WALS_BLAS_PIECE)
		return WALS_BLAS_PIECE / (row_work > 0 ? row_work : 1);
	w = WALS_BLAS_PIECE / ((int64_t) n * (rows > 0 ? rows : 1));
	w -= w % PIECE_STRIPE_ALIGN;
	*stripe = w < PIECE_STRIPE_ALIGN ? PIECE_STRIPE_ALIGN : w < n ? (int) w : n;
	return rows;
}

void
wals_syrk_pieces(int n, int64_t k, float alpha, const float *A, int lda,
				 float *C, int ldc)
{
	int64_t		tri = (int64_t) n * n / 2;	/* multiply-adds per row of A */
	int64_t		kc;
	int64_t		k0;
	int			h;

	if (n <= 0 || k <= 0)
		return;
	if (tri * k <= WALS_BLAS_PIECE)
	{
		wals_blas()->ssyrk(CblasColMajor, CblasLower, CblasNoTrans, n, (int) k,
					       alpha, A, lda, 1.0f, C, ldc);
		wals_poll(tri * k);
		return;
	}
	kc = wals_piece_rows(tri, n, k, &h);
	for (k0 = 0; k0 < k; k0 += kc)
	{
		int			m = (int) (k - k0 < kc ? k - k0 : kc);
		const float *Ak = A + (size_t) k0 * lda;
		int			c0;

		for (c0 = 0; c0 < n; c0 += h)
		{
			int			w = n - c0 < h ? n - c0 : h;
			int			below = n - c0 - w;

			wals_blas()->ssyrk(CblasColMajor, CblasLower, CblasNoTrans, w, m, alpha,
						       Ak + c0, lda, 1.0f, C + c0 + (size_t) c0 * ldc, ldc);
			if (below > 0)
				wals_blas()->sgemm(CblasColMajor, CblasNoTrans, CblasTrans, below, w, m,
							       alpha, Ak + c0 + w, lda, Ak + c0, lda, 1.0f,
							       C + c0 + w + (size_t) c0 * ldc, ldc);
			wals_poll(((int64_t) w * (w + 1) / 2 + (int64_t) below * w) * m);
		}
	}
}

/*
 * Tiles of the mirror: a copy down a column of G at f = 4096 misses the
 * cache at every entry, a tile's columns stay in it.
 */
#define MIRROR_TILE 64

/*
 * Row-major Y of k rows is column-major Y^T, so the lower triangle of
 * Y^T Y by columns, as wals_syrk_pieces writes it, is the upper triangle
 * by rows.  ssyrk does half the flops of a general product but writes one
 * triangle only, so the other is mirrored here: the solvers and the loss
 * read G as a plain full matrix.  G stays symmetric before and after, so
 * mirroring the accumulated upper triangle is exact.
 */
void
wals_gram_rows(const float *Y, int64_t lo, int64_t hi, int f, float *G)
{
	int			a0;
	int			b0;

	if (hi <= lo || f <= 0)
		return;
	wals_syrk_pieces(f, hi - lo, 1.0f, Y + lo * f, f, G, f);
	for (a0 = 0; a0 < f; a0 += MIRROR_TILE)
	{
		int			a1 = f - a0 < MIRROR_TILE ? f : a0 + MIRROR_TILE;

		for (b0 = 0; b0 <= a0; b0 += MIRROR_TILE)
		{
			int			a;
			int			b;

			for (a = a0; a < a1; a++)
				for (b = b0; b < b0 + MIRROR_TILE && b < a; b++)
					G[(size_t) a * f + b] = G[(size_t) b * f + a];
		}
		wals_poll((int64_t) 4 * MIRROR_TILE * a1);
	}
}
