/*
 * refresh_source.c
 *	  A refresh that solves items holding much of the source reads the
 *	  whole source as a training does, with its parallel workers.
 *
 * solve_items => 'touched' names, on a skewed catalog, the items that hold
 * most of the ratings, and the items a refresh solves again must be solved
 * from all of their ratings.  Read through an index, every one of those
 * rows goes through the executor of the leader alone; read as a training
 * reads its source (ingest.c), a plain table is scanned in place by the
 * leader and parallel workers together (ingest_parallel.c), as many as
 * max_parallel_maintenance_workers allows, and any other source through
 * SPI by the leader.  The rows of other items are dropped once read.
 *
 * A training's read keeps 12 bytes a row of the source, the index's read
 * 24 bytes a rating of the items solved; the whole source is read when
 * the items hold at least a quarter of it, where it takes at most twice
 * the memory, and wals.max_memory bounds both as it bounds a training.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"

#include "wals_serve.h"
#include "wals_train.h"

/* One in so many of the source's rows, at least, makes it read whole. */
#define REFRESH_WHOLE_SHARE		4

/*
 * Whether the ratings of items holding expected ratings (negative: not
 * known) are read from the whole source: a table or materialized view, the
 * planner's estimate of its rows at most REFRESH_WHOLE_SHARE times theirs,
 * and the rows read, with their id maps (12 bytes a row each, at most),
 * within wals.max_memory.
 */
bool
wals_refresh_reads_whole(const WalsModelInfo *info, double expected)
{
	char		relkind = get_rel_relkind(info->source);
	Relation	rel;
	double		rows;

	if (expected <= 0 || (relkind != RELKIND_RELATION && relkind != RELKIND_MATVIEW))
		return false;
	rel = table_open(info->source, AccessShareLock);
	rows = wals_ingest_estimate(rel);
	table_close(rel, NoLock);
	return expected * REFRESH_WHOLE_SHARE >= rows &&
		(wals_max_memory <= 0 || rows * 24.0 <= wals_max_memory * 1024.0);
}

/*
 * Every rating in the source of items ids[0..n) (increasing), read as the
 * model's owner by the reader of a training; *ncells gets their number.
 */
WalsCell *
wals_refresh_read_whole(const WalsModelInfo *info, const int64 *ids, int64 n, int64 *ncells)
{
	WalsTrainArgs args = {0};
	WalsRatings raw;
	bool	   *keep;
	WalsCell   *cells;
	int64		m = 0;

	args.source = info->source;
	args.source_display = wals_check_source(info->source, "source");
	args.source_name = wals_relation_name(info->source);
	args.user_col = info->user_col;
	args.item_col = info->item_col;
	args.rating_col = info->rating_col;
	args.model_display = info->display;
	args.params.feedback = info->params.feedback;
	args.workers = max_parallel_maintenance_workers;
	wals_ingest(&args, &raw, true);

	/* the source's items, increasing, against ids, increasing */
	keep = palloc0(sizeof(bool) * Max(raw.nitems, 1));
	for (int64 k = 0, i = 0; k < raw.nitems && i < n;)
	{
		if (((k + i) & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		if (raw.item_ids[k] < ids[i])
			k++;
		else if (raw.item_ids[k] > ids[i])
			i++;
		else
			keep[k++] = true;
	}
	for (int64 r = 0; r < raw.n; r++)
	{
		if ((r & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		m += keep[raw.items[r]];
	}
	cells = palloc_extended(sizeof(WalsCell) * Max(m, 1), MCXT_ALLOC_HUGE);
	m = 0;
	for (int64 r = 0; r < raw.n; r++)
	{
		if ((r & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		if (!keep[raw.items[r]])
			continue;
		cells[m].user = raw.user_ids[raw.users[r]];
		cells[m].item = raw.item_ids[raw.items[r]];
		cells[m++].rating = raw.ratings[r];
	}
	wals_ratings_free(&raw, WALS_ROWS_USERS);
	wals_ratings_free(&raw, WALS_ROWS_ITEMS);
	wals_ratings_free(&raw, WALS_ROWS_RATINGS);
	pfree(raw.user_ids);
	pfree(raw.item_ids);
	pfree(keep);
	*ncells = m;
	return cells;
}
