/*
 * chunks.c
 *	  Cutting a half-sweep's rows into chunks, and recording the lowest
 *	  row that failed.
 *
 * Chunks are cut by cost (ratings plus a per-row share), not by row count,
 * so a chunk of popular items is not a hundred times longer than the others
 * and the processes that claim them finish together.  Processes claim
 * chunks in row order, so the lowest failing row that any of them records
 * is the row a single process would have stopped at.
 */
#include "postgres.h"

#include "chunks.h"

/* About this many chunks per half-sweep, for balance between processes. */
#define WALS_CHUNKS_PER_SWEEP	1024

/*
 * Rows between two checks for a cancel: a row costs about f^2 (CG) to f^3
 * (Cholesky) operations, so wide models get shorter chunks.
 */
static int64
rows_per_check(int f)
{
	return Max(1, Min(WALS_ROWS_PER_CHECK, (1 << 22) / ((int64) f * f)));
}

/* Chunks a side of nrows rows can be cut into, at most. */
int64
wals_max_chunks(int64 nrows, int f)
{
	return nrows / rows_per_check(f) + WALS_CHUNKS_PER_SWEEP + 1;
}

/*
 * Cut rows into chunks of about equal cost: a rating costs O(f) per CG step
 * and a row about f/2 ratings' worth (its f x f products), and no chunk
 * holds more rows than a cancel check allows.
 */
int64
wals_cut_chunks(const WalsCsr *R, int f, int64 *bounds)
{
	double		total = (double) R->indptr[R->nrows] + (double) R->nrows * f / 2;
	double		target = Max(1.0, total / WALS_CHUNKS_PER_SWEEP);
	int64		cap = rows_per_check(f);
	int64		n = 0;
	int64		start = 0;
	double		cost = 0;

	bounds[0] = 0;
	for (int64 r = 0; r < R->nrows; r++)
	{
		cost += (double) (R->indptr[r + 1] - R->indptr[r]) + f / 2.0;
		if (cost >= target || r + 1 - start >= cap || r + 1 == R->nrows)
		{
			bounds[++n] = r + 1;
			start = r + 1;
			cost = 0;
		}
	}
	return n;
}

/*
 * Lower the shared failure to that of row, unless a lower one is there:
 * twice the row, plus one when its solution was not finite.
 */
void
wals_record_failure(pg_atomic_uint64 *failed, WalsStatus status, int64 row)
{
	uint64		mine = (uint64) row * 2 + (status == WALS_ESINGULAR ? 0 : 1);
	uint64		seen = pg_atomic_read_u64(failed);

	while (mine < seen && !pg_atomic_compare_exchange_u64(failed, &seen, mine))
		;
}

/* What wals_record_failure recorded: the status, and the row in *row. */
WalsStatus
wals_recorded_failure(uint64 failed, int64 *row)
{
	if (failed == WALS_NO_FAILURE)
		return WALS_OK;
	*row = (int64) (failed / 2);
	return failed % 2 == 0 ? WALS_ESINGULAR : WALS_ENONFINITE;
}
