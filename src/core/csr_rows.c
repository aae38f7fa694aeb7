/*
 * csr_rows.c
 *	  Sorting the rows of a matrix where they lie and merging their
 *	  repeats: the matrix by item, last of a build.
 *
 * A build scatters the ratings by item, rows unsorted, and transposes that
 * into the matrix by user, merging repeats (csr.c).  The matrix by item
 * then came of transposing back: every cell once more to a row of its
 * own, through partitions and a scratch, a third of the build.  Sorting
 * each row of the scattered matrix by column where it lies, and merging
 * its repeats as the transpose merges them, gives the same matrix, to the
 * bit: a row holds the same cells, in the order of their columns, and a
 * run of repeats merges to the same value whatever order it is in (its
 * values are sorted first).  A row's cells stay within its own stretch of
 * the arrays, a few kilobytes for all but the largest rows, in cache while
 * they are sorted; and rows are independent, so several processes may
 * take ranges of rows of one matrix at once, the gaps that merging leaves
 * between ranges being closed after.
 *
 * A row already in order is only checked.  A row that fits the scratch
 * is sorted least significant digit first through it, a pass of up to 11
 * bits reading the cells in order and writing each to its bucket (two
 * passes cover four million users), or, where it holds fewer cells than a
 * pass has buckets, by its top bits and then by insertion.  A row too
 * large for the scratch takes an American flag sort in place: a pass
 * counts its cells under each value of the highest byte of their columns,
 * a second moves each to its bucket by cycles of swaps; each bucket then
 * is sorted by the next byte.  Through the scratch the passes write in
 * order, where the swaps in place wait on each other (csr_bench, 15.2M
 * ratings in random order: 0.17 s where every row in place took 0.46 s);
 * in place, a row needs no more memory.
 */
#include <stdbool.h>
#include <string.h>

#include "wals_internal.h"

/* Buckets of fewer cells than this are sorted by insertion. */
#define ROWS_INSERTION		24

/* A pass in place sorts by one byte of the columns. */
#define ROWS_DIGIT_BITS		8
#define ROWS_BUCKETS		(1 << ROWS_DIGIT_BITS)

/*
 * A pass through the scratch sorts by up to 11 bits, as many as leave a
 * cell or two to a bucket: its counts, 8 kB, stay in the L1 cache.
 */
#define ROWS_MAX_DIGIT		11
#define ROWS_COUNT_BUCKETS	(1 << ROWS_MAX_DIGIT)
#define ROWS_MAX_PASSES		3

#define ROWS_MIN(a, b)		((a) < (b) ? (a) : (b))

/* Bytes a slice of a move takes, a poll after each. */
#define ROWS_MOVE_SLICE		((int64_t) 1 << 20)

/* Insertion sort of n cells by column, with their values or codes. */
static void
insertion_sort(int32_t *idx, float *val, uint8_t *code, int64_t n)
{
	for (int64_t a = 1; a < n; a++)
	{
		int32_t		x = idx[a];
		int64_t		b = a;

		if (idx[a - 1] <= x)
			continue;
		if (val != NULL)
		{
			float		v = val[a];

			for (; b > 0 && idx[b - 1] > x; b--)
			{
				idx[b] = idx[b - 1];
				val[b] = val[b - 1];
			}
			val[b] = v;
		}
		else
		{
			uint8_t		v = code[a];

			for (; b > 0 && idx[b - 1] > x; b--)
			{
				idx[b] = idx[b - 1];
				code[b] = code[b - 1];
			}
			code[b] = v;
		}
		idx[b] = x;
	}
}

/*
 * Swap the cell at position at, of the bucket b, with the next free place
 * of its own bucket, until a cell of b has come to position at; *moved
 * counts the swaps.  The cells are whole after every swap, so a poll may
 * come between any two.
 */
static void
cycle(int32_t *idx, float *val, uint8_t *code, int64_t *next, int shift, int b,
	  int64_t at, int64_t *moved, int64_t *polled)
{
	int			d;

	while ((d = (idx[at] >> shift) & (ROWS_BUCKETS - 1)) != b)
	{
		int64_t		p = next[d]++;
		int32_t		x = idx[p];

		idx[p] = idx[at];
		idx[at] = x;
		if (val != NULL)
		{
			float		v = val[p];

			val[p] = val[at];
			val[at] = v;
		}
		else
		{
			uint8_t		v = code[p];

			code[p] = code[at];
			code[at] = v;
		}
		if (++*moved - *polled >= (int64_t) WALS_CELL_POLL)
		{
			wals_poll((*moved - *polled) * WALS_CELL_WORK);
			*polled = *moved;
		}
	}
}

/* The sorts' scratch: room for cap cells, columns and values or codes. */
typedef struct RowScratch
{
	int64_t		cap;
	int32_t    *idx;
	float	   *val;
	uint8_t    *code;
} RowScratch;

static void sort_cells(int32_t *idx, float *val, uint8_t *code, int64_t n, int hibit,
					   const RowScratch *s);

/* Copy n cells, columns and values or codes, from the from_ arrays. */
static void
copy_cells(int32_t *idx, float *val, uint8_t *code, const int32_t *from_idx,
		   const float *from_val, const uint8_t *from_code, int64_t n)
{
	memcpy(idx, from_idx, n * sizeof(int32_t));
	if (val != NULL)
		memcpy(val, from_val, n * sizeof(float));
	else
		memcpy(code, from_code, n);
}

/*
 * Sort n cells, which fit s, by bits [shift, hibit) of their columns,
 * ROWS_MAX_DIGIT at most, where shift is chosen to leave a cell or two
 * to a bucket: a count, then a scatter into s and back, all in cache for
 * the rows that fit; then each bucket by the bits below.
 */
static void
count_sort(int32_t *idx, float *val, uint8_t *code, int64_t n, int hibit,
		   const RowScratch *s)
{
	int32_t		count[ROWS_COUNT_BUCKETS + 1];
	int			d = ROWS_MIN(hibit, ROWS_MIN(wals_index_bits(n), ROWS_MAX_DIGIT));
	int			shift = hibit - d;
	int32_t		mask = (int32_t) ((1u << d) - 1);
	int32_t		nb = mask + 1;
	int32_t		start = 0;
	int64_t		k;

	wals_poll(3 * n * WALS_CELL_WORK);
	memset(count, 0, sizeof(int32_t) * nb);
	for (k = 0; k < n; k++)
		count[(idx[k] >> shift) & mask]++;
	for (int32_t b = 0; b < nb; b++)
	{
		int32_t		c = count[b];

		count[b] = start;
		start += c;
	}
	count[nb] = (int32_t) n;
	for (k = 0; k < n; k++)
	{
		int32_t		p = count[(idx[k] >> shift) & mask]++;

		s->idx[p] = idx[k];
		if (val != NULL)
			s->val[p] = val[k];
		else
			s->code[p] = code[k];
	}
	copy_cells(idx, val, code, s->idx, s->val, s->code, n);
	if (shift == 0)
		return;
	/* the counts are now the ends of the buckets */
	for (int32_t b = 0, lo = 0; b < nb; lo = count[b++])
		if (count[b] - lo > 1)
			sort_cells(idx + lo, val != NULL ? val + lo : NULL,
					   val != NULL ? NULL : code + lo, count[b] - lo, shift, s);
}

/*
 * Sort n cells, which fit s, by the bits of their columns below hibit,
 * least significant digit first: a pass reads the cells in order and
 * writes each to its digit's bucket, from the row into s and back, with
 * digits of 11 bits at most, so two passes sort the columns of four
 * million users.  Unlike a sort from the highest digit, it leaves no
 * buckets to sort after: one count of every digit, then its passes.
 */
static void
lsd_sort(int32_t *idx, float *val, uint8_t *code, int64_t n, int hibit,
		 const RowScratch *s)
{
	int32_t		count[ROWS_MAX_PASSES][ROWS_COUNT_BUCKETS];
	int			passes = (hibit + ROWS_MAX_DIGIT - 1) / ROWS_MAX_DIGIT;
	int			d = (hibit + passes - 1) / passes;
	int32_t		mask = (int32_t) ((1u << d) - 1);
	int32_t    *from_idx = idx;
	float	   *from_val = val;
	uint8_t    *from_code = code;
	int64_t		k;

	wals_poll((passes + 1) * n * WALS_CELL_WORK);
	for (int p = 0; p < passes; p++)
		memset(count[p], 0, sizeof(int32_t) * (mask + 1));
	for (k = 0; k < n; k++)
		for (int p = 0; p < passes; p++)
			count[p][(idx[k] >> (p * d)) & mask]++;
	for (int p = 0; p < passes; p++)
	{
		int32_t		start = 0;
		int32_t    *to_idx = from_idx == idx ? s->idx : idx;
		float	   *to_val = from_val == val ? s->val : val;
		uint8_t    *to_code = from_code == code ? s->code : code;

		for (int32_t b = 0; b <= mask; b++)
		{
			int32_t		c = count[p][b];

			count[p][b] = start;
			start += c;
		}
		for (k = 0; k < n; k++)
		{
			int32_t		x = from_idx[k];
			int32_t		at = count[p][(x >> (p * d)) & mask]++;

			to_idx[at] = x;
			if (val != NULL)
				to_val[at] = from_val[k];
			else
				to_code[at] = from_code[k];
		}
		from_idx = to_idx;
		from_val = to_val;
		from_code = to_code;
	}
	if (from_idx != idx)
		copy_cells(idx, val, code, from_idx, from_val, from_code, n);
}

/*
 * Sort n cells, too many for s, by bits [hibit - 8, hibit) of their
 * columns in place, polling every WALS_CELL_POLL cells counted or moved
 * (a hook that does not return leaves them partly sorted); then each
 * bucket by the bits below.
 */
static void
flag_sort(int32_t *idx, float *val, uint8_t *code, int64_t n, int hibit,
		  const RowScratch *s)
{
	int64_t		count[ROWS_BUCKETS] = {0};
	int64_t		next[ROWS_BUCKETS];
	int64_t		end[ROWS_BUCKETS];
	int			shift = hibit > ROWS_DIGIT_BITS ? hibit - ROWS_DIGIT_BITS : 0;
	int64_t		start = 0;
	int64_t		moved = 0;
	int64_t		polled = 0;
	int			b;

	for (int64_t k = 0; k < n; k += WALS_CELL_POLL)
	{
		int64_t		to = n - k < (int64_t) WALS_CELL_POLL ? n : k + (int64_t) WALS_CELL_POLL;

		for (int64_t j = k; j < to; j++)
			count[(idx[j] >> shift) & (ROWS_BUCKETS - 1)]++;
		wals_poll((to - k) * WALS_CELL_WORK);
	}
	for (b = 0; b < ROWS_BUCKETS; b++)
	{
		next[b] = start;
		start += count[b];
		end[b] = start;
	}
	for (b = 0; b < ROWS_BUCKETS; b++)
	{
		while (next[b] < end[b])
		{
			int64_t		at = next[b]++;

			cycle(idx, val, code, next, shift, b, at, &moved, &polled);
		}
	}
	wals_poll((moved - polled) * WALS_CELL_WORK);
	if (shift == 0)
		return;
	start = 0;
	for (b = 0; b < ROWS_BUCKETS; b++)
	{
		if (count[b] > 1)
			sort_cells(idx + start, val != NULL ? val + start : NULL,
					   val != NULL ? NULL : code + start, count[b], shift, s);
		start += count[b];
	}
}

/*
 * Sort n cells by the bits of their columns below hibit, the bits above
 * being the same in all of them.
 */
static void
sort_cells(int32_t *idx, float *val, uint8_t *code, int64_t n, int hibit,
		   const RowScratch *s)
{
	if (n <= ROWS_INSERTION)
		insertion_sort(idx, val, code, n);
	else if (n <= s->cap && 2 * n < ((int64_t) 1 << ROWS_MIN(hibit, ROWS_MAX_DIGIT)))
		count_sort(idx, val, code, n, hibit, s);
	else if (n <= s->cap)
		lsd_sort(idx, val, code, n, hibit, s);
	else
		flag_sort(idx, val, code, n, hibit, s);
}

/* Whether n columns are in order, ties allowed. */
static bool
in_order(const int32_t *idx, int64_t n)
{
	for (int64_t k = 1; k < n; k++)
		if (idx[k] < idx[k - 1])
			return false;
	return true;
}

/* See wals_core.h. */
WalsStatus
wals_csr_sort_rows(WalsFeedback feedback, WalsCsr *csr, int64_t first, int64_t last,
				   int64_t *end, void *scratch, size_t scratch_bytes)
{
	int			hibit = csr->ncols > 1 ? wals_index_bits(csr->ncols) : 1;
	size_t		cell = sizeof(int32_t) + (csr->values != NULL ? sizeof(float) : 1);
	RowScratch	s;
	int64_t		w = first < last ? csr->indptr[first] : *end;
	int64_t		local = 0;

	/* the columns first, then the values or codes */
	s.cap = scratch == NULL ? 0 : (int64_t) (scratch_bytes / cell);
	s.idx = (int32_t *) scratch;
	s.val = s.cap > 0 && csr->values != NULL ? (float *) (s.idx + s.cap) : NULL;
	s.code = s.cap > 0 && csr->values == NULL ? (uint8_t *) (s.idx + s.cap) : NULL;

	for (int64_t r = first; r < last; r++)
	{
		int64_t		lo = csr->indptr[r];
		int64_t		hi = r + 1 < last ? csr->indptr[r + 1] : *end;
		WalsStatus	status;

		wals_poll_local(&local, (hi - lo + 1) * WALS_CELL_WORK);
		if (!in_order(csr->indices + lo, hi - lo))
			sort_cells(csr->indices + lo, csr->values != NULL ? csr->values + lo : NULL,
					   csr->values != NULL ? NULL : csr->codes + lo, hi - lo, hibit, &s);
		status = wals_csr_merge_rows(feedback, csr, r, r + 1, hi, &w, NULL);
		if (status != WALS_OK)
			return status;
	}
	wals_poll(local);
	*end = w;
	return WALS_OK;
}

/* See wals_core.h. */
void
wals_csr_move_rows(WalsCsr *csr, int64_t first, int64_t last, int64_t end, int64_t to)
{
	int64_t		from = first < last ? csr->indptr[first] : end;
	int64_t		gap = from - to;

	if (gap == 0)
		return;
	for (int64_t k = from; k < end; k += ROWS_MOVE_SLICE)
	{
		int64_t		m = end - k < ROWS_MOVE_SLICE ? end - k : ROWS_MOVE_SLICE;

		memmove(csr->indices + k - gap, csr->indices + k, m * sizeof(int32_t));
		if (csr->values != NULL)
			memmove(csr->values + k - gap, csr->values + k, m * sizeof(float));
		else
			memmove(csr->codes + k - gap, csr->codes + k, m);
		wals_poll(m * WALS_CELL_WORK);
	}
	for (int64_t r = first; r < last; r++)
		csr->indptr[r] -= gap;
}

/* See wals_core.h. */
WalsStatus
wals_csr_sort_merge(WalsFeedback feedback, WalsCsr *csr, void *scratch, size_t scratch_bytes)
{
	int64_t		end = csr->indptr[csr->nrows];
	WalsStatus	status = wals_csr_sort_rows(feedback, csr, 0, csr->nrows, &end, scratch,
											scratch_bytes);

	csr->indptr[csr->nrows] = end;
	return status;
}
