/*
 * test_codes.c
 *	  Matrices whose ratings are one-byte codes: the codebook, and every
 *	  step that reads or writes such a matrix gives, to the bit, what it
 *	  gives with the ratings as floats.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void
test_codebook(void)
{
	WalsCodebook cb;
	float		many[300];
	float		runs[768];
	uint8_t		codes[768];
	int			k;
	int			bad = 0;

	wals_codebook_init(&cb);
	CHECK(cb.n == 0, "a new codebook is empty");
	CHECK(wals_codebook_code(&cb, 5.0f) == 0 && wals_codebook_code(&cb, 1.0f) == 1,
		  "codes are given in order of first sight");
	CHECK(wals_codebook_code(&cb, 5.0f) == 0 && cb.n == 2, "a value keeps its code");
	CHECK(wals_codebook_code(&cb, -0.0f) == 2 && wals_codebook_code(&cb, 0.0f) == 3,
		  "-0 and 0 take codes of their own");
	for (k = 0; k < 300; k++)
		many[k] = 0.25f * (float) k - 20.0f;
	wals_codebook_init(&cb);
	for (k = 0; k < 768; k++)
		runs[k] = many[k / 3];
	CHECK(wals_codebook_take(&cb, runs, 768, codes) && cb.n == 256,
		  "256 distinct values, in runs of three, take codes");
	for (k = 0; k < 768; k++)
		bad += cb.value[codes[k]] != runs[k];
	for (k = 0; k < 256; k++)
		bad += cb.value[wals_codebook_code(&cb, many[k])] != many[k];
	CHECK(bad == 0 && cb.n == 256, "%d values or codes decode wrong", bad);
	CHECK(wals_codebook_code(&cb, many[256]) == -1, "a 257th value has no code");
	wals_codebook_init(&cb);
	{
		float		signs[6] = {-0.0f, 0.0f, 3.0f, -0.0f, 3.5f, 0.0f};
		uint8_t		sc[6];

		CHECK(wals_codebook_take(&cb, signs, 6, sc) && cb.n == 4 &&
			  sc[0] == sc[3] && sc[1] == sc[5] && sc[0] != sc[1] &&
			  cb.value[sc[2]] == 3.0f && cb.value[sc[4]] == 3.5f,
			  "taking codes keeps -0 apart from 0, and 3.5 from 3");
	}
	{
		/* two values whose bits share a place in the cache of taking (its hash,
		 * codebook.c, of 10 bits), in turn */
		float		pair[2] = {1.0f, 0.0f};
		float		turns[64];
		uint8_t		tc[64];
		uint32_t	b0;

		memcpy(&b0, &pair[0], sizeof(b0));
		for (uint32_t m = 1; m < (1u << 22); m++)
		{
			float		x = 1.0f + (float) m / (float) (1u << 22);
			uint32_t	b;

			memcpy(&b, &x, sizeof(b));
			if (((b * 2654435761u) >> 22) == ((b0 * 2654435761u) >> 22))
			{
				pair[1] = x;
				break;
			}
		}
		for (k = 0; k < 64; k++)
			turns[k] = pair[k % 2];
		wals_codebook_init(&cb);
		bad = pair[1] == 0.0f;
		CHECK(wals_codebook_take(&cb, turns, 64, tc) && cb.n == 2, "two values taken in turn");
		for (k = 0; k < 64; k++)
			bad += cb.value[tc[k]] != turns[k];
		CHECK(bad == 0, "two values that meet in the cache of taking keep their codes");
	}
	wals_codebook_init(&cb);
	CHECK(!wals_codebook_take(&cb, many, 300, NULL) && cb.n == 256,
		  "300 distinct values do not take codes");
}

/* A coded copy of src into dst: same rows and columns, codes of cb. */
static void
code_copy(const WalsCsr *src, WalsCsr *dst, WalsCodebook *cb)
{
	int64_t		nnz = src->indptr[src->nrows];

	memset(dst, 0, sizeof(*dst));
	dst->nrows = src->nrows;
	dst->ncols = src->ncols;
	dst->indptr = test_alloc(src->nrows + 1, sizeof(int64_t));
	dst->indices = test_alloc(nnz + 1, sizeof(int32_t));
	dst->codes = test_alloc(nnz + 1, 1);
	dst->codebook = cb;
	memcpy(dst->indptr, src->indptr, (src->nrows + 1) * sizeof(int64_t));
	memcpy(dst->indices, src->indices, nnz * sizeof(int32_t));
	for (int64_t k = 0; k < nnz; k++)
		dst->codes[k] = (uint8_t) wals_codebook_code(cb, src->values[k]);
}

/* A CSR with room for n cells: floats, or codes on a 64-byte line. */
static void
room(WalsCsr *c, int64_t nrows, int64_t n, int coded)
{
	memset(c, 0, sizeof(*c));
	c->indptr = test_alloc(nrows + 1, sizeof(int64_t));
	c->indices = test_alloc(n + 1, sizeof(int32_t));
	if (coded)
		c->codes = test_alloc(n + 64, 1);
	else
		c->values = test_alloc(n + 1, sizeof(float));
}

static void
csr_free(WalsCsr *c)
{
	free(c->indptr);
	free(c->indices);
	free(c->values);
	free(c->codes);
}

/* Same rows and cells, the coded one decoded. */
static int
same_cells(const WalsCsr *f, const WalsCsr *c)
{
	int64_t		nnz = f->indptr[f->nrows];

	if (f->nrows != c->nrows || f->ncols != c->ncols ||
		memcmp(f->indptr, c->indptr, (f->nrows + 1) * sizeof(int64_t)) != 0 ||
		memcmp(f->indices, c->indices, nnz * sizeof(int32_t)) != 0)
		return 0;
	for (int64_t k = 0; k < nnz; k++)
	{
		float		v = wals_csr_value(c, k);

		if (memcmp(&v, &f->values[k], sizeof(float)) != 0)
			return 0;
	}
	return 1;
}

/*
 * Unsorted rows with repeats, grouped by row as the training's rows are,
 * with ratings among a few stars, and one pair repeated many times (a
 * bot), which the merge of codes counts rather than decodes.
 */
static void
grouped_rows(WalsCsr *g, int64_t nrows, int64_t ncols, int64_t n, uint64_t seed)
{
	TestRng		rng;
	int64_t		k = 0;

	rng_seed(&rng, seed);
	room(g, nrows, n, 0);
	g->nrows = nrows;
	g->ncols = ncols;
	for (int64_t r = 0; r < nrows; r++)
	{
		int64_t		end = (r + 1) * n / nrows;

		g->indptr[r] = k;
		for (; k < end; k++)
		{
			int			repeat = r == 3 && k - g->indptr[r] < 100;

			g->indices[k] = repeat ? 7 : (int32_t) rng_below(&rng, (int) ncols);
			g->values[k] = 0.5f * (float) (1 + rng_below(&rng, 10));
		}
	}
	g->indptr[nrows] = n;
}

/* The merging transpose and the plain one back, floats against codes. */
static void
check_transposes(WalsFeedback fb, int64_t nrows, int64_t ncols, int64_t n,
				 uint64_t seed)
{
	WalsCodebook cb;
	WalsCsr		g;
	WalsCsr		gc;
	WalsCsr		t;
	WalsCsr		tc;
	WalsCsr		back;
	WalsCsr		backc;
	size_t		scratch_bytes = wals_csr_scratch_bytes((size_t) n);
	void	   *scratch = test_alloc(scratch_bytes + 1, 1);

	wals_codebook_init(&cb);
	grouped_rows(&g, nrows, ncols, n, seed);
	code_copy(&g, &gc, &cb);
	room(&t, ncols, n, 0);
	room(&tc, ncols, n, 1);
	CHECK(wals_csr_transpose_merge(fb, &g, &t, scratch, scratch_bytes) == WALS_OK &&
		  wals_csr_transpose_merge(fb, &gc, &tc, scratch, scratch_bytes) == WALS_OK,
		  "merging transposes of %lld cells", (long long) n);
	CHECK(tc.codebook == &cb && cb.n > 10,
		  "the merge keeps the codebook and adds the merged ratings (%d codes)", cb.n);
	CHECK(same_cells(&t, &tc), "%s merge of %lld cells: codes differ from floats",
		  fb == WALS_EXPLICIT ? "explicit" : "implicit", (long long) n);
	room(&back, nrows, n, 0);
	room(&backc, nrows, n, 1);
	wals_csr_transpose_with(&t, &back, scratch, scratch_bytes);
	wals_csr_transpose_with(&tc, &backc, scratch, scratch_bytes);
	CHECK(same_cells(&back, &backc), "transpose of %lld cells: codes differ from floats",
		  (long long) n);
	CHECK(wals_csr_transpose_merge(fb, &g, &tc, scratch, scratch_bytes) == WALS_EINVAL,
		  "floats into codes are refused");
	csr_free(&g);
	csr_free(&gc);
	csr_free(&t);
	csr_free(&tc);
	csr_free(&back);
	csr_free(&backc);
	free(scratch);
}

/*
 * The scatter of rows read into a matrix, as a training builds its first
 * matrix: into codes, the same cells as into floats, in one level and in
 * two, from floats (out of core) and from codes (in memory); a value the
 * full codebook has no code for, a code it does not hold and codes into
 * floats are refused.
 */
static void
check_scatter(int64_t nrows, int64_t ncols, int64_t n, uint64_t seed)
{
	WalsCodebook cb;
	TestRng		rng;
	int32_t    *row = test_alloc(n + 1, sizeof(int32_t));
	int32_t    *col = test_alloc(n + 1, sizeof(int32_t));
	float	   *val = test_alloc(n + 1, sizeof(float));
	uint8_t    *code = test_alloc(n + 1, sizeof(uint8_t));
	WalsCsr		f;
	WalsCsr		c;
	size_t		scratch_bytes = wals_csr_scratch_bytes((size_t) n);
	void	   *scratch = test_alloc(scratch_bytes + 1, 1);

	rng_seed(&rng, seed);
	for (int64_t k = 0; k < n; k++)
	{
		row[k] = (int32_t) rng_below(&rng, (int) nrows);
		col[k] = (int32_t) rng_below(&rng, (int) ncols);
		val[k] = (float) (1 + rng_below(&rng, 5));
	}
	wals_codebook_init(&cb);
	CHECK(wals_codebook_take(&cb, val, (size_t) n, NULL), "five stars take codes");
	room(&f, nrows, n, 0);
	room(&c, nrows, n, 1);
	c.codebook = &cb;
	CHECK(wals_csr_scatter(nrows, ncols, (size_t) n, row, col, val, &f, scratch,
						   scratch_bytes) == WALS_OK &&
		  wals_csr_scatter(nrows, ncols, (size_t) n, row, col, val, &c, scratch,
						   scratch_bytes) == WALS_OK,
		  "scatters of %lld cells", (long long) n);
	CHECK(same_cells(&f, &c), "scatter of %lld cells: codes differ from floats", (long long) n);
	CHECK(cb.n == 5, "the scatter adds no code (%d)", cb.n);
	CHECK(wals_codebook_take(&cb, val, (size_t) n, code), "the stars keep their codes");
	memset(c.indices, 0xff, (size_t) n * sizeof(int32_t));
	CHECK(wals_csr_scatter_codes(nrows, ncols, (size_t) n, row, col, code, &c, scratch,
								 scratch_bytes) == WALS_OK,
		  "scatter of %lld coded cells", (long long) n);
	CHECK(same_cells(&f, &c), "scatter of %lld coded cells: codes differ from floats",
		  (long long) n);
	CHECK(wals_csr_scatter_codes(nrows, ncols, (size_t) n, row, col, code, &f, scratch,
								 scratch_bytes) == WALS_EINVAL,
		  "codes into floats are refused");
	code[n - 1] = (uint8_t) cb.n;
	CHECK(wals_csr_scatter_codes(nrows, ncols, (size_t) n, row, col, code, &c, scratch,
								 scratch_bytes) == WALS_EINVAL,
		  "a code the codebook does not hold is refused");

	for (int v = 0; cb.n < WALS_CODES; v++)
		(void) wals_codebook_code(&cb, 100.0f + (float) v);
	val[n / 2] = 99.5f;
	CHECK(wals_csr_scatter(nrows, ncols, (size_t) n, row, col, val, &c, scratch,
						   scratch_bytes) == WALS_ECODES,
		  "a value the full codebook lacks is refused");
	csr_free(&f);
	csr_free(&c);
	free(row);
	free(col);
	free(val);
	free(code);
	free(scratch);
}

/*
 * Ratings of 1 to 200 take codes, but a repeat of each pair that sums to a
 * new value, more of them than codes are left, makes the merge say so.
 */
static void
test_overflow(void)
{
	WalsCodebook cb;
	WalsCsr		g;
	WalsCsr		gc;
	WalsCsr		t;
	int64_t		n = 400;

	room(&g, 1, n, 0);
	g.nrows = 1;
	g.ncols = 200;
	g.indptr[0] = 0;
	g.indptr[1] = n;
	for (int k = 0; k < 200; k++)
	{
		g.indices[k] = k;
		g.values[k] = (float) (k + 1);
		g.indices[200 + k] = k;
		g.values[200 + k] = 200.0f;
	}
	wals_codebook_init(&cb);
	code_copy(&g, &gc, &cb);
	CHECK(cb.n == 200, "200 codes");
	room(&t, 200, n, 1);
	CHECK(wals_csr_transpose_merge(WALS_IMPLICIT, &gc, &t, NULL, 0) == WALS_ECODES,
		  "sums past the codes are reported");
	CHECK(strcmp(wals_status_string(WALS_ECODES), "unknown status") != 0,
		  "WALS_ECODES has a text");
	csr_free(&g);
	csr_free(&gc);
	csr_free(&t);
}

/* Round tp's ratings to halves, so that they take codes. */
static void
halve_ratings(TestProblem *tp)
{
	WalsCsr    *sides[2] = {&tp->R, &tp->Rt};

	for (int s = 0; s < 2; s++)
		for (int64_t k = 0; k < sides[s]->indptr[sides[s]->nrows]; k++)
			sides[s]->values[k] = roundf(sides[s]->values[k] * 2.0f) / 2.0f;
}

/* Every solver, the loss and the line search's terms, floats against codes. */
static void
test_solvers(void)
{
	static const WalsSolver solvers[] = {WALS_CG, WALS_CHOLESKY, WALS_SUBSPACE};

	for (int v = 0; v < n_test_variants; v++)
	{
		TestProblem tp;
		WalsCodebook cb;
		WalsCsr		Rc;
		int			f = 12;
		float	   *G;

		problem_make_variant(&tp, &test_variants[v], 40, 30, f, 0.3, 77 + v);
		halve_ratings(&tp);
		wals_codebook_init(&cb);
		code_copy(&tp.R, &Rc, &cb);
		G = test_alloc((size_t) f * f, sizeof(float));
		wals_gram_rows(tp.Y, 0, tp.n, f, G);
		for (int s = 0; s < 3; s++)
		{
			WalsParams	params = tp.params;
			size_t		floats;
			float	   *scratch;
			float	   *Xf = test_alloc((size_t) tp.m * f, sizeof(float));
			float	   *Xc = test_alloc((size_t) tp.m * f, sizeof(float));

			params.solver = solvers[s];
			params.cg_steps = 3;
			params.block_size = 4;
			floats = wals_solve_scratch(&params, csr_max_row(&tp.R));
			scratch = test_alloc(floats, sizeof(float));
			memcpy(Xf, tp.X, sizeof(float) * tp.m * f);
			memcpy(Xc, tp.X, sizeof(float) * tp.m * f);
			CHECK(wals_solve_rows(&params, &tp.R, tp.Y, G, Xf, 0, tp.m, scratch, NULL) == WALS_OK &&
				  wals_solve_rows(&params, &Rc, tp.Y, G, Xc, 0, tp.m, scratch, NULL) == WALS_OK,
				  "%s, solver %d: solves", test_variants[v].name, s);
			CHECK(memcmp(Xf, Xc, sizeof(float) * tp.m * f) == 0,
				  "%s, solver %d: codes solve differently", test_variants[v].name, s);
			free(scratch);
			free(Xf);
			free(Xc);
		}
		CHECK(wals_loss_rows(&tp.params, &tp.R, tp.X, tp.Y, 0, tp.m) ==
			  wals_loss_rows(&tp.params, &Rc, tp.X, tp.Y, 0, tp.m),
			  "%s: codes give another loss", test_variants[v].name);
		{
			double		cf[WALS_LINE_TERMS] = {0};
			double		cc[WALS_LINE_TERMS] = {0};

			wals_line_rows(&tp.params, &tp.R, tp.X, tp.X, tp.Y, tp.Y, 0, tp.m, cf);
			wals_line_rows(&tp.params, &Rc, tp.X, tp.X, tp.Y, tp.Y, 0, tp.m, cc);
			CHECK(memcmp(cf, cc, sizeof(cf)) == 0,
				  "%s: codes give other line-search terms", test_variants[v].name);
		}
		free(G);
		csr_free(&Rc);
		problem_free(&tp);
	}
}

/* A validation's split and join keep codes where they were. */
static void
test_holdout_codes(void)
{
	TestProblem tp;
	WalsCodebook cb;
	WalsCsr		Rc;
	WalsCsr		held;
	WalsCsr		heldc;
	WalsCsr		all;
	int64_t    *row_ids;
	int64_t    *col_ids;
	int64_t		n;
	int64_t		nnz;

	problem_make_variant(&tp, &test_variants[0], 50, 40, 4, 0.3, 5);
	halve_ratings(&tp);
	wals_codebook_init(&cb);
	code_copy(&tp.R, &Rc, &cb);
	nnz = tp.R.indptr[tp.m];
	row_ids = test_alloc(tp.m, sizeof(int64_t));
	col_ids = test_alloc(tp.n, sizeof(int64_t));
	for (int u = 0; u < tp.m; u++)
		row_ids[u] = 1000 + u;
	for (int i = 0; i < tp.n; i++)
		col_ids[i] = 7 * i;
	n = wals_holdout_count(&Rc, WALS_IMPLICIT, row_ids, col_ids, 0.2, 9);
	CHECK(n > 0 && n == wals_holdout_count(&tp.R, WALS_IMPLICIT, row_ids, col_ids, 0.2, 9),
		  "codes hold out as many cells");
	room(&held, tp.m, n, 0);
	room(&heldc, tp.m, n, 0);
	wals_holdout_split(&tp.R, WALS_IMPLICIT, row_ids, col_ids, 0.2, 9, &held);
	wals_holdout_split(&Rc, WALS_IMPLICIT, row_ids, col_ids, 0.2, 9, &heldc);
	CHECK(same_cells(&tp.R, &Rc), "the cells kept differ with codes");
	CHECK(memcmp(held.indptr, heldc.indptr, (tp.m + 1) * sizeof(int64_t)) == 0 &&
		  memcmp(held.values, heldc.values, n * sizeof(float)) == 0,
		  "the cells held out differ with codes");
	room(&all, tp.m, nnz, 0);
	wals_holdout_join(&Rc, &heldc, &all);
	CHECK(all.indptr[tp.m] == nnz, "the join gives every cell back");
	csr_free(&held);
	csr_free(&heldc);
	csr_free(&all);
	csr_free(&Rc);
	free(row_ids);
	free(col_ids);
	problem_free(&tp);
}

void
test_codes(void)
{
	test_codebook();
	check_transposes(WALS_IMPLICIT, 50, 40, 3000, 1);
	check_transposes(WALS_EXPLICIT, 50, 40, 3000, 2);
	/* past CSR_MIN_CELLS cells and CSR_ONE_LEVEL_ROWS rows: two levels */
	check_transposes(WALS_IMPLICIT, 6000, 9000, 600000, 3);
	check_transposes(WALS_EXPLICIT, 9000, 6000, 600000, 4);
	check_scatter(40, 30, 2000, 5);
	check_scatter(9000, 6000, 600000, 6);
	test_overflow();
	test_solvers();
	test_holdout_codes();
}
