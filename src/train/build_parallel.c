/*
 * build_parallel.c
 *	  The transposes of a training's build taken by the leader and parallel
 *	  workers.
 *
 * The rows are read by the leader and the training's workers together
 * (ingest_parallel.c), but the transposes that made the matrices by user
 * and by item (matrices.c) ran in the leader alone, a third of the load
 * of 100 million ratings on two cores while the other core idled.  (The
 * transpose back to the matrix by item is now taken only after a
 * validation share; build_rows.c sorts its rows instead.)
 * Where the training has workers and both blocks of its workspace are
 * shared segments, each transpose is cut into the steps of
 * src/core/csr.c's split (count each chunk of rows, scatter each chunk,
 * sort each partition), which the leader and as many workers as the
 * training has take from atomic counters, one step after the other; the
 * leader alone adds the counts up and plans, and merges the duplicates at
 * the end, from the first partition whose sort found one (none, for most
 * sources).  Every item of a step lands at positions fixed before the
 * step, so the matrices are the same, to the bit, with any number of
 * workers.  A transpose too small to pay for starting workers
 * (a few milliseconds each, and mapping the blocks), or too small for two
 * levels, is taken by the leader alone, as before.
 *
 * The scatter of the rows read into the matrix by item (matrices.c) is
 * cut into the same steps where the rows are in shared segments, as the
 * leader keeps them when workers read the table with it (ingest.c): each
 * chunk is a run of rows read.  The workers map the rows only through the
 * count and the scatter, and the leader waits for each to let them go
 * before it frees them and makes the users' block while the partitions
 * are sorted, so that the rows, the items' block and the users' block
 * never all exist at once.  Rows in the leader's own memory it counts
 * and partitions alone; the sorting of the partitions is shared all the
 * same.
 *
 * The starting factors, each entry a function of the seed, the row's id
 * and its column (src/core/init.c), are drawn the same way, blocks of rows
 * taken from a counter: six hashes, a logarithm and a cosine an entry, two
 * seconds of one core for the 49 million entries of 766,000 rows at f = 64.
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

#define WALS_BUILD_KEY		1
#define WALS_INIT_KEY		2

/* Rows of starting factors a process draws at a time. */
#define WALS_INIT_BLOCK		4096

/* Entries below which the leader draws them alone: some 40 ms. */
#define WALS_INIT_PARALLEL_MIN	((int64) 1 << 20)

/* The shared arrays of rows a scatter reads: items, users, codes. */
#define BUILD_ROWS			3
#define BUILD_ROWS_CLOSED	0x80000000

/* What a step reads: a matrix, or the rows read. */
typedef struct BuildInput
{
	const WalsCsr *csr;
	const int32 *items;
	const int32 *users;
	const uint8 *codes;
} BuildInput;

/*
 * Chunks of a scatter of rows a process counts and scatters, on average:
 * each counts every row of the matrix by item, 4 bytes a row.
 */
#define WALS_BUILD_ROWS_CHUNKS_EACH	4

typedef enum BuildStep
{
	BUILD_COUNT,
	BUILD_SCATTER,
	BUILD_SORT,
	BUILD_STEPS
} BuildStep;

/*
 * What the processes share, followed by the split.  Each step has its own
 * counters, so that a process late on one step never takes an item of
 * the next under it.
 */
typedef struct BuildShared
{
	WalsWorkspaceShape shape;
	bool		to_users;		/* by item into by user, else back */
	bool		scatter;		/* the rows scattered by item */
	bool		rows;			/* ... from shared segments, in every step */
	dsm_handle	rows_handle[BUILD_ROWS];
	/* the processes that map the rows, and BUILD_ROWS_CLOSED once none may */
	pg_atomic_uint32 rows_maps;
	Size		scratch_bytes;
	pg_atomic_uint32 step;		/* the latest step opened */
	pg_atomic_uint64 next[BUILD_STEPS];
	pg_atomic_uint64 done[BUILD_STEPS];
	ConditionVariable cv;		/* a step opened, or finished */
	/* each partition sorted, for the leader merging behind the sorts */
	pg_atomic_uint32 sorted[WALS_CSR_MAX_PARTS];
} BuildShared;

PGDLLEXPORT void wals_build_main(dsm_segment *seg, shm_toc *toc);

static WalsCsrSplit *
split_of(BuildShared *sh)
{
	return (WalsCsrSplit *) ((char *) sh + MAXALIGN(sizeof(BuildShared)));
}

static int64
step_items(BuildShared *sh, BuildStep step)
{
	return step == BUILD_SORT ? wals_csr_split_parts(split_of(sh)) :
		wals_csr_split_chunks(split_of(sh));
}

/*
 * Take an item of step, if one is left; the last to finish says so, and
 * in the merging transpose each sort says so too, for the leader merging
 * behind them.
 */
static bool
take_one(BuildShared *sh, BuildStep step, const BuildInput *in, WalsCsr *out, void *scratch)
{
	WalsCsrSplit *s = split_of(sh);
	int64		n = step_items(sh, step);
	int64		i = (int64) pg_atomic_fetch_add_u64(&sh->next[step], 1);
	bool		mark = step == BUILD_SORT && sh->to_users;
	WalsStatus	st = WALS_OK;

	if (i >= n)
		return false;
	CHECK_FOR_INTERRUPTS();
	if (step == BUILD_COUNT && sh->rows)
		st = wals_csr_split_rows_count(s, out, in->items, in->users, in->codes, i);
	else if (step == BUILD_COUNT)
		wals_csr_split_count(s, in->csr, i);
	else if (step == BUILD_SCATTER && sh->rows)
		st = wals_csr_split_rows_scatter(s, in->items, in->users, in->codes, out, i,
										 scratch, sh->scratch_bytes);
	else if (step == BUILD_SCATTER)
		st = wals_csr_split_scatter(s, in->csr, out, i, scratch, sh->scratch_bytes);
	else
		st = wals_csr_split_sort(s, out, i, sh->to_users, scratch, sh->scratch_bytes);
	wals_report_core_status(st, "building the rating matrices");
	if (mark)
	{
		pg_write_barrier();
		pg_atomic_write_u32(&sh->sorted[i], 1);
	}
	if ((int64) pg_atomic_add_fetch_u64(&sh->done[step], 1) == n || mark)
		ConditionVariableBroadcast(&sh->cv);
	return true;
}

/* Take items of step until none is left. */
static void
take(BuildShared *sh, BuildStep step, const BuildInput *in, WalsCsr *out, void *scratch)
{
	while (take_one(sh, step, in, out, scratch))
		;
}

/* See wals_train.h. */
void
wals_build_wait(ConditionVariable *cv, pg_atomic_uint64 *done, int64 n)
{
	ConditionVariablePrepareToSleep(cv);
	while ((int64) pg_atomic_read_u64(done) < n)
		ConditionVariableSleep(cv, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
	pg_read_barrier();
}

/* Wait until every item of step is done (the leader). */
static void
wait_done(BuildShared *sh, BuildStep step)
{
	wals_build_wait(&sh->cv, &sh->done[step], step_items(sh, step));
}

/* See wals_train.h. */
void
wals_build_open_step(ConditionVariable *cv, pg_atomic_uint32 *step, uint32 open)
{
	pg_write_barrier();
	pg_atomic_write_u32(step, open);
	ConditionVariableBroadcast(cv);
}

/* See wals_train.h. */
uint32
wals_build_wait_step(ConditionVariable *cv, pg_atomic_uint32 *step, uint32 at_least)
{
	uint32		open;

	ConditionVariablePrepareToSleep(cv);
	while ((open = pg_atomic_read_u32(step)) < at_least)
		ConditionVariableSleep(cv, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
	pg_read_barrier();
	return open;
}

/* See wals_train.h. */
void *
wals_build_attach(dsm_handle h, dsm_segment **seg)
{
	*seg = dsm_attach(h);
	if (*seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not map the shared memory of the training")));
	return dsm_segment_address(*seg);
}

/* Open step for every process (the leader), once the one before is done. */
static void
open_step(BuildShared *sh, BuildStep step)
{
	wals_build_open_step(&sh->cv, &sh->step, (uint32) step);
}

/*
 * Map the rows of a scatter (a worker), unless the leader has closed them:
 * then their count and scatter are done, and the worker only sorts.
 */
static bool
map_rows(BuildShared *sh, dsm_segment **segs, BuildInput *in)
{
	uint32		maps = pg_atomic_read_u32(&sh->rows_maps);
	void	   *p[BUILD_ROWS];

	do
	{
		if (maps & BUILD_ROWS_CLOSED)
			return false;
	} while (!pg_atomic_compare_exchange_u32(&sh->rows_maps, &maps, maps + 1));
	for (int a = 0; a < BUILD_ROWS; a++)
		p[a] = wals_build_attach(sh->rows_handle[a], &segs[a]);
	in->items = p[0];
	in->users = p[1];
	in->codes = p[2];
	return true;
}

/* Let the rows go (a worker), so that the leader may free them. */
static void
unmap_rows(BuildShared *sh, dsm_segment **segs)
{
	for (int a = 0; a < BUILD_ROWS; a++)
		dsm_detach(segs[a]);
	pg_atomic_fetch_sub_u32(&sh->rows_maps, 1);
	ConditionVariableBroadcast(&sh->cv);
}

/*
 * Close the rows of a scatter (the leader): no worker maps them after, and
 * none maps them once this returns.
 */
static void
close_rows(BuildShared *sh)
{
	pg_atomic_fetch_or_u32(&sh->rows_maps, BUILD_ROWS_CLOSED);
	ConditionVariablePrepareToSleep(&sh->cv);
	while (pg_atomic_read_u32(&sh->rows_maps) != BUILD_ROWS_CLOSED)
		ConditionVariableSleep(&sh->cv, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
}

/* Entry point of a parallel worker: take the items of every step. */
void
wals_build_main(dsm_segment *seg, shm_toc *toc)
{
	BuildShared *sh = shm_toc_lookup(toc, WALS_BUILD_KEY, false);
	WalsWorkspace ws;
	void	   *scratch = MemoryContextAllocHuge(CurrentMemoryContext, sh->scratch_bytes);
	BuildInput	in = {0};
	WalsCsr    *out;
	dsm_segment *rows[BUILD_ROWS];
	bool		mapped = false;

	if (sh->scatter)
		wals_workspace_attach_items(&sh->shape, &ws);
	else
		wals_workspace_attach(&sh->shape, &ws);
	in.csr = sh->to_users ? &ws.by_item : &ws.by_user;
	out = sh->to_users ? &ws.by_user : &ws.by_item;
	if (sh->rows)
		mapped = map_rows(sh, rows, &in);
	for (int step = BUILD_COUNT; step < BUILD_STEPS; step++)
	{
		/* the leader found no partitions to plan: it transposes alone */
		if (wals_build_wait_step(&sh->cv, &sh->step, (uint32) step) == BUILD_STEPS)
			break;
		if (sh->rows && step != BUILD_SORT && !mapped)
			continue;
		/* one late for the scatter maps nothing: the leader may wait on it */
		if (step == BUILD_SCATTER &&
			(int64) pg_atomic_read_u64(&sh->next[step]) < step_items(sh, BUILD_SCATTER))
			wals_workspace_map_cells(&ws, out == &ws.by_user ? WALS_BLOCK_USERS :
									 WALS_BLOCK_ITEMS);
		take(sh, (BuildStep) step, &in, out, scratch);
		/* the leader waits for the rows to be let go before it sorts */
		if (mapped && step == BUILD_SCATTER)
		{
			unmap_rows(sh, rows);
			mapped = false;
		}
	}
	if (mapped)
		unmap_rows(sh, rows);
	wals_workspace_release(&ws);
	pfree(scratch);
}

/* See wals_train.h. */
bool
wals_build_may_share(const WalsTrainArgs *args, const WalsWorkspace *ws)
{
	return args->workers >= 1 && !IsInParallelMode() && !ws->shape.files &&
		ws->seg[WALS_BLOCK_ITEMS] != NULL &&
		(ws->base[WALS_BLOCK_USERS] == NULL || ws->seg[WALS_BLOCK_USERS] != NULL);
}

/* See wals_train.h. */
void
wals_build_close_context(ParallelContext *pcxt)
{
	DestroyParallelContext(pcxt);
	ExitParallelMode();
}

/* See wals_train.h. */
ParallelContext *
wals_build_open_context(const char *entry, int workers, Size bytes, uint64 key, void **area)
{
	ParallelContext *pcxt;

	EnterParallelMode();
	pcxt = CreateParallelContext("wals", entry, workers);
	shm_toc_estimate_chunk(&pcxt->estimator, bytes);
	shm_toc_estimate_keys(&pcxt->estimator, 1);
	InitializeParallelDSM(pcxt);
	if (pcxt->seg == NULL)
	{
		wals_build_close_context(pcxt);
		return NULL;
	}
	*area = shm_toc_allocate(pcxt->toc, bytes);
	shm_toc_insert(pcxt->toc, key, *area);
	return pcxt;
}

/* Ready sh for the workers, first opened. */
static void
init_shared(BuildShared *sh, const WalsWorkspace *ws, bool to_users, bool scatter,
			Size scratch_bytes, BuildStep first)
{
	sh->shape = ws->shape;
	sh->to_users = to_users;
	sh->scatter = scatter;
	sh->rows = false;
	pg_atomic_init_u32(&sh->rows_maps, 0);
	sh->scratch_bytes = scratch_bytes;
	pg_atomic_init_u32(&sh->step, (uint32) first);
	for (int step = 0; step < BUILD_STEPS; step++)
	{
		pg_atomic_init_u64(&sh->next[step], 0);
		pg_atomic_init_u64(&sh->done[step], 0);
	}
	for (int p = 0; p < WALS_CSR_MAX_PARTS; p++)
		pg_atomic_init_u32(&sh->sorted[p], 0);
	ConditionVariableInit(&sh->cv);
}

/*
 * The sorts of the merging transpose, the leader merging each partition
 * once it and those before it are sorted, between the sorts it takes, and
 * waiting on the next only where none is left to take: where pairs
 * repeat, the merge moves nearly every cell after the first repeat, a
 * quarter of a second at 100 million ratings that the leader took alone
 * after the sorts.  What wals_csr_split_end returns, the sorts done.
 */
static WalsStatus
sort_and_merge(BuildShared *sh, const BuildInput *in, WalsCsr *out, void *scratch,
			   WalsFeedback feedback)
{
	WalsCsrSplit *s = split_of(sh);
	int64		nparts = wals_csr_split_parts(s);
	WalsCsrMerge m;
	WalsStatus	st = WALS_OK;

	wals_csr_split_merge_begin(&m);
	while (m.part < nparts && st == WALS_OK)
	{
		if (pg_atomic_read_u32(&sh->sorted[m.part]) != 0)
		{
			pg_read_barrier();
			st = wals_csr_split_merge_part(s, out, &m, feedback);
			continue;
		}
		if (take_one(sh, BUILD_SORT, in, out, scratch))
			continue;
		ConditionVariablePrepareToSleep(&sh->cv);
		while (pg_atomic_read_u32(&sh->sorted[m.part]) == 0)
			ConditionVariableSleep(&sh->cv, PG_WAIT_EXTENSION);
		ConditionVariableCancelSleep();
	}
	/* a merge that failed leaves the sorts to finish before out is let go */
	take(sh, BUILD_SORT, in, out, scratch);
	wait_done(sh, BUILD_SORT);
	if (st == WALS_OK)
		wals_csr_split_merge_end(s, out, &m);
	return st;
}

/* The transpose of in into out, by the leader alone. */
static WalsStatus
transpose_alone(const WalsTrainArgs *args, const WalsCsr *in, WalsCsr *out, bool to_users,
				void *scratch, Size scratch_bytes)
{
	if (to_users)
		return wals_csr_transpose_merge(args->params.feedback, in, out, scratch, scratch_bytes);
	wals_csr_transpose_with(in, out, scratch, scratch_bytes);
	return WALS_OK;
}

/*
 * Transpose ws's matrix by item into its matrix by user (to_users, merging
 * duplicates) or back, through the leader's scratch, with the training's
 * workers where it pays; what wals_csr_transpose_merge (or
 * wals_csr_transpose_with) returns.
 */
WalsStatus
wals_build_transpose(const WalsTrainArgs *args, WalsWorkspace *ws, bool to_users,
					 void *scratch, Size scratch_bytes)
{
	WalsCsr    *in = to_users ? &ws->by_item : &ws->by_user;
	WalsCsr    *out = to_users ? &ws->by_user : &ws->by_item;
	BuildInput	input = {in};
	int64		nnz = in->indptr[in->nrows];
	ParallelContext *pcxt;
	BuildShared *sh;
	Size		bytes;
	bool		planned;
	WalsStatus	st = WALS_OK;

	if (nnz < WALS_BUILD_PARALLEL_MIN_CELLS || !wals_build_may_share(args, ws))
		return transpose_alone(args, in, out, to_users, scratch, scratch_bytes);

	bytes = MAXALIGN(sizeof(BuildShared)) + wals_csr_split_size(in->ncols, WALS_BUILD_COUNT_BYTES);
	pcxt = wals_build_open_context("wals_build_main", args->workers, bytes, WALS_BUILD_KEY,
								   (void **) &sh);
	if (pcxt == NULL || !wals_csr_split_begin(split_of(sh), in, out, WALS_BUILD_COUNT_BYTES))
	{
		if (pcxt != NULL)
			wals_build_close_context(pcxt);
		return transpose_alone(args, in, out, to_users, scratch, scratch_bytes);
	}
	init_shared(sh, ws, to_users, false, scratch_bytes, BUILD_COUNT);
	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: building the matrix by %s with %d parallel workers",
							 to_users ? "user" : "item", pcxt->nworkers_launched)));

	take(sh, BUILD_COUNT, &input, out, scratch);
	wait_done(sh, BUILD_COUNT);
	planned = wals_csr_split_plan(split_of(sh), out, scratch, scratch_bytes);
	if (planned)
	{
		open_step(sh, BUILD_SCATTER);
		take(sh, BUILD_SCATTER, &input, out, scratch);
		wait_done(sh, BUILD_SCATTER);
		open_step(sh, BUILD_SORT);
		if (to_users)
			st = sort_and_merge(sh, &input, out, scratch, args->params.feedback);
		else
		{
			take(sh, BUILD_SORT, &input, out, scratch);
			wait_done(sh, BUILD_SORT);
			st = wals_csr_split_end(split_of(sh), out, false, args->params.feedback);
		}
	}
	else
	{
		/* no partitions to sort: the workers have nothing left to take */
		open_step(sh, BUILD_STEPS);
	}
	WaitForParallelWorkersToFinish(pcxt);
	wals_build_close_context(pcxt);
	return planned ? st : transpose_alone(args, in, out, to_users, scratch, scratch_bytes);
}

/*
 * The count and pass A of the scatter of raw's rows, which are in shared
 * segments, taken with the workers of pcxt, not yet launched, through sh;
 * false, the workers gone, where the partitions could not be planned.
 */
static bool
scatter_rows(ParallelContext *pcxt, BuildShared *sh, WalsWorkspace *ws,
			 const WalsRatings *raw, void *scratch, Size scratch_bytes)
{
	BuildInput	input = {NULL, raw->items, raw->users, raw->codes};
	WalsCsrSplit *s = split_of(sh);

	init_shared(sh, ws, false, true, scratch_bytes, BUILD_COUNT);
	sh->rows = true;
	sh->rows_handle[0] = dsm_segment_handle(raw->seg[WALS_ROWS_ITEMS]);
	sh->rows_handle[1] = dsm_segment_handle(raw->seg[WALS_ROWS_USERS]);
	sh->rows_handle[2] = dsm_segment_handle(raw->codes_seg);
	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: scattering the rows read by item with %d parallel workers",
							 pcxt->nworkers_launched)));
	/* the workers count the rows, which the items' block takes no part in */
	wals_workspace_prefault(ws, WALS_BLOCK_ITEMS);
	take(sh, BUILD_COUNT, &input, &ws->by_item, scratch);
	wait_done(sh, BUILD_COUNT);
	if (!wals_csr_split_plan(s, &ws->by_item, scratch, scratch_bytes))
	{
		open_step(sh, BUILD_STEPS);
		WaitForParallelWorkersToFinish(pcxt);
		return false;
	}
	open_step(sh, BUILD_SCATTER);
	take(sh, BUILD_SCATTER, &input, &ws->by_item, scratch);
	wait_done(sh, BUILD_SCATTER);
	close_rows(sh);
	open_step(sh, BUILD_SORT);
	return true;
}

/*
 * See wals_train.h.  The count and pass A read the rows: with the workers
 * where the rows are shared segments, else in the leader alone, the
 * workers not yet started; pass B sorts each partition in the items'
 * block, which the workers map alone, the users' block not yet made.
 * The leader faults the items' block in while the workers count, where
 * they take the rows, and before it scatters them alone where not: a
 * quarter of a second of the leader alone at 100 million ratings.
 */
ParallelContext *
wals_build_scatter_begin(const WalsTrainArgs *args, WalsWorkspace *ws, const WalsRatings *raw,
						 void *scratch, Size scratch_bytes, WalsStatus *status)
{
	ParallelContext *pcxt = NULL;
	BuildShared *sh;
	WalsCsrSplit *s;
	bool		shared_rows = raw->seg[WALS_ROWS_USERS] != NULL &&
		raw->seg[WALS_ROWS_ITEMS] != NULL && raw->codes_seg != NULL;
	Size		count_bytes = 0;

	/* runs of rows cost the same: a few a process balance them */
	if (shared_rows)
		count_bytes = Min(WALS_BUILD_COUNT_BYTES,
						  (Size) (args->workers + 1) * WALS_BUILD_ROWS_CHUNKS_EACH *
						  (raw->nitems + 1) * sizeof(uint32));

	if (raw->n >= WALS_BUILD_PARALLEL_MIN_CELLS && wals_build_may_share(args, ws))
		pcxt = wals_build_open_context("wals_build_main", args->workers,
									   MAXALIGN(sizeof(BuildShared)) +
									   wals_csr_split_size(raw->nitems, count_bytes),
									   WALS_BUILD_KEY, (void **) &sh);
	if (pcxt != NULL && shared_rows &&
		wals_csr_split_rows_begin(split_of(sh), raw->nitems, raw->nusers, raw->n,
								  &ws->by_item, count_bytes))
	{
		*status = WALS_OK;
		if (scatter_rows(pcxt, sh, ws, raw, scratch, scratch_bytes))
			return pcxt;
		wals_build_close_context(pcxt);
		pcxt = NULL;
	}
	else
		wals_workspace_prefault(ws, WALS_BLOCK_ITEMS);
	if (pcxt == NULL)
	{
		*status = wals_csr_scatter_codes(raw->nitems, raw->nusers, raw->n, raw->items,
										 raw->users, raw->codes, &ws->by_item, scratch,
										 scratch_bytes);
		return NULL;
	}
	s = split_of(sh);
	*status = wals_csr_scatter_codes_split(s, raw->nitems, raw->nusers, raw->n, raw->items,
										   raw->users, raw->codes, &ws->by_item, scratch,
										   scratch_bytes);
	if (*status != WALS_OK || wals_csr_split_parts(s) == 0)
	{
		wals_build_close_context(pcxt);
		return NULL;
	}
	init_shared(sh, ws, false, true, scratch_bytes, BUILD_SORT);
	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: sorting the partitions of the matrix by item with %d parallel workers",
							 pcxt->nworkers_launched)));
	return pcxt;
}

/* See wals_train.h. */
WalsStatus
wals_build_scatter_end(ParallelContext *pcxt, WalsWorkspace *ws, void *scratch)
{
	BuildShared *sh = shm_toc_lookup(pcxt->toc, WALS_BUILD_KEY, false);
	BuildInput	input = {0};
	WalsStatus	st;

	take(sh, BUILD_SORT, &input, &ws->by_item, scratch);
	wait_done(sh, BUILD_SORT);
	st = wals_csr_split_end(split_of(sh), &ws->by_item, false, WALS_IMPLICIT);
	WaitForParallelWorkersToFinish(pcxt);
	wals_build_close_context(pcxt);
	return st;
}

/*
 * What the processes drawing the starting factors share, followed by the
 * ids of the users, then of the items.
 */
typedef struct InitShared
{
	WalsWorkspaceShape shape;
	int			f;
	float		scale;
	uint64		seed[2];		/* of the users' rows, of the items' */
	int64		nrows[2];
	pg_atomic_uint64 next;		/* the next block of rows to take */
} InitShared;

PGDLLEXPORT void wals_init_main(dsm_segment *seg, shm_toc *toc);

/* Draw blocks of rows, the users' then the items', until none is left. */
static void
init_blocks(InitShared *sh, float *X, float *Y)
{
	const int64 *ids[2];
	int64		blocks[2];

	ids[0] = (const int64 *) ((char *) sh + MAXALIGN(sizeof(InitShared)));
	ids[1] = ids[0] + sh->nrows[0];
	for (int side = 0; side < 2; side++)
		blocks[side] = (sh->nrows[side] + WALS_INIT_BLOCK - 1) / WALS_INIT_BLOCK;
	for (;;)
	{
		int64		b = (int64) pg_atomic_fetch_add_u64(&sh->next, 1);
		int			side = b < blocks[0] ? 0 : 1;
		int64		lo;

		if (b >= blocks[0] + blocks[1])
			return;
		CHECK_FOR_INTERRUPTS();
		lo = (side == 0 ? b : b - blocks[0]) * WALS_INIT_BLOCK;
		wals_init_rows(side == 0 ? X : Y, ids[side], lo,
					   Min(lo + WALS_INIT_BLOCK, sh->nrows[side]), sh->f, sh->seed[side],
					   sh->scale);
	}
}

/* Entry point of a parallel worker: draw blocks of the starting factors. */
void
wals_init_main(dsm_segment *seg, shm_toc *toc)
{
	InitShared *sh = shm_toc_lookup(toc, WALS_INIT_KEY, false);
	WalsWorkspace ws;

	wals_workspace_attach(&sh->shape, &ws);
	init_blocks(sh, ws.X, ws.Y);
	wals_workspace_release(&ws);
}

/*
 * Draw the starting factors of data's users into ws->X and of its items
 * into ws->Y (wals_init_rows, with seed_x, seed_y and scale) with the
 * training's workers: false, having drawn nothing, where they would not
 * pay or cannot map the workspace, for the caller to draw them alone.
 */
bool
wals_build_init(const WalsTrainArgs *args, WalsWorkspace *ws, const WalsData *data,
				uint64 seed_x, uint64 seed_y, float scale)
{
	int			f = args->params.factors;
	Size		bytes = MAXALIGN(sizeof(InitShared)) +
		sizeof(int64) * (data->nusers + data->nitems);
	ParallelContext *pcxt;
	InitShared *sh;

	if ((data->nusers + data->nitems) * f < WALS_INIT_PARALLEL_MIN ||
		!wals_build_may_share(args, ws))
		return false;
	pcxt = wals_build_open_context("wals_init_main", args->workers, bytes, WALS_INIT_KEY,
								   (void **) &sh);
	if (pcxt == NULL)
		return false;
	sh->shape = ws->shape;
	sh->f = f;
	sh->scale = scale;
	sh->seed[0] = seed_x;
	sh->seed[1] = seed_y;
	sh->nrows[0] = data->nusers;
	sh->nrows[1] = data->nitems;
	pg_atomic_init_u64(&sh->next, 0);
	memcpy((char *) sh + MAXALIGN(sizeof(InitShared)), data->user_ids,
		   sizeof(int64) * data->nusers);
	memcpy((char *) sh + MAXALIGN(sizeof(InitShared)) + sizeof(int64) * data->nusers,
		   data->item_ids, sizeof(int64) * data->nitems);
	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: drawing the starting factors with %d parallel workers",
							 pcxt->nworkers_launched)));
	init_blocks(sh, ws->X, ws->Y);
	WaitForParallelWorkersToFinish(pcxt);
	wals_build_close_context(pcxt);
	return true;
}
