/*
 * test_kernels.c
 *	  Every variant of the vector kernels this CPU runs, against plain
 *	  double-precision loops, at widths around the vector length (the masked
 *	  tails) and past what stays in registers; and the solvers run through
 *	  each variant, with odd widths and rows longer than a Cholesky block.
 *
 * Factor rows are placed so that the last one ends where an unreadable
 * page begins: a kernel that loads past a row's last float faults here
 * instead of reading a neighbour's data unnoticed.
 */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "wals_internal.h"

static const int widths[] = {1, 3, 15, 16, 17, 33, 48, 64, 65, 100, 130};
static const int n_widths = sizeof(widths) / sizeof(widths[0]);

#define MAX_F 130
#define MAX_CELLS 150
#define GUARD_ROWS 40

/* Rows of factors ending right at a page that cannot be read. */
typedef struct GuardedRows
{
	void	   *map;
	size_t		len;
	float	   *Y;
} GuardedRows;

static void
guarded_make(GuardedRows *g, int nrows, int f, TestRng *rng)
{
	long		page = sysconf(_SC_PAGESIZE);
	size_t		bytes = sizeof(float) * (size_t) nrows * f;
	size_t		data_pages = (bytes + page - 1) / page;
	int			fd = open("/dev/zero", O_RDONLY);
	int			k;

	g->len = (data_pages + 1) * page;
	g->map = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	CHECK(g->map != MAP_FAILED, "mmap");
	mprotect((char *) g->map + data_pages * page, page, PROT_NONE);
	g->Y = (float *) ((char *) g->map + data_pages * page - bytes);
	for (k = 0; k < nrows * f; k++)
		g->Y[k] = (float) rng_normal(rng);
}

static void
guarded_free(GuardedRows *g)
{
	munmap(g->map, g->len);
}

/* |got - want| small beside the size of the terms that were summed. */
static int
close_to(double got, double want, double scale)
{
	return fabs(got - want) <= 2e-5 * (scale + 1e-6) && isfinite(got);
}

/*
 * Cells: row indices into the guarded rows (the last row included) and
 * ratings from -5 to 5, dislikes and zeros (both signs) among them.
 */
static void
make_cells(int n, int nrows, int32_t *idx, float *val, TestRng *rng)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		idx[i] = i == n - 1 ? nrows - 1 : rng_below(rng, nrows);
		val[i] = (float) (rng_below(rng, 11) - 5);
		if (val[i] == 0.0f && rng_below(rng, 2))
			val[i] = -0.0f;
	}
}

/*
 * a(r) and b(r) of WalsPassCoef from their definition, in double; the
 * checks alternate a_from between 0, implicit feedback's, and -Inf,
 * explicit feedback's.
 */
static double
ref_a(const WalsPassCoef *coef, float r)
{
	return r >= coef->a_from ? (double) coef->a0 + (double) coef->a1 * r : 0.0;
}

static double
ref_b(const WalsPassCoef *coef, float r)
{
	return (double) coef->b0 + (double) coef->b1 * fabs((double) r);
}

static float
a_from_of(int trial)
{
	return trial % 2 == 0 ? 0.0f : -INFINITY;
}

static void
check_row_pass(const WalsKernels *k, const float *Y, int f, TestRng *rng)
{
	static const int lengths[] = {0, 1, 3, 4, 5, 7, 8, 19, 150, 150};
	WalsPassCoef coef = {0.5f, 0.25f, 0.0f, -1.5f, 0.75f};
	int32_t		idx[MAX_CELLS];
	float		val[MAX_CELLS];
	float		v[MAX_F + 1];
	float		out[MAX_F + 1];
	int			li;
	int			k2;

	for (k2 = 0; k2 < f; k2++)
		v[k2] = (float) rng_normal(rng);
	for (li = 0; li < (int) (sizeof(lengths) / sizeof(lengths[0])); li++)
	{
		int			n = lengths[li];
		int			bad = 0;
		int			i;
		int			c;

		make_cells(n, GUARD_ROWS, idx, val, rng);
		coef.a_from = a_from_of(li);
		out[f] = 12345.0f;
		k->row_pass(Y, idx, val, n, f, &coef, v, out);
		for (c = 0; c < f; c++)
		{
			double		want = 0.0;
			double		scale = 0.0;

			for (i = 0; i < n; i++)
			{
				const float *y = Y + (size_t) idx[i] * f;
				double		d = 0.0;
				double		dscale = 0.0;
				double		t;
				int			j;

				for (j = 0; j < f; j++)
				{
					d += (double) y[j] * v[j];
					dscale += fabs((double) y[j] * v[j]);
				}
				t = ref_a(&coef, val[i]) + ref_b(&coef, val[i]) * d;
				want += t * y[c];
				scale += (fabs(ref_a(&coef, val[i])) +
						  fabs(ref_b(&coef, val[i])) * dscale) * fabs(y[c]);
			}
			bad += !close_to(out[c], want, scale);
		}
		CHECK(bad == 0 && out[f] == 12345.0f, "%s row_pass f=%d n=%d: %d wrong",
			  k->name, f, n, bad);
	}
}

/* The n dot products x.y_i against double sums; out[n] must be untouched. */
static int
dots_wrong(const float *Y, const int32_t *idx, int n, int f, const float *x,
		   const float *out)
{
	int			bad = out[n] != 12345.0f;
	int			i;
	int			j;

	for (i = 0; i < n; i++)
	{
		double		want = 0.0;
		double		scale = 0.0;

		for (j = 0; j < f; j++)
		{
			want += (double) x[j] * Y[(size_t) idx[i] * f + j];
			scale += fabs((double) x[j] * Y[(size_t) idx[i] * f + j]);
		}
		bad += !close_to(out[i], want, scale);
	}
	return bad;
}

/* dots, and dots2 on row counts that end inside a group of four. */
static void
check_dots(const WalsKernels *k, const float *Y, int f, TestRng *rng)
{
	int32_t		idx[MAX_CELLS];
	float		val[MAX_CELLS];
	float		x[MAX_F];
	float		z[MAX_F];
	float		out[MAX_CELLS + 1];
	float		out2[MAX_CELLS + 1];
	int			n = 23;
	int			j;

	for (j = 0; j < f; j++)
	{
		x[j] = (float) rng_normal(rng);
		z[j] = (float) rng_normal(rng);
	}
	make_cells(24, GUARD_ROWS, idx, val, rng);
	out[n] = 12345.0f;
	k->dots(Y, idx, n, f, x, out);
	CHECK(dots_wrong(Y, idx, n, f, x, out) == 0, "%s dots f=%d", k->name, f);
	for (n = 21; n <= 24; n++)
	{
		out[n] = out2[n] = 12345.0f;
		k->dots2(Y, idx, n, f, x, z, out, out2);
		CHECK(dots_wrong(Y, idx, n, f, x, out) == 0 && dots_wrong(Y, idx, n, f, z, out2) == 0,
			  "%s dots2 f=%d n=%d", k->name, f, n);
	}
}

/*
 * gemm_nt against double dot products, and each entry the same bits as
 * when its row of X is alone, so that the subspace solver's rows do not
 * depend on the rows they are grouped with.  The rows of X end at the
 * guard page.
 */
static void
check_gemm_nt(const WalsKernels *k, const float *Y, int f)
{
	static const int ms[] = {1, 3, 4, 6, 17};
	static const int nxs[] = {1, 2, 3, 4, 5, 9};
	float		out[17 * 9];
	float		one[17];
	int			a;

	for (a = 0; a < (int) (sizeof(ms) / sizeof(ms[0])); a++)
	{
		int			m = ms[a];
		int			c;

		for (c = 0; c < (int) (sizeof(nxs) / sizeof(nxs[0])); c++)
		{
			int			nx = nxs[c];
			const float *X = Y + (size_t) (GUARD_ROWS - nx) * f;
			int			bad = 0;
			int			j;
			int			r;

			k->gemm_nt(Y, m, X, nx, f, out);
			for (r = 0; r < nx; r++)
			{
				k->gemm_nt(Y, m, X + (size_t) r * f, 1, f, one);
				for (j = 0; j < m; j++)
				{
					double		want = 0.0;
					double		scale = 0.0;
					int			i;

					for (i = 0; i < f; i++)
					{
						want += (double) Y[(size_t) j * f + i] * X[(size_t) r * f + i];
						scale += fabs((double) Y[(size_t) j * f + i] * X[(size_t) r * f + i]);
					}
					bad += !close_to(out[j * nx + r], want, scale);
					bad += memcmp(&out[j * nx + r], &one[j], sizeof(float)) != 0;
				}
			}
			CHECK(bad == 0, "%s gemm_nt f=%d m=%d nx=%d: %d wrong", k->name, f,
				  m, nx, bad);
		}
	}
}

/* symv, dot, axpy and xpay: O(f) and O(f^2) helpers of CG. */
static void
check_small(const WalsKernels *k, int f, TestRng *rng)
{
	float	   *G = test_alloc((size_t) f * f, sizeof(float));
	float		a[MAX_F + 1];
	float		b[MAX_F + 1];
	float		out[MAX_F + 1];
	double		want[MAX_F];
	double		scale;
	int			bad = 0;
	int			i;
	int			j;

	for (i = 0; i < f; i++)
	{
		a[i] = (float) rng_normal(rng);
		b[i] = (float) rng_normal(rng);
		out[i] = (float) rng_normal(rng);
		for (j = 0; j <= i; j++)
			G[i * f + j] = G[j * f + i] = (float) rng_normal(rng);
	}
	a[f] = b[f] = out[f] = 12345.0f;

	for (i = 0; i < f; i++)
	{
		want[i] = out[i];
		for (j = 0; j < f; j++)
			want[i] += 0.7 * G[i * f + j] * a[j];
	}
	k->symv(G, f, 0.7f, a, out);
	for (i = 0; i < f; i++)
	{
		scale = fabs(want[i]);
		for (j = 0; j < f; j++)
			scale += fabs(0.7 * G[i * f + j] * a[j]);
		bad += !close_to(out[i], want[i], scale);
	}
	CHECK(bad == 0 && out[f] == 12345.0f, "%s symv f=%d: %d wrong", k->name, f, bad);

	{
		double		d = 0.0;

		scale = 0.0;
		for (i = 0; i < f; i++)
		{
			d += (double) a[i] * b[i];
			scale += fabs((double) a[i] * b[i]);
		}
		CHECK(close_to(k->dot(a, b, f), d, scale), "%s dot f=%d", k->name, f);
	}

	for (i = 0; i < f; i++)
		want[i] = b[i] + 1.5 * a[i];
	k->axpy(1.5f, a, b, f);
	bad = 0;
	for (i = 0; i < f; i++)
		bad += !close_to(b[i], want[i], fabs(want[i]) + fabs(1.5 * a[i]));
	CHECK(bad == 0 && b[f] == 12345.0f, "%s axpy f=%d: %d wrong", k->name, f, bad);

	for (i = 0; i < f; i++)
		want[i] = a[i] - 0.5 * b[i];
	k->xpay(a, -0.5f, b, f);
	bad = 0;
	for (i = 0; i < f; i++)
		bad += !close_to(b[i], want[i], fabs(a[i]) + fabs(0.5 * b[i]));
	CHECK(bad == 0 && b[f] == 12345.0f, "%s xpay f=%d: %d wrong", k->name, f, bad);
	free(G);
}

/* Aligned, padded scratch, as solve.c lays it out. */
static float *
aligned_floats(size_t n, void **raw)
{
	char	   *p = test_alloc(n * sizeof(float) + WALS_ALIGN, 1);

	*raw = p;
	return (float *) (p + (WALS_ALIGN - (uintptr_t) p % WALS_ALIGN) % WALS_ALIGN);
}

/* chol_gather and gram_acc over blocks, against the weighted sums. */
static void
check_gram(const WalsKernels *k, const float *Y, int f, TestRng *rng)
{
	static const int lengths[] = {1, 3, 5, 64, 150, 150};
	int			fp = wals_pad(f);
	WalsPassCoef coef = {1.0f, 0.5f, 0.0f, -0.5f, 0.75f};
	void	   *raw_a;
	void	   *raw_b;
	void	   *raw_w;
	float	   *A = aligned_floats((size_t) f * fp, &raw_a);
	float	   *b = aligned_floats(fp, &raw_b);
	float	   *W = aligned_floats((size_t) 64 * fp, &raw_w);
	int32_t		idx[MAX_CELLS];
	float		val[MAX_CELLS];
	int			li;

	for (li = 0; li < (int) (sizeof(lengths) / sizeof(lengths[0])); li++)
	{
		int			n = lengths[li];
		int			bad = 0;
		int			lo;
		int			r;
		int			c;
		int			i;

		make_cells(n, GUARD_ROWS, idx, val, rng);
		coef.a_from = a_from_of(li);
		for (r = 0; r < f; r++)
			for (c = 0; c < fp; c++)
				A[r * fp + c] = c < f ? (float) (r == c) : 0.0f;
		memset(b, 0, sizeof(float) * fp);
		for (lo = 0; lo < n; lo += 64)
		{
			int			m = n - lo < 64 ? n - lo : 64;

			k->chol_gather(Y, idx + lo, val + lo, m, f, &coef, W, b);
			k->gram_acc(A, f, W, Y, idx + lo, m);
		}
		for (r = 0; r < f; r++)
		{
			double		want_b = 0.0;
			double		scale_b = 0.0;

			for (c = r; c < f; c++)
			{
				double		want = r == c;
				double		scale = 1.0;

				for (i = 0; i < n; i++)
				{
					const float *y = Y + (size_t) idx[i] * f;
					double		t = (double) y[r] * ref_b(&coef, val[i]) * y[c];

					want += t;
					scale += fabs(t);
				}
				bad += !close_to(A[r * fp + c], want, scale);
			}
			for (i = 0; i < n; i++)
			{
				double		t = ref_a(&coef, val[i]) * Y[(size_t) idx[i] * f + r];

				want_b += t;
				scale_b += fabs(t);
			}
			bad += !close_to(b[r], want_b, scale_b);
		}
		for (c = f; c < fp; c++)
			bad += b[c] != 0.0f;
		CHECK(bad == 0, "%s gram f=%d n=%d: %d wrong", k->name, f, n, bad);
	}
	free(raw_a);
	free(raw_b);
	free(raw_w);
}

/*
 * An SPD system with a known answer, solved, and a matrix that is not
 * positive definite (a negative pivot) refused, and so are a NaN pivot and
 * a matrix of infinite entries, by every kernel alike (src/core reports the
 * row as not positive definite, whatever the kernels).  The lower triangle
 * holds NaNs, which must not be read.
 */
static void
check_chol_solve(const WalsKernels *k, int f, TestRng *rng)
{
	int			fp = wals_pad(f);
	void	   *raw_a;
	void	   *raw_m;
	void	   *raw_b;
	float	   *A = aligned_floats((size_t) f * fp, &raw_a);
	float	   *M = aligned_floats((size_t) f * f, &raw_m);
	float	   *b = aligned_floats(fp, &raw_b);
	float		x[MAX_F + 1];
	double		want[MAX_F];
	double		err = 0.0;
	double		norm = 0.0;
	int			r;
	int			c;
	int			i;

	/* A = M^T M + f I, well conditioned, and b = A want. */
	for (i = 0; i < f * f; i++)
		M[i] = (float) rng_normal(rng);
	for (r = 0; r < f; r++)
		want[r] = rng_normal(rng);
	for (r = 0; r < f; r++)
		for (c = 0; c < fp; c++)
		{
			double		s = r == c ? f : 0.0;

			if (c >= f)
			{
				A[r * fp + c] = 0.0f;
				continue;
			}
			for (i = 0; i < f; i++)
				s += (double) M[i * f + r] * M[i * f + c];
			A[r * fp + c] = c >= r ? (float) s : NAN;
		}
	memset(b, 0, sizeof(float) * fp);
	for (r = 0; r < f; r++)
	{
		double		s = 0.0;

		for (c = 0; c < f; c++)
			s += (double) A[(r < c ? r : c) * fp + (r < c ? c : r)] * want[c];
		b[r] = (float) s;
	}
	x[f] = 12345.0f;
	CHECK(k->chol_solve(A, f, b, x), "%s chol_solve f=%d: refused", k->name, f);
	for (r = 0; r < f; r++)
	{
		err += (x[r] - want[r]) * (x[r] - want[r]);
		norm += want[r] * want[r];
	}
	CHECK(sqrt(err / norm) < 1e-4 && x[f] == 12345.0f,
		  "%s chol_solve f=%d: relative error %g", k->name, f, sqrt(err / norm));

	for (r = 0; r < f; r++)
		for (c = 0; c < fp; c++)
			A[r * fp + c] = c >= f ? 0.0f : r == c ? 1.0f : c > r ? 0.0f : NAN;
	A[(f - 1) * fp + f - 1] = -1.0f;
	memset(b, 0, sizeof(float) * fp);
	CHECK(!k->chol_solve(A, f, b, x), "%s chol_solve f=%d: negative pivot", k->name, f);
	for (r = 0; r < f; r++)
		for (c = 0; c < fp; c++)
			A[r * fp + c] = c >= f ? 0.0f : r == c ? 1.0f : c > r ? 0.0f : NAN;
	A[(f / 2) * fp + f / 2] = NAN;
	memset(b, 0, sizeof(float) * fp);
	b[f - 1] = 1.0f;
	CHECK(!k->chol_solve(A, f, b, x), "%s chol_solve f=%d: NaN pivot", k->name, f);

	/*
	 * Every entry infinite, as an overflowing confidence makes them: an
	 * infinite pivot, which every kernel refuses.
	 */
	for (r = 0; r < f; r++)
		for (c = 0; c < fp; c++)
			A[r * fp + c] = c >= f ? 0.0f : c >= r ? ((r + c) % 3 ? INFINITY : -INFINITY) : NAN;
	for (r = 0; r < f; r++)
		A[r * fp + r] = INFINITY;
	CHECK(!k->chol_solve(A, f, b, x), "%s chol_solve f=%d: infinite entries", k->name, f);
	free(raw_a);
	free(raw_m);
	free(raw_b);
}

/*
 * One block pass of the subspace solver against its definition: the
 * predictions brought up to date with the previous block's step, and the
 * block's right-hand side and Gram (upper triangle) added to, the padding
 * left zero.  Block sizes that take each path: one vector with its rows in
 * registers, several vectors, more than the registers hold, a narrow last
 * block after a wider one; rows longer than a chunk of gathered cells.
 */
static void
check_sub_block(const WalsKernels *k, const float *Y, int f, TestRng *rng)
{
	static const int sizes[] = {1, 5, 16, 24, 40, 1000};
	static const int lengths[] = {1, 3, 4, 5, 19, 150, 150};
	WalsPassCoef coef = {0.5f, 0.25f, 0.0f, -1.5f, 0.75f};
	int			si;

	for (si = 0; si < (int) (sizeof(sizes) / sizeof(sizes[0])); si++)
	{
		int			width = sizes[si] < f ? sizes[si] : f;
		int			nblocks = (f + width - 1) / width;
		int			bi;

		/* the first block, the second and the last */
		for (bi = 0; bi < nblocks; bi = bi < 1 ? 1 : bi < nblocks - 1 ? nblocks - 1 : nblocks)
		{
			int			k0 = bi * width;
			int			b = f - k0 < width ? f - k0 : width;
			int			bp = wals_pad(b);
			int			p0 = bi > 0 ? k0 - width : 0;
			int			pb = bi > 0 ? width : 0;
			void	   *raw_a;
			void	   *raw_r;
			void	   *raw_w;
			float	   *A = aligned_floats((size_t) b * bp, &raw_a);
			float	   *rhs = aligned_floats(bp, &raw_r);
			float	   *work = aligned_floats((size_t) 2 * WALS_SUB_CHUNK * bp, &raw_w);
			double	   *A_in = test_alloc((size_t) b * b, sizeof(double));
			double		rhs_in[MAX_F];
			float		dp[MAX_F];
			int			li;
			int			c;

			for (c = 0; c < pb; c++)
				dp[c] = (float) rng_normal(rng);
			for (li = 0; li < (int) (sizeof(lengths) / sizeof(lengths[0])); li++)
			{
				int			n = lengths[li];
				int32_t		idx[MAX_CELLS];
				float		val[MAX_CELLS];
				float		yhat[MAX_CELLS + 1];
				double		want_yhat[MAX_CELLS];
				double		t[MAX_CELLS];
				double		sw[MAX_CELLS];
				int			bad = 0;
				int			i;
				int			r;

				make_cells(n, GUARD_ROWS, idx, val, rng);
				coef.a_from = a_from_of(li);
				for (i = 0; i < n; i++)
				{
					const float *y = Y + (size_t) idx[i] * f;

					yhat[i] = (float) rng_normal(rng);
					want_yhat[i] = yhat[i];
					for (c = 0; c < pb; c++)
						want_yhat[i] += (double) y[p0 + c] * dp[c];
					t[i] = ref_a(&coef, val[i]) + ref_b(&coef, val[i]) * want_yhat[i];
					sw[i] = -ref_b(&coef, val[i]);
				}
				yhat[n] = 12345.0f;
				for (r = 0; r < b; r++)
				{
					rhs_in[r] = (float) rng_normal(rng);
					for (c = 0; c < b; c++)
						A_in[r * b + c] = (float) rng_normal(rng);
				}
				for (c = 0; c < bp; c++)
					rhs[c] = c < b ? (float) rhs_in[c] : 0.0f;
				for (r = 0; r < b; r++)
					for (c = 0; c < bp; c++)
						A[r * bp + c] = c < b ? (float) A_in[r * b + c] : 0.0f;

				k->sub_block(Y, idx, val, n, f, &coef, yhat, dp, p0, pb, k0, b,
							 A, rhs, work);

				for (i = 0; i < n; i++)
					bad += !close_to(yhat[i], want_yhat[i], fabs(want_yhat[i]) + 1.0);
				bad += yhat[n] != 12345.0f;
				for (r = 0; r < b; r++)
				{
					double		want = rhs_in[r];
					double		scale = fabs(want);

					for (i = 0; i < n; i++)
					{
						double		term = t[i] * Y[(size_t) idx[i] * f + k0 + r];

						want += term;
						scale += fabs(term);
					}
					bad += !close_to(rhs[r], want, scale + 1.0);
					for (c = r; c < b; c++)
					{
						want = A_in[r * b + c];
						scale = fabs(want);
						for (i = 0; i < n; i++)
						{
							const float *y = Y + (size_t) idx[i] * f + k0;
							double		term = sw[i] * y[r] * y[c];

							want += term;
							scale += fabs(term);
						}
						bad += !close_to(A[r * bp + c], want, scale);
					}
					for (c = b; c < bp; c++)
						bad += A[r * bp + c] != 0.0f;
				}
				for (c = b; c < bp; c++)
					bad += rhs[c] != 0.0f;
				CHECK(bad == 0, "%s sub_block f=%d b=%d k0=%d n=%d: %d wrong",
					  k->name, f, b, k0, n, bad);
			}
			free(A_in);
			free(raw_a);
			free(raw_r);
			free(raw_w);
		}
	}
}

/*
 * rank_counts against plain comparisons: scores with repeats, NaN and
 * infinities, relevant scores among them and not, lengths around the
 * vector's, the last score just before an unreadable page.
 */
static void
check_rank_counts(const WalsKernels *k, TestRng *rng)
{
	static const int lengths[] = {0, 1, 7, 15, 16, 17, 31, 33, 1000};
	int			l;

	for (l = 0; l < (int) (sizeof(lengths) / sizeof(lengths[0])); l++)
	{
		int			n = lengths[l];
		float		r[9];
		int64_t		below[9];
		int64_t		equal[9];
		int			ok = 1;
		int			p;
		int			i;
		GuardedRows g;

		guarded_make(&g, 1, n > 0 ? n : 1, rng);
		for (i = 0; i < n; i++)
		{
			int			kind = rng_below(rng, 20);

			g.Y[i] = kind == 0 ? NAN : kind == 1 ? INFINITY : kind == 2 ? -INFINITY :
				(float) rng_below(rng, 8) / 4.0f;
		}
		for (p = 0; p < 9; p++)
			r[p] = p == 0 ? NAN : p == 1 ? INFINITY : p == 2 ? -INFINITY :
				p == 3 ? 0.3f : (float) rng_below(rng, 8) / 4.0f;
		k->rank_counts(g.Y + (n > 0 ? 0 : 1), n, r, 9, below, equal);
		for (p = 0; p < 9; p++)
		{
			int64_t		lt = 0;
			int64_t		eq = 0;

			for (i = 0; i < n; i++)
			{
				lt += g.Y[i] < r[p];
				eq += g.Y[i] == r[p];
			}
			ok &= below[p] == lt && equal[p] == eq;
		}
		CHECK(ok, "%s rank_counts, %d scores", k->name, n);
		guarded_free(&g);
	}
}

static void
check_variant(const WalsKernels *k)
{
	TestRng		rng;
	int			w;

	rng_seed(&rng, 900);
	for (w = 0; w < n_widths; w++)
	{
		int			f = widths[w];
		GuardedRows g;

		guarded_make(&g, GUARD_ROWS, f, &rng);
		check_row_pass(k, g.Y, f, &rng);
		check_dots(k, g.Y, f, &rng);
		check_gemm_nt(k, g.Y, f);
		check_small(k, f, &rng);
		check_gram(k, g.Y, f, &rng);
		check_chol_solve(k, f, &rng);
		check_sub_block(k, g.Y, f, &rng);
		guarded_free(&g);
	}
	check_rank_counts(k, &rng);
}

/* ||a - b|| / max(||b||, 1) */
static double
rel_err(const float *a, const double *b, int f)
{
	double		d = 0.0;
	double		nb = 0.0;
	int			k;

	for (k = 0; k < f; k++)
	{
		d += (a[k] - b[k]) * (a[k] - b[k]);
		nb += b[k] * b[k];
	}
	return sqrt(d) / (sqrt(nb) > 1.0 ? sqrt(nb) : 1.0);
}

/*
 * Both solvers through one variant: a few users with rows longer than a
 * Cholesky block against the dense normal equations, for both sides of
 * the matrix and every model variant.
 */
static void
check_solvers(const WalsKernels *k)
{
	static const int solver_widths[] = {1, 3, 17, 65};
	int			w;

	for (w = 0; w < (int) (sizeof(solver_widths) / sizeof(solver_widths[0])); w++)
	{
		int			f = solver_widths[w];
		int			v;

		for (v = 0; v < n_test_variants; v++)
		{
			const TestVariant *tv = &test_variants[v];
			int			solver;

			for (solver = 0; solver < 2; solver++)
			{
				TestProblem tp;
				WalsParams	params;
				float	   *G;
				float	   *scratch;
				double	   *want = test_alloc(f, sizeof(double));
				double		worst = 0.0;
				WalsStatus	st;
				int			u;
				int			a;

				problem_make_variant(&tp, tv, 5, 160, f, 0.9,
							 1000 + 10 * w + v);
				params = tp.params;
				params.regularization = 1.0f;
				params.solver = solver == 0 ? WALS_CHOLESKY : WALS_CG;
				params.cg_steps = 3 * f + 10;
				tp.params = params;
				G = test_alloc((size_t) f * f, sizeof(float));
				for (a = 0; a < tp.n * f; a++)
					tp.Y[a] *= 0.3f;
				wals_gram_rows(tp.Y, 0, tp.n, f, G);
				scratch = test_alloc(wals_solve_scratch(&params, csr_max_row(&tp.R)),
									 sizeof(float));
				st = wals_solve_rows(&params, &tp.R, tp.Y, G, tp.X, 0, tp.m,
									 scratch, NULL);
				CHECK(st == WALS_OK, "%s %s f=%d solver %d: %s", k->name, tv->name,
					  f, solver, wals_status_string(st));
				for (u = 0; u < tp.m; u++)
				{
					double		e;

					brute_solve_row(&tp, tp.Y, u, want);
					e = rel_err(tp.X + u * f, want, f);
					if (e > worst)
						worst = e;
				}
				CHECK(worst < 2e-4, "%s %s f=%d solver %d: relative error %g",
					  k->name, tv->name, f, solver, worst);
				free(G);
				free(scratch);
				free(want);
				problem_free(&tp);
			}
		}
	}
}

/*
 * The cell weights are those of the model (DESIGN section 1, a negative
 * implicit rating a dislike), and the kernels' form of them agrees.
 */
static void
check_cell_linear(void)
{
	static const float ratings[] = {0.0f, -0.0f, 1.0f, 2.5f, 17.0f, -0.5f, -1.0f, -17.0f};
	int			v;

	for (v = 0; v < n_test_variants; v++)
	{
		WalsParams	params;
		WalsCellLinear w;
		int			bad = 0;
		int			i;

		memset(&params, 0, sizeof(params));
		params.feedback = test_variants[v].feedback;
		params.w0 = test_variants[v].w0;
		params.alpha = 0.7f;
		w = wals_cell_linear(&params);
		for (i = 0; i < (int) (sizeof(ratings) / sizeof(ratings[0])); i++)
		{
			float		c;
			float		p;
			double		r = ratings[i];
			double		want_c = params.feedback == WALS_IMPLICIT ? 1.0 + 0.7 * fabs(r) : 1.0;
			double		want_p = params.feedback == WALS_IMPLICIT ? (r >= 0.0) : r;

			wals_cell_weights(&params, ratings[i], &c, &p);
			bad += fabs(c - want_c) > 1e-6 * want_c || p != want_p;
			bad += fabs((double) c - params.w0 - (w.cw0 + w.cw1 * fabs(r))) >
				1e-5 * (1.0 + fabs(c));
			bad += fabs((double) c * p -
						(r >= w.cp_from ? w.cp0 + w.cp1 * r : 0.0)) > 1e-5 * (1.0 + fabs(c * p));
		}
		CHECK(bad == 0, "%s: cell weights wrong or their kernel form disagrees %d times",
			  test_variants[v].name, bad);
	}
}

/* Cholesky's scratch no longer grows with the longest row. */
static void
check_scratch(void)
{
	WalsParams	params;

	memset(&params, 0, sizeof(params));
	params.factors = 64;
	params.solver = WALS_CHOLESKY;
	CHECK(wals_solve_scratch(&params, 1000) == wals_solve_scratch(&params, 1000000),
		  "Cholesky scratch depends on the longest row");
	CHECK(wals_solve_scratch(&params, 3) < wals_solve_scratch(&params, 1000),
		  "Cholesky scratch for short rows is not smaller");
	params.solver = WALS_CG;
	CHECK(wals_solve_scratch(&params, 1000000) - wals_solve_scratch(&params, 10) == 999990,
		  "CG scratch holds more than the longest row's ratings beside its vectors");
}

/* Entry point, called from test_solve(): every variant, then the default again. */
void
test_kernels(void)
{
	int			isa;
	int			ran = 0;

	for (isa = 0; isa < WALS_ISA_COUNT; isa++)
	{
		const WalsKernels *k = wals_kernels_isa((WalsIsa) isa);

		if (k == NULL)
			continue;
		ran++;
		check_variant(k);
		wals_kernels_force(k);
		check_solvers(k);
	}
	wals_kernels_force(NULL);
	CHECK(ran > 0 && wals_kernels() != NULL, "no kernels for this CPU");
	check_cell_linear();
	check_scratch();
}
