/*
 * test_poll.c
 *	  The poll hook (wals_set_poll_hook): work that scales as f^2 or f^3
 *	  calls it at least once per WALS_POLL_WORK units, small work does not
 *	  call it at all, a hook that does not return leaves the core as it was,
 *	  and the products cut into pieces for it give the products.
 *
 * The counts asserted are lower bounds from the work each call must do,
 * never times: whether a poll comes every few milliseconds is what
 * test/bench/poll_bench prints, on the machine at hand.  The shapes are the
 * smallest that take each path (a product just over one piece of BLAS,
 * a factorisation just over the panels' threshold), since make test-arm64
 * runs them under qemu, where they take half a minute.
 */
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wals_internal.h"
#include "wals_score.h"

static int64_t polls;

static void
count_poll(void)
{
	polls++;
}

/* Count from zero with a whole budget. */
static void
count_from_zero(void)
{
	wals_set_poll_hook(count_poll);
	polls = 0;
}

/* A hook that longjmps out of the core at its jump_at-th call. */
static jmp_buf escape;
static int64_t jump_at;

static void
jump_poll(void)
{
	if (++polls == jump_at)
		longjmp(escape, 1);
}

static float *
random_rows(int64_t n, int f, double scale, uint64_t seed)
{
	float	   *Y = test_alloc((size_t) n * f, sizeof(float));
	TestRng		rng;
	int64_t		k;

	rng_seed(&rng, seed);
	for (k = 0; k < n * f; k++)
		Y[k] = (float) (scale * rng_normal(&rng));
	return Y;
}

/*
 * One Cholesky row of ncells cells at f: the row's CSR and Y, in a struct
 * so that it can be solved again the same way.  The unobserved weight is 0,
 * so that no Gram of Y is needed: the row's system is the Gram of its
 * cells and the regularisation, the work whose polls are counted, and the
 * tests stay short under qemu (make test-arm64).
 */
typedef struct WideRow
{
	WalsParams	params;
	WalsCsr		R;
	int64_t		indptr[2];
	int32_t    *idx;
	float	   *val;
	float	   *Y;
	float	   *G;
	float	   *scratch;
} WideRow;

static void
wide_row_make(WideRow *w, int f, int ncells, int nitems)
{
	int			j;

	memset(&w->params, 0, sizeof(w->params));
	w->params.feedback = WALS_IMPLICIT;
	w->params.solver = WALS_CHOLESKY;
	w->params.factors = f;
	w->params.regularization = 1.0f;
	w->params.alpha = 1.0f;
	w->params.w0 = 0.0f;
	w->idx = test_alloc((size_t) ncells, sizeof(int32_t));
	w->val = test_alloc((size_t) ncells, sizeof(float));
	for (j = 0; j < ncells; j++)
	{
		w->idx[j] = (int32_t) ((int64_t) j * nitems / ncells);
		w->val[j] = 1.0f + (float) (j % 3);
	}
	w->indptr[0] = 0;
	w->indptr[1] = ncells;
	w->R.nrows = 1;
	w->R.ncols = nitems;
	w->R.indptr = w->indptr;
	w->R.indices = w->idx;
	w->R.values = w->val;
	w->Y = random_rows(nitems, f, 1.0 / sqrt((double) f), 11);
	w->G = test_alloc(1, sizeof(float));
	w->scratch = test_alloc(wals_solve_scratch(&w->params, ncells), sizeof(float));
}

static void
wide_row_free(WideRow *w)
{
	free(w->idx);
	free(w->val);
	free(w->Y);
	free(w->G);
	free(w->scratch);
}

static WalsStatus
wide_row_solve(WideRow *w, float *x)
{
	memset(x, 0, sizeof(float) * w->params.factors);
	return wals_solve_rows(&w->params, &w->R, w->Y, w->G, x, 0, 1, w->scratch, NULL);
}

/*
 * Small work polls not at all: a whole training's pieces at f = 16, and
 * scoring, add up to far less than one budget.
 */
static void
test_small_f_quiet(void)
{
	TestProblem tp;
	int			f = 16;
	float	   *GX = test_alloc((size_t) f * f, sizeof(float));
	float	   *GY = test_alloc((size_t) f * f, sizeof(float));
	float	   *scratch;
	WalsScoreIndex ix;
	void	   *buffer;
	void	   *qscratch;
	int32_t		idx[10];
	float		score[10];

	problem_make(&tp, WALS_IMPLICIT, 1.0f, 300, 200, f, 0.1, 5);
	scratch = test_alloc(wals_solve_scratch(&tp.params, csr_max_row(&tp.Rt)) +
						 wals_solve_scratch(&tp.params, csr_max_row(&tp.R)), sizeof(float));
	count_from_zero();
	wals_gram_rows(tp.Y, 0, tp.n, f, GY);
	CHECK(wals_solve_rows(&tp.params, &tp.R, tp.Y, GY, tp.X, 0, tp.m, scratch, NULL) == WALS_OK,
		  "poll: small solve");
	wals_gram_rows(tp.X, 0, tp.m, f, GX);
	CHECK(wals_solve_rows(&tp.params, &tp.Rt, tp.X, GX, tp.Y, 0, tp.n, scratch, NULL) == WALS_OK,
		  "poll: small solve of the other side");
	(void) core_loss(&tp, tp.X, tp.Y);
	buffer = test_alloc(wals_score_index_size(tp.n, f), 1);
	CHECK(wals_score_index_build(&ix, tp.Y, tp.n, f, buffer) == WALS_OK, "poll: small index");
	qscratch = test_alloc(wals_score_scratch_size(&ix, 10), 1);
	(void) wals_score_topk(&ix, tp.X, NULL, 10, idx, score, qscratch);
	CHECK(polls == 0, "poll: a training and a query at f = 16 polled %lld times, not 0",
		  (long long) polls);
	wals_set_poll_hook(NULL);
	free(buffer);
	free(qscratch);
	free(scratch);
	free(GX);
	free(GY);
	problem_free(&tp);
}

/*
 * A Cholesky row at f = 1024 is ncells f^2 / 2 multiply-adds in the Gram of
 * its cells and f^3 / 6 in its factorisation: each kernel family polls at
 * least once per budget of the Gram, the vector families of the
 * factorisation too (the portable family's is one spotrf at this f, within
 * the bound on a call into LAPACK), and the answer is the one it gives
 * unpolled.  A count far above the budget is one poll, not several, so
 * these are lower bounds.
 */
static void
test_cholesky_polls(void)
{
	int			f = 1024;
	int			ncells = 128;
	int64_t		gram = (int64_t) ncells * f * f / 2 / WALS_POLL_WORK;
	int64_t		factor = (int64_t) f * f / 6 * f / WALS_POLL_WORK;
	WideRow		w;
	float	   *x = test_alloc((size_t) f, sizeof(float));
	float	   *quiet = test_alloc((size_t) f, sizeof(float));
	int			isa;

	wide_row_make(&w, f, ncells, 1000);
	for (isa = 0; isa < WALS_ISA_COUNT; isa++)
	{
		const WalsKernels *kern = wals_kernels_isa((WalsIsa) isa);

		if (kern == NULL)
			continue;
		int64_t		least = gram + (isa == WALS_ISA_GENERIC ? 0 : factor);

		wals_kernels_force(kern);
		wals_set_poll_hook(NULL);
		CHECK(wide_row_solve(&w, quiet) == WALS_OK, "poll: %s: solve", kern->name);
		count_from_zero();
		CHECK(wide_row_solve(&w, x) == WALS_OK, "poll: %s: solve with a hook", kern->name);
		CHECK(polls >= least, "poll: %s: a Cholesky row at f = %d polled %lld times, fewer than %lld",
			  kern->name, f, (long long) polls, (long long) least);
		CHECK(memcmp(x, quiet, sizeof(float) * f) == 0,
			  "poll: %s: the hook changed the solution", kern->name);
	}
	wals_kernels_force(NULL);
	wals_set_poll_hook(NULL);
	wide_row_free(&w);
	free(x);
	free(quiet);
}

/*
 * Above f = 1476 the portable family factorises by panels of 128 columns,
 * a few BLAS calls each, rather than in one spotrf: the same solution as
 * the widest family's to float rounding, and a poll a panel at least.
 */
static void
test_cholesky_panels(void)
{
	int			f = 1488;
	WideRow		w;
	float	   *x = test_alloc((size_t) f, sizeof(float));
	float	   *ref = test_alloc((size_t) f, sizeof(float));
	double		worst = 0.0;
	double		norm = 0.0;
	int			k;

	wide_row_make(&w, f, 64, 1000);
	wals_kernels_force(wals_kernels_isa(WALS_ISA_GENERIC));
	count_from_zero();
	CHECK(wide_row_solve(&w, x) == WALS_OK, "poll: panels: solve");
	CHECK(polls >= f / 128, "poll: panels: a Cholesky row at f = %d polled %lld times",
		  f, (long long) polls);
	wals_kernels_force(NULL);
	wals_set_poll_hook(NULL);
	CHECK(wide_row_solve(&w, ref) == WALS_OK, "poll: panels: the widest family's solve");
	for (k = 0; k < f; k++)
	{
		if (fabs((double) x[k] - ref[k]) > worst)
			worst = fabs((double) x[k] - ref[k]);
		if (fabs((double) ref[k]) > norm)
			norm = fabs((double) ref[k]);
	}
	CHECK(worst <= 1e-3 * norm, "poll: panels: %s and the portable panels differ by %g of %g",
		  wals_kernels_name(), worst, norm);
	wide_row_free(&w);
	free(x);
	free(ref);
}

/*
 * x.y in double over a column pair of row-major Y (k rows), the Gram's
 * entry (a, b) as it is written.
 */
static double
column_dot(const float *X, const float *D, int64_t k, int f, int a, int b)
{
	double		s = 0.0;
	int64_t		r;

	for (r = 0; r < k; r++)
		s += (double) X[r * f + a] * D[r * f + b];
	return s;
}

/*
 * The Gram of rows that cost more than a piece, at f = 1456 where pieces
 * are stripes (above 1448): entries against double-precision sums (a
 * sample of them), G exactly symmetric, and a poll per piece.  The cross
 * product of ALS-NCG is cut the same way.
 */
static void
test_products_in_pieces(void)
{
	int			f = 1456;
	int64_t		n = 520;
	float	   *Y = random_rows(n, f, 1.0, 21);
	float	   *D = random_rows(n, f, 1.0, 22);
	float	   *G = test_alloc((size_t) f * f, sizeof(float));
	float	   *C = test_alloc((size_t) f * f, sizeof(float));
	int64_t		least = (int64_t) f * f / 2 * n / WALS_BLAS_PIECE;
	TestRng		rng;
	int			bad = 0;
	int			asym = 0;
	int			s;
	int			a;
	int			b;

	count_from_zero();
	wals_gram_rows(Y, 0, n, f, G);
	CHECK(polls >= least, "poll: a Gram of %lld rows at f = %d polled %lld times, fewer than %lld",
		  (long long) n, f, (long long) polls, (long long) least);
	for (a = 0; a < f; a++)
		for (b = a + 1; b < f; b++)
			asym += G[(size_t) a * f + b] != G[(size_t) b * f + a];
	CHECK(asym == 0, "poll: the Gram in pieces has %d asymmetric entries", asym);

	count_from_zero();
	wals_cross_rows(Y, D, 0, n, f, C);
	CHECK(polls >= (int64_t) f * f * n / WALS_BLAS_PIECE,
		  "poll: a cross product of %lld rows at f = %d polled %lld times",
		  (long long) n, f, (long long) polls);
	rng_seed(&rng, 23);
	for (s = 0; s < 300; s++)
	{
		double		want;

		a = rng_below(&rng, f);
		b = s < 100 ? a : rng_below(&rng, f);
		want = column_dot(Y, Y, n, f, a, b);
		bad += fabs(G[(size_t) a * f + b] - want) > 1e-4 * (1.0 + fabs(want));
		want = column_dot(Y, D, n, f, a, b);
		bad += fabs(C[(size_t) a * f + b] - want) > 1e-4 * (1.0 + fabs(want));
	}
	CHECK(bad == 0, "poll: %d sampled entries of the products in pieces are wrong", bad);
	wals_set_poll_hook(NULL);
	free(Y);
	free(D);
	free(G);
	free(C);
}

/*
 * Scoring at f = 512: the index build polls, and the matrix product of
 * every item, cut into blocks of items, gives the dot products (a sample
 * of them, against double-precision sums).
 */
static void
test_scoring_polls(void)
{
	int			f = 512;
	int64_t		n = 20000;
	int			m = 64;
	float	   *Y = random_rows(n, f, 1.0, 31);
	float	   *X = random_rows(m, f, 1.0, 32);
	float	   *s = test_alloc((size_t) m * n, sizeof(float));
	void	   *buffer = test_alloc(wals_score_index_size(n, f), 1);
	WalsScoreIndex ix;
	TestRng		rng;
	int			bad = 0;
	int			k;

	count_from_zero();
	CHECK(wals_score_index_build(&ix, Y, n, f, buffer) == WALS_OK, "poll: index build");
	CHECK(polls >= 10 * n * f / WALS_POLL_WORK,
		  "poll: an index of %lld items at f = %d polled %lld times",
		  (long long) n, f, (long long) polls);
	count_from_zero();
	wals_score_product(X, m, Y, n, f, s);
	CHECK(polls >= (int64_t) m * n * f / WALS_BLAS_PIECE,
		  "poll: a product of %d users by %lld items polled %lld times",
		  m, (long long) n, (long long) polls);
	rng_seed(&rng, 33);
	for (k = 0; k < 300; k++)
	{
		int			u = rng_below(&rng, m);
		int64_t		i = k < 100 ? n - 1 - k : rng_below(&rng, (int) n);
		double		want = 0.0;
		int			c;

		for (c = 0; c < f; c++)
			want += (double) X[(size_t) u * f + c] * Y[(size_t) i * f + c];
		bad += fabs(s[(size_t) u * n + i] - want) > 1e-4 * (1.0 + fabs(want));
	}
	CHECK(bad == 0, "poll: %d sampled scores of the product by blocks of items are wrong", bad);
	wals_set_poll_hook(NULL);
	free(Y);
	free(X);
	free(s);
	free(buffer);
}

/* Starting factors at f = 4096: a normal deviate costs many multiply-adds. */
static void
test_init_polls(void)
{
	int			f = 4096;
	int64_t		n = 300;
	int64_t    *ids = test_alloc((size_t) n, sizeof(int64_t));
	float	   *X = test_alloc((size_t) n * f, sizeof(float));
	int64_t		k;

	for (k = 0; k < n; k++)
		ids[k] = k * 7;
	count_from_zero();
	wals_init_rows(X, ids, 0, n, f, 42, 0.1f);
	CHECK(polls >= 16 * n * f / WALS_POLL_WORK,
		  "poll: starting factors of %lld rows at f = %d polled %lld times",
		  (long long) n, f, (long long) polls);
	wals_set_poll_hook(NULL);
	free(ids);
	free(X);
}

/*
 * The matrix build's passes over the cells, which cost a few nanoseconds
 * a cell with no factor in sight: the grouping in place, the scatter, the
 * merging transpose and the sort of rows where they lie (through the
 * scratch, and of one long row in place) each poll at least once per
 * WALS_POLL_WORK units of their cells' work, WALS_CELL_WORK a cell a pass.
 */
static void
test_build_polls(void)
{
	int64_t		nrows = 50000;
	int64_t		ncols = 1000;
	size_t		n = (size_t) 8 * WALS_CELL_POLL;
	int32_t    *row = test_alloc(n, sizeof(int32_t));
	int32_t    *col = test_alloc(n, sizeof(int32_t));
	float	   *val = test_alloc(n, sizeof(float));
	size_t		group_bytes = wals_csr_group_scratch_bytes(nrows);
	size_t		scratch_bytes = wals_csr_scratch_bytes(n);
	void	   *scratch = test_alloc((group_bytes > scratch_bytes ? group_bytes : scratch_bytes) + 64, 1);
	WalsCsr		by_row;
	WalsCsr		by_col;
	int64_t		floor = (int64_t) n * WALS_CELL_WORK / WALS_POLL_WORK;
	TestRng		rng;
	size_t		k;

	rng_seed(&rng, 7);
	for (k = 0; k < n; k++)
	{
		row[k] = (int32_t) (rng_next(&rng) % (uint64_t) nrows);
		col[k] = (int32_t) (rng_next(&rng) % (uint64_t) ncols);
		val[k] = 1.0f;
	}
	by_row.indptr = test_alloc((size_t) nrows + 1, sizeof(int64_t));
	by_row.indices = col;
	by_row.values = val;
	by_row.nrows = nrows;
	by_row.ncols = ncols;
	count_from_zero();
	CHECK(wals_csr_group_in_place(nrows, ncols, n, row, col, val, by_row.indptr, scratch,
								  group_bytes) == WALS_OK, "poll: group in place");
	CHECK(polls >= 3 * floor, "poll: grouping %zu cells in place polled %lld times",
		  n, (long long) polls);

	by_col.indptr = test_alloc((size_t) ncols + 1, sizeof(int64_t));
	by_col.indices = test_alloc(n, sizeof(int32_t));
	by_col.values = test_alloc(n, sizeof(float));
	count_from_zero();
	CHECK(wals_csr_transpose_merge(WALS_IMPLICIT, &by_row, &by_col, scratch,
								   scratch_bytes) == WALS_OK, "poll: transpose");
	CHECK(polls >= 2 * floor, "poll: the merging transpose of %zu cells polled %lld times",
		  n, (long long) polls);
	{
		int64_t    *row_ids = test_alloc((size_t) ncols, sizeof(int64_t));
		int64_t    *col_ids = test_alloc((size_t) nrows, sizeof(int64_t));
		int64_t		held;
		int64_t		before = by_col.indptr[ncols];
		WalsCsr		out;
		WalsCsr		all;

		for (k = 0; k < (size_t) ncols; k++)
			row_ids[k] = (int64_t) k;
		for (k = 0; k < (size_t) nrows; k++)
			col_ids[k] = (int64_t) k;
		count_from_zero();
		held = wals_holdout_count(&by_col, WALS_IMPLICIT, row_ids, col_ids, 0.1, 3);
		CHECK(polls >= floor, "poll: counting the cells a validation share holds out of %zu polled %lld times",
			  n, (long long) polls);
		out.indptr = test_alloc((size_t) ncols + 1, sizeof(int64_t));
		out.indices = test_alloc((size_t) held + 1, sizeof(int32_t));
		out.values = test_alloc((size_t) held + 1, sizeof(float));
		out.codes = NULL;
		count_from_zero();
		wals_holdout_split(&by_col, WALS_IMPLICIT, row_ids, col_ids, 0.1, 3, &out);
		CHECK(polls >= floor && out.indptr[ncols] == held,
			  "poll: holding them out polled %lld times", (long long) polls);
		all.indptr = test_alloc((size_t) ncols + 1, sizeof(int64_t));
		all.indices = test_alloc((size_t) before, sizeof(int32_t));
		all.values = test_alloc((size_t) before, sizeof(float));
		all.codes = NULL;
		count_from_zero();
		wals_holdout_join(&by_col, &out, &all);
		/* one pass of a cell each: a poll every WALS_POLL_WORK and a little */
		CHECK(polls >= floor / 2 && all.indptr[ncols] == before,
			  "poll: joining them back polled %lld times", (long long) polls);
		free(all.indptr);
		free(all.indices);
		free(all.values);
		free(out.indptr);
		free(out.indices);
		free(out.values);
		free(row_ids);
		free(col_ids);
	}

	rng_seed(&rng, 7);
	for (k = 0; k < n; k++)
	{
		row[k] = (int32_t) (rng_next(&rng) % (uint64_t) nrows);
		col[k] = (int32_t) (rng_next(&rng) % (uint64_t) ncols);
	}
	by_row.indices = test_alloc(n, sizeof(int32_t));
	by_row.values = test_alloc(n, sizeof(float));
	count_from_zero();
	CHECK(wals_csr_scatter(nrows, ncols, n, row, col, val, &by_row, scratch,
						   scratch_bytes) == WALS_OK, "poll: scatter");
	CHECK(polls >= 2 * floor, "poll: scattering %zu cells polled %lld times",
		  n, (long long) polls);
	{
		int32_t    *rank = test_alloc((size_t) nrows, sizeof(int32_t));
		int			ok = 1;

		for (k = 0; k < (size_t) nrows; k++)
			rank[k] = (int32_t) (nrows - 1 - (int64_t) k);
		count_from_zero();
		wals_idmap_renumber(row, n, rank);
		/* one pass, in pieces of exactly the budget: a poll every other piece */
		CHECK(polls >= floor / 2, "poll: renumbering %zu rows polled %lld times", n,
			  (long long) polls);
		wals_idmap_renumber(row, n, rank);
		rng_seed(&rng, 7);
		for (k = 0; k < n; k++)
		{
			ok &= row[k] == (int32_t) (rng_next(&rng) % (uint64_t) nrows);
			(void) rng_next(&rng);
		}
		CHECK(ok, "poll: renumbering twice by a reversal gives the rows back");
		free(rank);
	}
	count_from_zero();
	CHECK(wals_csr_sort_merge(WALS_IMPLICIT, &by_row, scratch, scratch_bytes) == WALS_OK,
		  "poll: sorting the rows");
	CHECK(polls >= floor, "poll: sorting the rows of %zu cells where they lie polled %lld times",
		  n, (long long) polls);
	for (k = 0; k < n; k++)
		by_row.indices[k] = (int32_t) (rng_next(&rng) % (uint64_t) ncols);
	by_row.nrows = 1;
	by_row.indptr[0] = 0;
	by_row.indptr[1] = (int64_t) n;
	count_from_zero();
	CHECK(wals_csr_sort_merge(WALS_IMPLICIT, &by_row, NULL, 0) == WALS_OK,
		  "poll: sorting one row in place");
	CHECK(polls >= 2 * floor, "poll: sorting one row of %zu cells in place polled %lld times",
		  n, (long long) polls);
	wals_set_poll_hook(NULL);
	free(by_row.indices);
	free(by_row.values);
	free(by_row.indptr);
	free(by_col.indices);
	free(by_col.values);
	free(by_col.indptr);
	free(row);
	free(col);
	free(val);
	free(scratch);
}

/*
 * Ranking the ids of a hash map sorts them by radix in passes that poll:
 * 4 million random ids, whose every byte varies, poll at least once per
 * two WALS_POLL_WORK of each pass, and come out sorted, each row's rank
 * its id's place.
 */
static void
test_rank_polls(void)
{
	size_t		n = (size_t) 8 * WALS_CELL_POLL;
	int64_t    *ids = test_alloc(n, sizeof(int64_t));
	int32_t    *index = test_alloc(n, sizeof(int32_t));
	int64_t    *sorted = test_alloc(n, sizeof(int64_t));
	int32_t    *rank = test_alloc(n, sizeof(int32_t));
	int64_t		floor = (int64_t) n * WALS_CELL_WORK / WALS_POLL_WORK;
	WalsIdMap	map;
	void	   *buffer;
	size_t		bytes;
	TestRng		rng;
	size_t		k;
	int			ok = 1;

	rng_seed(&rng, 13);
	for (k = 0; k < n; k++)
		ids[k] = (int64_t) rng_next(&rng);
	wals_idmap_init(&map);
	bytes = wals_idmap_need(&map, ids, n);
	buffer = test_alloc(bytes, 1);
	CHECK(wals_idmap_move(&map, buffer, bytes, ids, n) == WALS_OK &&
		  wals_idmap_insert_many(&map, ids, n, index) == WALS_OK && map.dense == NULL,
		  "poll: %zu random ids in a hash map", n);
	count_from_zero();
	wals_idmap_rank(&map, sorted, rank);
	CHECK(polls >= 4 * floor, "poll: ranking %zu ids polled %lld times", n, (long long) polls);
	wals_set_poll_hook(NULL);
	for (k = 1; k < map.count; k++)
		ok &= sorted[k - 1] < sorted[k];
	for (k = 0; k < n; k++)
		ok &= sorted[rank[index[k]]] == ids[k];
	CHECK(ok, "poll: the ids ranked are sorted, and each row's rank is its id's place");
	/* and a dense map, whose array lists its ids in order: one pass */
	for (k = 0; k < n; k++)
		ids[k] = (int64_t) (n - 1 - k);
	free(buffer);
	wals_idmap_init(&map);
	bytes = wals_idmap_need(&map, ids, n);
	buffer = test_alloc(bytes, 1);
	CHECK(wals_idmap_move(&map, buffer, bytes, ids, n) == WALS_OK &&
		  wals_idmap_insert_many(&map, ids, n, index) == WALS_OK && map.dense != NULL,
		  "poll: %zu ids in a dense map", n);
	count_from_zero();
	wals_idmap_rank(&map, sorted, rank);
	CHECK(polls >= floor / 2 && sorted[0] == 0 && rank[index[0]] == (int32_t) (n - 1),
		  "poll: ranking %zu ids of a dense map polled %lld times", n, (long long) polls);
	wals_set_poll_hook(NULL);
	free(ids);
	free(index);
	free(sorted);
	free(rank);
	free(buffer);
}

/*
 * A hook that longjmps out, as the server's does on a cancel, in the
 * middle of a Cholesky row: the core holds nothing, so the same row
 * solved again afterwards gives the same bits as before.
 */
static void
test_hook_that_jumps(void)
{
	int			f = 1024;
	WideRow		w;
	float	   *x = test_alloc((size_t) f, sizeof(float));
	float	   *again = test_alloc((size_t) f, sizeof(float));
	volatile int jumped = 0;

	wide_row_make(&w, f, 64, 1000);
	wals_set_poll_hook(NULL);
	CHECK(wide_row_solve(&w, x) == WALS_OK, "poll: jump: solve");
	wals_set_poll_hook(jump_poll);
	polls = 0;
	jump_at = 3;
	if (setjmp(escape) == 0)
		(void) wide_row_solve(&w, again);
	else
		jumped = 1;
	CHECK(jumped, "poll: the hook's longjmp left the solve");
	wals_set_poll_hook(NULL);
	CHECK(wide_row_solve(&w, again) == WALS_OK, "poll: jump: solve again");
	CHECK(memcmp(x, again, sizeof(float) * f) == 0,
		  "poll: the solve after a longjmp out of another differs");
	wide_row_free(&w);
	free(x);
	free(again);
}

void
test_poll(void)
{
	test_small_f_quiet();
	test_cholesky_polls();
	test_cholesky_panels();
	test_products_in_pieces();
	test_scoring_polls();
	test_init_polls();
	test_build_polls();
	test_rank_polls();
	test_hook_that_jumps();
}
