/*
 * peer_parallel.c
 *	  A shard's half-sweep, and its users' part of the loss, computed by its
 *	  backend and parallel workers.
 *
 * What the solves read (both matrices, the rows it owns, every row of the
 * other side) lives in one dynamic shared memory segment for the whole
 * session, owned by the transaction, so that it outlives the coordinator's
 * calls and goes with the session.  Each half-sweep launches its workers
 * in a parallel context of its own, since a call returns between two
 * half-sweeps and parallel mode may not outlast the statement; they map
 * the segment, and they and the backend claim chunks of rows (cut by cost
 * as on one server, chunks.c) until none is left.  The rows are solved as
 * on one server whatever process solves them, so the factors are the same
 * bits with or without workers; with parallel_leader_participation off,
 * the backend leaves them all to its workers, as a Gather does.  A row
 * that cannot be solved is recorded, the lowest one winning, and the
 * half-sweep's error is the one the backend alone would raise.  A cancel,
 * or an error in a worker, ends the call, and the transaction's abort
 * stops the workers.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "shard_peer.h"

#define WALS_KEY_SHARD_TASK		UINT64CONST(0x57414C5300000002)

typedef enum ShardJob
{
	JOB_SOLVE,					/* solve the rows into mine */
	JOB_LOSS					/* each chunk's loss, from mine and other */
} ShardJob;

/*
 * A half-sweep or a loss, in the parallel context's segment: where its
 * arrays are in the session's segment (offsets from its start), then in
 * the same block the Gram of the other side (f x f), the chunk bounds and
 * each chunk's loss.
 */
typedef struct ShardTask
{
	ShardJob	job;
	WalsParams	params;
	dsm_handle	handle;
	Size		indptr;
	Size		indices;
	Size		values;
	Size		other;
	Size		mine;
	int64		nrows;
	int64		ncols;
	int64		scratch_floats;
	int64		nchunks;
	pg_atomic_uint64 next;
	pg_atomic_uint64 failed;
} ShardTask;

PGDLLEXPORT void wals_shard_parallel_main(dsm_segment *seg, shm_toc *toc);

static float *
task_gram(ShardTask *t)
{
	return (float *) ((char *) t + MAXALIGN(sizeof(ShardTask)));
}

static int64 *
task_bounds(ShardTask *t)
{
	return (int64 *) (task_gram(t) + (Size) t->params.factors * t->params.factors);
}

static double *
task_losses(ShardTask *t)
{
	return (double *) (task_bounds(t) + t->nchunks + 1);
}

/*
 * Put what the solves read, bytes of it, in a segment shared with
 * parallel workers, when the session may use them and one is to be had.
 */
void
wals_shard_share_rows(Session *s, Size bytes)
{
	ResourceOwner owner = CurrentResourceOwner;

	if (s->workers <= 0)
		return;
	/* The calls' own resource owners end with each; the session does not. */
	CurrentResourceOwner = TopTransactionResourceOwner;
	s->seg = dsm_create(bytes, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	CurrentResourceOwner = owner;
	if (s->seg == NULL)
		return;
	s->seg_next = dsm_segment_address(s->seg);
	s->seg_end = s->seg_next + bytes;
}

/* Claim chunks and do the task's job on them until none is left. */
static void
run_chunks(ShardTask *t, const WalsCsr *R, const float *other, float *mine, float *scratch)
{
	const int64 *bounds = task_bounds(t);
	const float *G = task_gram(t);

	for (;;)
	{
		uint64		chunk = pg_atomic_fetch_add_u64(&t->next, 1);
		int64		bad = -1;
		WalsStatus	st;

		if (chunk >= (uint64) t->nchunks)
			return;
		CHECK_FOR_INTERRUPTS();
		if (t->job == JOB_LOSS)
		{
			task_losses(t)[chunk] = wals_loss_rows(&t->params, R, mine, other, bounds[chunk],
												   bounds[chunk + 1]);
			continue;
		}
		if (pg_atomic_read_u64(&t->failed) != WALS_NO_FAILURE)
			continue;
		st = wals_solve_rows(&t->params, R, other, G, mine, bounds[chunk],
							 bounds[chunk + 1], scratch, &bad);
		if (st == WALS_ESINGULAR || st == WALS_ENONFINITE)
			wals_record_failure(&t->failed, st, bad);
		else if (st != WALS_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not solve rows " INT64_FORMAT " to " INT64_FORMAT ": %s",
							bounds[chunk], bounds[chunk + 1] - 1, wals_status_string(st))));
	}
}

static Size
offset_in(const Session *s, const void *p)
{
	return (const char *) p - (const char *) dsm_segment_address(s->seg);
}

/*
 * Do job on the owned rows of R, with mine their factors, the other side's
 * in the session and their Gram G: each chunk's loss, summed in chunk
 * order into *loss, or the rows solved; WALS_OK, or the failure of the
 * lowest row that could not be solved, in *bad.  Without a segment the
 * backend runs the same chunks alone.
 */
static WalsStatus
run(Session *s, ShardJob job, const WalsCsr *R, const float *G, float *mine, double *loss,
	int64 *bad)
{
	int			f = s->params.factors;
	ParallelContext *pcxt = NULL;
	bool		shared;
	ShardTask  *t;
	Size		bytes;
	int64		nchunks;
	int64	   *bounds;
	uint64		failed;

	s->launched = 0;
	bounds = palloc(sizeof(int64) * (wals_max_chunks(R->nrows, f) + 1));
	nchunks = wals_cut_chunks(R, f, bounds);
	bytes = MAXALIGN(sizeof(ShardTask)) + sizeof(float) * f * f +
		sizeof(int64) * (nchunks + 1) + sizeof(double) * nchunks;

	if (s->seg != NULL && R->nrows > 0)
	{
		EnterParallelMode();
		pcxt = CreateParallelContext("wals", "wals_shard_parallel_main", s->workers);
		shm_toc_estimate_chunk(&pcxt->estimator, bytes);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
		InitializeParallelDSM(pcxt);
	}
	shared = pcxt != NULL && pcxt->seg != NULL;
	t = shared ? shm_toc_allocate(pcxt->toc, bytes) : palloc(bytes);
	memset(t, 0, sizeof(ShardTask));
	t->job = job;
	t->params = s->params;
	t->nrows = R->nrows;
	t->ncols = R->ncols;
	t->scratch_floats = s->scratch_floats;
	t->nchunks = nchunks;
	pg_atomic_init_u64(&t->next, 0);
	pg_atomic_init_u64(&t->failed, WALS_NO_FAILURE);
	if (G != NULL)
		memcpy(task_gram(t), G, sizeof(float) * f * f);
	memcpy(task_bounds(t), bounds, sizeof(int64) * (nchunks + 1));
	if (shared)
	{
		t->handle = dsm_segment_handle(s->seg);
		t->indptr = offset_in(s, R->indptr);
		t->indices = offset_in(s, R->indices);
		t->values = offset_in(s, R->values);
		t->other = offset_in(s, s->other);
		t->mine = offset_in(s, mine);
		shm_toc_insert(pcxt->toc, WALS_KEY_SHARD_TASK, t);
		LaunchParallelWorkers(pcxt);
		s->launched = pcxt->nworkers_launched;
	}

	/* parallel_leader_participation = off leaves the rows to the workers, as for a Gather */
	if (parallel_leader_participation || s->launched == 0)
		run_chunks(t, R, s->other, mine, s->scratch);
	if (pcxt != NULL)
		WaitForParallelWorkersToFinish(pcxt);
	failed = pg_atomic_read_u64(&t->failed);
	if (loss != NULL)
	{
		*loss = 0;
		for (int64 c = 0; c < nchunks; c++)
			*loss += task_losses(t)[c];
	}
	if (pcxt != NULL)
	{
		DestroyParallelContext(pcxt);
		ExitParallelMode();
	}
	if (!shared)
		pfree(t);
	pfree(bounds);
	return wals_recorded_failure(failed, bad);
}

/*
 * Solve the owned rows of R into mine from the other side's factors and
 * their Gram G: WALS_OK, or the failure of the lowest row that could not
 * be solved, in *bad.
 */
WalsStatus
wals_shard_solve_rows(Session *s, const WalsCsr *R, const float *G, float *mine, int64 *bad)
{
	return run(s, JOB_SOLVE, R, G, mine, NULL, bad);
}

/*
 * The owned users' cells and regularisation, from their factors and every
 * item's, as src/core sums them on one server but for the order of the
 * chunks' sums.
 */
double
wals_shard_loss_rows(Session *s)
{
	double		loss;
	int64		bad;

	run(s, JOB_LOSS, &s->by_user, NULL, s->X, &loss, &bad);
	return loss;
}

/*
 * Entry point of a parallel worker of a shard's half-sweep or loss: map
 * the session's segment, and take chunks until none is left.
 */
void
wals_shard_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	ShardTask  *t = shm_toc_lookup(toc, WALS_KEY_SHARD_TASK, false);
	dsm_segment *rows = dsm_attach(t->handle);
	char	   *base;
	WalsCsr		R;
	float	   *scratch;

	if (rows == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not map the shared memory of a shard's training")));
	base = dsm_segment_address(rows);
	R.nrows = t->nrows;
	R.ncols = t->ncols;
	R.indptr = (int64 *) (base + t->indptr);
	R.indices = (int32 *) (base + t->indices);
	R.values = (float *) (base + t->values);
	scratch = MemoryContextAllocHuge(CurrentMemoryContext,
									 sizeof(float) * Max(t->scratch_floats, 1));
	run_chunks(t, &R, (const float *) (base + t->other), (float *) (base + t->mine), scratch);
	dsm_detach(rows);
}
