/*
 * csr_group.c
 *	  Grouping coordinates by row in place, so that a build needs no second
 *	  copy of its ratings.
 *
 * A training reads its ratings as three parallel arrays, 12 bytes a
 * rating.  wals_csr_scatter writes a CSR by item beside them, 8 bytes more
 * while the 12 still exist; sorting the arrays by row where they lie makes
 * col and val that CSR's indices and values, and row, spent, can go before
 * the merging transpose writes its 8 bytes: never more than 16 at a time.
 * Ratings that take one-byte codes need no such care: coded, the rows take
 * 9 bytes, and the 5 of a CSR by item beside them make 14, so they are
 * scattered (wals_csr_scatter_codes), which is faster.
 *
 * The sort is an MSD radix sort in place (an American flag sort): count
 * each bucket's cells, then swap every cell into its bucket's range
 * (permute).  Each cell goes to wherever its bucket's cursor is: with a
 * bucket per row, 10 million cursors and the lines under them would miss
 * on nearly every cell.  So large sorts take two levels.  The first buckets
 * by the top bits of the row, a few hundred buckets whose cursors and
 * current lines stay in cache; the second sorts each of those buckets by
 * the row itself: its rows are consecutive, their cursors a small array,
 * and the bucket, a few hundredths of the cells, in cache once counted.
 * Counting a bucket's rows gives their starts, in indptr directly.  The
 * scratch holds only cursors and lists of buckets, 200 kB for 10 million
 * rows.
 *
 * Within a row the order is lost, which wals_csr_transpose_merge does not
 * mind: each of its output rows lists its cells in order of this input's
 * rows, and duplicates, side by side, are merged from their sorted values.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "wals_internal.h"

/*
 * The first level sorts by GROUP_TOP_BITS top bits of the row, more when
 * the second level would otherwise have more than 2^GROUP_SPAN_BITS rows
 * to a bucket, and never more than GROUP_MAX_TOP_BITS; rows that fit
 * GROUP_TOP_BITS take one level.  On 15 million ratings of 27,000 items
 * (test/bench/csr_bench), 64 to 256 first-level buckets did best, 1024
 * took a quarter longer and 4096 two and a half times as long, the
 * cursors' lines and pages no longer in cache; on 300 million ratings of
 * 10 million items, 1024 buckets of 16,384 rows took 10.8 ns a rating,
 * 256 of 65,536 rows 17 ns, 2048 15 ns.
 */
#define GROUP_TOP_BITS		8
#define GROUP_MAX_TOP_BITS	10
#define GROUP_SPAN_BITS		14

/* A cursor's lines are asked for this many cells before it reaches them. */
#define GROUP_PREFETCH		32

/*
 * Counting a bucket's rows asks for its columns and values this many cells
 * ahead, a line of each at a time.
 */
#define GROUP_AHEAD			256
#define GROUP_LINE			16

/* The caller's scratch is used from its first 64-byte boundary. */
#define GROUP_ALIGN			64

/* The three arrays being sorted. */
typedef struct GroupCells
{
	int32_t    *row;
	int32_t    *col;
	float	   *val;
} GroupCells;

/* Row bits the second level sorts: 0 when one level takes every row. */
static int
low_bits(int64_t nrows)
{
	int			bits = 0;
	int			top;

	while (bits < 31 && ((int64_t) 1 << bits) < nrows)
		bits++;
	top = bits - GROUP_SPAN_BITS;
	if (top < GROUP_TOP_BITS)
		top = GROUP_TOP_BITS;
	if (top > GROUP_MAX_TOP_BITS)
		top = GROUP_MAX_TOP_BITS;
	return bits > top ? bits - top : 0;
}

/* Buckets of the first level: rows sharing their top bits. */
static int64_t
top_buckets(int64_t nrows, int shift)
{
	return nrows == 0 ? 0 : ((nrows - 1) >> shift) + 1;
}

/* Rows to a first-level bucket, for the second level; none with one level. */
static int64_t
span_rows(int shift)
{
	return shift > 0 ? (int64_t) 1 << shift : 0;
}

/*
 * The scratch holds the first level's bucket starts (nb + 1) and cursors
 * (nb), the second level's cursors (span), and either level's list of
 * buckets left (the more of nb and span).
 */
size_t
wals_csr_group_scratch_bytes(int64_t nrows)
{
	int			shift;
	int64_t		nb;
	int64_t		span;

	if (nrows < 0 || nrows > INT32_MAX)
		return 0;
	shift = low_bits(nrows);
	nb = top_buckets(nrows, shift);
	span = span_rows(shift);
	return GROUP_ALIGN + (2 * nb + 1 + span) * sizeof(int64_t) +
		(nb > span ? nb : span) * sizeof(int32_t);
}

/*
 * Ask for cell k's lines in all three arrays, only a hint: among hundreds
 * of cursors advancing at random, no hardware prefetcher sees the streams.
 */
static inline void
prefetch_cell(const GroupCells *c, int64_t k)
{
#ifdef __GNUC__
	__builtin_prefetch(&c->row[k], 1);
	__builtin_prefetch(&c->col[k], 1);
	__builtin_prefetch(&c->val[k], 1);
#else
	(void) c;
	(void) k;
#endif
}

/* Ask for the lines of columns and values holding cell k; only a hint. */
static inline void
prefetch_lines(const GroupCells *c, int64_t k)
{
#ifdef __GNUC__
	__builtin_prefetch(&c->col[k]);
	__builtin_prefetch(&c->val[k]);
#else
	(void) c;
	(void) k;
#endif
}

/*
 * American flag passes over the cells of nb buckets, a cell's bucket being
 * (row - base) >> shift, until every cell lies in its bucket: next[b] is
 * where bucket b's cells not yet placed begin, end[b] where its cells end.
 * Each cell of a bucket's unplaced range trades places with the cell at
 * its own bucket's cursor, where it stays, and the cell it displaced waits
 * for the next pass.  Following each displaced cell to its place instead
 * (the cycle leader's way) makes every swap wait for the load before it:
 * on csr_bench's 15 million ratings the grouping then took 2.3 times the
 * two-level scatter's time.  These swaps are independent, the misses of
 * several overlap, and it takes 1.1 times.
 * Every swap places one cell for good, so the passes make n swaps in all;
 * but a chain of displacements advances one step a pass, so the passes
 * visit only the buckets still unplaced, listed in todo (room for nb), each
 * of which costs a swap at least.  prefetch asks for the cursors' lines
 * ahead, for buckets whose cells are not in cache.
 */
static inline void
permute(const GroupCells *c, int32_t base, int shift, int64_t nb,
		const int64_t *end, int64_t *next, int32_t *todo, bool prefetch)
{
	int64_t		left = 0;
	int64_t		b;

	for (b = 0; b < nb; b++)
		if (next[b] < end[b])
			todo[left++] = (int32_t) b;
	while (left > 0)
	{
		int64_t		kept = 0;
		int64_t		t;

		for (t = 0; t < left; t++)
		{
			int64_t		stop = end[todo[t]];
			int64_t		k;

			for (k = next[todo[t]]; k < stop;)
			{
				int64_t		piece = stop - k < (int64_t) WALS_CELL_POLL ? stop :
					k + (int64_t) WALS_CELL_POLL;

				wals_poll((piece - k) * WALS_CELL_WORK);
				for (; k < piece; k++)
				{
					int32_t		r = c->row[k];
					int32_t		cc = c->col[k];
					float		v = c->val[k];
					int64_t		d = (r - base) >> shift;
					int64_t		pos = next[d]++;

					if (prefetch && pos + GROUP_PREFETCH < end[d])
						prefetch_cell(c, pos + GROUP_PREFETCH);
					c->row[k] = c->row[pos];
					c->col[k] = c->col[pos];
					c->val[k] = c->val[pos];
					c->row[pos] = r;
					c->col[pos] = cc;
					c->val[pos] = v;
				}
			}
			if (next[todo[t]] < stop)
				todo[kept++] = todo[t];
		}
		left = kept;
	}
}

/*
 * The second level for the rows [lo, hi), whose cells are [start, end):
 * their counts, gathered in cursor, become their starts, in indptr and in
 * cursor, and indptr[hi], where the next bucket starts, is end; the swaps
 * then end each row where the next one starts.  Counting reads the rows in order and asks for the columns and values
 * ahead, so that the swaps find the bucket in cache, where the first level
 * left it long ago.
 */
static void
sort_rows(const GroupCells *c, int64_t lo, int64_t hi, int64_t start,
		  int64_t end, int64_t *indptr, int64_t *cursor, int32_t *todo)
{
	int64_t		at = start;
	int64_t		k;
	int64_t		r;

	memset(cursor, 0, (hi - lo) * sizeof(int64_t));
	wals_poll((end - start + hi - lo) * WALS_CELL_WORK);
	for (k = start; k < end; k++)
	{
		if (k % GROUP_LINE == 0 && k + GROUP_AHEAD < end)
			prefetch_lines(c, k + GROUP_AHEAD);
		cursor[c->row[k] - lo]++;
	}
	for (r = lo; r < hi; r++)
	{
		int64_t		count = cursor[r - lo];

		indptr[r] = cursor[r - lo] = at;
		at += count;
	}
	indptr[hi] = end;
	permute(c, (int32_t) lo, 0, hi - lo, indptr + lo + 1, cursor, todo, false);
}

/*
 * Everything is checked in the first level's counting pass, before any
 * cell moves; the counts live in the scratch, so that a refusal leaves
 * indptr as it was too.
 */
WalsStatus
wals_csr_group_in_place(int64_t nrows, int64_t ncols, size_t n,
						int32_t *row, int32_t *col, float *val,
						int64_t *indptr, void *scratch, size_t scratch_bytes)
{
	GroupCells	c = {row, col, val};
	int			shift;
	int64_t		nb;
	int64_t	   *start;
	int64_t	   *next;
	int64_t	   *cursor;
	int32_t    *todo;
	int64_t		b;
	size_t		k;

	if (nrows < 0 || ncols < 0 || nrows > INT32_MAX || ncols > INT32_MAX ||
		scratch == NULL || scratch_bytes < wals_csr_group_scratch_bytes(nrows))
		return WALS_EINVAL;
	shift = low_bits(nrows);
	nb = top_buckets(nrows, shift);
	start = (int64_t *) (((uintptr_t) scratch + GROUP_ALIGN - 1) &
						 ~(uintptr_t) (GROUP_ALIGN - 1));
	next = start + nb + 1;
	cursor = next + nb;
	todo = (int32_t *) (cursor + span_rows(shift));

	memset(start, 0, (nb + 1) * sizeof(int64_t));
	for (k = 0; k < n; k++)
	{
		if (k % WALS_CELL_POLL == 0)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		if (row[k] < 0 || row[k] >= nrows || col[k] < 0 || col[k] >= ncols)
			return WALS_EINVAL;
		if (!isfinite(val[k]))
			return WALS_ENONFINITE;
		start[(row[k] >> shift) + 1]++;
	}
	for (b = 0; b < nb; b++)
	{
		start[b + 1] += start[b];
		next[b] = start[b];
	}
	permute(&c, 0, shift, nb, start + 1, next, todo, true);

	if (shift == 0)
	{
		memcpy(indptr, start, (nrows + 1) * sizeof(int64_t));
		return WALS_OK;
	}
	for (b = 0; b < nb; b++)
	{
		int64_t		lo = b << shift;
		int64_t		hi = lo + ((int64_t) 1 << shift) < nrows ?
			lo + ((int64_t) 1 << shift) : nrows;

		sort_rows(&c, lo, hi, start[b], start[b + 1], indptr, cursor, todo);
	}
	return WALS_OK;
}
