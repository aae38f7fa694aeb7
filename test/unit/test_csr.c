/*
 * test_csr.c
 *	  Sparse build: the scatter keeping input order, duplicates merged
 *	  (summed or averaged) the same whatever the input order, empty rows and
 *	  columns, rows strictly increasing, bad input refused, and the
 *	  transposes checked cell by cell and by round trip.  Sorts large
 *	  enough for the two-level path must give the one-level result to the
 *	  bit, on arrays on a cache line (non-temporal stores) and off one,
 *	  with repeats, empty rows, a row holding most cells, every bit of the
 *	  packed index in use, and the fallbacks to one level.  A pair repeated
 *	  a hundred thousand times merges in n log n.  Grouping in place gives
 *	  each row the scatter's cells, and the merging transpose the same
 *	  matrix to the bit, in one level and two, within its scratch, and
 *	  refuses bad input before a cell moves.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/*
 * A CSR with room for n cells, and the work buffers of wals_csr_from_coo,
 * which runs the scatter and the merging transpose in turn.
 */
typedef struct CsrBuild
{
	WalsCsr		csr;
	int64_t    *tmp_indptr;
	int32_t    *tmp_idx;
	float	   *tmp_val;
	int32_t    *counts;
} CsrBuild;

static WalsStatus
build(CsrBuild *b, WalsFeedback fb, int64_t nrows, int64_t ncols, size_t n,
	  const int32_t *row, const int32_t *col, const float *val)
{
	b->csr.indptr = test_alloc(nrows + 1, sizeof(int64_t));
	b->csr.indices = test_alloc(n, sizeof(int32_t));
	b->csr.values = test_alloc(n, sizeof(float));
	b->tmp_indptr = test_alloc(ncols + 1, sizeof(int64_t));
	b->tmp_idx = test_alloc(n, sizeof(int32_t));
	b->tmp_val = test_alloc(n, sizeof(float));
	b->counts = test_alloc(n, sizeof(int32_t));
	return wals_csr_from_coo(fb, nrows, ncols, n, row, col, val, &b->csr,
							 b->tmp_indptr, b->tmp_idx, b->tmp_val, b->counts);
}

static void
build_free(CsrBuild *b)
{
	free(b->csr.indptr);
	free(b->csr.indices);
	free(b->csr.values);
	free(b->tmp_indptr);
	free(b->tmp_idx);
	free(b->tmp_val);
	free(b->counts);
}

/* Indptr monotone from 0, and column indices in range and strictly rising. */
static int
well_formed(const WalsCsr *c)
{
	int64_t		u;
	int64_t		j;

	if (c->indptr[0] != 0)
		return 0;
	for (u = 0; u < c->nrows; u++)
	{
		if (c->indptr[u + 1] < c->indptr[u])
			return 0;
		for (j = c->indptr[u]; j < c->indptr[u + 1]; j++)
			if (c->indices[j] < 0 || c->indices[j] >= c->ncols ||
				(j > c->indptr[u] && c->indices[j - 1] >= c->indices[j]))
				return 0;
	}
	return 1;
}

static void
test_small_by_hand(void)
{
	int32_t		row[] = {2, 0, 2, 0, 0};
	int32_t		col[] = {0, 3, 1, 1, 3};
	float		val[] = {1.0f, 2.0f, 4.0f, 5.0f, 3.0f};
	CsrBuild	b;

	CHECK(build(&b, WALS_IMPLICIT, 4, 5, 5, row, col, val) == WALS_OK, "build");
	CHECK(b.csr.indptr[4] == 4, "nnz %lld", (long long) b.csr.indptr[4]);
	CHECK(b.csr.indptr[0] == 0 && b.csr.indptr[1] == 2 &&
		  b.csr.indptr[2] == 2 && b.csr.indptr[3] == 4 &&
		  b.csr.indptr[4] == 4, "indptr");
	CHECK(b.csr.indices[0] == 1 && b.csr.values[0] == 5.0f &&
		  b.csr.indices[1] == 3 && b.csr.values[1] == 5.0f, "row 0 summed");
	CHECK(b.csr.indices[2] == 0 && b.csr.values[2] == 1.0f &&
		  b.csr.indices[3] == 1 && b.csr.values[3] == 4.0f, "row 2");
	build_free(&b);

	CHECK(build(&b, WALS_EXPLICIT, 4, 5, 5, row, col, val) == WALS_OK, "build");
	CHECK(b.csr.values[0] == 5.0f && b.csr.values[1] == 2.5f, "row 0 averaged");
	build_free(&b);
}

/*
 * Random cells with many repeats, in random order, against a naive dense
 * merge; rows 0 and 5 and every column divisible by 4 stay empty.
 */
static void
test_random(WalsFeedback fb, uint64_t seed)
{
	int			m = 13;
	int			n = 17;
	size_t		cnt = 300;
	int32_t    *row = test_alloc(cnt, sizeof(int32_t));
	int32_t    *col = test_alloc(cnt, sizeof(int32_t));
	float	   *val = test_alloc(cnt, sizeof(float));
	double	   *sum = test_alloc((size_t) m * n, sizeof(double));
	int		   *num = test_alloc((size_t) m * n, sizeof(int));
	CsrBuild	b;
	WalsCsr		t;
	WalsCsr		tt;
	TestRng		rng;
	int64_t		nnz;
	int64_t		expect_nnz = 0;
	int			bad = 0;
	size_t		k;
	int			u;
	int			i;

	rng_seed(&rng, seed);
	for (k = 0; k < cnt; k++)
	{
		do
			row[k] = rng_below(&rng, m);
		while (row[k] == 0 || row[k] == 5);
		do
			col[k] = rng_below(&rng, n);
		while (col[k] % 4 == 0);
		val[k] = (float) (1 + rng_below(&rng, 5)) * 0.5f;
		sum[row[k] * n + col[k]] += val[k];
		num[row[k] * n + col[k]]++;
	}
	for (k = 0; k < (size_t) m * n; k++)
		expect_nnz += num[k] > 0;

	CHECK(build(&b, fb, m, n, cnt, row, col, val) == WALS_OK, "build random");
	nnz = b.csr.indptr[m];
	CHECK(nnz == expect_nnz, "nnz %lld, expected %lld", (long long) nnz,
		  (long long) expect_nnz);
	CHECK(well_formed(&b.csr), "from_coo result malformed");
	CHECK(b.csr.indptr[1] == 0 && b.csr.indptr[6] == b.csr.indptr[5],
		  "empty rows");
	for (u = 0; u < m; u++)
	{
		int64_t		j;

		for (j = b.csr.indptr[u]; j < b.csr.indptr[u + 1]; j++)
		{
			int			c = b.csr.indices[j];
			double		want = sum[u * n + c] /
				(fb == WALS_EXPLICIT ? num[u * n + c] : 1);

			bad += num[u * n + c] == 0 || c % 4 == 0 ||
				b.counts[j] != num[u * n + c] ||
				fabs(b.csr.values[j] - want) > 1e-5 * fabs(want);
		}
	}
	CHECK(bad == 0, "%d merged cells wrong", bad);

	t.indptr = test_alloc(n + 1, sizeof(int64_t));
	t.indices = test_alloc(nnz, sizeof(int32_t));
	t.values = test_alloc(nnz, sizeof(float));
	wals_csr_transpose(&b.csr, &t);
	CHECK(t.nrows == n && t.ncols == m && t.indptr[n] == nnz, "transpose shape");
	CHECK(well_formed(&t), "transpose malformed");
	for (i = 0; i < n; i += 4)
		CHECK(t.indptr[i + 1] == t.indptr[i], "empty column %d has cells", i);
	bad = 0;
	for (i = 0; i < n; i++)
	{
		int64_t		j;

		for (j = t.indptr[i]; j < t.indptr[i + 1]; j++)
		{
			int			v = t.indices[j];
			int64_t		q;
			int			found = 0;

			for (q = b.csr.indptr[v]; q < b.csr.indptr[v + 1]; q++)
				found |= b.csr.indices[q] == i && b.csr.values[q] == t.values[j];
			bad += !found;
		}
	}
	CHECK(bad == 0, "%d transposed cells not in the original", bad);

	tt.indptr = test_alloc(m + 1, sizeof(int64_t));
	tt.indices = test_alloc(nnz, sizeof(int32_t));
	tt.values = test_alloc(nnz, sizeof(float));
	wals_csr_transpose(&t, &tt);
	CHECK(tt.nrows == m && tt.ncols == n &&
		  memcmp(tt.indptr, b.csr.indptr, (m + 1) * sizeof(int64_t)) == 0 &&
		  memcmp(tt.indices, b.csr.indices, nnz * sizeof(int32_t)) == 0 &&
		  memcmp(tt.values, b.csr.values, nnz * sizeof(float)) == 0,
		  "transpose round trip differs");

	free(t.indptr);
	free(t.indices);
	free(t.values);
	free(tt.indptr);
	free(tt.indices);
	free(tt.values);
	build_free(&b);
	free(row);
	free(col);
	free(val);
	free(sum);
	free(num);
}

/* The scatter groups by row and keeps the input order within a row. */
static void
test_scatter(void)
{
	int32_t		row[] = {1, 0, 1, 1, 0};
	int32_t		col[] = {4, 2, 0, 4, 3};
	float		val[] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
	int64_t		indptr[4];
	int32_t		indices[5];
	float		values[5];
	WalsCsr		c = {0, 0, indptr, indices, values, NULL, NULL};

	CHECK(wals_csr_scatter(3, 5, 5, row, col, val, &c, NULL, 0) == WALS_OK, "scatter");
	CHECK(c.nrows == 3 && c.ncols == 5, "scatter shape");
	CHECK(indptr[0] == 0 && indptr[1] == 2 && indptr[2] == 5 && indptr[3] == 5,
		  "scatter indptr");
	CHECK(indices[0] == 2 && values[0] == 2.0f && indices[1] == 3 && values[1] == 5.0f,
		  "row 0 in input order");
	CHECK(indices[2] == 4 && values[2] == 1.0f && indices[3] == 0 && values[3] == 3.0f &&
		  indices[4] == 4 && values[4] == 4.0f, "row 1 in input order, repeats kept");
	CHECK(wals_csr_scatter(2, 5, 5, row, col, val, &c, NULL, 0) == WALS_OK, "two rows");
	CHECK(wals_csr_scatter(3, 4, 5, row, col, val, &c, NULL, 0) == WALS_EINVAL,
		  "column past the end");
	CHECK(wals_csr_scatter(1, 5, 5, row, col, val, &c, NULL, 0) == WALS_EINVAL,
		  "row past the end");
	CHECK(wals_csr_scatter(3, (int64_t) INT32_MAX + 1, 0, row, col, val, &c,
						   NULL, 0) == WALS_EINVAL,
		  "more columns than int32 indices");
	CHECK(wals_csr_scatter(3, 5, 0, NULL, NULL, NULL, &c, NULL, 0) == WALS_OK &&
		  indptr[0] == 0 && indptr[3] == 0,
		  "no cells, and no arrays, as an empty shard has, scatter into empty rows");
}

/*
 * Three or more duplicates whose float sum depends on the order of
 * addition: 2^24 + 1 + 1 is 2^24 one way and 2^24 + 2 the other; merged
 * cells must not depend on the order the coordinates came in.
 */
static void
test_merge_order(WalsFeedback fb)
{
	int32_t		row[] = {0, 0, 0, 1, 0, 1, 1};
	int32_t		col[] = {1, 1, 1, 0, 0, 0, 0};
	float		val[] = {16777216.0f, 1.0f, 1.0f, 1e8f, 7.0f, 1.0f, 1e8f};
	int32_t		row2[7];
	int32_t		col2[7];
	float		val2[7];
	int			order[] = {6, 2, 4, 0, 5, 1, 3};
	CsrBuild	a;
	CsrBuild	b;
	int			k;

	if (fb == WALS_EXPLICIT)
		val[6] = -1e8f;
	for (k = 0; k < 7; k++)
	{
		row2[k] = row[order[k]];
		col2[k] = col[order[k]];
		val2[k] = val[order[k]];
	}
	CHECK(build(&a, fb, 2, 2, 7, row, col, val) == WALS_OK, "build in order");
	CHECK(build(&b, fb, 2, 2, 7, row2, col2, val2) == WALS_OK, "build shuffled");
	CHECK(a.csr.indptr[2] == 3 && b.csr.indptr[2] == 3, "three cells");
	CHECK(memcmp(a.csr.indptr, b.csr.indptr, 3 * sizeof(int64_t)) == 0 &&
		  memcmp(a.csr.indices, b.csr.indices, 3 * sizeof(int32_t)) == 0 &&
		  memcmp(a.csr.values, b.csr.values, 3 * sizeof(float)) == 0,
		  "merged cells depend on the input order");
	if (fb == WALS_IMPLICIT)
		CHECK(a.csr.values[1] == 16777218.0f && a.csr.values[2] == 200000001.0f,
			  "sums %g %g", a.csr.values[1], a.csr.values[2]);
	else
		CHECK(a.csr.values[0] == 7.0f && fabsf(a.csr.values[1] - 16777218.0f / 3) < 1.0f &&
			  a.csr.values[2] == 1.0f / 3, "averages %g %g %g",
			  a.csr.values[0], a.csr.values[1], a.csr.values[2]);
	build_free(&a);
	build_free(&b);
}

static void
test_bad_input(void)
{
	int32_t		row[] = {0, 1};
	int32_t		col[] = {1, 0};
	float		val[] = {1.0f, 2.0f};
	int32_t		badrow[] = {0, 2};
	int32_t		badcol[] = {-1, 0};
	float		nan_val[] = {1.0f, NAN};
	float		inf_val[] = {-INFINITY, 1.0f};
	int32_t		same[] = {0, 0};
	float		huge[] = {3e38f, 3e38f};
	CsrBuild	b;

	CHECK(build(&b, WALS_IMPLICIT, 2, 2, 2, badrow, col, val) == WALS_EINVAL,
		  "row out of range");
	build_free(&b);
	CHECK(build(&b, WALS_IMPLICIT, 2, 2, 2, row, badcol, val) == WALS_EINVAL,
		  "negative column");
	build_free(&b);
	CHECK(build(&b, WALS_IMPLICIT, 2, 2, 2, row, col, nan_val) == WALS_ENONFINITE,
		  "NaN rating");
	build_free(&b);
	CHECK(build(&b, WALS_EXPLICIT, 2, 2, 2, row, col, inf_val) == WALS_ENONFINITE,
		  "infinite rating");
	build_free(&b);
	CHECK(build(&b, WALS_IMPLICIT, 2, 2, 2, same, same, huge) == WALS_ENONFINITE,
		  "duplicates summing past float");
	build_free(&b);
	CHECK(build(&b, WALS_EXPLICIT, 2, 2, 2, same, same, huge) == WALS_OK &&
		  b.csr.values[0] == 3e38f, "explicit duplicates averaged without overflow");
	build_free(&b);
	CHECK(build(&b, WALS_IMPLICIT, -1, 2, 0, row, col, val) == WALS_EINVAL,
		  "negative row count");
	build_free(&b);
	CHECK(build(&b, WALS_IMPLICIT, 3, 2, 0, row, col, val) == WALS_OK &&
		  b.csr.indptr[3] == 0 && b.csr.indptr[1] == 0, "no ratings at all");
	build_free(&b);
}

/*
 * A large sort's shape: cells drawn over rows and columns, every row
 * divisible by 7 and the last 100 left empty, a share (in percent) on
 * hot_rows hot rows side by side and as many hot columns,
 * and a share repeated.  scatter_only for columns too many for the
 * transposes' buffers.
 */
typedef struct BigCase
{
	const char *name;
	int64_t		nrows;
	int64_t		ncols;
	size_t		n;
	int			hot_pct;
	int			repeat_pct;
	int			scatter_only;
	int			hot_rows;
} BigCase;

/*
 * A CSR of nrows rows with room for n cells, whose arrays start shift bytes
 * past a line.
 */
static void
big_csr(WalsCsr *c, int64_t nrows, size_t n, size_t shift)
{
	c->indptr = test_alloc_on_line((nrows + 1) * sizeof(int64_t), 0);
	c->indices = test_alloc_on_line(n * sizeof(int32_t), shift);
	c->values = test_alloc_on_line(n * sizeof(float), shift);
}

static void
big_csr_free(WalsCsr *c, size_t shift)
{
	free(c->indptr);
	free((char *) c->indices - shift);
	free((char *) c->values - shift);
}

/* Same shape, row starts and cells, to the bit. */
static int
csr_same(const WalsCsr *a, const WalsCsr *b)
{
	int64_t		nnz = a->indptr[a->nrows];

	return a->nrows == b->nrows && a->ncols == b->ncols &&
		memcmp(a->indptr, b->indptr, (a->nrows + 1) * sizeof(int64_t)) == 0 &&
		memcmp(a->indices, b->indices, nnz * sizeof(int32_t)) == 0 &&
		memcmp(a->values, b->values, nnz * sizeof(float)) == 0;
}

/* Whether any byte of the scratch changed from its fill. */
static int
touched(const unsigned char *scratch, size_t bytes)
{
	size_t		k;

	for (k = 0; k < bytes; k++)
		if (scratch[k] != 0xA5)
			return 1;
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

/* Distinct (row, col) pairs, the nnz a merge must leave. */
static int64_t
distinct_pairs(const int32_t *row, const int32_t *col, size_t n)
{
	uint64_t   *key = test_alloc(n, sizeof(uint64_t));
	int64_t		count = 0;
	size_t		k;

	for (k = 0; k < n; k++)
		key[k] = ((uint64_t) row[k] << 32) | (uint32_t) col[k];
	qsort(key, n, sizeof(uint64_t), cmp_u64);
	for (k = 0; k < n; k++)
		count += k == 0 || key[k] != key[k - 1];
	free(key);
	return count;
}

static int32_t
draw_index(TestRng *rng, int64_t size, int skip_empty)
{
	for (;;)
	{
		int32_t		k = (int32_t) (rng_next(rng) % (uint64_t) size);

		if (!skip_empty || (k % 7 != 0 && k < size - 100))
			return k;
	}
}

/*
 * The build of ingest.c, scatter then merging transpose then transpose,
 * through a scratch of scratch_bytes (past a line by shift) on arrays
 * shift bytes past a line, against the one-level build without a scratch.
 * two_level: whether the scatter must use the scratch (1), must not (0),
 * or may only plan in it (-1).
 */
static void
check_big(const BigCase *bc, size_t shift, size_t scratch_bytes, int two_level)
{
	int32_t    *row = test_alloc(bc->n, sizeof(int32_t));
	int32_t    *col = test_alloc(bc->n, sizeof(int32_t));
	float	   *val = test_alloc(bc->n, sizeof(float));
	size_t		alloc = wals_csr_scratch_bytes(bc->n) + 64;
	unsigned char *scratch = test_alloc_on_line(alloc, shift);
	WalsCsr		a_row;
	WalsCsr		b_row;
	WalsCsr		a_col;
	WalsCsr		b_col;
	TestRng		rng;
	size_t		k;

	rng_seed(&rng, (uint64_t) bc->nrows * 31 + bc->ncols + shift);
	for (k = 0; k < bc->n; k++)
	{
		int			pct = rng_below(&rng, 100);

		if (k > 0 && pct < bc->repeat_pct)
		{
			size_t		j = rng_next(&rng) % k;

			row[k] = row[j];
			col[k] = col[j];
		}
		else
		{
			int			hot = rng_below(&rng, bc->hot_rows);

			row[k] = pct < bc->hot_pct ? (int32_t) (bc->nrows / 3 + 1 + hot) :
				draw_index(&rng, bc->nrows, 1);
			pct = rng_below(&rng, 100);
			col[k] = pct < bc->hot_pct ? (int32_t) (bc->ncols / 2 + 1 + hot) :
				draw_index(&rng, bc->ncols, 0);
		}
		val[k] = (float) (1 + rng_below(&rng, 5));
	}
	memset(scratch, 0xA5, alloc - shift);
	big_csr(&a_row, bc->nrows, bc->n, shift);
	big_csr(&b_row, bc->nrows, bc->n, shift);

	CHECK(wals_csr_scatter(bc->nrows, bc->ncols, bc->n, row, col, val, &a_row,
						   scratch, scratch_bytes) == WALS_OK &&
		  wals_csr_scatter(bc->nrows, bc->ncols, bc->n, row, col, val, &b_row,
						   NULL, 0) == WALS_OK, "%s: scatter", bc->name);
	CHECK(csr_same(&a_row, &b_row), "%s: scatter differs from one level",
		  bc->name);
	CHECK(two_level < 0 || touched(scratch, alloc - shift) == two_level,
		  "%s: scatter %s the two-level path", bc->name,
		  two_level ? "did not take" : "took");
	if (!bc->scatter_only)
	{
		big_csr(&a_col, bc->ncols, bc->n, shift);
		big_csr(&b_col, bc->ncols, bc->n, shift);
		CHECK(wals_csr_transpose_merge(WALS_IMPLICIT, &a_row, &a_col, scratch,
									   scratch_bytes) == WALS_OK &&
			  wals_csr_transpose_merge(WALS_IMPLICIT, &b_row, &b_col,
									   NULL, 0) == WALS_OK,
			  "%s: merging transpose", bc->name);
		CHECK(csr_same(&a_col, &b_col) && well_formed(&a_col),
			  "%s: merging transpose differs from one level", bc->name);
		CHECK(a_col.indptr[bc->ncols] == distinct_pairs(col, row, bc->n),
			  "%s: %lld cells after merging, %lld distinct pairs", bc->name,
			  (long long) a_col.indptr[bc->ncols],
			  (long long) distinct_pairs(col, row, bc->n));
		wals_csr_transpose_with(&a_col, &a_row, scratch, scratch_bytes);
		wals_csr_transpose(&b_col, &b_row);
		CHECK(csr_same(&a_row, &b_row) && well_formed(&a_row),
			  "%s: transpose differs from one level", bc->name);
		big_csr_free(&a_col, shift);
		big_csr_free(&b_col, shift);
	}
	big_csr_free(&a_row, shift);
	big_csr_free(&b_row, shift);
	free(scratch - shift);
	free(row);
	free(col);
	free(val);
}

/*
 * Two levels on lines and off them, every case against one level; then the
 * fallbacks: a scratch one byte short, and columns so wide that too few
 * rows fit a partition for the partitions to fit their limit.  Past
 * 131,072 rows, a block of the table of partitions holds several rows,
 * and a dozen hot rows side by side, each a partition of its own, start
 * several partitions inside one block.
 */
static void
test_two_level(void)
{
	static const BigCase cases[] = {
		{"repeats and empty rows", 20000, 30000, 800000, 0, 5, 0, 1},
		{"a row with most cells", 8000, 5000, 600000, 60, 2, 0, 1},
		{"every packed bit", 1000000, 1 << 20, 600000, 0, 1, 0, 1},
		{"too wide for two levels", 6000, 1 << 30, 600000, 0, 1, 1, 1},
		{"hot rows side by side in blocks", 400000, 300000, 800000, 40, 2, 0, 12},
	};

	CHECK(wals_csr_scratch_bytes(100000) == 0, "a small sort wants a scratch");
	CHECK(wals_csr_scratch_bytes(100000000) >= 100000000 / 64,
		  "scratch of %zu bytes for 10^8 cells",
		  wals_csr_scratch_bytes(100000000));
	check_big(&cases[0], 0, wals_csr_scratch_bytes(cases[0].n), 1);
	check_big(&cases[1], 0, wals_csr_scratch_bytes(cases[1].n), 1);
	check_big(&cases[2], 0, wals_csr_scratch_bytes(cases[2].n), 1);
	check_big(&cases[0], 4, wals_csr_scratch_bytes(cases[0].n), 1);
	check_big(&cases[1], 4, wals_csr_scratch_bytes(cases[1].n), 1);
	check_big(&cases[0], 0, wals_csr_scratch_bytes(cases[0].n) - 1, 0);
	check_big(&cases[3], 0, wals_csr_scratch_bytes(cases[3].n), -1);
	check_big(&cases[4], 0, wals_csr_scratch_bytes(cases[4].n), 1);
}

/*
 * Duplicates summing past a float are caught when the merge runs inside the
 * second pass too.
 */
static void
test_two_level_overflow(void)
{
	size_t		n = 600000;
	int64_t		nrows = 9000;
	int32_t    *row = test_alloc(n, sizeof(int32_t));
	int32_t    *col = test_alloc(n, sizeof(int32_t));
	float	   *val = test_alloc(n, sizeof(float));
	size_t		bytes = wals_csr_scratch_bytes(n);
	void	   *scratch = test_alloc_on_line(bytes, 0);
	WalsCsr		by_row;
	WalsCsr		by_col;
	size_t		k;

	for (k = 0; k < n; k++)
	{
		row[k] = (int32_t) (k % nrows);
		col[k] = (int32_t) (k % 7919);
		val[k] = 1.0f;
	}
	row[n - 1] = row[0];
	col[n - 1] = col[0];
	val[0] = val[n - 1] = 3e38f;
	big_csr(&by_row, nrows, n, 0);
	big_csr(&by_col, 7919, n, 0);
	CHECK(wals_csr_scatter(nrows, 7919, n, row, col, val, &by_row,
						   scratch, bytes) == WALS_OK, "scatter");
	CHECK(wals_csr_transpose_merge(WALS_IMPLICIT, &by_row, &by_col,
								   scratch, bytes) == WALS_ENONFINITE,
		  "duplicates summing past float in two levels");
	big_csr_free(&by_row, 0);
	big_csr_free(&by_col, 0);
	free(scratch);
	free(row);
	free(col);
	free(val);
}

static int
cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a;
	float		y = *(const float *) b;

	return (x > y) - (x < y);
}

/*
 * One pair repeated 100000 times, past the insertion sort of short runs:
 * merged in n log n, to the sum of the values in ascending order, whatever
 * their order, among a few other cells.
 */
static void
test_long_run(WalsFeedback fb)
{
	size_t		n = 100003;
	int32_t    *row = test_alloc(n, sizeof(int32_t));
	int32_t    *col = test_alloc(n, sizeof(int32_t));
	float	   *val = test_alloc(n, sizeof(float));
	float	   *sorted = test_alloc(n, sizeof(float));
	CsrBuild	a;
	CsrBuild	b;
	TestRng		rng;
	double		sum = 0.0;
	size_t		k;

	rng_seed(&rng, 77);
	for (k = 0; k < n; k++)
	{
		row[k] = k < 3 ? (int32_t) k : 1;
		col[k] = k < 3 ? 0 : 2;
		val[k] = sorted[k] = k < 3 ? 1.0f :
			(float) rng_uniform(&rng) * (k % 2 ? 16777216.0f : 1.0f);
	}
	qsort(sorted + 3, n - 3, sizeof(float), cmp_float);
	for (k = 3; k < n; k++)
		sum += sorted[k];
	if (fb == WALS_EXPLICIT)
		sum /= (double) (n - 3);
	CHECK(build(&a, fb, 3, 3, n, row, col, val) == WALS_OK, "build long run");
	for (k = n - 1; k > 0; k--)
	{
		size_t		j = rng_next(&rng) % (k + 1);
		float		t = val[k];
		int32_t		r = row[k];
		int32_t		c = col[k];

		val[k] = val[j];
		row[k] = row[j];
		col[k] = col[j];
		val[j] = t;
		row[j] = r;
		col[j] = c;
	}
	CHECK(build(&b, fb, 3, 3, n, row, col, val) == WALS_OK, "build long run shuffled");
	CHECK(a.csr.indptr[3] == 4 && b.csr.indptr[3] == 4, "four cells");
	CHECK(a.csr.indices[2] == 2 && a.csr.values[2] == (float) sum &&
		  a.counts[2] == (int32_t) (n - 3), "long run %g, expected %g",
		  a.csr.values[2], sum);
	CHECK(memcmp(a.csr.values, b.csr.values, 4 * sizeof(float)) == 0,
		  "long run depends on the input order");
	build_free(&a);
	build_free(&b);
	free(row);
	free(col);
	free(val);
	free(sorted);
}

/* A cell as one sortable key: its column, then its value's bits. */
static uint64_t
cell_key(int32_t col, float val)
{
	uint32_t	bits;

	memcpy(&bits, &val, sizeof(bits));
	return ((uint64_t) (uint32_t) col << 32) | bits;
}

/* Whether cells [a, a + len) of one CSR and [b, b + len) of another are the same multiset. */
static int
same_cells(const int32_t *a_col, const float *a_val, int64_t a,
		   const int32_t *b_col, const float *b_val, int64_t b, int64_t len)
{
	uint64_t   *ka = test_alloc(len, sizeof(uint64_t));
	uint64_t   *kb = test_alloc(len, sizeof(uint64_t));
	int64_t		k;
	int			same;

	for (k = 0; k < len; k++)
	{
		ka[k] = cell_key(a_col[a + k], a_val[a + k]);
		kb[k] = cell_key(b_col[b + k], b_val[b + k]);
	}
	qsort(ka, len, sizeof(uint64_t), cmp_u64);
	qsort(kb, len, sizeof(uint64_t), cmp_u64);
	same = memcmp(ka, kb, len * sizeof(uint64_t)) == 0;
	free(ka);
	free(kb);
	return same;
}

/*
 * A scratch of exactly bytes for the grouping, shift bytes past a line,
 * filled with 0xA5 and followed by a guard of as many bytes.
 */
#define GROUP_GUARD 64

static unsigned char *
group_scratch(size_t bytes, size_t shift)
{
	unsigned char *scratch = test_alloc_on_line(bytes + GROUP_GUARD, shift);

	memset(scratch, 0xA5, bytes + GROUP_GUARD);
	return scratch;
}

/* The grouping by hand: rows 2 and 4 empty, repeats, no cells, no rows. */
static void
test_group_by_hand(void)
{
	int32_t		row[] = {3, 0, 3, 1, 0, 3};
	int32_t		col[] = {1, 4, 0, 2, 4, 1};
	float		val[] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
	int32_t		want_col[] = {4, 4, 2, 1, 0, 1};
	float		want_val[] = {5.0f, 2.0f, 4.0f, 6.0f, 3.0f, 1.0f};
	int64_t		want_ptr[] = {0, 2, 3, 3, 6, 6};
	int64_t		indptr[6];
	size_t		bytes = wals_csr_group_scratch_bytes(5000);
	unsigned char *scratch = group_scratch(bytes, 0);
	int64_t	   *wide = test_alloc(5001, sizeof(int64_t));
	int32_t		one_row[] = {4999};
	int32_t		one_col[] = {2};
	float		one_val[] = {7.0f};
	int64_t		r;
	int			bad = 0;

	CHECK(bytes >= wals_csr_group_scratch_bytes(5) &&
		  wals_csr_group_scratch_bytes(0) > 0, "scratch sizes");
	CHECK(wals_csr_group_in_place(5, 5, 6, row, col, val, indptr, scratch,
								  bytes) == WALS_OK, "group");
	CHECK(memcmp(indptr, want_ptr, sizeof(want_ptr)) == 0,
		  "indptr %lld %lld %lld %lld %lld %lld", (long long) indptr[0],
		  (long long) indptr[1], (long long) indptr[2], (long long) indptr[3],
		  (long long) indptr[4], (long long) indptr[5]);
	for (r = 0; r < 5; r++)
		bad += !same_cells(col, val, indptr[r], want_col, want_val, want_ptr[r],
						   want_ptr[r + 1] - want_ptr[r]);
	CHECK(bad == 0, "%d rows with the wrong cells", bad);

	memset(indptr, 0xFF, sizeof(indptr));
	CHECK(wals_csr_group_in_place(4, 3, 0, row, col, val, indptr, scratch,
								  bytes) == WALS_OK &&
		  indptr[0] == 0 && indptr[1] == 0 && indptr[2] == 0 &&
		  indptr[3] == 0 && indptr[4] == 0, "no cells");
	indptr[0] = -1;
	CHECK(wals_csr_group_in_place(0, 3, 0, row, col, val, indptr, scratch,
								  bytes) == WALS_OK && indptr[0] == 0, "no rows");
	CHECK(wals_csr_group_in_place(0, 3, 1, row, col, val, indptr, scratch,
								  bytes) == WALS_EINVAL, "a cell and no rows");

	memset(wide, 0xFF, 5001 * sizeof(int64_t));
	CHECK(wals_csr_group_in_place(5000, 3, 0, row, col, val, wide, scratch,
								  bytes) == WALS_OK, "two levels, no cells");
	for (r = 0; r <= 5000; r++)
		bad += wide[r] != 0;
	CHECK(bad == 0, "two levels, no cells: %d row starts not 0", bad);
	CHECK(wals_csr_group_in_place(5000, 3, 1, one_row, one_col, one_val, wide,
								  scratch, bytes) == WALS_OK &&
		  wide[4999] == 0 && wide[5000] == 1 && one_col[0] == 2 &&
		  one_val[0] == 7.0f, "two levels, one cell in the last row");
	CHECK(!touched(scratch + bytes, GROUP_GUARD), "wrote past the scratch");
	free(wide);
	free(scratch);
}

/*
 * A grouping's shape: cells over rows drawn as nrows * u^power (1 for
 * uniform rows, more for a power law crowding the low rows, 0 for rows
 * already in order), columns uniform, and a share (in percent) repeating
 * an earlier cell's pair with a new value.
 */
typedef struct GroupCase
{
	const char *name;
	int64_t		nrows;
	int64_t		ncols;
	size_t		n;
	double		power;
	int			repeat_pct;
} GroupCase;

/*
 * The grouping against the scatter, on a scratch of exactly its size past a
 * line: the same row starts, each row the same multiset of cells, and the
 * merging transposes of both the same to the bit, for both feedbacks.
 */
static void
check_group(const GroupCase *gc)
{
	int32_t    *row = test_alloc(gc->n, sizeof(int32_t));
	int32_t    *col = test_alloc(gc->n, sizeof(int32_t));
	float	   *val = test_alloc(gc->n, sizeof(float));
	size_t		bytes = wals_csr_group_scratch_bytes(gc->nrows);
	unsigned char *scratch = group_scratch(bytes, 4);
	size_t		csr_bytes = wals_csr_scratch_bytes(gc->n);
	void	   *csr_scratch = csr_bytes > 0 ? test_alloc_on_line(csr_bytes, 0) : NULL;
	WalsCsr		grouped;
	WalsCsr		scattered;
	TestRng		rng;
	int64_t		r;
	int			bad = 0;
	int			f;
	size_t		k;

	rng_seed(&rng, (uint64_t) gc->nrows * 131 + gc->n);
	for (k = 0; k < gc->n; k++)
	{
		if (k > 0 && rng_below(&rng, 100) < gc->repeat_pct)
		{
			size_t		j = rng_next(&rng) % k;

			row[k] = row[j];
			col[k] = col[j];
		}
		else
		{
			row[k] = gc->power == 0.0 ? (int32_t) (k * gc->nrows / gc->n) :
				(int32_t) (gc->nrows * pow(rng_uniform(&rng), gc->power));
			col[k] = (int32_t) (rng_next(&rng) % (uint64_t) gc->ncols);
		}
		val[k] = (float) (rng_uniform(&rng) * 100.0);
	}
	big_csr(&scattered, gc->nrows, gc->n, 0);
	CHECK(wals_csr_scatter(gc->nrows, gc->ncols, gc->n, row, col, val,
						   &scattered, NULL, 0) == WALS_OK, "%s: scatter", gc->name);

	grouped.nrows = gc->nrows;
	grouped.ncols = gc->ncols;
	grouped.indptr = test_alloc_on_line((gc->nrows + 1) * sizeof(int64_t), 0);
	grouped.indices = col;
	grouped.values = val;
	CHECK(wals_csr_group_in_place(gc->nrows, gc->ncols, gc->n, row, col, val,
								  grouped.indptr, scratch, bytes) == WALS_OK,
		  "%s: group", gc->name);
	CHECK(!touched(scratch + bytes, GROUP_GUARD), "%s: wrote past the scratch",
		  gc->name);
	CHECK(grouped.indptr[0] == 0 && grouped.indptr[gc->nrows] == (int64_t) gc->n &&
		  memcmp(grouped.indptr, scattered.indptr,
				 (gc->nrows + 1) * sizeof(int64_t)) == 0,
		  "%s: row starts differ from the scatter's", gc->name);
	for (r = 0; r < gc->nrows; r++)
		if (scattered.indptr[r + 1] > scattered.indptr[r])
			bad += !same_cells(col, val, grouped.indptr[r], scattered.indices,
							   scattered.values, scattered.indptr[r],
							   scattered.indptr[r + 1] - scattered.indptr[r]);
	CHECK(bad == 0, "%s: %d rows with other cells than the scatter's", gc->name, bad);

	for (f = 0; f < 2; f++)
	{
		WalsFeedback fb = f == 0 ? WALS_IMPLICIT : WALS_EXPLICIT;
		WalsCsr		a;
		WalsCsr		b;

		big_csr(&a, gc->ncols, gc->n, 0);
		big_csr(&b, gc->ncols, gc->n, 0);
		CHECK(wals_csr_transpose_merge(fb, &grouped, &a, csr_scratch,
									   csr_bytes) == WALS_OK &&
			  wals_csr_transpose_merge(fb, &scattered, &b, csr_scratch,
									   csr_bytes) == WALS_OK,
			  "%s: merging transposes", gc->name);
		CHECK(csr_same(&a, &b) && well_formed(&a),
			  "%s: %s merge after grouping differs from after the scatter",
			  gc->name, f == 0 ? "implicit" : "explicit");
		big_csr_free(&a, 0);
		big_csr_free(&b, 0);
	}
	free(grouped.indptr);
	big_csr_free(&scattered, 0);
	free(scratch - 4);
	free(csr_scratch);
	free(row);
	free(col);
	free(val);
}

/*
 * Shapes taking one level and two: tiny, at the edge of one level (256
 * rows) and just past it, a power law whose low rows crowd one first-level
 * bucket, rows already in order, a last bucket one row short of the
 * others, rows so many that most buckets are empty, and so many that the
 * first level takes more than 8 bits.
 */
static void
test_group_random(void)
{
	static const GroupCase cases[] = {
		{"one cell", 1, 1, 1, 1.0, 0},
		{"one row", 1, 7, 200, 1.0, 30},
		{"tiny", 3, 2, 40, 1.0, 50},
		{"one level, power law", 256, 50, 30000, 2.0, 20},
		{"just past one level", 257, 60, 30000, 1.0, 20},
		{"two levels, uniform", 3000, 700, 100000, 1.0, 5},
		{"two levels, power law", 50000, 20000, 300000, 3.0, 10},
		{"two levels, a hot bucket", 200000, 5000, 300000, 8.0, 2},
		{"two levels, rows in order", 50000, 20000, 300000, 0.0, 0},
		{"two levels, a last bucket one row short", 65535, 100, 50000, 1.0, 5},
		{"two levels, most buckets empty", 2000000, 1000, 5000, 1.0, 10},
		{"two levels, 1024 first-level buckets", 9000000, 3000, 200000, 2.0, 5},
	};
	size_t		c;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		check_group(&cases[c]);
}

/*
 * Bad input, at the last cell so that the checks must cover every cell
 * before one moves, and sizes and scratches refused: the right status, and
 * the coordinates and indptr left as they were.
 */
static void
test_group_bad_input(void)
{
	static const char *const names[] = {
		"row past the end", "negative row", "column past the end",
		"negative column", "NaN value", "infinite value",
		"scratch one byte short", "no scratch", "more columns than int32",
		"negative row count", "more rows than int32"
	};
	static const WalsStatus want[] = {
		WALS_EINVAL, WALS_EINVAL, WALS_EINVAL, WALS_EINVAL,
		WALS_ENONFINITE, WALS_ENONFINITE, WALS_EINVAL, WALS_EINVAL,
		WALS_EINVAL, WALS_EINVAL, WALS_EINVAL
	};
	int64_t		nrows = 5000;
	int64_t		ncols = 300;
	size_t		n = 20000;
	int32_t    *row = test_alloc(n, sizeof(int32_t));
	int32_t    *col = test_alloc(n, sizeof(int32_t));
	float	   *val = test_alloc(n, sizeof(float));
	int32_t    *row0 = test_alloc(n, sizeof(int32_t));
	int32_t    *col0 = test_alloc(n, sizeof(int32_t));
	float	   *val0 = test_alloc(n, sizeof(float));
	int64_t    *indptr = test_alloc(nrows + 1, sizeof(int64_t));
	int64_t    *indptr0 = test_alloc(nrows + 1, sizeof(int64_t));
	size_t		bytes = wals_csr_group_scratch_bytes(nrows);
	unsigned char *scratch = group_scratch(bytes, 0);
	TestRng		rng;
	int32_t		last_row;
	int32_t		last_col;
	float		last_val;
	int			c;
	size_t		k;

	rng_seed(&rng, 5);
	for (k = 0; k < n; k++)
	{
		row0[k] = (int32_t) (rng_next(&rng) % (uint64_t) nrows);
		col0[k] = (int32_t) (rng_next(&rng) % (uint64_t) ncols);
		val0[k] = (float) rng_uniform(&rng);
	}
	last_row = row0[n - 1];
	last_col = col0[n - 1];
	last_val = val0[n - 1];
	memset(indptr0, 0x5A, (nrows + 1) * sizeof(int64_t));
	for (c = 0; c < (int) (sizeof(want) / sizeof(want[0])); c++)
	{
		int64_t		m = nrows;
		int64_t		w = ncols;
		void	   *s = scratch;
		size_t		sb = bytes;
		WalsStatus	status;

		row0[n - 1] = last_row;
		col0[n - 1] = last_col;
		val0[n - 1] = last_val;
		switch (c)
		{
			case 0:
				row0[n - 1] = (int32_t) nrows;
				break;
			case 1:
				row0[n - 1] = -1;
				break;
			case 2:
				col0[n - 1] = (int32_t) ncols;
				break;
			case 3:
				col0[n - 1] = -1;
				break;
			case 4:
				val0[n - 1] = NAN;
				break;
			case 5:
				val0[n - 1] = -INFINITY;
				break;
			case 6:
				sb = bytes - 1;
				break;
			case 7:
				s = NULL;
				break;
			case 8:
				w = (int64_t) INT32_MAX + 1;
				break;
			case 9:
				m = -1;
				break;
			case 10:
				m = (int64_t) INT32_MAX + 1;
				break;
		}
		memcpy(row, row0, n * sizeof(int32_t));
		memcpy(col, col0, n * sizeof(int32_t));
		memcpy(val, val0, n * sizeof(float));
		memcpy(indptr, indptr0, (nrows + 1) * sizeof(int64_t));
		status = wals_csr_group_in_place(m, w, n, row, col, val, indptr, s, sb);
		CHECK(status == want[c], "%s: status %d, expected %d", names[c],
			  (int) status, (int) want[c]);
		CHECK(memcmp(row, row0, n * sizeof(int32_t)) == 0 &&
			  memcmp(col, col0, n * sizeof(int32_t)) == 0 &&
			  memcmp(val, val0, n * sizeof(float)) == 0 &&
			  memcmp(indptr, indptr0, (nrows + 1) * sizeof(int64_t)) == 0,
			  "%s: the arrays changed", names[c]);
	}
	row0[n - 1] = last_row;
	col0[n - 1] = last_col;
	val0[n - 1] = last_val;
	CHECK(wals_csr_group_in_place(nrows, ncols, n, row0, col0, val0, indptr,
								  scratch, bytes) == WALS_OK, "the same cells, fixed");
	free(row);
	free(col);
	free(val);
	free(row0);
	free(col0);
	free(val0);
	free(indptr);
	free(indptr0);
	free(scratch);
}

/* Entry point: every sparse-build check. */
void
test_csr(void)
{
	test_scatter();
	test_small_by_hand();
	test_merge_order(WALS_IMPLICIT);
	test_merge_order(WALS_EXPLICIT);
	test_random(WALS_IMPLICIT, 11);
	test_random(WALS_EXPLICIT, 12);
	test_bad_input();
	test_long_run(WALS_IMPLICIT);
	test_long_run(WALS_EXPLICIT);
	test_two_level();
	test_two_level_overflow();
	test_group_by_hand();
	test_group_random();
	test_group_bad_input();
}
