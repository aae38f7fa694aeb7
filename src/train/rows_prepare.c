/*
 * rows_prepare.c
 *	  The rows read renumbered, and their ratings coded, by the leader and
 *	  the training's workers.
 *
 * Once a table is read, its rows carry provisional indices, and the
 * ratings are floats (ingest.c): the leader alone turned the indices into
 * ranks, then the ratings into codes (workspace.c), two passes over every
 * row, half a second of one core at 100 million rows while the others
 * idled.  Where the leader keeps its rows in shared segments, as it does
 * when workers read the table with it, they are cut into ranges that the
 * leader and the workers take from a counter: each renumbers its range
 * through the ranks, which the leader copies beside them, and codes its
 * ratings with a codebook of its own.  The leader then merges the
 * codebooks in the order of the ranges, which gives each value the code
 * one pass over all the rows in order would give it; the ranges whose
 * codes that changes are recoded in a second step.  The rows and codes
 * are the same, to the bit, with any number of workers.  A range with
 * more distinct ratings than codes hold, or ranges that make as many
 * together, leave the ratings as floats, and the codes are freed.
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

#define WALS_PREPARE_KEY		1

/* Rows below which the leader prepares them alone: tens of milliseconds. */
#define WALS_PREPARE_PARALLEL_MIN_ROWS	((int64) 4 << 20)

/* Ranges a process takes, on average, so that none waits long on the last. */
#define WALS_PREPARE_RANGES_EACH	16

/* The shared arrays: user and item indices, ratings, codes. */
#define PREPARE_ARRAYS	4

typedef enum PrepareStep
{
	PREPARE_RENUMBER,			/* renumber and code each range */
	PREPARE_RECODE,				/* recode the ranges whose codes changed */
	PREPARE_STEPS
} PrepareStep;

/* One range of rows, and what coding it found. */
typedef struct PrepareRange
{
	int64		lo;
	int64		hi;
	bool		coded;			/* its ratings took codes of cb */
	bool		recode;			/* its codes change to the merged book's */
	WalsCodebook cb;
	uint8		to[WALS_CODES]; /* cb's codes in the merged book */
} PrepareRange;

/*
 * What the processes share, followed by the ranges, the user ranks and
 * the item ranks.
 */
typedef struct PrepareShared
{
	dsm_handle	handle[PREPARE_ARRAYS];
	int64		nusers;
	int64		nitems;
	int64		nranges;
	bool		code;			/* code the ratings too */
	pg_atomic_uint32 step;
	pg_atomic_uint64 next[PREPARE_STEPS];
	pg_atomic_uint64 done[PREPARE_STEPS];
	ConditionVariable cv;		/* a step opened, or finished */
} PrepareShared;

/* The rows as one process maps them. */
typedef struct PrepareRows
{
	int32	   *users;
	int32	   *items;
	float	   *ratings;
	uint8	   *codes;
} PrepareRows;

PGDLLEXPORT void wals_prepare_main(dsm_segment *seg, shm_toc *toc);

static PrepareRange *
ranges_of(PrepareShared *sh)
{
	return (PrepareRange *) ((char *) sh + MAXALIGN(sizeof(PrepareShared)));
}

static int32 *
user_ranks(PrepareShared *sh)
{
	return (int32 *) (ranges_of(sh) + sh->nranges);
}

static int32 *
item_ranks(PrepareShared *sh)
{
	return user_ranks(sh) + sh->nusers;
}

/* Take the ranges of step until none is left; the last to finish says so. */
static void
take(PrepareShared *sh, PrepareStep step, const PrepareRows *rows)
{
	PrepareRange *ranges = ranges_of(sh);

	for (;;)
	{
		int64		i = (int64) pg_atomic_fetch_add_u64(&sh->next[step], 1);
		PrepareRange *r;

		if (i >= sh->nranges)
			return;
		r = &ranges[i];
		CHECK_FOR_INTERRUPTS();
		if (step == PREPARE_RENUMBER)
		{
			wals_idmap_renumber(rows->users + r->lo, r->hi - r->lo, user_ranks(sh));
			wals_idmap_renumber(rows->items + r->lo, r->hi - r->lo, item_ranks(sh));
			if (sh->code)
			{
				wals_codebook_init(&r->cb);
				r->coded = wals_codebook_take(&r->cb, rows->ratings + r->lo, r->hi - r->lo,
											  rows->codes + r->lo);
			}
		}
		else if (r->recode)
		{
			for (int64 k = r->lo; k < r->hi; k++)
				rows->codes[k] = r->to[rows->codes[k]];
		}
		if ((int64) pg_atomic_add_fetch_u64(&sh->done[step], 1) == sh->nranges)
			ConditionVariableBroadcast(&sh->cv);
	}
}

/* Entry point of a parallel worker: take the ranges of each step. */
void
wals_prepare_main(dsm_segment *seg, shm_toc *toc)
{
	PrepareShared *sh = shm_toc_lookup(toc, WALS_PREPARE_KEY, false);
	dsm_segment *segs[PREPARE_ARRAYS] = {0};
	void	   *p[PREPARE_ARRAYS] = {0};
	PrepareRows rows;

	for (int a = 0; a < (sh->code ? PREPARE_ARRAYS : PREPARE_ARRAYS - 1); a++)
		p[a] = wals_build_attach(sh->handle[a], &segs[a]);
	rows.users = p[0];
	rows.items = p[1];
	rows.ratings = p[2];
	rows.codes = p[3];
	for (int step = PREPARE_RENUMBER; step < PREPARE_STEPS; step++)
	{
		/* the leader found nothing to recode */
		if (wals_build_wait_step(&sh->cv, &sh->step, (uint32) step) == PREPARE_STEPS)
			break;
		take(sh, (PrepareStep) step, &rows);
	}
	for (int a = 0; a < PREPARE_ARRAYS; a++)
		if (segs[a] != NULL)
			dsm_detach(segs[a]);
}

/*
 * Merge the ranges' codebooks into cb, in their order, and mark the ranges
 * whose codes change; false where the ratings cannot take codes.
 */
static bool
merge_codebooks(PrepareShared *sh, WalsCodebook *cb, bool *recode)
{
	PrepareRange *ranges = ranges_of(sh);

	wals_codebook_init(cb);
	*recode = false;
	for (int64 i = 0; i < sh->nranges; i++)
	{
		PrepareRange *r = &ranges[i];

		if (!r->coded)
			return false;
		r->recode = false;
		for (int c = 0; c < r->cb.n; c++)
		{
			int			code = wals_codebook_code(cb, r->cb.value[c]);

			if (code < 0)
				return false;
			r->to[c] = (uint8) code;
			r->recode |= code != c;
		}
		*recode |= r->recode;
	}
	return true;
}

/* See wals_train.h. */
bool
wals_rows_prepare(const WalsTrainArgs *args, WalsRatings *raw, const int32 *user_rank,
				  const int32 *item_rank, bool code)
{
	int64		per_range;
	int64		nranges;
	Size		bytes;
	ParallelContext *pcxt;
	PrepareShared *sh;
	PrepareRange *ranges;
	PrepareRows rows = {raw->users, raw->items, raw->ratings, NULL};
	bool		recode = false;

	if (args->workers <= 0 || raw->n < WALS_PREPARE_PARALLEL_MIN_ROWS ||
		raw->seg[WALS_ROWS_USERS] == NULL || raw->seg[WALS_ROWS_ITEMS] == NULL ||
		raw->seg[WALS_ROWS_RATINGS] == NULL || IsInParallelMode())
		return false;
	per_range = Max(raw->n / ((int64) (args->workers + 1) * WALS_PREPARE_RANGES_EACH), 1);
	nranges = (raw->n + per_range - 1) / per_range;
	bytes = MAXALIGN(sizeof(PrepareShared)) + nranges * sizeof(PrepareRange) +
		(raw->nusers + raw->nitems) * sizeof(int32);
	if (code)
	{
		wals_ratings_alloc_codes(raw);
		code = raw->codes_seg != NULL;
		if (!code)
			wals_ratings_free_codes(raw);
	}
	pcxt = wals_build_open_context("wals_prepare_main", args->workers, bytes,
								   WALS_PREPARE_KEY, (void **) &sh);
	if (pcxt == NULL)
	{
		wals_ratings_free_codes(raw);
		return false;
	}
	rows.codes = raw->codes;
	sh->handle[0] = dsm_segment_handle(raw->seg[WALS_ROWS_USERS]);
	sh->handle[1] = dsm_segment_handle(raw->seg[WALS_ROWS_ITEMS]);
	sh->handle[2] = dsm_segment_handle(raw->seg[WALS_ROWS_RATINGS]);
	sh->handle[3] = code ? dsm_segment_handle(raw->codes_seg) : 0;
	sh->nusers = raw->nusers;
	sh->nitems = raw->nitems;
	sh->nranges = nranges;
	sh->code = code;
	ranges = ranges_of(sh);
	for (int64 i = 0; i < nranges; i++)
	{
		ranges[i].lo = i * per_range;
		ranges[i].hi = Min(raw->n, (i + 1) * per_range);
		ranges[i].coded = false;
		ranges[i].recode = false;
	}
	memcpy(user_ranks(sh), user_rank, raw->nusers * sizeof(int32));
	memcpy(item_ranks(sh), item_rank, raw->nitems * sizeof(int32));
	pg_atomic_init_u32(&sh->step, PREPARE_RENUMBER);
	for (int step = 0; step < PREPARE_STEPS; step++)
	{
		pg_atomic_init_u64(&sh->next[step], 0);
		pg_atomic_init_u64(&sh->done[step], 0);
	}
	ConditionVariableInit(&sh->cv);
	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: renumbering the rows read%s with %d parallel workers",
							 code ? " and coding their ratings" : "",
							 pcxt->nworkers_launched)));

	take(sh, PREPARE_RENUMBER, &rows);
	wals_build_wait(&sh->cv, &sh->done[PREPARE_RENUMBER], sh->nranges);
	if (code)
	{
		raw->codebook = MemoryContextAlloc(CurrentMemoryContext, sizeof(WalsCodebook));
		if (!merge_codebooks(sh, raw->codebook, &recode))
		{
			pfree(raw->codebook);
			raw->codebook = NULL;
			recode = false;
		}
	}
	if (recode)
	{
		wals_build_open_step(&sh->cv, &sh->step, PREPARE_RECODE);
		take(sh, PREPARE_RECODE, &rows);
		wals_build_wait(&sh->cv, &sh->done[PREPARE_RECODE], sh->nranges);
	}
	else
		wals_build_open_step(&sh->cv, &sh->step, PREPARE_STEPS);
	raw->codes_tried = code;
	WaitForParallelWorkersToFinish(pcxt);
	wals_build_close_context(pcxt);
	/* only now: a worker that starts late still maps every segment */
	if (raw->codebook == NULL)
		wals_ratings_free_codes(raw);
	return true;
}
