/*
 * test_csr_split.c
 *	  The transpose shared among processes (csr.c, wals_csr_split_*),
 *	  taken here by one process playing several: its chunks (64, or a
 *	  few where the counts are given little room) counted last first and
 *	  scattered even ones first (so that each chunk writes both
 *	  before and after its neighbours), its partitions sorted last first,
 *	  through two scratches in turn, must give the transposes of one
 *	  process to the bit, merging and not, with floats and with codes, on
 *	  arrays on a line (where pass A writes whole lines) and off it.
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

/*
 * in transposed into out by the split, as processes taking chunks and
 * partitions in an order of their own would: false where the split would
 * not begin.
 */
static int
split_transpose(const WalsCsr *in, WalsCsr *out, int merge, WalsFeedback fb,
				void *scratch[2], size_t scratch_bytes, int chunks)
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
	for (int64_t p = wals_csr_split_parts(s) - 1; p >= 0; p--)
		ok &= wals_csr_split_sort(s, out, p, scratch[p % 2], scratch_bytes) == WALS_OK;
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
	WalsCsr		g;
	WalsCsr		in_one;
	WalsCsr		in_split;
	WalsCsr		one;
	WalsCsr		split;
	WalsCsr		back_one;
	WalsCsr		back_split;

	grouped(&g, nrows, ncols, n, (uint64_t) n + shift, shift);
	if (coded)
	{
		wals_codebook_init(&cb_one);
		coded_copy(&g, &in_one, &cb_one, shift);
		cb_split = cb_one;
		coded_copy(&g, &in_split, &cb_split, shift);
	}
	else
		in_one = in_split = g;
	room(&one, ncols, n, coded, shift);
	room(&split, ncols, n, coded, shift);
	CHECK(wals_csr_transpose_merge(fb, &in_one, &one, scratch[0], bytes) == WALS_OK,
		  "%s: the merging transpose in one process", name);
	CHECK(split_transpose(&in_split, &split, 1, fb, scratch, bytes, chunks),
		  "%s: the merging transpose split", name);
	CHECK(same(&one, &split) && (!coded || (cb_one.n == cb_split.n &&
											memcmp(cb_one.value, cb_split.value,
												   sizeof(float) * cb_one.n) == 0)),
		  "%s: split, it is the one process's to the bit", name);

	room(&back_one, nrows, n, coded, shift);
	room(&back_split, nrows, n, coded, shift);
	wals_csr_transpose_with(&one, &back_one, scratch[0], bytes);
	CHECK(split_transpose(&split, &back_split, 0, fb, scratch, bytes, chunks),
		  "%s: the transpose back split", name);
	CHECK(same(&back_one, &back_split), "%s: and back, the one process's to the bit", name);

	if (coded)
	{
		room_free(&in_one, shift);
		room_free(&in_split, shift);
	}
	room_free(&g, shift);
	room_free(&one, shift);
	room_free(&split, shift);
	room_free(&back_one, shift);
	room_free(&back_split, shift);
	free(scratch[0]);
	free(scratch[1]);
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

void
test_csr_split(void)
{
	check_split("floats, implicit", 9000, 7000, 700000, 0, 0, WALS_IMPLICIT, 64);
	check_split("floats, explicit, off a line", 9000, 7000, 700000, 0, 4, WALS_EXPLICIT, 64);
	check_split("floats, three chunks", 9000, 7000, 700000, 0, 0, WALS_IMPLICIT, 3);
	check_split("codes, implicit", 12000, 6000, 900000, 1, 0, WALS_IMPLICIT, 64);
	check_split("codes, off a line", 6000, 12000, 800000, 1, 12, WALS_IMPLICIT, 5);
	check_refused();
}
