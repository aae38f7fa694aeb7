/*
 * matrices.c
 *	  Building the two matrices of a training, by user and by item, from
 *	  the rows read.
 *
 * Each matrix takes 8 bytes a cell, 5 where its ratings take one-byte codes
 * (workspace.c), and the rows read 12 a row; a training holds at most 16
 * bytes a rating at any moment, 14 with codes.  With floats, the rows are
 * grouped by item in place (src/core/csr_group.c), which leaves their
 * users and ratings as a matrix by item and the array of items to be
 * freed; that matrix is copied into the items' block of the workspace and
 * freed.  With codes, which the workspace took as it found them
 * (workspace.c), the floats are spent, which leaves the rows 9 bytes, and
 * the rows are scattered by item straight into the items' block, 14 bytes
 * together: the scatter reads the rows in order and writes whole lines,
 * where grouping in place swaps cells to and fro across all three arrays,
 * and nothing is copied after.
 * Only then, the rows spent, is the users' block allocated (while the
 * workers sort the scatter's partitions, where they do).  Where the rows
 * are shared segments, the spent arrays hold the matrices' cells rather
 * than being freed: the floats the items' indices, the items and the
 * codes the users' indices and codes.  Their pages are faulted in
 * already, where those of new segments cost about a second a gigabyte to
 * make on a 2-core EPYC guest: 0.9 GB of them at 100 million ratings.
 * Then the merging
 * transpose reads the matrix by item to write the matrix by user
 * (src/core/csr.c).  The matrix by item is then finished where it lies:
 * each of its rows sorted by user and its repeats merged
 * (src/core/csr_rows.c), which gives what
 * transposing the matrix by user back gave, to the bit, for a fraction of
 * the cost: a row's cells stay in cache, and a row already in order is
 * only checked.  Only where a validation share has left the matrix by
 * user is it transposed back.  Merging repeats can make new ratings;
 * where they overflow the codes, the training gives codes up and merges
 * again with floats.  Beside them, the scratch of the sorts (a 64th of a
 * byte a rating, 300 kB at least), which the memory estimate counts
 * (workspace.c).
 *
 * The sorts, not page faults, made building cost more than reading: with
 * its buffers faulted in ahead, building 15.2 million ratings (138k users,
 * 27k items) took 0.6 to 0.8 s after a read of 0.55 s on a 2-core Xeon VM,
 * nearly all of it cells missing the cache and the TLB as they went to
 * their rows, in the shared segment above all, which gets no huge pages.
 * Sorting in two passes through the scratch brought it to 0.35 to 0.42 s.
 * The transpose, the scatter (wholly where the rows are shared segments,
 * else the sorting of its partitions) and the sorting of rows are taken
 * by the leader and the training's workers where they are large
 * (build_parallel.c, build_rows.c).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "wals_train.h"

/*
 * Summing duplicates is the one way finite ratings can become a rating the
 * model cannot hold; say so in terms of the column.
 */
static void
check_merge(const WalsTrainArgs *args, WalsStatus status)
{
	if (status == WALS_ENONFINITE && args->rating_col != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("column \"%s\" given as \"rating_col\" has repeated (user, item) pairs whose ratings sum past the range of real",
						args->rating_col),
				 errhint("Implicit feedback sums the ratings of a repeated pair; aggregate or scale them in a view.")));
	wals_report_core_status(status, "building the rating matrix");
}

/*
 * Group raw's rows by item in place, free the items, and copy the rest
 * into the items' block of ws, which takes floats: its matrix by item,
 * rows unsorted.
 */
static void
group_by_item(WalsRatings *raw, WalsWorkspace *ws)
{
	size_t		scratch_bytes = wals_csr_group_scratch_bytes(raw->nitems);
	void	   *scratch = MemoryContextAllocHuge(CurrentMemoryContext,
											 Max(scratch_bytes, 1));
	int64	   *indptr = MemoryContextAllocHuge(CurrentMemoryContext,
												(raw->nitems + 1) * sizeof(int64));

	wals_report_core_status(wals_csr_group_in_place(raw->nitems, raw->nusers, raw->n,
													raw->items, raw->users, raw->ratings,
													indptr, scratch, scratch_bytes),
							"building the rating matrix");
	pfree(scratch);
	wals_ratings_free(raw, WALS_ROWS_ITEMS);
	CHECK_FOR_INTERRUPTS();

	wals_workspace_allocate(ws, WALS_BLOCK_ITEMS);
	wals_workspace_prefault(ws, WALS_BLOCK_ITEMS);
	wals_copy_bytes(ws->by_item.indptr, indptr, (raw->nitems + 1) * sizeof(int64));
	pfree(indptr);
	wals_copy_bytes(ws->by_item.indices, raw->users, raw->n * sizeof(int32));
	wals_ratings_free(raw, WALS_ROWS_USERS);
	wals_copy_bytes(ws->by_item.values, raw->ratings, raw->n * sizeof(float));
	wals_ratings_free(raw, WALS_ROWS_RATINGS);
}

/* Make ws's users' block, ready for the matrix by user, unless it is made. */
static void
users_block(WalsWorkspace *ws, const WalsRatings *raw)
{
	if (ws->base[WALS_BLOCK_USERS] != NULL)
		return;
	wals_workspace_allocate(ws, WALS_BLOCK_USERS);
	wals_workspace_prefault(ws, WALS_BLOCK_USERS);
}

/*
 * Give which of raw's arrays, consumed, to array a of block's cells in
 * ws, where it is a shared segment the block takes (workspace.c), else
 * free it.
 */
static int
pass_rows(WalsRatings *raw, WalsRowArray which, WalsWorkspace *ws, WalsBlock block,
		  WalsCellArray a)
{
	if (raw->spilled == NULL && wals_workspace_take_segment(ws, block, a, &raw->seg[which]))
	{
		*wals_ratings_array(raw, which) = NULL;
		return 1;
	}
	wals_ratings_free(raw, which);
	return 0;
}

/*
 * Scatter raw's rows by item into the items' block of ws, through the
 * sorts' scratch, and free them: its matrix by item, rows unsorted, as
 * grouping leaves them; merging sorts each run of repeats, so the
 * matrices built from it are the same.  In memory with codes, which the
 * workspace took as it found them, the floats go first: the rows are 9
 * bytes beside the block.  Out of core, the rows and the cells are in
 * temporary files, where sorting the rows where they lie would move a few
 * hundred cursors over pages the page cache cannot hold, when a scatter
 * reads them in order and writes through lines of a few hundred
 * partitions.
 */
static void
scatter_by_item(const WalsTrainArgs *args, WalsRatings *raw, WalsWorkspace *ws, void *scratch,
				size_t scratch_bytes)
{
	WalsStatus	status;
	ParallelContext *sorting = NULL;
	int			passed = 0;

	if (raw->codes != NULL)
		passed += pass_rows(raw, WALS_ROWS_RATINGS, ws, WALS_BLOCK_ITEMS, WALS_CELLS_INDICES);
	wals_workspace_allocate(ws, WALS_BLOCK_ITEMS);
	if (raw->codes != NULL)
		sorting = wals_build_scatter_begin(args, ws, raw, scratch, scratch_bytes, &status);
	else
	{
		wals_workspace_prefault(ws, WALS_BLOCK_ITEMS);
		status = wals_csr_scatter(raw->nitems, raw->nusers, raw->n, raw->items, raw->users,
								  raw->ratings, &ws->by_item, scratch, scratch_bytes);
	}
	if (raw->codes != NULL && wals_workspace_take_segment(ws, WALS_BLOCK_USERS,
														  WALS_CELLS_VALUES, &raw->codes_seg))
	{
		raw->codes = NULL;
		passed++;
	}
	passed += pass_rows(raw, WALS_ROWS_ITEMS, ws, WALS_BLOCK_USERS, WALS_CELLS_INDICES);
	if (passed > 0)
		ereport(DEBUG1,
				(errmsg_internal("wals: the matrices' cells take %d arrays of the rows read, their pages faulted in",
								 passed)));
	wals_ratings_free_codes(raw);
	wals_ratings_free(raw, WALS_ROWS_ITEMS);
	wals_ratings_free(raw, WALS_ROWS_USERS);
	wals_ratings_free(raw, WALS_ROWS_RATINGS);
	/* while the workers sort the partitions, the users' block is made */
	if (sorting != NULL)
	{
		users_block(ws, raw);
		status = wals_build_scatter_end(sorting, ws, scratch);
	}
	wals_report_core_status(status, "building the rating matrix");
}

/* See wals_train.h. */
void
wals_build_matrices(const WalsTrainArgs *args, WalsRatings *raw, WalsWorkspace *ws,
					WalsData *data)
{
	size_t		scratch_bytes = wals_csr_scratch_bytes(raw->n);
	void	   *scratch;

	data->nusers = raw->nusers;
	data->nitems = raw->nitems;
	data->user_ids = raw->user_ids;
	data->item_ids = raw->item_ids;
	data->null_ids = raw->null_ids;

	/* grouping in place, the sorts' scratch only once the rows are grouped */
	if (!ws->shape.files && !ws->shape.coded)
		group_by_item(raw, ws);
	scratch = MemoryContextAllocHuge(CurrentMemoryContext, Max(scratch_bytes, 1));
	if (ws->shape.files || ws->shape.coded)
		scatter_by_item(args, raw, ws, scratch, scratch_bytes);
	for (;;)
	{
		WalsStatus	status;

		users_block(ws, raw);
		status = wals_build_transpose(args, ws, true, scratch, scratch_bytes);
		if (status != WALS_ECODES)
		{
			check_merge(args, status);
			break;
		}
		wals_workspace_uncode(args, ws);
	}
	data->by_item = ws->by_item;
	data->by_user = ws->by_user;
	data->nratings = data->by_user.indptr[data->nusers];
	CHECK_FOR_INTERRUPTS();
	if (wals_validation_split(args, raw, data))
		(void) wals_build_transpose(args, ws, false, scratch, scratch_bytes);
	else
		check_merge(args, wals_build_sort_rows(args, ws, scratch, scratch_bytes));
	data->by_item = ws->by_item;
	pfree(scratch);
}
