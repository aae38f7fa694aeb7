/*
 * csr.c
 *	  Building the user-side CSR from coordinates, and its transpose.
 *
 * Ratings arrive in scan order.  Two stable counting sorts (by column, then
 * by row) cost O(nnz + rows + columns) and leave every row sorted by column,
 * so duplicate cells become neighbours and merge in one pass, with no
 * comparison sort and no hash of cells.
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
 * Compact each row in place, folding runs of equal columns into one cell.
 * The write position never passes the read position, so no second buffer is
 * needed.  Sums are divided by their counts afterwards for explicit feedback,
 * where a repeated rating is a re-rating, not more evidence.
 */
static WalsStatus
merge_duplicates(WalsFeedback feedback, WalsCsr *out, int32_t *counts)
{
	int64_t		w = 0;
	int64_t		old_start = 0;
	int64_t		u;

	for (u = 0; u < out->nrows; u++)
	{
		int64_t		old_end = out->indptr[u + 1];
		int64_t		row_start = w;
		int64_t		k;

		for (k = old_start; k < old_end; k++)
		{
			if (w > row_start && out->indices[w - 1] == out->indices[k])
			{
				out->values[w - 1] += out->values[k];
				counts[w - 1]++;
				continue;
			}
			out->indices[w] = out->indices[k];
			out->values[w] = out->values[k];
			counts[w] = 1;
			w++;
		}
		old_start = old_end;
		out->indptr[u + 1] = w;
	}

	for (u = 0; u < w; u++)
	{
		if (feedback == WALS_EXPLICIT)
			out->values[u] /= (float) counts[u];
		if (!isfinite(out->values[u]))
			return WALS_ENONFINITE;
	}
	return WALS_OK;
}

/*
 * Everything is checked in the first pass, before the scatters trust the
 * indices.  A sum of finite duplicates can still overflow, hence the second
 * finiteness check at the merge.
 */
WalsStatus
wals_csr_from_coo(WalsFeedback feedback,
				  int64_t nrows, int64_t ncols, size_t n,
				  const int32_t *row, const int32_t *col,
				  const float *val, WalsCsr *out,
				  int64_t *tmp_indptr, int32_t *tmp_idx,
				  float *tmp_val, int32_t *counts)
{
	int64_t		j;
	size_t		k;

	if (nrows < 0 || ncols < 0 || nrows > INT32_MAX || ncols > INT32_MAX)
		return WALS_EINVAL;
	out->nrows = nrows;
	out->ncols = ncols;

	for (j = 0; j <= ncols; j++)
		tmp_indptr[j] = 0;
	for (j = 0; j <= nrows; j++)
		out->indptr[j] = 0;
	for (k = 0; k < n; k++)
	{
		if (row[k] < 0 || row[k] >= nrows || col[k] < 0 || col[k] >= ncols)
			return WALS_EINVAL;
		if (!isfinite(val[k]))
			return WALS_ENONFINITE;
		tmp_indptr[col[k] + 1]++;
		out->indptr[row[k] + 1]++;
	}
	counts_to_starts(tmp_indptr, ncols);
	counts_to_starts(out->indptr, nrows);

	for (k = 0; k < n; k++)
	{
		int64_t		pos = tmp_indptr[col[k]]++;

		tmp_idx[pos] = row[k];
		tmp_val[pos] = val[k];
	}
	cursors_to_starts(tmp_indptr, ncols);

	for (j = 0; j < ncols; j++)
	{
		int64_t		pos;

		for (pos = tmp_indptr[j]; pos < tmp_indptr[j + 1]; pos++)
		{
			int64_t		dst = out->indptr[tmp_idx[pos]]++;

			out->indices[dst] = (int32_t) j;
			out->values[dst] = tmp_val[pos];
		}
	}
	cursors_to_starts(out->indptr, nrows);

	return merge_duplicates(feedback, out, counts);
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
