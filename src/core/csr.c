/*
 * csr.c
 *	  Building both sparse matrices from coordinates, in little memory.
 *
 * Ratings arrive in scan order, as coordinates.  A counting sort by item
 * (wals_csr_scatter) turns them into a CSR by item whose rows are not yet
 * sorted; transposing that (wals_csr_transpose_merge) walks the items in
 * order, so every user row comes out sorted by item with duplicate cells
 * side by side, and they merge in the same pass over the row.  A plain
 * transpose back gives the final CSR by item.  Each step reads one buffer
 * and writes another of the same size, so no more than two copies of the
 * ratings ever exist, and nothing costs more than O(nnz + rows + columns):
 * no comparison sort, no hash of cells, no count per cell.
 */
#include <math.h>

#include "wals_core.h"

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
 * shifting by one restores the starts without a second array.
 */
static void
cursors_to_starts(int64_t *ptr, int64_t n)
{
	int64_t		j;

	for (j = n; j > 0; j--)
		ptr[j] = ptr[j - 1];
	ptr[0] = 0;
}

/*
 * Everything is checked in the counting pass, before the scatter trusts the
 * indices.
 */
WalsStatus
wals_csr_scatter(int64_t nrows, int64_t ncols, size_t n,
				 const int32_t *row, const int32_t *col, const float *val,
				 WalsCsr *out)
{
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
		if (row[k] < 0 || row[k] >= nrows || col[k] < 0 || col[k] >= ncols)
			return WALS_EINVAL;
		if (!isfinite(val[k]))
			return WALS_ENONFINITE;
		out->indptr[row[k] + 1]++;
	}
	counts_to_starts(out->indptr, nrows);

	for (k = 0; k < n; k++)
	{
		int64_t		pos = out->indptr[row[k]]++;

		out->indices[pos] = col[k];
		out->values[pos] = val[k];
	}
	cursors_to_starts(out->indptr, nrows);
	return WALS_OK;
}

/*
 * One cell from the run of duplicates values[0..len).  The values are
 * sorted first and summed in double, so the result does not depend on the
 * order the rows were read in, which float addition alone would not give
 * for three or more.  Explicit ratings are averaged: a repeated rating is a
 * re-rating, not more evidence.  Runs are short and rare, so an insertion
 * sort is enough.
 */
static float
merge_run(WalsFeedback feedback, float *values, int64_t len)
{
	double		sum = 0.0;
	int64_t		a;

	for (a = 1; a < len; a++)
	{
		float		v = values[a];
		int64_t		b = a;

		for (; b > 0 && values[b - 1] > v; b--)
			values[b] = values[b - 1];
		values[b] = v;
	}
	for (a = 0; a < len; a++)
		sum += values[a];
	if (feedback == WALS_EXPLICIT)
		sum /= (double) len;
	return (float) sum;
}

/*
 * Compact each row in place, folding runs of equal columns into one cell.
 * The write position never passes the read position, so no second buffer is
 * needed, and a run's length is known when it ends, so no count per cell
 * unless the caller asks for them (counts not NULL).  A sum of finite
 * duplicates can still overflow a float, hence the check.
 */
static WalsStatus
merge_duplicates(WalsFeedback feedback, WalsCsr *csr, int32_t *counts)
{
	int64_t		w = 0;
	int64_t		start = 0;
	int64_t		r;

	for (r = 0; r < csr->nrows; r++)
	{
		int64_t		end = csr->indptr[r + 1];
		int64_t		k = start;

		while (k < end)
		{
			int64_t		run = k + 1;

			while (run < end && csr->indices[run] == csr->indices[k])
				run++;
			csr->indices[w] = csr->indices[k];
			csr->values[w] = run - k == 1 ? csr->values[k] :
				merge_run(feedback, csr->values + k, run - k);
			if (!isfinite(csr->values[w]))
				return WALS_ENONFINITE;
			if (counts != NULL)
				counts[w] = (int32_t) (run - k);
			w++;
			k = run;
		}
		start = end;
		csr->indptr[r + 1] = w;
	}
	return WALS_OK;
}

/*
 * The transpose puts each out row in order of in's rows, so equal cells of
 * one (row, column) pair meet whatever order in's rows had.
 */
WalsStatus
wals_csr_transpose_merge(WalsFeedback feedback, const WalsCsr *in, WalsCsr *out)
{
	wals_csr_transpose(in, out);
	return merge_duplicates(feedback, out, NULL);
}

/*
 * One counting sort by column; walking the rows in order makes each output
 * row sorted by construction.  The caller sizes out from in (ncols + 1
 * pointers, nnz cells).
 */
void
wals_csr_transpose(const WalsCsr *in, WalsCsr *out)
{
	int64_t		nnz = in->indptr[in->nrows];
	int64_t		j;
	int64_t		u;

	out->nrows = in->ncols;
	out->ncols = in->nrows;
	for (j = 0; j <= in->ncols; j++)
		out->indptr[j] = 0;
	for (j = 0; j < nnz; j++)
		out->indptr[in->indices[j] + 1]++;
	counts_to_starts(out->indptr, in->ncols);

	for (u = 0; u < in->nrows; u++)
	{
		for (j = in->indptr[u]; j < in->indptr[u + 1]; j++)
		{
			int64_t		dst = out->indptr[in->indices[j]]++;

			out->indices[dst] = (int32_t) u;
			out->values[dst] = in->values[j];
		}
	}
	cursors_to_starts(out->indptr, in->ncols);
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
	WalsCsr		by_col;
	WalsStatus	status;

	by_col.indptr = tmp_indptr;
	by_col.indices = tmp_idx;
	by_col.values = tmp_val;
	status = wals_csr_scatter(ncols, nrows, n, col, row, val, &by_col);
	if (status != WALS_OK)
		return status;
	wals_csr_transpose(&by_col, out);
	return merge_duplicates(feedback, out, counts);
}
