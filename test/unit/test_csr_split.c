/*
 * test_csr_split.c
 *	  The transpose shared among processes (csr.c, wals_csr_split_*),
 *	  taken here by one process playing several: its chunks (64, or a
 *	  few where the counts are given little room) counted last first and
 *	  scattered even ones first (so that each chunk writes both
 *	  before and after its neighbours), its partitions sorted last first,
 *	  through two scratches in turn, must give the transposes of one
 *	  process to the bit, merging and not, with floats and with codes, on
 *	  arrays on a line (where pass A writes whole lines) and off it.  So
 *	  must the rows of a matrix sorted where they lie (wals_csr_sort_rows),
 *	  ranges of them taken last first and moved together after.  And the
 *	  scatter of coordinates whose last pass is left to the processes
 *	  (wals_csr_scatter_codes_split), its partitions sorted last first,
 *	  must give the one-process scatter's matrix.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wals_internal.h"

/*
 * Room for a CSR of nrows rows and n cells, floats or codes, shift bytes
 * past a line: on one, pass A writes whole lines.
 */
static void
room(WalsCsr *c, int64_t nrows, int64_t n, int coded, size_t shift)
{
	memset(c, 0, sizeof(*c));
	c->indptr = test_alloc(nrows + 1, sizeof(int64_t));
	c->indices = test_alloc_on_line(n * sizeof(int32_t), shift);
	if (coded)
		c->codes = test_alloc_on_line(n, shift);
	else
		c->values = test_alloc_on_line(n * sizeof(float), shift);
}

static void
room_free(WalsCsr *c, size_t shift)
{
	free(c->indptr);
	free((char *) c->indices - shift);
	if (c->codes != NULL)
		free(c->codes - shift);
	else
		free((char *) c->values - shift);
}

static int
same(const WalsCsr *a, const WalsCsr *b)
{
	int64_t		nnz = a->indptr[a->nrows];

	return a->nrows == b->nrows && a->ncols == b->ncols &&
		memcmp(a->indptr, b->indptr, (a->nrows + 1) * sizeof(int64_t)) == 0 &&
		memcmp(a->indices, b->indices, nnz * sizeof(int32_t)) == 0 &&
		(a->codes != NULL ? memcmp(a->codes, b->codes, nnz) == 0 :
		 memcmp(a->values, b->values, nnz * sizeof(float)) == 0);
}

/* Whether two codebooks hold the same values under the same codes. */
static int
same_book(const WalsCodebook *a, const WalsCodebook *b)
{
	return a->n == b->n && memcmp(a->value, b->value, sizeof(float) * a->n) == 0;
}

/*
 * in transposed into out by the split, as processes taking chunks and
 * partitions in an order of their own would, or, pipelined, sorting the
 * partitions in order and merging each right after its sort, while those
 * after it are not yet sorted, as the leader merges while workers sort:
 * false where the split would not begin.
 */
static int
split_transpose(const WalsCsr *in, WalsCsr *out, int merge, WalsFeedback fb,
				void *scratch[2], size_t scratch_bytes, int chunks, int pipelined)
{
	size_t		count_bytes = sizeof(uint32_t) * (size_t) chunks * (size_t) (in->ncols + 1);
	WalsCsrSplit *s = test_alloc(wals_csr_split_size(in->ncols, count_bytes), 1);
	int			ok = 1;

	if (!wals_csr_split_begin(s, in, out, count_bytes))
	{
		free(s);
		return 0;
	}
	for (int64_t k = wals_csr_split_chunks(s) - 1; k >= 0; k--)
		wals_csr_split_count(s, in, k);
	if (!wals_csr_split_plan(s, out, scratch[0], scratch_bytes))
	{
		free(s);
		return 0;
	}
	/* even chunks first: each writes before the chunk after it, and after the one before */
	for (int parity = 0; parity < 2; parity++)
		for (int64_t c = parity; c < wals_csr_split_chunks(s); c += 2)
			ok &= wals_csr_split_scatter(s, in, out, c, scratch[c % 2], scratch_bytes) == WALS_OK;
	if (pipelined)
	{
		WalsCsrMerge m;

		wals_csr_split_merge_begin(&m);
		for (int64_t p = 0; p < wals_csr_split_parts(s); p++)
		{
			ok &= wals_csr_split_sort(s, out, p, true, scratch[p % 2], scratch_bytes) == WALS_OK;
			ok &= m.part == p && wals_csr_split_merge_part(s, out, &m, fb) == WALS_OK;
		}
		wals_csr_split_merge_end(s, out, &m);
		free(s);
		return ok;
	}
	for (int64_t p = wals_csr_split_parts(s) - 1; p >= 0; p--)
		ok &= wals_csr_split_sort(s, out, p, merge, scratch[p % 2], scratch_bytes) == WALS_OK;
	ok &= wals_csr_split_end(s, out, merge, fb) == WALS_OK;
	free(s);
	return ok;
}

/*
 * Rows of unsorted cells with repeats, a long row and empty ones, grouped
 * by row as the training's rows are; ratings among a few stars.
 */
static void
grouped(WalsCsr *g, int64_t nrows, int64_t ncols, int64_t n, uint64_t seed, size_t shift)
{
	TestRng		rng;
	int64_t		k = 0;

	rng_seed(&rng, seed);
	room(g, nrows, n, 0, shift);
	g->nrows = nrows;
	g->ncols = ncols;
	for (int64_t r = 0; r < nrows; r++)
	{
		int64_t		end = r == 5 ? k + n / 20 : r % 9 == 0 ? k : k + (n - n / 20) / nrows;

		g->indptr[r] = k;
		if (r == nrows - 1)
			end = n;
		for (; k < end; k++)
		{
			g->indices[k] = rng_below(&rng, 10) == 0 && k > g->indptr[r] ?
				g->indices[k - 1] : (int32_t) rng_below(&rng, (int) ncols);
			g->values[k] = (float) (1 + rng_below(&rng, 5));
		}
	}
	g->indptr[nrows] = n;
}

/* A coded copy of src (same arrays' shift) with the codes of cb. */
static void
coded_copy(const WalsCsr *src, WalsCsr *dst, WalsCodebook *cb, size_t shift)
{
	int64_t		nnz = src->indptr[src->nrows];

	room(dst, src->nrows, nnz, 1, shift);
	dst->nrows = src->nrows;
	dst->ncols = src->ncols;
	dst->codebook = cb;
	memcpy(dst->indptr, src->indptr, (src->nrows + 1) * sizeof(int64_t));
	memcpy(dst->indices, src->indices, nnz * sizeof(int32_t));
	for (int64_t k = 0; k < nnz; k++)
		dst->codes[k] = (uint8_t) wals_codebook_code(cb, src->values[k]);
}

static void
check_split(const char *name, int64_t nrows, int64_t ncols, int64_t n, int coded,
			size_t shift, WalsFeedback fb, int chunks)
{
	size_t		bytes = wals_csr_scratch_bytes((size_t) n);
	void	   *scratch[2] = {test_alloc(bytes, 1), test_alloc(bytes, 1)};
	WalsCodebook cb_one;
	WalsCodebook cb_split;
	WalsCodebook cb_pipe;
	WalsCsr		g;
	WalsCsr		in_one;
	WalsCsr		in_split;
	WalsCsr		in_pipe;
	WalsCsr		one;
	WalsCsr		split;
	WalsCsr		pipe;
	WalsCsr		back_one;
	WalsCsr		back_split;

	grouped(&g, nrows, ncols, n, (uint64_t) n + shift, shift);
	if (coded)
	{
		wals_codebook_init(&cb_one);
		coded_copy(&g, &in_one, &cb_one, shift);
		cb_split = cb_one;
		coded_copy(&g, &in_split, &cb_split, shift);
		cb_pipe = cb_one;
		coded_copy(&g, &in_pipe, &cb_pipe, shift);
	}
	else
		in_one = in_split = in_pipe = g;
	room(&one, ncols, n, coded, shift);
	room(&split, ncols, n, coded, shift);
	room(&pipe, ncols, n, coded, shift);
	CHECK(wals_csr_transpose_merge(fb, &in_one, &one, scratch[0], bytes) == WALS_OK,
		  "%s: the merging transpose in one process", name);
	CHECK(split_transpose(&in_split, &split, 1, fb, scratch, bytes, chunks, 0),
		  "%s: the merging transpose split", name);
	CHECK(same(&one, &split) && (!coded || same_book(&cb_one, &cb_split)),
		  "%s: split, it is the one process's to the bit", name);
	CHECK(split_transpose(&in_pipe, &pipe, 1, fb, scratch, bytes, chunks, 1),
		  "%s: the merging transpose split, each partition merged once sorted", name);
	CHECK(same(&one, &pipe) && (!coded || same_book(&cb_one, &cb_pipe)),
		  "%s: merged as sorted, it is the one process's to the bit", name);

	room(&back_one, nrows, n, coded, shift);
	room(&back_split, nrows, n, coded, shift);
	wals_csr_transpose_with(&one, &back_one, scratch[0], bytes);
	CHECK(split_transpose(&split, &back_split, 0, fb, scratch, bytes, chunks, 0),
		  "%s: the transpose back split", name);
	CHECK(same(&back_one, &back_split), "%s: and back, the one process's to the bit", name);

	if (coded)
	{
		room_free(&in_one, shift);
		room_free(&in_split, shift);
		room_free(&in_pipe, shift);
	}
	room_free(&g, shift);
	room_free(&one, shift);
	room_free(&split, shift);
	room_free(&pipe, shift);
	room_free(&back_one, shift);
	room_free(&back_split, shift);
	free(scratch[0]);
	free(scratch[1]);
}

/*
 * The merging transpose split of a matrix none of whose rows repeats a
 * column, then of the same with every cell in the last quarter of its
 * columns twice: the sorts find repeats in none of the partitions, then
 * only in the last of them, where the merge starts; the one process's
 * transpose, to the bit, either way.
 */
static void
check_split_late_repeats(void)
{
	int64_t		n = 700000;
	size_t		bytes = wals_csr_scratch_bytes((size_t) n);
	void	   *scratch[2] = {test_alloc(bytes, 1), test_alloc(bytes, 1)};
	WalsCsr		g;
	WalsCsr		once;
	WalsCsr		twice;
	int64_t		k = 0;

	grouped(&g, 9000, 7000, n, 77, 0);
	room(&once, g.ncols, n, 0, 0);
	CHECK(wals_csr_transpose_merge(WALS_IMPLICIT, &g, &once, scratch[0], bytes) == WALS_OK,
		  "late repeats: a matrix without repeats");
	room(&twice, once.nrows, 2 * n, 0, 0);
	twice.nrows = once.nrows;
	twice.ncols = once.ncols;
	for (int64_t r = 0; r < once.nrows; r++)
	{
		twice.indptr[r] = k;
		for (int64_t j = once.indptr[r]; j < once.indptr[r + 1]; j++)
			for (int copy = once.indices[j] >= once.ncols * 3 / 4 ? 2 : 1; copy > 0; copy--)
			{
				twice.indices[k] = once.indices[j];
				twice.values[k++] = once.values[j];
			}
	}
	twice.indptr[twice.nrows] = k;
	for (int late = 0; late < 2; late++)
	{
		const WalsCsr *in = late ? &twice : &once;
		int64_t		nnz = in->indptr[in->nrows];
		WalsCsr		one;
		WalsCsr		split;

		room(&one, in->ncols, nnz, 0, 0);
		room(&split, in->ncols, nnz, 0, 0);
		CHECK(wals_csr_transpose_merge(WALS_IMPLICIT, in, &one, scratch[0], bytes) == WALS_OK &&
			  split_transpose(in, &split, 1, WALS_IMPLICIT, scratch, bytes, 8, 0),
			  "late repeats: the merging transposes, %s", late ? "repeats late" : "no repeats");
		CHECK(same(&one, &split) && one.indptr[one.nrows] == once.indptr[once.nrows],
			  "late repeats: split, it is the one process's to the bit, %s",
			  late ? "repeats late" : "no repeats");
		room_free(&one, 0);
		room_free(&split, 0);
	}
	room_free(&g, 0);
	room_free(&once, 0);
	room_free(&twice, 0);
	free(scratch[0]);
	free(scratch[1]);
}

/*
 * A copy of src, floats or coded with cb, on the same shift, for a sort
 * of its rows where they lie.
 */
static void
copy_of(const WalsCsr *src, WalsCsr *dst, int coded, WalsCodebook *cb, size_t shift)
{
	int64_t		nnz = src->indptr[src->nrows];

	if (coded)
	{
		coded_copy(src, dst, cb, shift);
		return;
	}
	room(dst, src->nrows, nnz, 0, shift);
	dst->nrows = src->nrows;
	dst->ncols = src->ncols;
	memcpy(dst->indptr, src->indptr, (src->nrows + 1) * sizeof(int64_t));
	memcpy(dst->indices, src->indices, nnz * sizeof(int32_t));
	memcpy(dst->values, src->values, nnz * sizeof(float));
}

/*
 * Rows sorted where they lie and merged (csr_rows.c), all at once and in
 * ranges taken last first, with the sorts' scratch, with a scratch too
 * small for all but short rows (which leaves long ones to the sort in
 * place), and with none: each time the transpose of the merging
 * transpose, to the bit.  With codes, the rows take the codebook as the
 * merging transpose left it, merged ratings and all, as in a build, and
 * add nothing to it.
 */
static void
check_rows(const char *name, int64_t nrows, int64_t ncols, int64_t n, int coded,
		   size_t shift, WalsFeedback fb)
{
	size_t		bytes = wals_csr_scratch_bytes((size_t) n);
	size_t		sizes[3] = {bytes, 200, 0};
	void	   *scratch = test_alloc(bytes > 200 ? bytes : 200, 1);
	WalsCodebook cb_ref;
	WalsCsr		g;
	WalsCsr		in;
	WalsCsr		by_col;
	WalsCsr		back;

	grouped(&g, nrows, ncols, n, (uint64_t) n + shift + 1, shift);
	wals_codebook_init(&cb_ref);
	copy_of(&g, &in, coded, &cb_ref, shift);
	room(&by_col, ncols, n, coded, shift);
	room(&back, nrows, n, coded, shift);
	CHECK(wals_csr_transpose_merge(fb, &in, &by_col, scratch, bytes) == WALS_OK,
		  "%s: the merging transpose", name);
	wals_csr_transpose_with(&by_col, &back, scratch, bytes);

	for (int s = 0; s < 3; s++)
	{
		for (int ranged = 0; ranged < 2; ranged++)
		{
			WalsCodebook cb = cb_ref;
			WalsCsr		rows;
			WalsStatus	st = WALS_OK;

			copy_of(&g, &rows, coded, &cb, shift);
			if (!ranged)
				st = wals_csr_sort_merge(fb, &rows, sizes[s] > 0 ? scratch : NULL, sizes[s]);
			else
			{
				int64_t		nr = 7;
				int64_t		first[8];
				int64_t		begin[8];
				int64_t		end[8];
				int64_t		w = 0;

				/* ranges of rows cut unevenly, one of them empty */
				for (int64_t i = 0; i < nr; i++)
					first[i] = i == 3 ? first[2] : nrows * i * i / (nr * nr);
				first[nr] = nrows;
				for (int64_t i = 0; i < nr; i++)
				{
					begin[i] = rows.indptr[first[i]];
					end[i] = rows.indptr[first[i + 1]];
				}
				for (int64_t i = nr - 1; i >= 0 && st == WALS_OK; i--)
					st = wals_csr_sort_rows(fb, &rows, first[i], first[i + 1], &end[i],
											sizes[s] > 0 ? scratch : NULL, sizes[s]);
				for (int64_t i = 0; i < nr && st == WALS_OK; i++)
				{
					wals_csr_move_rows(&rows, first[i], first[i + 1], end[i], w);
					w += end[i] - begin[i];
				}
				rows.indptr[nrows] = w;
			}
			CHECK(st == WALS_OK && same(&back, &rows) &&
				  (!coded || (cb.n == cb_ref.n &&
							  memcmp(cb.value, cb_ref.value, sizeof(float) * cb.n) == 0)),
				  "%s: rows sorted where they lie%s, scratch of %zu bytes, are the transposes' to the bit",
				  name, ranged ? " in ranges" : "", sizes[s]);
			room_free(&rows, shift);
		}
	}
	if (coded)
		room_free(&in, shift);
	room_free(&g, shift);
	room_free(&by_col, shift);
	room_free(&back, shift);
	free(scratch);
}

static int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/*
 * Columns up to the largest an int32 holds, which take three passes of
 * the sort through the scratch, or four bytes in place; and a row already
 * in order, which is left as it was.  The merged rows are checked against
 * a sort of their own: strictly increasing columns, each the sum of its
 * run in increasing order of values.
 */
static void
check_rows_wide(void)
{
	int64_t		n = 60000;
	int64_t		nrows = 3;
	size_t		bytes = wals_csr_scratch_bytes((size_t) n);
	void	   *scratch = test_alloc(bytes, 1);
	TestRng		rng;

	rng_seed(&rng, 11);
	for (int pass = 0; pass < 2; pass++)
	{
		WalsCsr		c;
		int64_t    *cells = test_alloc(n, sizeof(int64_t));
		int			ok = 1;
		int64_t		w = 0;

		room(&c, nrows, n, 0, 0);
		c.nrows = nrows;
		c.ncols = INT32_MAX;
		c.indptr[0] = 0;
		c.indptr[1] = n / 2;
		c.indptr[2] = n - 10;
		c.indptr[3] = n;
		for (int64_t k = 0; k < n; k++)
		{
			int32_t		col = k >= n / 2 && k < n - 10 ? (int32_t) (k * 7) :
				(int32_t) (rng_next(&rng) % 3000) * 715827;

			c.indices[k] = col;
			c.values[k] = (float) (1 + rng_below(&rng, 4));
			/* the reference: column above, value below, sorted as one key */
			cells[k] = ((int64_t) col << 8) | (int64_t) c.values[k];
		}
		for (int64_t r = 0; r < nrows; r++)
			qsort(cells + c.indptr[r], c.indptr[r + 1] - c.indptr[r], sizeof(int64_t),
				  cmp_int64);
		CHECK(wals_csr_sort_merge(WALS_IMPLICIT, &c, pass == 0 ? scratch : NULL,
								  pass == 0 ? bytes : 0) == WALS_OK,
			  "wide columns: sorted %s", pass == 0 ? "through the scratch" : "in place");
		for (int64_t k = 0; k < n;)
		{
			int64_t		run = k;
			double		sum = 0.0;

			while (run < n && cells[run] >> 8 == cells[k] >> 8)
				sum += (double) (cells[run++] & 0xff);
			ok &= w < c.indptr[nrows] && c.indices[w] == (int32_t) (cells[k] >> 8) &&
				c.values[w] == (float) sum;
			w++;
			k = run;
		}
		CHECK(ok && w == c.indptr[nrows] && c.indptr[1] < n / 2 && c.indptr[2] - c.indptr[1] == n / 2 - 10,
			  "wide columns, %s: each row in order, its repeats merged",
			  pass == 0 ? "through the scratch" : "in place");
		room_free(&c, 0);
		free(cells);
	}
	free(scratch);
}

/*
 * A transpose too small for two levels does not begin, nor one whose
 * chunks' counts do not fit where the caller allows; both leave the
 * one-process transpose to the caller.
 */
static void
check_refused(void)
{
	WalsCsrSplit *s = test_alloc(wals_csr_split_size(7000, (size_t) 16 << 20), 1);
	WalsCsr		g;
	WalsCsr		out;

	grouped(&g, 100, 200, 5000, 3, 0);
	room(&out, 200, 5000, 0, 0);
	CHECK(!wals_csr_split_begin(s, &g, &out, (size_t) 16 << 20),
		  "a transpose of 5,000 cells is not split");
	room_free(&g, 0);
	room_free(&out, 0);
	grouped(&g, 9000, 7000, 700000, 3, 0);
	room(&out, 7000, 700000, 0, 0);
	CHECK(!wals_csr_split_begin(s, &g, &out, sizeof(uint32_t) * 7001),
		  "nor one with room for the counts of one chunk");
	CHECK(wals_csr_split_begin(s, &g, &out, sizeof(uint32_t) * 7001 * 2) &&
		  wals_csr_split_chunks(s) == 2, "with room for two, it is split in two");
	room_free(&g, 0);
	room_free(&out, 0);
	free(s);
}

/*
 * n rows of seed: a seventh of them in the first 50 rows, codes of the
 * five stars of cb.
 */
static void
random_rows(uint64_t seed, int64_t nrows, int64_t ncols, int64_t n, int32_t *row,
			int32_t *col, uint8_t *code, WalsCodebook *cb)
{
	TestRng		rng;

	rng_seed(&rng, seed);
	wals_codebook_init(cb);
	for (int v = 1; v <= 5; v++)
		(void) wals_codebook_code(cb, (float) v);
	for (int64_t k = 0; k < n; k++)
	{
		row[k] = (int32_t) (k % 7 == 0 ? rng_below(&rng, 50) : rng_below(&rng, (int) nrows));
		col[k] = (int32_t) rng_below(&rng, (int) ncols);
		code[k] = (uint8_t) rng_below(&rng, 5);
	}
}

/*
 * n coordinates of nrows x ncols, rows in the order a scan would give them
 * (repeats among them), with codes of five stars, scattered by one process
 * and with its last pass left to the partitions: the same matrix.
 */
static void
check_scatter_split(const char *name, int64_t nrows, int64_t ncols, int64_t n, size_t shift)
{
	size_t		bytes = wals_csr_scratch_bytes((size_t) n);
	void	   *scratch[2] = {test_alloc(bytes, 1), test_alloc(bytes, 1)};
	int32_t    *row = test_alloc(n, sizeof(int32_t));
	int32_t    *col = test_alloc(n, sizeof(int32_t));
	uint8_t    *code = test_alloc(n, 1);
	WalsCsrSplit *s = test_alloc(wals_csr_split_size(nrows, 0), 1);
	WalsCodebook cb;
	WalsCsr		one;
	WalsCsr		split;
	int			ok = 1;

	random_rows((uint64_t) n + shift, nrows, ncols, n, row, col, code, &cb);
	room(&one, nrows, n, 1, shift);
	room(&split, nrows, n, 1, shift);
	one.codebook = split.codebook = &cb;
	CHECK(wals_csr_scatter_codes(nrows, ncols, n, row, col, code, &one, scratch[0], bytes) ==
		  WALS_OK, "%s: the scatter of one process", name);
	ok &= wals_csr_scatter_codes_split(s, nrows, ncols, n, row, col, code, &split, scratch[0],
									   bytes) == WALS_OK;
	for (int64_t p = wals_csr_split_parts(s) - 1; p >= 0; p--)
		ok &= wals_csr_split_sort(s, &split, p, false, scratch[p % 2], bytes) == WALS_OK;
	if (wals_csr_split_parts(s) > 0)
		ok &= wals_csr_split_end(s, &split, false, WALS_IMPLICIT) == WALS_OK;
	CHECK(ok && same(&one, &split),
		  "%s: the scatter's %lld partitions sorted last first give the one-process scatter, to the bit",
		  name, (long long) wals_csr_split_parts(s));
	CHECK((nrows > 4096) == (wals_csr_split_parts(s) > 1),
		  "%s: partitions left to sort where the rows are many, none where they are few", name);
	room_free(&one, shift);
	room_free(&split, shift);
	free(s);
	free(code);
	free(col);
	free(row);
	free(scratch[0]);
	free(scratch[1]);
}

/*
 * The scatter of rows split into chunks, counted and scattered last chunk
 * first, against the scatter of one process; and a row out of range is
 * refused by the count of its chunk alone.
 */
static void
check_rows_split(const char *name, int64_t nrows, int64_t ncols, int64_t n, size_t shift,
				 size_t count_bytes)
{
	size_t		bytes = wals_csr_scratch_bytes((size_t) n);
	void	   *scratch[2] = {test_alloc(bytes, 1), test_alloc(bytes, 1)};
	int32_t    *row = test_alloc(n, sizeof(int32_t));
	int32_t    *col = test_alloc(n, sizeof(int32_t));
	uint8_t    *code = test_alloc(n, 1);
	WalsCsrSplit *s = test_alloc(wals_csr_split_size(nrows, count_bytes), 1);
	WalsCodebook cb;
	WalsCsr		one;
	WalsCsr		split;
	int64_t		chunks;
	int			ok = 1;
	int			refused = 0;

	random_rows((uint64_t) n + shift + 7, nrows, ncols, n, row, col, code, &cb);
	room(&one, nrows, n, 1, shift);
	room(&split, nrows, n, 1, shift);
	one.codebook = split.codebook = &cb;
	CHECK(wals_csr_scatter_codes(nrows, ncols, n, row, col, code, &one, scratch[0], bytes) ==
		  WALS_OK, "%s: the scatter of one process", name);
	CHECK(wals_csr_split_rows_begin(s, nrows, ncols, n, &split, count_bytes),
		  "%s: the rows are split", name);
	chunks = wals_csr_split_chunks(s);
	for (int64_t c = chunks - 1; c >= 0; c--)
		ok &= wals_csr_split_rows_count(s, &split, row, col, code, c) == WALS_OK;
	ok &= wals_csr_split_plan(s, &split, scratch[0], bytes);
	for (int64_t c = chunks - 1; c >= 0; c--)
		ok &= wals_csr_split_rows_scatter(s, row, col, code, &split, c, scratch[c % 2],
										  bytes) == WALS_OK;
	for (int64_t p = wals_csr_split_parts(s) - 1; p >= 0; p--)
		ok &= wals_csr_split_sort(s, &split, p, false, scratch[p % 2], bytes) == WALS_OK;
	ok &= wals_csr_split_end(s, &split, false, WALS_IMPLICIT) == WALS_OK;
	CHECK(ok && same(&one, &split),
		  "%s: %lld chunks and %lld partitions taken last first give the one-process scatter, to the bit",
		  name, (long long) chunks, (long long) wals_csr_split_parts(s));

	/* a bad row in the last chunk, a bad code in the first */
	row[n - 1] = (int32_t) nrows;
	code[0] = 5;
	for (int64_t c = 0; c < chunks; c++)
		refused += wals_csr_split_rows_count(s, &split, row, col, code, c) == WALS_EINVAL;
	CHECK(refused == 2, "%s: the counts of the two chunks with a bad row refuse them (%d)",
		  name, refused);
	room_free(&one, shift);
	room_free(&split, shift);
	free(s);
	free(code);
	free(col);
	free(row);
	free(scratch[0]);
	free(scratch[1]);
}

/* Too few rows, or counts too small for two chunks: no split. */
static void
check_rows_refused(void)
{
	WalsCsrSplit *s = test_alloc(wals_csr_split_size(20000, 64 << 20), 1);
	WalsCsr		out = {0};

	CHECK(!wals_csr_split_rows_begin(s, 20000, 5000, 1000, &out, 64 << 20),
		  "rows split refused: a thousand rows take one process");
	CHECK(!wals_csr_split_rows_begin(s, 20000, 5000, 5000000, &out, 20000 * 4),
		  "rows split refused: the counts of one chunk only fit");
	out.values = (float *) s;
	CHECK(!wals_csr_split_rows_begin(s, 20000, 5000, 5000000, &out, 64 << 20),
		  "rows split refused: the matrix takes floats");
	free(s);
}

void
test_csr_split(void)
{
	check_split("floats, implicit", 9000, 7000, 700000, 0, 0, WALS_IMPLICIT, 64);
	check_split("floats, explicit, off a line", 9000, 7000, 700000, 0, 4, WALS_EXPLICIT, 64);
	check_split("floats, three chunks", 9000, 7000, 700000, 0, 0, WALS_IMPLICIT, 3);
	check_split("codes, implicit", 12000, 6000, 900000, 1, 0, WALS_IMPLICIT, 64);
	check_split("codes, off a line", 6000, 12000, 800000, 1, 12, WALS_IMPLICIT, 5);
	check_split("codes, blocks of several rows", 9000, 300000, 900000, 1, 0, WALS_IMPLICIT, 8);
	check_split_late_repeats();
	check_refused();
	check_rows("rows, floats, implicit", 9000, 7000, 700000, 0, 0, WALS_IMPLICIT);
	check_rows("rows, floats, explicit, off a line", 3000, 70000, 400000, 0, 4, WALS_EXPLICIT);
	check_rows("rows, codes", 12000, 6000, 900000, 1, 0, WALS_IMPLICIT);
	check_rows("rows, codes, off a line", 600, 1200, 80000, 1, 12, WALS_IMPLICIT);
	check_rows_wide();
	check_scatter_split("scatter, codes", 12000, 6000, 900000, 0);
	check_scatter_split("scatter, codes, off a line", 9000, 70000, 700000, 12);
	check_scatter_split("scatter, few rows", 3000, 6000, 300000, 0);
	check_scatter_split("scatter, blocks of several rows", 300000, 9000, 900000, 0);
	check_rows_split("rows split, codes", 12000, 6000, 900000, 0, 64 << 20);
	check_rows_split("rows split, off a line, three chunks", 9000, 70000, 700000, 12,
					 3 * 9001 * 4);
	check_rows_split("rows split, blocks of several rows", 300000, 9000, 900000, 0, 64 << 20);
	check_rows_refused();
}
