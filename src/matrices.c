/*
 * matrices.c
 *	  Building the two sparse matrices of a training from the ratings read.
 *
 * The ratings as read take 12 bytes a row, each matrix 8 bytes a cell.
 * Building by user first would need the coordinates and both matrices at
 * once; instead the coordinates are scattered by item into the buffers of
 * the item matrix and freed at once, and every later step only ever reads
 * one matrix's buffers to write the other's (src/core/csr.c).  Large
 * buffers are mapped lazily, so the peak is about 20 bytes a rating while
 * the coordinates still exist, and 16 afterwards.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "wals.h"

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
	wals_report_core_status(status, "building the rating matrix", -1);
}

/* See wals.h. */
void
wals_build_matrices(const WalsTrainArgs *args, WalsRatings *raw, WalsData *data)
{
	data->nusers = raw->nusers;
	data->nitems = raw->nitems;
	data->user_ids = raw->user_ids;
	data->item_ids = raw->item_ids;
	data->null_ids = raw->null_ids;

	wals_report_core_status(wals_csr_scatter(raw->nitems, raw->nusers, raw->n,
											 raw->items, raw->users, raw->ratings,
											 &data->by_item),
							"building the rating matrix", -1);
	pfree(raw->users);
	pfree(raw->items);
	pfree(raw->ratings);
	raw->users = NULL;
	raw->items = NULL;
	raw->ratings = NULL;
	CHECK_FOR_INTERRUPTS();

	check_merge(args, wals_csr_transpose_merge(args->params.feedback,
											   &data->by_item, &data->by_user));
	data->nratings = data->by_user.indptr[data->nusers];
	CHECK_FOR_INTERRUPTS();

	wals_csr_transpose(&data->by_user, &data->by_item);
}
