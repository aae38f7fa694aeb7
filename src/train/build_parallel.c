/*
 * build_parallel.c
 *	  The transposes of a training's build taken by the leader and parallel
 *	  workers.
 *
 * The rows are read by the leader and the training's workers together
 * (ingest_parallel.c), but the two transposes that make the matrices by
 * user and by item (matrices.c) ran in the leader alone, a third of the
 * load of 100 million ratings on two cores while the other core idled.
 * Where the training has workers and both blocks of its workspace are
 * shared segments, each transpose is cut into the steps of
 * src/core/csr.c's split (count each chunk of rows, scatter each chunk,
 * sort each partition), which the leader and as many workers as the
 * training has take from atomic counters, one step after the other; the
 * leader alone adds the counts up and plans, and merges the duplicates at
 * the end.  Every item of a step lands at positions fixed
 * before the step, so the matrices are the same, to the bit, with any
 * number of workers.  A transpose too small to pay for starting workers
 * (a few milliseconds each, and mapping the blocks), or too small for two
 * levels, is taken by the leader alone, as before.
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

/*
 * Cells below which the leader transposes alone: some 40 ms of one core,
 * several times what starting a worker and mapping the blocks cost.
 */
#define WALS_BUILD_PARALLEL_MIN_CELLS	((int64) 4 << 20)

/*
 * What the chunks' counts of out's rows may take in the segment: 64
 * chunks of 200,000 rows, 4 of 5 million, none (the leader alone) past
 * 8 million.
 */
#define WALS_BUILD_COUNT_BYTES	((Size) 64 << 20)

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
	Size		scratch_bytes;
	pg_atomic_uint32 step;		/* the latest step opened */
	pg_atomic_uint64 next[BUILD_STEPS];
	pg_atomic_uint64 done[BUILD_STEPS];
	ConditionVariable cv;		/* a step opened, or finished */
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

/* Take items of step until none is left; the last to finish says so. */
static void
take(BuildShared *sh, BuildStep step, const WalsCsr *in, WalsCsr *out, void *scratch)
{
	WalsCsrSplit *s = split_of(sh);
	int64		n = step_items(sh, step);

	for (;;)
	{
		int64		i = (int64) pg_atomic_fetch_add_u64(&sh->next[step], 1);
		WalsStatus	st = WALS_OK;

		if (i >= n)
			return;
		CHECK_FOR_INTERRUPTS();
		if (step == BUILD_COUNT)
			wals_csr_split_count(s, in, i);
		else if (step == BUILD_SCATTER)
			st = wals_csr_split_scatter(s, in, out, i, scratch, sh->scratch_bytes);
		else
			st = wals_csr_split_sort(s, out, i, scratch, sh->scratch_bytes);
		wals_report_core_status(st, "building the rating matrices");
		if ((int64) pg_atomic_add_fetch_u64(&sh->done[step], 1) == n)
			ConditionVariableBroadcast(&sh->cv);
	}
}

/* Wait until every item of step is done (the leader). */
static void
wait_done(BuildShared *sh, BuildStep step)
{
	int64		n = step_items(sh, step);

	ConditionVariablePrepareToSleep(&sh->cv);
	while ((int64) pg_atomic_read_u64(&sh->done[step]) < n)
		ConditionVariableSleep(&sh->cv, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
	pg_read_barrier();
}

/* Open step for every process (the leader), once the one before is done. */
static void
open_step(BuildShared *sh, BuildStep step)
{
	pg_write_barrier();
	pg_atomic_write_u32(&sh->step, (uint32) step);
	ConditionVariableBroadcast(&sh->cv);
}

/* Entry point of a parallel worker: take the items of every step. */
void
wals_build_main(dsm_segment *seg, shm_toc *toc)
{
	BuildShared *sh = shm_toc_lookup(toc, WALS_BUILD_KEY, false);
	WalsWorkspace ws;
	void	   *scratch = MemoryContextAllocHuge(CurrentMemoryContext, sh->scratch_bytes);
	WalsCsr    *in;
	WalsCsr    *out;

	wals_workspace_attach(&sh->shape, &ws);
	in = sh->to_users ? &ws.by_item : &ws.by_user;
	out = sh->to_users ? &ws.by_user : &ws.by_item;
	for (int step = BUILD_COUNT; step < BUILD_STEPS; step++)
	{
		ConditionVariablePrepareToSleep(&sh->cv);
		while (pg_atomic_read_u32(&sh->step) < (uint32) step)
			ConditionVariableSleep(&sh->cv, PG_WAIT_EXTENSION);
		ConditionVariableCancelSleep();
		/* the leader found no partitions to plan: it transposes alone */
		if (pg_atomic_read_u32(&sh->step) == BUILD_STEPS)
			break;
		pg_read_barrier();
		take(sh, (BuildStep) step, in, out, scratch);
	}
	wals_workspace_release(&ws);
	pfree(scratch);
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
	int64		nnz = in->indptr[in->nrows];
	ParallelContext *pcxt;
	BuildShared *sh;
	Size		bytes;
	bool		planned;
	WalsStatus	st = WALS_OK;

	if (args->workers < 1 || nnz < WALS_BUILD_PARALLEL_MIN_CELLS || IsInParallelMode() ||
		ws->shape.files || !wals_workspace_shared(ws))
		return transpose_alone(args, in, out, to_users, scratch, scratch_bytes);

	EnterParallelMode();
	pcxt = CreateParallelContext("wals", "wals_build_main", args->workers);
	bytes = MAXALIGN(sizeof(BuildShared)) + wals_csr_split_size(in->ncols, WALS_BUILD_COUNT_BYTES);
	shm_toc_estimate_chunk(&pcxt->estimator, bytes);
	shm_toc_estimate_keys(&pcxt->estimator, 1);
	InitializeParallelDSM(pcxt);
	sh = pcxt->seg != NULL ? shm_toc_allocate(pcxt->toc, bytes) : NULL;
	if (sh == NULL || !wals_csr_split_begin(split_of(sh), in, out, WALS_BUILD_COUNT_BYTES))
	{
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		return transpose_alone(args, in, out, to_users, scratch, scratch_bytes);
	}
	sh->shape = ws->shape;
	sh->to_users = to_users;
	sh->scratch_bytes = scratch_bytes;
	pg_atomic_init_u32(&sh->step, BUILD_COUNT);
	for (int step = 0; step < BUILD_STEPS; step++)
	{
		pg_atomic_init_u64(&sh->next[step], 0);
		pg_atomic_init_u64(&sh->done[step], 0);
	}
	ConditionVariableInit(&sh->cv);
	shm_toc_insert(pcxt->toc, WALS_BUILD_KEY, sh);
	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: building the matrix by %s with %d parallel workers",
							 to_users ? "user" : "item", pcxt->nworkers_launched)));

	take(sh, BUILD_COUNT, in, out, scratch);
	wait_done(sh, BUILD_COUNT);
	planned = wals_csr_split_plan(split_of(sh), out, scratch, scratch_bytes);
	if (planned)
	{
		open_step(sh, BUILD_SCATTER);
		take(sh, BUILD_SCATTER, in, out, scratch);
		wait_done(sh, BUILD_SCATTER);
		open_step(sh, BUILD_SORT);
		take(sh, BUILD_SORT, in, out, scratch);
		wait_done(sh, BUILD_SORT);
		st = wals_csr_split_end(split_of(sh), out, to_users, args->params.feedback);
	}
	else
	{
		/* no partitions to sort: the workers have nothing left to take */
		open_step(sh, BUILD_STEPS);
	}
	WaitForParallelWorkersToFinish(pcxt);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	return planned ? st : transpose_alone(args, in, out, to_users, scratch, scratch_bytes);
}
