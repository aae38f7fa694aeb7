/*
 * matrices.c
 *	  Building the two matrices of a training, by user and by item, from
 *	  the rows read.
 *
 * Each matrix takes 8 bytes a cell.  Building by user first would need the
 * rows and both matrices at once; instead the rows are scattered by item
 * into the buffers of the item matrix and freed at once, and every later
 * step only reads one matrix's buffers to write the other's
 * (src/core/csr.c).  Large buffers are mapped lazily, so the peak is about
 * 20 bytes a rating while the rows still exist, and 16 afterwards, plus
 * the scratch the three sorts share (a 64th of a byte a rating, 300 kB at
 * least), which the memory estimate counts.
 *
 * Those sorts, not page faults, made building cost more than reading: with
 * its buffers faulted in ahead, building 15.2 million ratings (138k users,
 * 27k items) took 0.6 to 0.8 s after a read of 0.55 s on a 2-core Xeon VM,
 * nearly all of it cells missing the cache and the TLB as they went to
 * their rows, in the shared segment above all, which gets no huge pages.
 * Sorting in two passes through the scratch brought it to 0.35 to 0.42 s.
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
 * Ready the buffers of a matrix about to be written, up to nnz cells: they
 * are the caller's, but asking for huge pages is only a hint.
 */
static void
prefault_csr(const WalsCsr *csr, int64 nrows, int64 nnz)
{
	wals_advise_huge_pages(csr->indptr, (nrows + 1) * sizeof(int64));
	wals_advise_huge_pages(csr->indices, nnz * sizeof(int32));
	wals_advise_huge_pages(csr->values, nnz * sizeof(float));
	wals_prefault(csr->indptr, (nrows + 1) * sizeof(int64));
	wals_prefault(csr->indices, nnz * sizeof(int32));
	wals_prefault(csr->values, nnz * sizeof(float));
}

/* See wals_train.h. */
void
wals_build_matrices(const WalsTrainArgs *args, WalsRatings *raw, WalsData *data)
{
	size_t		scratch_bytes = wals_csr_scratch_bytes(raw->n);
	void	   *scratch = MemoryContextAllocHuge(CurrentMemoryContext,
											 Max(scratch_bytes, 1));

	data->nusers = raw->nusers;
	data->nitems = raw->nitems;
	data->user_ids = raw->user_ids;
	data->item_ids = raw->item_ids;
	data->null_ids = raw->null_ids;

	prefault_csr(&data->by_item, raw->nitems, raw->n);
	wals_report_core_status(wals_csr_scatter(raw->nitems, raw->nusers, raw->n,
											 raw->items, raw->users, raw->ratings,
											 &data->by_item, scratch, scratch_bytes),
							"building the rating matrix");
	pfree(raw->users);
	pfree(raw->items);
	pfree(raw->ratings);
	raw->users = NULL;
	raw->items = NULL;
	raw->ratings = NULL;
	CHECK_FOR_INTERRUPTS();

	prefault_csr(&data->by_user, raw->nusers, raw->n);
	check_merge(args, wals_csr_transpose_merge(args->params.feedback,
											   &data->by_item, &data->by_user,
											   scratch, scratch_bytes));
	data->nratings = data->by_user.indptr[data->nusers];
	CHECK_FOR_INTERRUPTS();
	wals_validation_split(args, raw, data);

	wals_csr_transpose_with(&data->by_user, &data->by_item, scratch, scratch_bytes);
	pfree(scratch);
}
