/*
 * validate_shared.c
 *	  The validation's part of the CPU engine's shared block: what the
 *	  leader and its parallel workers need to score the held-out cells
 *	  together, each taking chunks of the users as they take rows in a
 *	  sweep.
 *
 * The area places its sections by offsets, so that the leader can build
 * it in its own memory and copy it into the parallel context's segment,
 * and each process maps it at its own address; the pointers of the
 * index's header each process replaces with its own.  It carries a
 * copy of the held-out cells (the leader's, private), the users scored
 * (wals_holdout_pick's), one accumulator per user and the int8 index of
 * the item factors, rebuilt before each validation: the leader orders the
 * items, every process quantises chunks of the blocks, and the leader
 * maps items to positions.  A process writes only its chunk's
 * accumulators; the leader merges them in user order, so the metric has
 * the same bits as one process scoring the users in turn, whatever the
 * number of workers.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "wals_train.h"

/* Users scored a chunk: a block of the core's scoring, a few milliseconds. */
#define WALS_VALIDATION_CHUNK	WALS_HOLDOUT_BLOCK

/*
 * Blocks of the index a chunk quantises: 2,048 items, a millisecond or so
 * at f = 128, enough chunks for every process at 20,000 items and more.
 */
#define WALS_VALIDATION_INDEX_CHUNK	128

typedef struct ValidationArea
{
	int			k;
	bool		with_auc;
	int			factors;
	int64		nusers;			/* rows of the held cells and of X */
	int64		nitems;
	int64		npicked;		/* users scored */
	int64		nheld;
	Size		held_indptr;	/* offsets from the area's start */
	Size		held_indices;
	Size		users;
	Size		parts;
	Size		index;
	Size		index_blocks;	/* where the built index's blocks begin */
	WalsScoreIndex header;		/* its scalars; pointers set per process */
	Size		total;
} ValidationArea;

/* The area's shape for this training, sections unset when area is NULL. */
static Size
plan(const WalsTrainArgs *args, const WalsData *data, ValidationArea *area)
{
	ValidationArea local;
	Size		off = TYPEALIGN(WALS_AREA_ALIGN, sizeof(ValidationArea));
	int64		npicked = wals_holdout_users(&data->held, WALS_VALIDATION_USERS);
	int64		nheld = data->held.indptr[data->nusers];

	if (area == NULL)
		area = &local;
	memset(area, 0, sizeof(*area));
	area->k = args->validation_k;
	area->with_auc = args->validation_kind == WALS_METRIC_AUC;
	area->factors = args->params.factors;
	area->nusers = data->nusers;
	area->nitems = data->nitems;
	area->npicked = npicked;
	area->nheld = nheld;
	area->held_indptr = wals_area_section(&off, sizeof(int64) * (data->nusers + 1));
	area->held_indices = wals_area_section(&off, sizeof(int32) * nheld);
	area->users = wals_area_section(&off, sizeof(int64) * npicked);
	area->parts = wals_area_section(&off, sizeof(WalsMetricsAcc) * npicked);
	area->index = wals_area_section(&off, wals_score_index_size(data->nitems, args->params.factors));
	area->total = MAXALIGN(off);
	return area->total;
}

Size
wals_validation_area_bytes(const WalsTrainArgs *args, const WalsData *data)
{
	if (!wals_validating(args))
		return 0;
	return plan(args, data, NULL);
}

/*
 * The area, at a MAXALIGNed address: offsets from it alone, not its
 * address, place the sections, since the leader fills it in its own memory
 * and copies it into the segment.
 */
static char *
area_base(void *area)
{
	Assert(area == (void *) MAXALIGN(area));
	return area;
}

void
wals_validation_area_fill(void *mem, const WalsTrainArgs *args, const WalsData *data)
{
	char	   *base = area_base(mem);
	ValidationArea *area = (ValidationArea *) base;

	plan(args, data, area);
	memcpy(base + area->held_indptr, data->held.indptr, sizeof(int64) * (data->nusers + 1));
	memcpy(base + area->held_indices, data->held.indices, sizeof(int32) * area->nheld);
	wals_holdout_pick(&data->held, WALS_VALIDATION_USERS, (int64_t *) (base + area->users));
}

int64
wals_validation_area_chunks(void *mem)
{
	ValidationArea *area = (ValidationArea *) area_base(mem);

	return (area->npicked + WALS_VALIDATION_CHUNK - 1) / WALS_VALIDATION_CHUNK;
}

/*
 * A process's view of the area at mem (the leader's or a worker's
 * mapping), its training cells and factors in its own mapping of the
 * workspace.
 */
void
wals_validation_area_map(void *mem, const WalsWorkspace *ws, WalsValidationView *view)
{
	char	   *base = area_base(mem);
	ValidationArea *area = (ValidationArea *) base;

	memset(view, 0, sizeof(*view));
	view->area = mem;
	view->ws = ws;
	view->held.nrows = area->nusers;
	view->held.ncols = area->nitems;
	view->held.indptr = (int64 *) (base + area->held_indptr);
	view->held.indices = (int32 *) (base + area->held_indices);
	view->users = (int64 *) (base + area->users);
	view->parts = (WalsMetricsAcc *) (base + area->parts);
	view->cxt = CurrentMemoryContext;
}

/*
 * The index of the item factors as they are now, begun by the leader
 * before the chunks of its blocks are handed out: the items' norms and
 * their order, O(items f) but a small part of the build.
 */
void
wals_validation_index_begin(WalsValidationView *view)
{
	char	   *base = area_base(view->area);
	ValidationArea *area = (ValidationArea *) base;
	WalsStatus	st;

	st = wals_score_index_begin(&area->header, view->ws->Y, area->nitems, area->factors,
								base + area->index);
	if (st != WALS_OK)
		wals_report_core_status(st, "indexing the item factors for the validation");
	area->index_blocks = (const char *) area->header.blocks - base;
}

int64
wals_validation_index_chunks(void *mem)
{
	ValidationArea *area = (ValidationArea *) area_base(mem);

	return (wals_score_index_blocks(&area->header) + WALS_VALIDATION_INDEX_CHUNK - 1) /
		WALS_VALIDATION_INDEX_CHUNK;
}

/* This process's copy of the index's header, pointing into its mappings. */
static WalsScoreIndex
mapped_index(const WalsValidationView *view)
{
	char	   *base = area_base(view->area);
	ValidationArea *area = (ValidationArea *) base;
	WalsScoreIndex ix = area->header;

	wals_score_index_remap(&ix, view->ws->Y, base + area->index_blocks);
	return ix;
}

/* Quantise the blocks of chunk, in any process. */
void
wals_validation_index_chunk(WalsValidationView *view, int64 chunk)
{
	WalsScoreIndex ix = mapped_index(view);
	int64		lo = chunk * WALS_VALIDATION_INDEX_CHUNK;

	wals_score_index_fill(&ix, lo, Min(lo + WALS_VALIDATION_INDEX_CHUNK,
									   wals_score_index_blocks(&ix)));
}

/* The leader, once every block is quantised: the index is ready. */
void
wals_validation_index_end(WalsValidationView *view)
{
	WalsScoreIndex ix = mapped_index(view);

	wals_score_index_end(&ix);
}

/* Score the users of chunk, in any process, into their accumulators. */
void
wals_validation_area_chunk(WalsValidationView *view, int64 chunk)
{
	ValidationArea *area = (ValidationArea *) area_base(view->area);
	WalsScoreIndex ix = mapped_index(view);
	int64		lo = chunk * WALS_VALIDATION_CHUNK;
	int64		n = Min(area->npicked - lo, WALS_VALIDATION_CHUNK);
	WalsStatus	st;

	if (view->scratch == NULL)
		view->scratch = MemoryContextAllocHuge(view->cxt,
											   wals_holdout_scratch(area->nitems, area->factors,
																	area->k, area->with_auc));
	st = wals_holdout_score(&ix, view->ws->X, &view->ws->by_user, &view->held,
							view->users + lo, n, area->k, area->with_auc, view->scratch,
							view->parts + lo);
	if (st != WALS_OK)
		wals_report_core_status(st, "measuring the validation metric");
}

/* The leader, once every chunk is scored: the metrics of all users. */
void
wals_validation_area_merge(const WalsValidationView *view, WalsMetrics *out)
{
	ValidationArea *area = (ValidationArea *) area_base(view->area);
	WalsMetricsAcc acc;

	wals_metrics_init(&acc, area->k);
	for (int64 j = 0; j < area->npicked; j++)
		wals_metrics_merge(&acc, &view->parts[j]);
	wals_metrics_finish(&acc, out);
}
