/*
 * build_rows.c
 *	  The matrix by item of a build sorted row by row, with the training's
 *	  workers.
 *
 * The last step of a build (matrices.c) sorts each row of the matrix by
 * item, as the scatter left it, where it lies, and merges its repeats
 * (src/core/csr_rows.c).  Rows are independent: the leader cuts them into
 * ranges of about the same number of cells, which it and the workers take
 * from a counter, each sorting and merging its range from the range's
 * first cell on, through a scratch of its own.  Merging can leave a range
 * shorter than it was; the leader then moves the ranges down in order.
 * Every range lands where it would have alone, so the matrix is the same,
 * to the bit, with any number of workers.  A matrix too small to pay for
 * starting workers is sorted by the leader alone.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "wals_train.h"

#define WALS_ROWS_KEY		1

/*
 * Cells below which the leader sorts alone: tens of milliseconds of one
 * core, several times what starting a worker and mapping the blocks cost.
 */
#define WALS_ROWS_PARALLEL_MIN_CELLS	((int64) 4 << 20)

/* Ranges a process takes, on average, so that none waits long on the last. */
#define WALS_ROWS_RANGES_EACH	64

/* One range of rows, its cells before and after merging. */
typedef struct RowRange
{
	int64		first;			/* its first row; the next range's is its end */
	int64		begin;			/* its first cell */
	int64		end;			/* its end, before merging and after */
	WalsStatus	status;
} RowRange;

/* What the processes share, followed by the ranges. */
typedef struct RowsShared
{
	WalsWorkspaceShape shape;
	WalsFeedback feedback;
	Size		scratch_bytes;
	int64		nranges;
	pg_atomic_uint64 next;
	pg_atomic_uint64 done;
	ConditionVariable cv;		/* the last range is done */
} RowsShared;

PGDLLEXPORT void wals_rows_main(dsm_segment *seg, shm_toc *toc);

static RowRange *
ranges_of(RowsShared *sh)
{
	return (RowRange *) ((char *) sh + MAXALIGN(sizeof(RowsShared)));
}

/* Sort ranges of csr until none is left; the last to finish says so. */
static void
take(RowsShared *sh, WalsCsr *csr, void *scratch)
{
	RowRange   *ranges = ranges_of(sh);

	for (;;)
	{
		int64		i = (int64) pg_atomic_fetch_add_u64(&sh->next, 1);
		RowRange   *r;
		int64		last;

		if (i >= sh->nranges)
			return;
		r = &ranges[i];
		CHECK_FOR_INTERRUPTS();
		last = i + 1 < sh->nranges ? ranges[i + 1].first : csr->nrows;
		r->status = wals_csr_sort_rows(sh->feedback, csr, r->first, last, &r->end,
									   scratch, sh->scratch_bytes);
		if ((int64) pg_atomic_add_fetch_u64(&sh->done, 1) == sh->nranges)
			ConditionVariableBroadcast(&sh->cv);
	}
}

/* Entry point of a parallel worker: sort ranges until none is left. */
void
wals_rows_main(dsm_segment *seg, shm_toc *toc)
{
	RowsShared *sh = shm_toc_lookup(toc, WALS_ROWS_KEY, false);
	WalsWorkspace ws;
	void	   *scratch = MemoryContextAllocHuge(CurrentMemoryContext, sh->scratch_bytes);

	wals_workspace_attach(&sh->shape, &ws);
	take(sh, &ws.by_item, scratch);
	wals_workspace_release(&ws);
	pfree(scratch);
}

/*
 * Cut csr's rows into ranges of about cells cells each, a row larger
 * than that alone, into ranges (NULL: only count them); how many.
 */
static int64
cut_ranges(const WalsCsr *csr, int64 cells, RowRange *ranges)
{
	int64		n = 0;
	int64		r = 0;

	while (r < csr->nrows)
	{
		int64		first = r;

		while (r < csr->nrows && csr->indptr[r + 1] - csr->indptr[first] < cells)
			r++;
		if (r == first)
			r++;
		if (ranges != NULL)
		{
			ranges[n].first = first;
			ranges[n].begin = csr->indptr[first];
			ranges[n].end = csr->indptr[r];
			ranges[n].status = WALS_OK;
		}
		n++;
	}
	return n;
}

/* See wals_train.h. */
WalsStatus
wals_build_sort_rows(const WalsTrainArgs *args, WalsWorkspace *ws, void *scratch,
					 Size scratch_bytes)
{
	WalsCsr    *csr = &ws->by_item;
	int64		nnz = csr->indptr[csr->nrows];
	int64		cells = Max(nnz / ((int64) (args->workers + 1) * WALS_ROWS_RANGES_EACH), 1);
	int64		nranges;
	ParallelContext *pcxt = NULL;
	RowsShared *sh;
	RowRange   *ranges;
	int64		w = 0;

	if (nnz < WALS_ROWS_PARALLEL_MIN_CELLS || !wals_build_may_share(args, ws))
		return wals_csr_sort_merge(args->params.feedback, csr, scratch, scratch_bytes);

	nranges = cut_ranges(csr, cells, NULL);
	pcxt = wals_build_open_context("wals_rows_main", args->workers,
								   MAXALIGN(sizeof(RowsShared)) + nranges * sizeof(RowRange),
								   WALS_ROWS_KEY, (void **) &sh);
	if (pcxt == NULL)
		return wals_csr_sort_merge(args->params.feedback, csr, scratch, scratch_bytes);
	ranges = ranges_of(sh);
	sh->shape = ws->shape;
	sh->feedback = args->params.feedback;
	sh->scratch_bytes = scratch_bytes;
	sh->nranges = cut_ranges(csr, cells, ranges);
	pg_atomic_init_u64(&sh->next, 0);
	pg_atomic_init_u64(&sh->done, 0);
	ConditionVariableInit(&sh->cv);
	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: sorting the rows of the matrix by item with %d parallel workers",
							 pcxt->nworkers_launched)));

	take(sh, csr, scratch);
	wals_build_wait(&sh->cv, &sh->done, sh->nranges);
	WaitForParallelWorkersToFinish(pcxt);

	for (int64 i = 0; i < sh->nranges; i++)
	{
		int64		last = i + 1 < sh->nranges ? ranges[i + 1].first : csr->nrows;

		if (ranges[i].status != WALS_OK)
		{
			WalsStatus	status = ranges[i].status;

			wals_build_close_context(pcxt);
			return status;
		}
		wals_csr_move_rows(csr, ranges[i].first, last, ranges[i].end, w);
		w += ranges[i].end - ranges[i].begin;
	}
	csr->indptr[csr->nrows] = w;
	wals_build_close_context(pcxt);
	return WALS_OK;
}
