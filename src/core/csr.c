/*
 * csr.c
 *	  Building both sparse matrices from coordinates, in little memory.
 *
 * Ratings arrive in scan order, as coordinates.  A counting sort by item
 * (wals_csr_scatter) turns them into a CSR by item whose rows are not yet
 * sorted; transposing that (wals_csr_transpose_merge) walks the items in
 * order, so every user row comes out sorted by item with duplicate cells
 * side by side, and they merge as each row is placed.  A plain transpose
 * back gives the final CSR by item.  Each step reads one buffer and writes
 * another of the same size, so no more than two copies of the ratings ever
 * exist, and nothing costs more than O(nnz + rows + columns): no comparison
 * sort of cells, no hash of cells, no count per cell.
 *
 * A counting sort writes each cell at the cursor of its row, and with 27k
 * items or 138k users, the cursors and the lines they write to outgrow the
 * caches and the TLB: nearly every cell misses, and the three sorts of 15
 * million ratings took 0.65 to 0.7 s of CPU on a 2-core Xeon VM without
 * huge pages (a training's shared segment has none), 0.5 s with them.  So
 * large sorts take two stable passes (plan_parts).  Pass A cuts the rows
 * into a few hundred runs of consecutive rows and writes each cell to its
 * run's partition, packing the row's offset in the run with the column in
 * one int32; the cells of a partition gather in a line buffer and go out a
 * whole 64-byte line at a time with non-temporal stores, which neither
 * read the line first nor evict what the pass still uses.  Pass B sorts
 * each partition (a few hundred kilobytes) through a scratch of its size,
 * all in cache, and merges its rows' duplicates while they are there.
 * Both passes keep the input order within a row, so the result is the
 * one-level sort's to the bit, in 0.3 s on the same VM, huge pages or not
 * (test/bench/csr_bench).  The caller provides the scratch; without it,
 * and for small sorts, the one-level sort remains.
 *
 * Pass A finds a cell's partition from its row.  Tagging each row's start
 * with it cost a load from the row starts, 8 bytes a row, for every cell:
 * 5 MB for 666k users, which miss the TLB without huge pages, as a
 * training's shared segments have none.  On a 2-core AMD EPYC VM that
 * load was 86% of the transpose to the matrix by user at 100 million
 * ratings (perf).  So each block of consecutive rows names the partition
 * of its first row in a table of at most CSR_BLOCKS entries, which stays
 * in the L2 cache; the partitions that start inside the block are few,
 * and found from there.
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "wals_internal.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/*
 * Pass A writes to at most this many partitions; rows so many, or columns
 * so wide, that they cannot be cut this coarsely take the one-level sort.
 */
#define CSR_MAX_PARTS		WALS_CSR_MAX_PARTS

/*
 * A partition of several rows holds at most 1 / CSR_PART_SHARE of the
 * cells (CSR_MIN_PART_CELLS at least), which makes a few hundred
 * partitions: with fewer, pass B's would outgrow the cache; with more,
 * pass A's line buffers would.
 */
#define CSR_PART_SHARE		512
#define CSR_MIN_PART_CELLS	4096

/*
 * Sorts of fewer cells, whose output of a few megabytes stays in cache, or
 * into fewer rows, whose cursors and lines do, are faster in one level
 * (below 300k cells the two levels cost a third more; past a million they
 * save a fifth, and over half past ten million).
 */
#define CSR_MIN_CELLS		(1 << 19)
#define CSR_ONE_LEVEL_ROWS	4096

/* Runs of duplicates longer than this are heapsorted, not insertion-sorted. */
#define CSR_SHORT_RUN		32

/* Cells to a 64-byte line of indices, or of values. */
#define CSR_LINE			16

/*
 * Entries of the table of the partitions of blocks of rows, at most: 128
 * kB, blocks of one or two rows up to 131,072 rows, of 16 for 666k.
 */
#define CSR_BLOCKS			65536

/* The caller's scratch is used from its first 64-byte boundary. */
#define CSR_ALIGN			64

/* One partition's pending cells in pass A, a line of each array. */
typedef struct CsrLine
{
	int32_t		idx[CSR_LINE];
	union
	{
		float		val[CSR_LINE];
		uint8_t		code[CSR_LINE];
	};
} CsrLine;

/*
 * The partitions of a two-level sort into out, in the caller's scratch.
 * Rows are grouped greedily into runs of consecutive rows that hold at
 * most max_cells cells, save a single row that alone holds more, and at
 * most 2^(31 - colbits) rows, so that a row's offset in its run and a
 * column index pack into one non-negative int32.
 */
typedef struct CsrParts
{
	int64_t		nparts;
	int			colbits;		/* bits of the largest column index */
	int64_t		max_cells;		/* of a partition of several rows */
	bool		buffered;		/* pass A writes through lines */
	bool		coded;			/* the cells carry codes, not values */
	int64_t    *first;			/* first row of each partition, then nrows */
	int64_t    *begin;			/* first cell of each partition */
	int64_t    *cursor;			/* next cell of each; after pass A, its end */
	int			block_shift;	/* rows >> block_shift: a row's block */
	uint16_t   *block_part;		/* partition of each block's first row */
	CsrLine    *lines;			/* one per partition, in pass A */
	int32_t    *cell_idx;		/* max_cells, in pass B, over the lines */
	float	   *cell_val;		/* or, for codes, */
	uint8_t    *cell_code;
} CsrParts;

/*
 * Turn counts at ptr[1..n] into start offsets at ptr[0..n), so that a
 * scatter can use ptr[j]++ as its cursor.
 */
static void
counts_to_starts(int64_t *ptr, int64_t n)
{
	int64_t		j;

	ptr[0] = 0;
	for (j = 0; j < n; j++)
		ptr[j + 1] += ptr[j];
}

/*
 * After a scatter each cursor ptr[j] has advanced to the start of j + 1;
 * shifting by one restores the starts without a second array, the first
 * being start.
 */
static void
cursors_to_starts(int64_t *ptr, int64_t n, int64_t start)
{
	int64_t		j;

	for (j = n; j > 0; j--)
		ptr[j] = ptr[j - 1];
	ptr[0] = start;
}

/* Cells a partition of several rows may hold, in a sort of n cells. */
static size_t
part_cells(size_t n)
{
	size_t		cells = n / CSR_PART_SHARE;

	return cells > CSR_MIN_PART_CELLS ? cells : CSR_MIN_PART_CELLS;
}

/* The scratch holds the lines of pass A, then the cells of pass B. */
static size_t
shared_bytes(size_t n)
{
	size_t		lines = CSR_MAX_PARTS * sizeof(CsrLine);
	size_t		cells = part_cells(n) * (sizeof(int32_t) + sizeof(float));

	return lines > cells ? lines : cells;
}

/* See wals_core.h. */
size_t
wals_csr_scratch_bytes(size_t n)
{
	if (n < CSR_MIN_CELLS)
		return 0;
	return CSR_ALIGN + shared_bytes(n) + (3 * CSR_MAX_PARTS + 1) * sizeof(int64_t) +
		CSR_BLOCKS * sizeof(uint16_t);
}

/* Entries of the table of the partitions of blocks of nrows rows. */
static int64_t
block_count(int64_t nrows, int block_shift)
{
	return ((nrows - 1) >> block_shift) + 1;
}

/* Point pp's arrays into the scratch; false when it is too small for n cells. */
static bool
carve_scratch(CsrParts *pp, size_t n, void *scratch, size_t scratch_bytes)
{
	char	   *at = (char *) (((uintptr_t) scratch + CSR_ALIGN - 1) &
							   ~(uintptr_t) (CSR_ALIGN - 1));

	if (scratch == NULL || n < CSR_MIN_CELLS ||
		scratch_bytes < wals_csr_scratch_bytes(n))
		return false;
	pp->max_cells = (int64_t) part_cells(n);
	pp->lines = (CsrLine *) at;
	pp->cell_idx = (int32_t *) at;
	pp->cell_val = (float *) (pp->cell_idx + pp->max_cells);
	pp->cell_code = (uint8_t *) pp->cell_val;
	pp->first = (int64_t *) (at + shared_bytes(n));
	pp->begin = pp->first + CSR_MAX_PARTS + 1;
	pp->cursor = pp->begin + CSR_MAX_PARTS;
	pp->block_part = (uint16_t *) (pp->cursor + CSR_MAX_PARTS);
	return true;
}

/* See wals_internal.h. */
int
wals_index_bits(int64_t ncols)
{
	int			bits = 0;

	while (bits < 31 && ((int64_t) 1 << bits) < ncols)
		bits++;
	return bits;
}

/*
 * With the counts of out's rows at indptr[1..nrows], plan the partitions,
 * turn the counts into row starts and fill the table of the partitions of
 * blocks of rows.  False, leaving the counts as
 * they were, when the sort is better taken in one level: out is small, the
 * scratch is missing or too small, or the rows do not fit in CSR_MAX_PARTS
 * partitions.
 */
static bool
plan_parts(CsrParts *pp, WalsCsr *out, size_t n, void *scratch,
		   size_t scratch_bytes)
{
	int64_t    *indptr = out->indptr;
	int64_t		max_rows;
	int64_t		cells = 0;
	int64_t		np = 0;
	int64_t		r;
	int64_t		p;

	if (out->nrows <= CSR_ONE_LEVEL_ROWS || !carve_scratch(pp, n, scratch, scratch_bytes))
		return false;
	pp->colbits = wals_index_bits(out->ncols);
	max_rows = (int64_t) 1 << (31 - pp->colbits);

	pp->first[0] = 0;
	pp->begin[0] = 0;
	for (r = 0; r < out->nrows; r++)
	{
		int64_t		c = indptr[r + 1];

		if (r > pp->first[np] &&
			(cells + c > pp->max_cells || r - pp->first[np] == max_rows))
		{
			if (++np == CSR_MAX_PARTS)
				return false;
			pp->first[np] = r;
			pp->begin[np] = pp->begin[np - 1] + cells;
			cells = 0;
		}
		cells += c;
	}
	pp->nparts = np + 1;
	pp->first[pp->nparts] = out->nrows;

	counts_to_starts(indptr, out->nrows);
	for (p = 0; p < pp->nparts; p++)
		pp->cursor[p] = pp->begin[p];
	pp->block_shift = 0;
	while (block_count(out->nrows, pp->block_shift) > CSR_BLOCKS)
		pp->block_shift++;
	p = 0;
	for (r = 0; r < out->nrows; r += (int64_t) 1 << pp->block_shift)
	{
		while (r >= pp->first[p + 1])
			p++;
		pp->block_part[r >> pp->block_shift] = (uint16_t) p;
	}
	pp->coded = out->values == NULL;
#ifdef __SSE2__
	/* whole lines go out only where both arrays start on a line */
	pp->buffered = ((uintptr_t) out->indices % CSR_ALIGN) == 0 &&
		(pp->coded ? ((uintptr_t) out->codes % CSR_LINE) == 0 :
		 ((uintptr_t) out->values % CSR_ALIGN) == 0);
#else
	/* without non-temporal stores, lines would only add a copy */
	pp->buffered = false;
#endif
	return true;
}

#ifdef __SSE2__
/* Copy the cells [from, to) of a partition's line to out. */
static void
spill_cells(const CsrLine *line, WalsCsr *out, int64_t from, int64_t to)
{
	int64_t		k;

	for (k = from; k < to; k++)
	{
		out->indices[k] = line->idx[k % CSR_LINE];
		if (out->values != NULL)
			out->values[k] = line->val[k % CSR_LINE];
		else
			out->codes[k] = line->code[k % CSR_LINE];
	}
}

/*
 * Write partition p's full line of cells ending at last with non-temporal
 * stores, which need not read the lines they fill, unless part of the line
 * belongs to the partition before.
 */
static void
spill_line(const CsrParts *pp, const CsrLine *line, WalsCsr *out, int64_t p,
		   int64_t last)
{
	int64_t		from = last + 1 - CSR_LINE;
	__m128i    *idx = (__m128i *) (out->indices + from);
	int			q;

	if (from < pp->begin[p])
	{
		spill_cells(line, out, pp->begin[p], last + 1);
		return;
	}
	for (q = 0; q < 4; q++)
		_mm_stream_si128(idx + q, _mm_load_si128((const __m128i *) line->idx + q));
	if (pp->coded)
	{
		_mm_stream_si128((__m128i *) (out->codes + from),
						 _mm_load_si128((const __m128i *) line->code));
		return;
	}
	for (q = 0; q < 4; q++)
		_mm_stream_si128((__m128i *) (out->values + from) + q,
						 _mm_load_si128((const __m128i *) line->val + q));
}

/*
 * The end of pass A: the cells still in the lines, then a fence, since
 * non-temporal stores are not ordered with the loads of pass B.
 */
static void
flush_lines(const CsrParts *pp, WalsCsr *out)
{
	int64_t		p;

	if (!pp->buffered)
		return;
	for (p = 0; p < pp->nparts; p++)
	{
		int64_t		end = pp->cursor[p];
		int64_t		from = end - end % CSR_LINE;

		if (from < pp->begin[p])
			from = pp->begin[p];
		spill_cells(&pp->lines[p], out, from, end);
	}
	_mm_sfence();
}
#else
/* Without non-temporal stores, pass A writes in place: nothing to flush. */
static void
flush_lines(const CsrParts *pp, WalsCsr *out)
{
	(void) pp;
	(void) out;
}
#endif

/*
 * What pass A reads of pp and out for every cell, copied into the locals
 * of the loop that scatters: the build does not assume strict aliasing,
 * so each store of a cell made the loop load every field of pp again.
 */
typedef struct CsrPass
{
	const uint16_t *block_part;
	const int64_t *first;
	int64_t    *cursor;
	CsrLine    *lines;
	int32_t    *indices;
	float	   *values;
	uint8_t    *codes;
	int			block_shift;
	int			colbits;
	bool		coded;
	bool		buffered;
} CsrPass;

static inline CsrPass
pass_of(const CsrParts *pp, const WalsCsr *out)
{
	CsrPass		a;

	a.block_part = pp->block_part;
	a.first = pp->first;
	a.cursor = pp->cursor;
	a.lines = pp->lines;
	a.indices = out->indices;
	a.values = out->values;
	a.codes = out->codes;
	a.block_shift = pp->block_shift;
	a.colbits = pp->colbits;
	a.coded = pp->coded;
	a.buffered = pp->buffered;
	return a;
}

/*
 * Pass A: one cell to the next free place of its partition, its column
 * packed with its row's offset in the partition.  The input is read in
 * order, so each partition keeps it.  The cell carries v, or code where
 * out has codes.
 */
static inline void
put_cell(const CsrParts *pp, const CsrPass *a, WalsCsr *out, int32_t r, int32_t c, float v,
		 uint8_t code)
{
	int64_t		p = a->block_part[r >> a->block_shift];
	uint64_t	dst;
	int32_t		packed;

	while (r >= a->first[p + 1])
		p++;
	dst = (uint64_t) a->cursor[p]++;
	packed = (int32_t) (((uint32_t) (r - a->first[p]) << a->colbits) | (uint32_t) c);

#ifdef __SSE2__
	if (a->buffered)
	{
		CsrLine    *line = &a->lines[p];

		line->idx[dst % CSR_LINE] = packed;
		if (a->coded)
			line->code[dst % CSR_LINE] = code;
		else
			line->val[dst % CSR_LINE] = v;
		if (dst % CSR_LINE == CSR_LINE - 1)
			spill_line(pp, line, out, p, (int64_t) dst);
		return;
	}
#endif
	a->indices[dst] = packed;
	if (a->coded)
		a->codes[dst] = code;
	else
		a->values[dst] = v;
}

/*
 * Pass B within one partition of several rows, cells [start, end): a stable
 * counting sort by row through the scratch, where the cells, the rows'
 * cursors and the part of out they go to all fit in cache.  The row starts
 * serve as cursors, and become the row starts of the next rows.  The
 * pointers and the kind of value are locals, as in pass A (CsrPass).
 */
static void
sort_part(const CsrParts *pp, WalsCsr *out, int64_t first, int64_t last,
		  int64_t start, int64_t end)
{
	int64_t    *cursor = out->indptr + first;
	int32_t		mask = (int32_t) (((uint32_t) 1 << pp->colbits) - 1);
	int			shift = pp->colbits;
	int64_t		m = end - start;
	const int32_t *cell_idx = pp->cell_idx;
	int32_t    *indices = out->indices;
	const uint8_t *cell_code = pp->cell_code;
	uint8_t    *codes = out->codes;
	const float *cell_val = pp->cell_val;
	float	   *values = out->values;
	bool		coded = pp->coded;

	memcpy(pp->cell_idx, out->indices + start, m * sizeof(int32_t));
	if (coded)
		memcpy(pp->cell_code, out->codes + start, m);
	else
		memcpy(pp->cell_val, out->values + start, m * sizeof(float));
	for (int64_t k = 0; k < m; k++)
	{
		int64_t		dst = cursor[cell_idx[k] >> shift]++;

		indices[dst] = cell_idx[k] & mask;
		if (coded)
			codes[dst] = cell_code[k];
		else
			values[dst] = cell_val[k];
	}
	/* the last row's end is the next partition's, and not this one's to write */
	cursors_to_starts(cursor, last - first - 1, start);
}

/* Sift v[root] down the max-heap v[0..n). */
static void
sift_down(float *v, int64_t root, int64_t n)
{
	float		x = v[root];

	for (;;)
	{
		int64_t		child = 2 * root + 1;

		if (child >= n)
			break;
		if (child + 1 < n && v[child + 1] > v[child])
			child++;
		if (!(v[child] > x))
			break;
		v[root] = v[child];
		root = child;
	}
	v[root] = x;
}

/*
 * Sort the finite v[0..n) in place, ascending.  Runs of duplicates are short
 * and rare, and an insertion sort suits them; but a pair repeated a hundred
 * thousand times, as a bot's clicks may be, would make it quadratic, so long
 * runs take a heapsort.
 */
static void
sort_values(float *v, int64_t n)
{
	int64_t		a;

	if (n > CSR_SHORT_RUN)
	{
		for (a = n / 2 - 1; a >= 0; a--)
			sift_down(v, a, n);
		for (a = n - 1; a > 0; a--)
		{
			float		top = v[0];

			v[0] = v[a];
			v[a] = top;
			sift_down(v, 0, a);
		}
		return;
	}
	for (a = 1; a < n; a++)
	{
		float		x = v[a];
		int64_t		b = a;

		for (; b > 0 && v[b - 1] > x; b--)
			v[b] = v[b - 1];
		v[b] = x;
	}
}

/*
 * One cell from the run of duplicates values[0..len).  The values are
 * sorted first and summed in double, so the result does not depend on the
 * order the rows were read in, which float addition alone would not give
 * for three or more.  Explicit ratings are averaged: a repeated rating is a
 * re-rating, not more evidence.
 */
static float
merge_run(WalsFeedback feedback, float *values, int64_t len)
{
	double		sum = 0.0;
	int64_t		a;

	sort_values(values, len);
	for (a = 0; a < len; a++)
		sum += values[a];
	if (feedback == WALS_EXPLICIT)
		sum /= (double) len;
	return (float) sum;
}

/*
 * merge_run over the run of duplicates codes[0..len) of cb, giving the
 * merged value's code: a short run decoded, a long one (a bot's clicks)
 * counted by code and summed in the same order of values.
 */
static WalsStatus
merge_code_run(WalsFeedback feedback, WalsCodebook *cb, const uint8_t *codes,
			   int64_t len, uint8_t *out)
{
	float		v[CSR_SHORT_RUN];
	float		merged;
	int			code;
	int64_t		a;

	if (len <= CSR_SHORT_RUN)
	{
		for (a = 0; a < len; a++)
			v[a] = cb->value[codes[a]];
		merged = merge_run(feedback, v, len);
	}
	else
	{
		int64_t		count[WALS_CODES] = {0};
		uint8_t		order[WALS_CODES];
		int			m = 0;
		double		sum = 0.0;

		for (a = 0; a < len; a++)
			count[codes[a]]++;
		for (code = 0; code < cb->n; code++)
		{
			int			b;

			if (count[code] == 0)
				continue;
			for (b = m++; b > 0 && cb->value[order[b - 1]] > cb->value[code]; b--)
				order[b] = order[b - 1];
			order[b] = (uint8_t) code;
		}
		for (code = 0; code < m; code++)
			for (a = 0; a < count[order[code]]; a++)
				sum += cb->value[order[code]];
		if (feedback == WALS_EXPLICIT)
			sum /= (double) len;
		merged = (float) sum;
	}
	if (!isfinite(merged))
		return WALS_ENONFINITE;
	code = wals_codebook_code(cb, merged);
	if (code < 0)
		return WALS_ECODES;
	*out = (uint8_t) code;
	return WALS_OK;
}

/*
 * Fold the run of duplicates at cells [k, k + len), len > 1, of csr into
 * cell k, as floats or as codes.
 */
static WalsStatus
merge_cells(WalsFeedback feedback, WalsCsr *csr, int64_t k, int64_t len)
{
	if (csr->values == NULL)
		return merge_code_run(feedback, csr->codebook, csr->codes + k, len, csr->codes + k);
	csr->values[k] = merge_run(feedback, csr->values + k, len);
	return isfinite(csr->values[k]) ? WALS_OK : WALS_ENONFINITE;
}

/*
 * Move cells [k, k + len) of csr down to w, which is not past k, each with
 * a count of 1 where counts is not NULL.
 */
static void
move_cells(WalsCsr *csr, int64_t w, int64_t k, int64_t len, int32_t *counts)
{
	int64_t		a;

	if (w != k && len > 0)
	{
		memmove(csr->indices + w, csr->indices + k, len * sizeof(int32_t));
		if (csr->values != NULL)
			memmove(csr->values + w, csr->values + k, len * sizeof(float));
		else
			memmove(csr->codes + w, csr->codes + k, len);
	}
	if (counts != NULL)
		for (a = 0; a < len; a++)
			counts[w + a] = 1;
}

/*
 * Compact rows [first, last) of csr in place, folding runs of equal columns
 * into one cell, and write the new row starts, from *w on, to
 * indptr[first..last).  The rows start at indptr[first..last) and the last
 * ends at end.  The write position never passes the read position, so no
 * second buffer is needed, and a run's length is known when it ends, so no
 * count per cell unless the caller asks for them (counts not NULL).  The
 * cells between runs move as whole stretches, untouched one by one: most
 * cells are alone.  A sum of finite duplicates can still overflow a
 * float, hence the check.
 */
WalsStatus
wals_csr_merge_rows(WalsFeedback feedback, WalsCsr *csr, int64_t first, int64_t last,
					int64_t end, int64_t *w, int32_t *counts)
{
	int64_t		r;
	int64_t		local = 0;

	for (r = first; r < last; r++)
	{
		int64_t		k = csr->indptr[r];
		int64_t		stop = r + 1 < last ? csr->indptr[r + 1] : end;

		wals_poll_local(&local, (stop - k + 1) * WALS_CELL_WORK);
		csr->indptr[r] = *w;
		while (k < stop)
		{
			int64_t		d = k;
			int64_t		run;
			WalsStatus	status;

			/* cells alone up to the next run, d, or the row's end */
			while (d + 1 < stop && csr->indices[d + 1] != csr->indices[d])
				d++;
			if (d + 1 >= stop)
				d = stop;
			move_cells(csr, *w, k, d - k, counts);
			*w += d - k;
			if (d == stop)
				break;
			for (run = d + 1; run < stop && csr->indices[run] == csr->indices[d]; run++)
				;
			status = merge_cells(feedback, csr, d, run - d);
			if (status != WALS_OK)
				return status;
			csr->indices[*w] = csr->indices[d];
			wals_csr_copy_rating(csr, *w, csr, d);
			if (counts != NULL)
				counts[*w] = (int32_t) (run - d);
			(*w)++;
			k = run;
		}
	}
	wals_poll(local);
	return WALS_OK;
}

/* wals_csr_merge_rows over every row of csr, sorted in place. */
static WalsStatus
merge_duplicates(WalsFeedback feedback, WalsCsr *csr, int32_t *counts)
{
	int64_t		w = 0;
	WalsStatus	status = wals_csr_merge_rows(feedback, csr, 0, csr->nrows,
											   csr->indptr[csr->nrows], &w, counts);

	csr->indptr[csr->nrows] = w;
	return status;
}

/*
 * Pass B for every partition, merging each partition's rows right after
 * sorting them, while they are in cache, when merge is set.  A partition of
 * one row is in place already: its offset is 0, so its packed cells are
 * plain column indices.
 */
static WalsStatus
sort_parts(const CsrParts *pp, WalsCsr *out, bool merge, WalsFeedback feedback)
{
	int64_t		start = 0;
	int64_t		w = 0;
	int64_t		p;

	for (p = 0; p < pp->nparts; p++)
	{
		int64_t		first = pp->first[p];
		int64_t		last = pp->first[p + 1];
		int64_t		end = pp->cursor[p];

		wals_poll((end - start + last - first) * WALS_CELL_WORK);
		if (last - first == 1)
			out->indptr[first] = start;
		else
			sort_part(pp, out, first, last, start, end);
		if (merge)
		{
			WalsStatus	status = wals_csr_merge_rows(feedback, out, first, last,
													 end, &w, NULL);

			if (status != WALS_OK)
				return status;
		}
		start = end;
	}
	out->indptr[out->nrows] = merge ? w : start;
	return WALS_OK;
}

static void split_record(WalsCsrSplit *s, const CsrParts *pp);

/*
 * The scatter of wals_csr_scatter and wals_csr_scatter_codes: each cell
 * carries val[k], or, where code is not NULL, code[k] of out's codebook,
 * out then having codes.  Where s is not NULL and the scatter takes two
 * levels, pass B is left to wals_csr_split_sort of s.
 * Everything is checked in the counting pass, before the scatter trusts
 * the indices.
 */
static WalsStatus
scatter(int64_t nrows, int64_t ncols, size_t n, const int32_t *row, const int32_t *col,
		const float *val, const uint8_t *code, WalsCsr *out, void *scratch,
		size_t scratch_bytes, WalsCsrSplit *s)
{
	CsrParts	pp;
	int64_t		j;
	size_t		k;

	if (nrows < 0 || ncols < 0 || nrows > INT32_MAX || ncols > INT32_MAX)
		return WALS_EINVAL;
	out->nrows = nrows;
	out->ncols = ncols;

	for (j = 0; j <= nrows; j++)
		out->indptr[j] = 0;
	for (k = 0; k < n; k++)
	{
		if (k % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		if (row[k] < 0 || row[k] >= nrows || col[k] < 0 || col[k] >= ncols)
			return WALS_EINVAL;
		if (code != NULL)
		{
			if (code[k] >= out->codebook->n)
				return WALS_EINVAL;
		}
		else if (!isfinite(val[k]))
			return WALS_ENONFINITE;
		else if (out->values == NULL && wals_codebook_code(out->codebook, val[k]) < 0)
			return WALS_ECODES;
		out->indptr[row[k] + 1]++;
	}

	if (plan_parts(&pp, out, n, scratch, scratch_bytes))
	{
		CsrPass		a = pass_of(&pp, out);

		for (k = 0; k < n; k++)
		{
			if (k % WALS_CELL_POLL == 0)
				wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
			if (code != NULL)
				put_cell(&pp, &a, out, row[k], col[k], 0.0f, code[k]);
			else
				put_cell(&pp, &a, out, row[k], col[k], val[k],
						 a.coded ? (uint8_t) wals_codebook_code(out->codebook, val[k]) : 0);
		}
		flush_lines(&pp, out);
		if (s == NULL)
			return sort_parts(&pp, out, false, WALS_IMPLICIT);
		split_record(s, &pp);
		return WALS_OK;
	}

	counts_to_starts(out->indptr, nrows);
	for (k = 0; k < n; k++)
	{
		int64_t		pos = out->indptr[row[k]]++;

		if (k % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		out->indices[pos] = col[k];
		if (out->values != NULL)
			out->values[pos] = val[k];
		else
			out->codes[pos] = code != NULL ? code[k] :
				(uint8_t) wals_codebook_code(out->codebook, val[k]);
	}
	cursors_to_starts(out->indptr, nrows, 0);
	return WALS_OK;
}

WalsStatus
wals_csr_scatter(int64_t nrows, int64_t ncols, size_t n,
				 const int32_t *row, const int32_t *col, const float *val,
				 WalsCsr *out, void *scratch, size_t scratch_bytes)
{
	return scatter(nrows, ncols, n, row, col, val, NULL, out, scratch, scratch_bytes, NULL);
}

WalsStatus
wals_csr_scatter_codes(int64_t nrows, int64_t ncols, size_t n,
					   const int32_t *row, const int32_t *col, const uint8_t *code,
					   WalsCsr *out, void *scratch, size_t scratch_bytes)
{
	if (out->values != NULL)
		return WALS_EINVAL;
	return scatter(nrows, ncols, n, row, col, NULL, code, out, scratch, scratch_bytes, NULL);
}

/*
 * Size out as in's transpose and count the cells of each of its rows at
 * out->indptr[1..]: false where in and out do not both hold values, or
 * both codes.
 */
static bool
count_columns(const WalsCsr *in, WalsCsr *out)
{
	int64_t		nnz = in->indptr[in->nrows];
	int64_t		j;

	out->nrows = in->ncols;
	out->ncols = in->nrows;
	if ((in->values == NULL) != (out->values == NULL))
		return false;
	out->codebook = in->codebook;
	for (j = 0; j <= in->ncols; j++)
		out->indptr[j] = 0;
	for (j = 0; j < nnz; j++)
	{
		if (j % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		out->indptr[in->indices[j] + 1]++;
	}
	return true;
}

/*
 * Pass A of a transpose over in's rows [lo, hi), each cell to its column's
 * row of out, then the lines flushed.
 */
static void
scatter_rows(CsrParts *pp, const WalsCsr *in, WalsCsr *out, int64_t lo, int64_t hi)
{
	int64_t		local = 0;
	CsrPass		a = pass_of(pp, out);
	const int64_t *indptr = in->indptr;
	const int32_t *indices = in->indices;
	const float *values = in->values;
	const uint8_t *codes = in->codes;

	for (int64_t u = lo; u < hi; u++)
	{
		wals_poll_local(&local, (indptr[u + 1] - indptr[u] + 1) * WALS_CELL_WORK);
		for (int64_t j = indptr[u]; j < indptr[u + 1]; j++)
			put_cell(pp, &a, out, indices[j], (int32_t) u,
					 values != NULL ? values[j] : 0.0f, values != NULL ? 0 : codes[j]);
	}
	wals_poll(local);
	flush_lines(pp, out);
}

/*
 * One counting sort by column, in one level or two; walking in's rows in
 * order makes each output row sorted by construction, and merge folds its
 * duplicates.
 */
static WalsStatus
transpose(const WalsCsr *in, WalsCsr *out, void *scratch, size_t scratch_bytes,
		  bool merge, WalsFeedback feedback)
{
	int64_t		nnz = in->indptr[in->nrows];
	CsrParts	pp;
	int64_t		j;
	int64_t		u;
	int64_t		local = 0;

	if (!count_columns(in, out))
		return WALS_EINVAL;
	if (plan_parts(&pp, out, (size_t) nnz, scratch, scratch_bytes))
	{
		scatter_rows(&pp, in, out, 0, in->nrows);
		return sort_parts(&pp, out, merge, feedback);
	}

	counts_to_starts(out->indptr, in->ncols);
	for (u = 0; u < in->nrows; u++)
	{
		wals_poll_local(&local, (in->indptr[u + 1] - in->indptr[u] + 1) * WALS_CELL_WORK);
		for (j = in->indptr[u]; j < in->indptr[u + 1]; j++)
		{
			int64_t		dst = out->indptr[in->indices[j]]++;

			out->indices[dst] = (int32_t) u;
			wals_csr_copy_rating(out, dst, in, j);
		}
	}
	wals_poll(local);
	cursors_to_starts(out->indptr, in->ncols, 0);
	return merge ? merge_duplicates(feedback, out, NULL) : WALS_OK;
}

/*
 * The transpose puts each out row in order of in's rows, so equal cells of
 * one (row, column) pair meet whatever order in's rows had.
 */
WalsStatus
wals_csr_transpose_merge(WalsFeedback feedback, const WalsCsr *in, WalsCsr *out,
						 void *scratch, size_t scratch_bytes)
{
	return transpose(in, out, scratch, scratch_bytes, true, feedback);
}

/* See wals_core.h. */
void
wals_csr_transpose_with(const WalsCsr *in, WalsCsr *out, void *scratch,
						size_t scratch_bytes)
{
	(void) transpose(in, out, scratch, scratch_bytes, false, WALS_IMPLICIT);
}

/* The caller sizes out from in (ncols + 1 pointers, nnz cells). */
void
wals_csr_transpose(const WalsCsr *in, WalsCsr *out)
{
	wals_csr_transpose_with(in, out, NULL, 0);
}

/*
 * The scatter and the merging transpose, through the caller's scratch CSR
 * by column, keeping the counts the merge otherwise forgets.
 */
WalsStatus
wals_csr_from_coo(WalsFeedback feedback,
				  int64_t nrows, int64_t ncols, size_t n,
				  const int32_t *row, const int32_t *col,
				  const float *val, WalsCsr *out,
				  int64_t *tmp_indptr, int32_t *tmp_idx,
				  float *tmp_val, int32_t *counts)
{
	WalsCsr		by_col = {0};
	WalsStatus	status;

	by_col.indptr = tmp_indptr;
	by_col.indices = tmp_idx;
	by_col.values = tmp_val;
	status = wals_csr_scatter(ncols, nrows, n, col, row, val, &by_col, NULL, 0);
	if (status != WALS_OK)
		return status;
	wals_csr_transpose(&by_col, out);
	return merge_duplicates(feedback, out, counts);
}

/*
 * A two-level transpose shared among processes (wals_core.h).  in's rows
 * are cut into chunks of about equal cells; each chunk counts the cells
 * of each of out's rows it holds, in an array of its own, so that the
 * counting is shared too; the leader adds them up, plans the partitions
 * as transpose does, and gives each chunk its own segment of every
 * partition, after the segments of the chunks before it, so that a
 * partition holds its cells in input order whichever process took which
 * chunk; then each partition is sorted on its own.  Segments do not
 * start on a line: pass A writes whole lines only where they lie inside
 * the chunk's segment, as it does where a partition begins (spill_line,
 * flush_lines), so processes never write the same bytes.  Merging
 * duplicates, which may add to the codebook, stays with the leader,
 * after the sorts, row by row as sort_parts merges them: the result is
 * transpose's, to the bit.
 */
#define CSR_SPLIT_CHUNKS	64

struct WalsCsrSplit
{
	int64_t		n;
	int64_t		out_rows;
	int64_t		nchunks;
	int64_t		chunk_row[CSR_SPLIT_CHUNKS + 1];
	int64_t		nparts;
	int			colbits;
	bool		coded;
	bool		buffered;
	int			block_shift;
	uint16_t	block_part[CSR_BLOCKS];
	int64_t		first[CSR_MAX_PARTS + 1];
	int64_t		begin[CSR_MAX_PARTS + 1];
	/* whether each partition's rows, sorted to be merged, repeat a column */
	bool		repeats[CSR_MAX_PARTS];
	/* where each chunk's segment of each partition starts */
	int64_t		at[CSR_SPLIT_CHUNKS][CSR_MAX_PARTS];
	/* then each chunk's count of each of out's rows, nchunks x out_rows */
	uint32_t	counts[];
};

/* Record in s the partitions of pp, whose pass A is done, for pass B. */
static void
split_record(WalsCsrSplit *s, const CsrParts *pp)
{
	s->nparts = pp->nparts;
	s->colbits = pp->colbits;
	s->coded = pp->coded;
	s->buffered = pp->buffered;
	s->block_shift = pp->block_shift;
	memcpy(s->block_part, pp->block_part,
		   sizeof(uint16_t) * block_count(s->out_rows, pp->block_shift));
	memcpy(s->first, pp->first, sizeof(int64_t) * (pp->nparts + 1));
	memcpy(s->begin, pp->begin, sizeof(int64_t) * pp->nparts);
	s->begin[pp->nparts] = s->n;
}

/* Chunks whose counts fit in count_bytes, at most CSR_SPLIT_CHUNKS. */
static int64_t
split_chunks(int64_t out_rows, size_t count_bytes)
{
	int64_t		fit = (int64_t) (count_bytes / (sizeof(uint32_t) * (size_t) (out_rows + 1)));

	return fit < CSR_SPLIT_CHUNKS ? fit : CSR_SPLIT_CHUNKS;
}

size_t
wals_csr_split_size(int64_t out_rows, size_t count_bytes)
{
	int64_t		chunks = split_chunks(out_rows, count_bytes);

	return offsetof(WalsCsrSplit, counts) +
		sizeof(uint32_t) * (size_t) (chunks > 1 ? chunks : 1) * (size_t) out_rows;
}

bool
wals_csr_split_begin(WalsCsrSplit *s, const WalsCsr *in, WalsCsr *out, size_t count_bytes)
{
	int64_t		nnz = in->indptr[in->nrows];
	int64_t		chunks = split_chunks(in->ncols, count_bytes);
	int64_t		per_chunk;
	int64_t		cells = 0;
	int64_t		u;

	out->nrows = in->ncols;
	out->ncols = in->nrows;
	if ((in->values == NULL) != (out->values == NULL) || chunks < 2 ||
		nnz >= (int64_t) UINT32_MAX || nnz < CSR_MIN_CELLS || out->nrows <= CSR_ONE_LEVEL_ROWS)
		return false;
	out->codebook = in->codebook;
	memset(s, 0, offsetof(WalsCsrSplit, counts));
	s->n = nnz;
	s->out_rows = out->nrows;
	per_chunk = nnz / chunks + 1;
	for (u = 0; u < in->nrows; u++)
	{
		cells += in->indptr[u + 1] - in->indptr[u];
		if (cells >= per_chunk && s->nchunks < chunks - 1)
		{
			s->chunk_row[++s->nchunks] = u + 1;
			cells = 0;
		}
	}
	s->chunk_row[++s->nchunks] = in->nrows;
	return true;
}

int64_t
wals_csr_split_chunks(const WalsCsrSplit *s)
{
	return s->nchunks;
}

int64_t
wals_csr_split_parts(const WalsCsrSplit *s)
{
	return s->nparts;
}

void
wals_csr_split_count(WalsCsrSplit *s, const WalsCsr *in, int64_t chunk)
{
	uint32_t   *count = s->counts + chunk * s->out_rows;
	int64_t		lo = in->indptr[s->chunk_row[chunk]];
	int64_t		hi = in->indptr[s->chunk_row[chunk + 1]];
	const int32_t *indices = in->indices;	/* a local: see CsrPass */
	int64_t		j;

	memset(count, 0, sizeof(uint32_t) * s->out_rows);
	for (j = lo; j < hi; j++)
	{
		if ((j - lo) % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		count[indices[j]]++;
	}
}

bool
wals_csr_split_plan(WalsCsrSplit *s, WalsCsr *out, void *scratch, size_t scratch_bytes)
{
	CsrParts	pp;
	int64_t		local = 0;
	int64_t		r;
	int64_t		k;
	int64_t		p;

	out->indptr[0] = 0;
	for (r = 0; r < s->out_rows; r++)
	{
		int64_t		c = 0;

		for (k = 0; k < s->nchunks; k++)
			c += s->counts[k * s->out_rows + r];
		out->indptr[r + 1] = c;
		wals_poll_local(&local, s->nchunks);
	}
	wals_poll(local);
	if (!plan_parts(&pp, out, (size_t) s->n, scratch, scratch_bytes))
		return false;
	split_record(s, &pp);
	for (p = 0; p < s->nparts; p++)
	{
		int64_t		at = s->begin[p];

		for (k = 0; k < s->nchunks; k++)
		{
			const uint32_t *count = s->counts + k * s->out_rows;
			int64_t		c = 0;

			for (r = s->first[p]; r < s->first[p + 1]; r++)
				c += count[r];
			s->at[k][p] = at;
			at += c;
			wals_poll_local(&local, s->first[p + 1] - s->first[p]);
		}
	}
	wals_poll(local);
	return true;
}

/* pp for a process of split s, in its own scratch; false when too small. */
static bool
split_parts(const WalsCsrSplit *s, CsrParts *pp, void *scratch, size_t scratch_bytes)
{
	if (!carve_scratch(pp, (size_t) s->n, scratch, scratch_bytes))
		return false;
	pp->nparts = s->nparts;
	pp->colbits = s->colbits;
	pp->coded = s->coded;
	pp->buffered = s->buffered;
	memcpy(pp->first, s->first, sizeof(int64_t) * (s->nparts + 1));
	return true;
}

/*
 * split_parts for pass A of chunk: its cursors, and the table of the
 * partitions of blocks, which pass B does not read.
 */
static bool
split_chunk_parts(const WalsCsrSplit *s, CsrParts *pp, int64_t chunk, void *scratch,
				  size_t scratch_bytes)
{
	if (!split_parts(s, pp, scratch, scratch_bytes))
		return false;
	memcpy(pp->begin, s->at[chunk], sizeof(int64_t) * s->nparts);
	memcpy(pp->cursor, s->at[chunk], sizeof(int64_t) * s->nparts);
	pp->block_shift = s->block_shift;
	memcpy(pp->block_part, s->block_part,
		   sizeof(uint16_t) * block_count(s->out_rows, s->block_shift));
	return true;
}

WalsStatus
wals_csr_split_scatter(const WalsCsrSplit *s, const WalsCsr *in, WalsCsr *out, int64_t chunk,
					   void *scratch, size_t scratch_bytes)
{
	CsrParts	pp;

	if (!split_chunk_parts(s, &pp, chunk, scratch, scratch_bytes))
		return WALS_EINVAL;
	scatter_rows(&pp, in, out, s->chunk_row[chunk], s->chunk_row[chunk + 1]);
	return WALS_OK;
}

/*
 * Whether a row of out among rows [first, last), which end at end, holds
 * a column twice: its cells are sorted, so repeats lie side by side.  A
 * partition of one row can hold a large share of the ratings, hence the
 * polls within a row.
 */
static bool
has_repeats(const WalsCsr *out, int64_t first, int64_t last, int64_t end)
{
	for (int64_t r = first; r < last; r++)
	{
		int64_t		stop = r + 1 < last ? out->indptr[r + 1] : end;

		for (int64_t k = out->indptr[r] + 1; k < stop; k++)
		{
			if (k % WALS_CELL_POLL == 0)
				wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
			if (out->indices[k] == out->indices[k - 1])
				return true;
		}
	}
	return false;
}

WalsStatus
wals_csr_split_sort(WalsCsrSplit *s, WalsCsr *out, int64_t part, bool merge, void *scratch,
					size_t scratch_bytes)
{
	CsrParts	pp;
	int64_t		first = s->first[part];
	int64_t		last = s->first[part + 1];
	int64_t		start = s->begin[part];
	int64_t		end = s->begin[part + 1];

	if (!split_parts(s, &pp, scratch, scratch_bytes))
		return WALS_EINVAL;
	wals_poll((end - start + last - first) * WALS_CELL_WORK);
	if (last - first == 1)
		out->indptr[first] = start;
	else
		sort_part(&pp, out, first, last, start, end);
	s->repeats[part] = merge && has_repeats(out, first, last, end);
	return WALS_OK;
}

/*
 * The merge folds repeats in one process, in order, as merged ratings
 * take the next codes of the codebook the processes share; the rows
 * before the first partition that repeats a column need not move.
 */
WalsStatus
wals_csr_split_end(const WalsCsrSplit *s, WalsCsr *out, bool merge, WalsFeedback feedback)
{
	WalsCsrMerge m;

	out->indptr[out->nrows] = s->n;
	if (!merge)
		return WALS_OK;
	wals_csr_split_merge_begin(&m);
	while (m.part < s->nparts)
	{
		WalsStatus	status = wals_csr_split_merge_part(s, out, &m, feedback);

		if (status != WALS_OK)
			return status;
	}
	wals_csr_split_merge_end(s, out, &m);
	return WALS_OK;
}

void
wals_csr_split_merge_begin(WalsCsrMerge *m)
{
	m->part = 0;
	m->w = 0;
	m->moving = false;
}

/*
 * A partition's last row ends where the next partition begins, which the
 * split knows, so merging it reads nothing of the partitions after it.
 */
WalsStatus
wals_csr_split_merge_part(const WalsCsrSplit *s, WalsCsr *out, WalsCsrMerge *m,
						  WalsFeedback feedback)
{
	int64_t		p = m->part++;

	if (!m->moving)
	{
		if (!s->repeats[p])
			return WALS_OK;
		m->moving = true;
		m->w = s->begin[p];
	}
	return wals_csr_merge_rows(feedback, out, s->first[p], s->first[p + 1], s->begin[p + 1],
							   &m->w, NULL);
}

void
wals_csr_split_merge_end(const WalsCsrSplit *s, WalsCsr *out, const WalsCsrMerge *m)
{
	out->indptr[out->nrows] = m->moving ? m->w : s->n;
}

/*
 * The scatter of rows shared among processes as the transpose is (above),
 * but the chunks are runs of rows read, of equal length, and each chunk
 * checks its rows as scatter's count does.  Each chunk's cells follow the
 * chunks before it in every partition, as one process reading the rows in
 * order would put them, so the result is wals_csr_scatter_codes's.
 */
bool
wals_csr_split_rows_begin(WalsCsrSplit *s, int64_t nrows, int64_t ncols, size_t n,
						  WalsCsr *out, size_t count_bytes)
{
	int64_t		chunks = split_chunks(nrows, count_bytes);
	int64_t		k;

	if (nrows < 0 || ncols < 0 || nrows > INT32_MAX || ncols > INT32_MAX)
		return false;
	out->nrows = nrows;
	out->ncols = ncols;
	if (out->values != NULL || chunks < 2 || n >= (size_t) UINT32_MAX ||
		n < CSR_MIN_CELLS || nrows <= CSR_ONE_LEVEL_ROWS)
		return false;
	memset(s, 0, offsetof(WalsCsrSplit, counts));
	s->n = (int64_t) n;
	s->out_rows = nrows;
	s->nchunks = chunks;
	for (k = 0; k <= chunks; k++)
		s->chunk_row[k] = (int64_t) ((double) n * k / chunks);
	s->chunk_row[chunks] = (int64_t) n;
	return true;
}

WalsStatus
wals_csr_split_rows_count(WalsCsrSplit *s, const WalsCsr *out, const int32_t *row,
						  const int32_t *col, const uint8_t *code, int64_t chunk)
{
	uint32_t   *count = s->counts + chunk * s->out_rows;
	int64_t		lo = s->chunk_row[chunk];
	int64_t		hi = s->chunk_row[chunk + 1];
	/* locals, which a count's store cannot change: see CsrPass */
	int64_t		nrows = out->nrows;
	int64_t		ncols = out->ncols;
	int32_t		ncodes = out->codebook->n;
	int64_t		k;

	memset(count, 0, sizeof(uint32_t) * s->out_rows);
	for (k = lo; k < hi; k++)
	{
		if ((k - lo) % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		if (row[k] < 0 || row[k] >= nrows || col[k] < 0 || col[k] >= ncols ||
			code[k] >= ncodes)
			return WALS_EINVAL;
		count[row[k]]++;
	}
	return WALS_OK;
}

WalsStatus
wals_csr_split_rows_scatter(const WalsCsrSplit *s, const int32_t *row, const int32_t *col,
							const uint8_t *code, WalsCsr *out, int64_t chunk,
							void *scratch, size_t scratch_bytes)
{
	CsrParts	pp;
	int64_t		lo = s->chunk_row[chunk];
	int64_t		hi = s->chunk_row[chunk + 1];
	int64_t		k;
	CsrPass		a;

	if (!split_chunk_parts(s, &pp, chunk, scratch, scratch_bytes))
		return WALS_EINVAL;
	a = pass_of(&pp, out);
	for (k = lo; k < hi; k++)
	{
		if ((k - lo) % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		put_cell(&pp, &a, out, row[k], col[k], 0.0f, code[k]);
	}
	flush_lines(&pp, out);
	return WALS_OK;
}

WalsStatus
wals_csr_scatter_codes_split(WalsCsrSplit *s, int64_t nrows, int64_t ncols, size_t n,
							 const int32_t *row, const int32_t *col, const uint8_t *code,
							 WalsCsr *out, void *scratch, size_t scratch_bytes)
{
	memset(s, 0, offsetof(WalsCsrSplit, counts));
	s->n = (int64_t) n;
	s->out_rows = nrows;
	if (out->values != NULL)
		return WALS_EINVAL;
	return scatter(nrows, ncols, n, row, col, NULL, code, out, scratch, scratch_bytes, s);
}
