/*
 * engine_cpu.c
 *	  The CPU engine: the sweeps of a training, run by the leader and
 *	  parallel workers.
 *
 * The matrices and factors live in the training's workspace (workspace.c),
 * a dynamic shared memory segment when workers are asked for.  Workers are
 * launched once per training through a ParallelContext, attach to that
 * segment, and then serve every half-sweep: for each task the leader resets
 * a shared cursor, workers and leader claim chunks of rows from it until
 * none is left, and the leader waits until every chunk is finished.
 * Launching once keeps the cost of starting processes and of faulting the
 * segment's pages into them out of the iterations.
 *
 * Chunks are cut by cost (chunks.c), so that the processes finish
 * together.  The loss is summed per chunk in chunk order, so a training
 * gives the same bits whatever the number of workers.
 *
 * A row that cannot be solved is not an error in the process that meets
 * it: the lowest such row is recorded in shared memory, chunks not yet
 * claimed are skipped, and iterate hands the failure to train.c, which
 * reports it as it reports any engine's.  Since chunks are claimed in row
 * order, the row named is the lowest failing one, as on the GPU.  A cancel
 * or any other error in a process ends the training: workers check for
 * interrupts between chunks and while they wait; an error in a worker is
 * rethrown in the leader, and the leader's abort terminates the workers.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "chunks.h"
#include "wals_train.h"

#define WALS_KEY_SHARED			UINT64CONST(0x57414C5300000001)

/* The cursor's chunk while the leader rewrites the task's description. */
#define CHUNK_CLOSED			PG_UINT32_MAX

/*
 * Elements of a pass over all factors (combine, dot) between two checks for
 * a cancel: about a millisecond; the factors of 20,000 rows at f = 4096 are
 * 80 slices.  A multiple of four (dot_part).
 */
#define WALS_PASS_SLICE			((Size) 1 << 20)

typedef enum WalsTask
{
	WALS_TASK_NONE = 0,
	WALS_TASK_SOLVE_USERS,
	WALS_TASK_SOLVE_ITEMS,
	WALS_TASK_LOSS,
	WALS_TASK_LINE,
	WALS_TASK_INDEX,
	WALS_TASK_VALIDATE,
	WALS_TASK_QUIT
} WalsTask;

/*
 * What every process needs to find and run the tasks, followed in the same
 * block by the chunk bounds of each side and the loss of each user chunk.
 * The cursor packs the task's generation (high 32 bits) with the next chunk
 * to claim, so that a process that lagged behind can never claim a chunk of
 * a later task under an earlier one's description.  While the leader
 * rewrites the description the cursor holds the new generation and
 * CHUNK_CLOSED, so that a process that read the new description cannot
 * claim a chunk under the earlier generation either.  failed holds twice the
 * lowest failing row of the current task, plus one when its solution was
 * not finite rather than its system not positive definite.
 */
typedef struct WalsShared
{
	WalsParams	params;
	WalsWorkspaceShape workspace;
	int64		scratch_floats; /* each process's solver scratch */
	int64		user_nchunks;
	int64		item_nchunks;
	Size		validation_bytes;	/* the validation's area, after the loss parts */
	WalsTask	task;
	int			vec_a;			/* the line's base */
	int			vec_b;			/* the line's direction */
	uint32		nchunks;		/* chunks of the current task */
	pg_atomic_uint64 cursor;
	pg_atomic_uint32 finished;
	pg_atomic_uint64 rows_done;	/* of the solve under way, for wals_progress */
	pg_atomic_uint64 failed;
	ConditionVariable task_cv;
	ConditionVariable done_cv;
} WalsShared;

/* One process's view of the training. */
typedef struct CpuEngine
{
	WalsShared *shared;
	WalsWorkspace *ws;
	WalsWorkspace attached;		/* a worker's own mapping of the workspace */
	const WalsProblem *problem; /* the leader's; NULL in a worker */
	ParallelContext *pcxt;
	int64	   *user_chunks;	/* user_nchunks + 1 bounds */
	int64	   *item_chunks;
	double	   *loss_parts;		/* WALS_LINE_TERMS per user chunk */
	float	   *scratch;
	float	   *grams;			/* the leader's Grams of a line search */
	bool		grams_current;	/* GX and GY are those of the factors */
	WalsValidationView validation;	/* when validation_bytes > 0 */
} CpuEngine;

PGDLLEXPORT void wals_parallel_main(dsm_segment *seg, shm_toc *toc);

/*
 * Bytes of the shared block of a training with these chunk counts and
 * validation area.
 */
static Size
shared_bytes(int64 user_nchunks, int64 item_nchunks, Size validation_bytes)
{
	return MAXALIGN(sizeof(WalsShared)) +
		sizeof(int64) * (user_nchunks + 1 + item_nchunks + 1) +
		sizeof(double) * WALS_LINE_TERMS * Max(user_nchunks, 1) + validation_bytes;
}

/* The Grams of a line search: of the base, its cross term, of the direction. */
#define WALS_LINE_GRAMS 6

/*
 * The most memory the engine needs beside the workspace: the shared block
 * with as many chunks as a training of nusers and nitems rows can have,
 * and the Grams of its line searches.
 */
double
wals_cpu_engine_bytes(const WalsTrainArgs *args, int64 nusers, int64 nitems)
{
	int			f = args->params.factors;
	double		grams = args->accelerate == WALS_ACCEL_NCG ?
		(double) WALS_LINE_GRAMS * f * f * sizeof(float) : 0;

	return (double) shared_bytes(wals_max_chunks(nusers, f), wals_max_chunks(nitems, f), 0) +
		grams;
}

/* Vector k's part of X (or of Y): the factors themselves for k = 0. */
static float *
vec_x(const WalsWorkspace *ws, int k)
{
	return k == WALS_VEC_FACTORS ? ws->X : ws->spare[k];
}

static float *
vec_y(const WalsWorkspace *ws, int k)
{
	return k == WALS_VEC_FACTORS ? ws->Y :
		ws->spare[k] + (Size) ws->shape.nusers * ws->shape.factors;
}

static void
map_chunks(CpuEngine *e)
{
	char	   *tail = (char *) e->shared + MAXALIGN(sizeof(WalsShared));

	e->user_chunks = (int64 *) tail;
	e->item_chunks = e->user_chunks + e->shared->user_nchunks + 1;
	e->loss_parts = (double *) (e->item_chunks + e->shared->item_nchunks + 1);
	if (e->shared->validation_bytes > 0)
		wals_validation_area_map(e->loss_parts + WALS_LINE_TERMS * Max(e->shared->user_nchunks, 1),
								 e->ws, &e->validation);
}

/* Each process's solver scratch, in the memory of the current context. */
static float *
alloc_scratch(const WalsShared *sh)
{
	return MemoryContextAllocHuge(CurrentMemoryContext,
								  Max(sh->scratch_floats, 1) * sizeof(float));
}

static void
run_chunk(CpuEngine *e, WalsTask task, uint32 chunk)
{
	const WalsParams *params = &e->shared->params;
	WalsWorkspace *ws = e->ws;
	int64		bad_row = -1;
	WalsStatus	status = WALS_OK;

	switch (task)
	{
		case WALS_TASK_SOLVE_USERS:
			status = wals_solve_rows(params, &ws->by_user, ws->Y, ws->GY, ws->X,
									 e->user_chunks[chunk], e->user_chunks[chunk + 1],
									 e->scratch, &bad_row);
			break;
		case WALS_TASK_SOLVE_ITEMS:
			status = wals_solve_rows(params, &ws->by_item, ws->X, ws->GX, ws->Y,
									 e->item_chunks[chunk], e->item_chunks[chunk + 1],
									 e->scratch, &bad_row);
			break;
		case WALS_TASK_LOSS:
			e->loss_parts[(Size) chunk * WALS_LINE_TERMS] =
				wals_loss_rows(params, &ws->by_user, ws->X, ws->Y,
							   e->user_chunks[chunk], e->user_chunks[chunk + 1]);
			break;
		case WALS_TASK_LINE:
			{
				double	   *coef = e->loss_parts + (Size) chunk * WALS_LINE_TERMS;
				int			a = e->shared->vec_a;
				int			b = e->shared->vec_b;

				memset(coef, 0, sizeof(double) * WALS_LINE_TERMS);
				wals_line_rows(params, &ws->by_user, vec_x(ws, a), vec_x(ws, b),
							   vec_y(ws, a), vec_y(ws, b), e->user_chunks[chunk],
							   e->user_chunks[chunk + 1], coef);
			}
			break;
		case WALS_TASK_INDEX:
			wals_validation_index_chunk(&e->validation, chunk);
			break;
		case WALS_TASK_VALIDATE:
			wals_validation_area_chunk(&e->validation, chunk);
			break;
		case WALS_TASK_NONE:
		case WALS_TASK_QUIT:
			break;
	}
	if (status == WALS_ESINGULAR || status == WALS_ENONFINITE)
		wals_record_failure(&e->shared->failed, status, bad_row);
	else if (status != WALS_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not solve rows %lld to %lld: %s",
						(long long) (task == WALS_TASK_SOLVE_USERS ? e->user_chunks[chunk] :
									 e->item_chunks[chunk]),
						(long long) (task == WALS_TASK_SOLVE_USERS ? e->user_chunks[chunk + 1] :
									 e->item_chunks[chunk + 1]) - 1,
						wals_status_string(status))));
}

/*
 * Claim and run chunks of generation gen until none is left.  A claim is a
 * compare-and-swap on the whole cursor, so it fails once the leader has
 * moved on to another generation.  Once a row has failed, the chunks still
 * unclaimed are counted finished without being run: they hold only higher
 * rows, and the half-sweep's result will not be used.
 */
static void
work_on(CpuEngine *e, uint32 gen)
{
	WalsShared *sh = e->shared;
	WalsTask	task;
	uint32		nchunks;
	uint64		cur;

	task = sh->task;
	nchunks = sh->nchunks;
	cur = pg_atomic_read_u64(&sh->cursor);
	for (;;)
	{
		uint32		chunk = (uint32) cur;

		if ((uint32) (cur >> 32) != gen || chunk >= nchunks)
			return;
		if (!pg_atomic_compare_exchange_u64(&sh->cursor, &cur, cur + 1))
			continue;

		CHECK_FOR_INTERRUPTS();
		if (pg_atomic_read_u64(&sh->failed) == WALS_NO_FAILURE)
			run_chunk(e, task, chunk);
		if (task == WALS_TASK_SOLVE_USERS || task == WALS_TASK_SOLVE_ITEMS)
		{
			const int64 *bounds = task == WALS_TASK_SOLVE_USERS ? e->user_chunks : e->item_chunks;
			uint64		done = pg_atomic_add_fetch_u64(&sh->rows_done,
													   bounds[chunk + 1] - bounds[chunk]);

			if (e->problem != NULL)
				wals_work_rows((int64) done);
		}
		if (pg_atomic_add_fetch_u32(&sh->finished, 1) == nchunks)
			ConditionVariableBroadcast(&sh->done_cv);
		cur = pg_atomic_read_u64(&sh->cursor);
	}
}

/* Publish a task, work on it, and wait until every chunk is done. */
static void
run_task(CpuEngine *e, WalsTask task, uint32 nchunks)
{
	WalsShared *sh = e->shared;
	uint32		gen = (uint32) (pg_atomic_read_u64(&sh->cursor) >> 32) + 1;

	pg_atomic_write_u64(&sh->cursor, ((uint64) gen << 32) | CHUNK_CLOSED);
	pg_memory_barrier();
	sh->task = task;
	sh->nchunks = nchunks;
	pg_atomic_write_u32(&sh->finished, 0);
	pg_atomic_write_u64(&sh->rows_done, 0);
	pg_write_barrier();
	pg_atomic_write_u64(&sh->cursor, (uint64) gen << 32);
	if (e->pcxt != NULL)
		ConditionVariableBroadcast(&sh->task_cv);
	if (task == WALS_TASK_QUIT)
		return;

	work_on(e, gen);

	if (pg_atomic_read_u32(&sh->finished) < nchunks)
	{
		ConditionVariablePrepareToSleep(&sh->done_cv);
		while (pg_atomic_read_u32(&sh->finished) < nchunks)
		{
			/* the last chunks may be long ones: wals_progress's rows go on */
			ConditionVariableTimedSleep(&sh->done_cv, 1000, PG_WAIT_EXTENSION);
			wals_work_rows((int64) pg_atomic_read_u64(&sh->rows_done));
		}
		ConditionVariableCancelSleep();
	}
}

/*
 * Solve one side; false with failure set when a row could not be solved.
 */
static bool
solve_side(CpuEngine *e, WalsSide side, WalsFailure *failure)
{
	WalsShared *sh = e->shared;

	if (side == WALS_SIDE_USERS)
		e->problem->phase(e->problem->phase_arg, WALS_PHASE_SOLVING_USERS,
						  e->ws->shape.nusers, "solving user factors");
	else
		e->problem->phase(e->problem->phase_arg, WALS_PHASE_SOLVING_ITEMS,
						  e->ws->shape.nitems, "solving item factors");
	run_task(e, side == WALS_SIDE_USERS ? WALS_TASK_SOLVE_USERS : WALS_TASK_SOLVE_ITEMS,
			 (uint32) (side == WALS_SIDE_USERS ? sh->user_nchunks : sh->item_nchunks));
	failure->status = wals_recorded_failure(pg_atomic_read_u64(&sh->failed), &failure->row);
	if (failure->status == WALS_OK)
		return true;
	failure->side = side;
	failure->detail[0] = '\0';
	return false;
}

/* G = Y^T Y over all rows, by the leader; O(rows f^2), small beside a sweep. */
static void
compute_gram(const float *Y, int64 nrows, int f, float *G)
{
	int64		step = WALS_ROWS_PER_CHECK * 16;

	wals_zero_floats(G, (size_t) f * f);
	for (int64 lo = 0; lo < nrows; lo += step)
	{
		CHECK_FOR_INTERRUPTS();
		wals_gram_rows(Y, lo, Min(nrows, lo + step), f, G);
	}
}

/* C = X^T D over all rows, by the leader in slices as compute_gram. */
static void
cross_rows(const float *X, const float *D, int64 nrows, int f, float *C)
{
	int64		step = WALS_ROWS_PER_CHECK * 16;

	for (int64 lo = 0; lo < nrows; lo += step)
	{
		CHECK_FOR_INTERRUPTS();
		wals_cross_rows(X, D, lo, Min(nrows, lo + step), f, C);
	}
}

/* The exact objective; GX and GY must be those of the current factors. */
static double
compute_loss(CpuEngine *e)
{
	WalsShared *sh = e->shared;
	WalsWorkspace *ws = e->ws;
	const WalsParams *params = &sh->params;
	double		loss;

	e->problem->phase(e->problem->phase_arg, WALS_PHASE_LOSS, 0, "computing the loss");
	run_task(e, WALS_TASK_LOSS, (uint32) sh->user_nchunks);
	loss = wals_loss_unobserved(params, ws->GX, ws->GY);
	for (int64 c = 0; c < sh->user_nchunks; c++)
		loss += e->loss_parts[c * WALS_LINE_TERMS];
	return loss + wals_reg_rows(params, &ws->by_item, ws->Y, 0, sh->workspace.nitems);
}

/*
 * Launch the workers, which attach to the training's memory and wait for
 * tasks, with the shared block in the parallel context's segment.  Without
 * a shared workspace, or when none can be launched, the leader trains alone
 * with the block in its own memory.
 */
static void
launch_workers(CpuEngine *e, const WalsTrainArgs *args, const WalsShared *local, Size bytes)
{
	WalsShared *sh;

	/* a workspace that /dev/shm had no room for has said so */
	if (args->workers > 0 && e->ws->share && !wals_workspace_shared(e->ws))
		ereport(NOTICE,
				(errmsg("no dynamic shared memory segment is available; model \"%s\" trains in the leader alone",
						args->model_display),
				 errhint("Raise max_connections or free dynamic shared memory segments to train with parallel workers.")));
	if (args->workers > 0 && wals_workspace_shared(e->ws))
	{
		EnterParallelMode();
		e->pcxt = CreateParallelContext("wals", "wals_parallel_main", args->workers);
		shm_toc_estimate_chunk(&e->pcxt->estimator, bytes);
		shm_toc_estimate_keys(&e->pcxt->estimator, 1);
		InitializeParallelDSM(e->pcxt);
	}

	if (e->pcxt != NULL && e->pcxt->seg != NULL)
		sh = shm_toc_allocate(e->pcxt->toc, bytes);
	else
		sh = palloc(bytes);
	memcpy(sh, local, bytes);
	pg_atomic_init_u64(&sh->cursor, 0);
	pg_atomic_init_u32(&sh->finished, 0);
	pg_atomic_init_u64(&sh->rows_done, 0);
	pg_atomic_init_u64(&sh->failed, WALS_NO_FAILURE);
	ConditionVariableInit(&sh->task_cv);
	ConditionVariableInit(&sh->done_cv);
	e->shared = sh;
	map_chunks(e);

	if (e->pcxt != NULL && e->pcxt->seg != NULL)
	{
		shm_toc_insert(e->pcxt->toc, WALS_KEY_SHARED, sh);
		LaunchParallelWorkers(e->pcxt);
	}
	if (args->workers > 0 && wals_workspace_shared(e->ws) &&
		(e->pcxt->seg == NULL || e->pcxt->nworkers_launched == 0))
		ereport(NOTICE,
				(errmsg("no parallel worker could be launched; model \"%s\" trains in the leader alone",
						args->model_display),
				 errhint("Raise max_worker_processes or max_parallel_workers, or pass workers => 0.")));
}

/*
 * Cut the chunks, launch the workers, and compute the Gram of the starting
 * item factors, which the first user half-sweep needs.
 */
static bool
cpu_begin(WalsProblem *problem, void **state, WalsFailure *failure)
{
	const WalsTrainArgs *args = problem->args;
	WalsWorkspace *ws = problem->workspace;
	int			f = args->params.factors;
	CpuEngine  *e = palloc0(sizeof(CpuEngine));
	int64	   *user_chunks = palloc(sizeof(int64) * (wals_max_chunks(ws->shape.nusers, f) + 1));
	int64	   *item_chunks = palloc(sizeof(int64) * (wals_max_chunks(ws->shape.nitems, f) + 1));
	WalsShared *local;
	Size		bytes;
	Size		validation_bytes;
	int64		user_nchunks;
	int64		item_nchunks;

	Assert(problem->X == ws->X && problem->Y == ws->Y);
	e->ws = ws;
	e->problem = problem;
	user_nchunks = wals_cut_chunks(&ws->by_user, f, user_chunks);
	item_nchunks = wals_cut_chunks(&ws->by_item, f, item_chunks);
	validation_bytes = wals_validation_area_bytes(args, problem->data);
	bytes = shared_bytes(user_nchunks, item_nchunks, validation_bytes);

	local = palloc0(bytes);
	local->params = args->params;
	local->workspace = ws->shape;
	local->scratch_floats = wals_solve_scratch(&args->params,
											 wals_workspace_longest_row(&ws->shape));
	local->user_nchunks = user_nchunks;
	local->item_nchunks = item_nchunks;
	local->validation_bytes = validation_bytes;
	e->shared = local;
	map_chunks(e);
	if (local->validation_bytes > 0)
		wals_validation_area_fill(e->validation.area, args, problem->data);
	memcpy(e->user_chunks, user_chunks, sizeof(int64) * (user_nchunks + 1));
	memcpy(e->item_chunks, item_chunks, sizeof(int64) * (item_nchunks + 1));
	pfree(user_chunks);
	pfree(item_chunks);

	e->scratch = alloc_scratch(local);
	launch_workers(e, args, local, bytes);
	pfree(local);
	problem->workers = e->pcxt != NULL ? e->pcxt->nworkers_launched : 0;

	/* The line search's Grams, in the leader's memory. */
	if (problem->accelerate)
		e->grams = MemoryContextAllocHuge(CurrentMemoryContext,
										  sizeof(float) * WALS_LINE_GRAMS * f * f);
	compute_gram(ws->Y, ws->shape.nitems, f, ws->GY);
	*state = e;
	return true;
}

/* One iteration: both half-sweeps, each followed by its Gram, and the loss. */
static bool
cpu_iterate(void *state, double *loss, WalsFailure *failure)
{
	CpuEngine  *e = state;
	WalsWorkspace *ws = e->ws;
	int			f = ws->shape.factors;

	if (!solve_side(e, WALS_SIDE_USERS, failure))
		return false;
	compute_gram(ws->X, ws->shape.nusers, f, ws->GX);
	if (!solve_side(e, WALS_SIDE_ITEMS, failure))
		return false;
	compute_gram(ws->Y, ws->shape.nitems, f, ws->GY);
	e->grams_current = true;
	if (loss != NULL)
		*loss = compute_loss(e);
	return true;
}

static bool
cpu_factors(void *state, float *X, float *Y, WalsFailure *failure)
{
	CpuEngine  *e = state;
	WalsWorkspace *ws = e->ws;
	int			f = ws->shape.factors;

	wals_copy_floats(X, ws->X, (size_t) ws->shape.nusers * f);
	wals_copy_floats(Y, ws->Y, (size_t) ws->shape.nitems * f);
	return true;
}

/*
 * The validation metric of the current factors: the index of Y, begun and
 * ended by the leader, its blocks and then the users in chunks by every
 * process.
 */
static bool
cpu_validate(void *state, WalsMetrics *out, WalsFailure *failure)
{
	CpuEngine  *e = state;

	Assert(e->shared->validation_bytes > 0);
	e->problem->phase(e->problem->phase_arg, WALS_PHASE_VALIDATION, 0,
					  "measuring the validation metric");
	wals_validation_index_begin(&e->validation);
	run_task(e, WALS_TASK_INDEX, (uint32) wals_validation_index_chunks(e->validation.area));
	wals_validation_index_end(&e->validation);
	run_task(e, WALS_TASK_VALIDATE, (uint32) wals_validation_area_chunks(e->validation.area));
	wals_validation_area_merge(&e->validation, out);
	return true;
}

/* An operation on vector k that this training cannot run. */
static bool
bad_vector(int k, WalsFailure *failure)
{
	failure->status = WALS_EINVAL;
	failure->side = WALS_SIDE_NONE;
	failure->row = -1;
	snprintf(failure->detail, sizeof(failure->detail),
			 "vector %d is not one of this training's spare vectors", k);
	return false;
}

static bool
vector_ok(const CpuEngine *e, int k, WalsFailure *failure)
{
	return (k >= 0 && k <= e->ws->shape.spares) || bad_vector(k, failure);
}

/*
 * Leader alone: a pass over all factors costs a few milliseconds beside a
 * sweep's seconds, in slices between which a cancel is checked.  dst may
 * be x or y, element by element.
 */
static bool
cpu_combine(void *state, int dst, double a, int x, double b, int y, WalsFailure *failure)
{
	CpuEngine  *e = state;
	WalsWorkspace *ws = e->ws;
	int			f = ws->shape.factors;
	Size		nx = (Size) ws->shape.nusers * f;
	Size		ny = (Size) ws->shape.nitems * f;

	if (!vector_ok(e, dst, failure) || !vector_ok(e, x, failure) || !vector_ok(e, y, failure))
		return false;
	for (int part = 0; part < 2; part++)
	{
		float	   *d = part == 0 ? vec_x(ws, dst) : vec_y(ws, dst);
		const float *xs = part == 0 ? vec_x(ws, x) : vec_y(ws, x);
		const float *ys = part == 0 ? vec_x(ws, y) : vec_y(ws, y);
		Size		n = part == 0 ? nx : ny;
		float		fa = (float) a;
		float		fb = (float) b;

		for (Size k0 = 0; k0 < n; k0 += WALS_PASS_SLICE)
		{
			Size		k1 = Min(n, k0 + WALS_PASS_SLICE);

			CHECK_FOR_INTERRUPTS();
			if (b == 0)
				for (Size k = k0; k < k1; k++)
					d[k] = fa * xs[k];
			else if (a == 0)
				for (Size k = k0; k < k1; k++)
					d[k] = fb * ys[k];
			else
				for (Size k = k0; k < k1; k++)
					d[k] = fa * xs[k] + fb * ys[k];
		}
	}
	/*
	 * The next sweep starts with the users, from the Gram of Y, and
	 * computes GX itself.
	 */
	if (dst == WALS_VEC_FACTORS)
	{
		compute_gram(ws->Y, ws->shape.nitems, f, ws->GY);
		e->grams_current = false;
	}
	return true;
}

/*
 * In slices between checks for a cancel; a slice is a multiple of four
 * elements, so the four partial sums add in the same order as in one loop.
 */
static double
dot_part(const float *a, const float *b, Size n)
{
	double		s[4] = {0, 0, 0, 0};
	Size		k = 0;

	for (Size k0 = 0; k0 < n; k0 += WALS_PASS_SLICE)
	{
		Size		k1 = Min(n, k0 + WALS_PASS_SLICE);

		CHECK_FOR_INTERRUPTS();
		for (; k + 4 <= k1; k += 4)
			for (int j = 0; j < 4; j++)
				s[j] += (double) a[k + j] * b[k + j];
	}
	for (; k < n; k++)
		s[0] += (double) a[k] * b[k];
	return (s[0] + s[1]) + (s[2] + s[3]);
}

static bool
cpu_dot(void *state, int x, int y, double *out, WalsFailure *failure)
{
	CpuEngine  *e = state;
	WalsWorkspace *ws = e->ws;
	int			f = ws->shape.factors;

	if (!vector_ok(e, x, failure) || !vector_ok(e, y, failure))
		return false;
	CHECK_FOR_INTERRUPTS();
	*out = dot_part(vec_x(ws, x), vec_x(ws, y), (Size) ws->shape.nusers * f) +
		dot_part(vec_y(ws, x), vec_y(ws, y), (Size) ws->shape.nitems * f);
	return true;
}

/*
 * The observed cells by user chunks in the processes, the Grams by the
 * leader (as between sweeps), and the items' regularisation.
 */
static bool
cpu_line(void *state, int base, int dir, double coef[WALS_LINE_TERMS], WalsFailure *failure)
{
	CpuEngine  *e = state;
	WalsWorkspace *ws = e->ws;
	WalsShared *sh = e->shared;
	const WalsParams *params = &sh->params;
	int			f = ws->shape.factors;
	Size		ff = (Size) f * f;
	float	   *M = e->grams;
	int64		nusers = ws->shape.nusers;
	int64		nitems = ws->shape.nitems;

	if (e->grams == NULL)
		return bad_vector(dir, failure);
	if (!vector_ok(e, base, failure) || !vector_ok(e, dir, failure))
		return false;
	e->problem->phase(e->problem->phase_arg, WALS_PHASE_LINE_SEARCH, 0,
					  "searching along the direction");
	sh->vec_a = base;
	sh->vec_b = dir;
	run_task(e, WALS_TASK_LINE, (uint32) sh->user_nchunks);
	memset(coef, 0, sizeof(double) * WALS_LINE_TERMS);
	for (int64 c = 0; c < sh->user_nchunks; c++)
		for (int k = 0; k < WALS_LINE_TERMS; k++)
			coef[k] += e->loss_parts[c * WALS_LINE_TERMS + k];
	wals_line_reg_rows(params, &ws->by_item, vec_y(ws, base), vec_y(ws, dir), 0, nitems, coef);
	if (params->w0 == 0.0f)
		return true;

	wals_zero_floats(M, WALS_LINE_GRAMS * ff);
	/* ALS-NCG searches from the factors a sweep has just left. */
	if (base == WALS_VEC_FACTORS && e->grams_current)
	{
		wals_copy_floats(M, ws->GX, ff);
		wals_copy_floats(M + 3 * ff, ws->GY, ff);
	}
	else
	{
		compute_gram(vec_x(ws, base), nusers, f, M);
		compute_gram(vec_y(ws, base), nitems, f, M + 3 * ff);
	}
	cross_rows(vec_x(ws, base), vec_x(ws, dir), nusers, f, M + ff);
	compute_gram(vec_x(ws, dir), nusers, f, M + 2 * ff);
	cross_rows(vec_y(ws, base), vec_y(ws, dir), nitems, f, M + 4 * ff);
	compute_gram(vec_y(ws, dir), nitems, f, M + 5 * ff);
	wals_line_unobserved(params, M, M + ff, M + 2 * ff, M + 3 * ff, M + 4 * ff, M + 5 * ff,
						 coef);
	return true;
}

/*
 * Stop the workers.  The factors are already in the workspace, where X and
 * Y point.  After an error the transaction's abort stops the workers and
 * frees everything, so there is nothing to do without X.
 */
static bool
cpu_end(void *state, float *X, float *Y, WalsFailure *failure)
{
	CpuEngine  *e = state;

	if (e == NULL || X == NULL || e->pcxt == NULL)
		return true;
	if (e->pcxt->nworkers_launched > 0)
	{
		run_task(e, WALS_TASK_QUIT, 0);
		WaitForParallelWorkersToFinish(e->pcxt);
	}
	DestroyParallelContext(e->pcxt);
	e->pcxt = NULL;
	ExitParallelMode();
	return true;
}

const WalsEngine wals_cpu_engine = {
	.name = "cpu",
	.begin = cpu_begin,
	.iterate = cpu_iterate,
	.factors = cpu_factors,
	.validate = cpu_validate,
	.end = cpu_end,
	.combine = cpu_combine,
	.dot = cpu_dot,
	.line = cpu_line,
};

/*
 * Entry point of a parallel worker: attach to the training's memory, then
 * work on each task the leader publishes until it says to quit.
 */
void
wals_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	CpuEngine	e = {0};
	WalsShared *sh = shm_toc_lookup(toc, WALS_KEY_SHARED, false);
	uint32		seen = 0;

	e.shared = sh;
	wals_workspace_attach(&sh->workspace, &e.attached);
	e.ws = &e.attached;
	map_chunks(&e);
	e.scratch = alloc_scratch(sh);

	for (;;)
	{
		uint64		cur;
		uint32		gen;

		ConditionVariablePrepareToSleep(&sh->task_cv);
		for (;;)
		{
			cur = pg_atomic_read_u64(&sh->cursor);
			gen = (uint32) (cur >> 32);
			if (gen != seen && (uint32) cur != CHUNK_CLOSED)
				break;
			ConditionVariableSleep(&sh->task_cv, PG_WAIT_EXTENSION);
		}
		ConditionVariableCancelSleep();
		seen = gen;

		/* The description of gen, written before the cursor opened it. */
		pg_read_barrier();
		if (sh->task == WALS_TASK_QUIT)
			break;
		work_on(&e, gen);
	}
	wals_workspace_release(&e.attached);
}
