/*
 * engine_cpu.c
 *	  The sweeps of a training, run by the leader and parallel workers.
 *
 * The matrices and factors live in one dynamic shared memory segment that
 * the leader fills once (or in private memory when no worker is asked for).
 * Workers are launched once per training through a ParallelContext, attach
 * to that segment, and then serve every half-sweep: for each task the leader
 * resets a shared cursor, workers and leader claim chunks of rows from it
 * until none is left, and the leader waits until every chunk is finished.
 * Launching once keeps the cost of starting processes and of faulting the
 * segment's pages into them out of the iterations.
 *
 * Chunks are cut by cost (ratings plus a per-row share), not by row count,
 * so a chunk of popular items is not a hundred times longer than the others
 * and the processes finish together.  The loss is summed per chunk in chunk
 * order, so a training gives the same bits whatever the number of workers.
 *
 * A cancel or an error in any process ends the training: workers check for
 * interrupts between chunks and while they wait; an error in a worker is
 * rethrown in the leader, and the leader's abort terminates the workers.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "wals_train.h"

#define WALS_KEY_SHARED			UINT64CONST(0x57414C5300000001)

/* About this many chunks per half-sweep, for balance between processes. */
#define WALS_CHUNKS_PER_SWEEP	1024

/* Rows solved between two checks for a cancel, at most. */
#define WALS_ROWS_PER_CHECK		256

/* Sections of the training's memory start on cache-line boundaries. */
#define WALS_ALIGN				64

typedef enum WalsTask
{
	WALS_TASK_NONE = 0,
	WALS_TASK_SOLVE_USERS,
	WALS_TASK_SOLVE_ITEMS,
	WALS_TASK_LOSS,
	WALS_TASK_QUIT
} WalsTask;

/* Byte offsets of the sections of the training's memory. */
typedef struct WalsLayout
{
	Size		x;
	Size		y;
	Size		gx;
	Size		gy;
	Size		user_indptr;
	Size		user_indices;
	Size		user_values;
	Size		item_indptr;
	Size		item_indices;
	Size		item_values;
	Size		user_chunks;
	Size		item_chunks;
	Size		loss_parts;
	Size		total;
} WalsLayout;

/*
 * What every process needs to find and run the tasks.  The cursor packs the
 * task's generation (high 32 bits) with the next chunk to claim, so that a
 * process that lagged behind can never claim a chunk of a later task under
 * an earlier one's description.
 */
typedef struct WalsShared
{
	WalsParams	params;
	dsm_handle	data_handle;
	WalsLayout	layout;
	int64		nusers;
	int64		nitems;
	int64		scratch_floats; /* each process's solver scratch */
	int64		user_nchunks;
	int64		item_nchunks;
	WalsTask	task;
	uint32		nchunks;		/* chunks of the current task */
	pg_atomic_uint64 cursor;
	pg_atomic_uint32 finished;
	ConditionVariable task_cv;
	ConditionVariable done_cv;
} WalsShared;

/* One process's view of the training. */
struct WalsSweeps
{
	WalsShared *shared;
	char	   *base;
	dsm_segment *data_seg;		/* NULL when the memory is private */
	ParallelContext *pcxt;
	WalsCsr		by_user;
	WalsCsr		by_item;
	float	   *X;
	float	   *Y;
	float	   *GX;
	float	   *GY;
	int64	   *user_chunks;	/* user_nchunks + 1 bounds */
	int64	   *item_chunks;
	double	   *loss_parts;		/* one per user chunk */
	float	   *scratch;
};

PGDLLEXPORT void wals_parallel_main(dsm_segment *seg, shm_toc *toc);

static Size
add_section(Size *offset, Size bytes)
{
	Size		at = TYPEALIGN(WALS_ALIGN, *offset);

	*offset = at + Max(bytes, 1);
	return at;
}

/*
 * Rows between two checks for a cancel: a row costs about f^2 (CG) to f^3
 * (Cholesky) operations, so wide models get shorter chunks.
 */
static int64
rows_per_check(int f)
{
	return Max(1, Min(WALS_ROWS_PER_CHECK, (1 << 22) / ((int64) f * f)));
}

/* Chunks a side of nrows rows can be cut into, at most. */
static int64
max_chunks(int64 nrows, int f)
{
	return nrows / rows_per_check(f) + WALS_CHUNKS_PER_SWEEP + 1;
}

static void
plan_layout(WalsLayout *l, int64 nusers, int64 nitems, int64 cells, int f)
{
	Size		off = 0;

	l->x = add_section(&off, (Size) nusers * f * sizeof(float));
	l->y = add_section(&off, (Size) nitems * f * sizeof(float));
	l->gx = add_section(&off, (Size) f * f * sizeof(float));
	l->gy = add_section(&off, (Size) f * f * sizeof(float));
	l->user_indptr = add_section(&off, (Size) (nusers + 1) * sizeof(int64));
	l->user_indices = add_section(&off, (Size) cells * sizeof(int32));
	l->user_values = add_section(&off, (Size) cells * sizeof(float));
	l->item_indptr = add_section(&off, (Size) (nitems + 1) * sizeof(int64));
	l->item_indices = add_section(&off, (Size) cells * sizeof(int32));
	l->item_values = add_section(&off, (Size) cells * sizeof(float));
	l->user_chunks = add_section(&off, (Size) (max_chunks(nusers, f) + 1) * sizeof(int64));
	l->item_chunks = add_section(&off, (Size) (max_chunks(nitems, f) + 1) * sizeof(int64));
	l->loss_parts = add_section(&off, (Size) max_chunks(nusers, f) * sizeof(double));
	l->total = TYPEALIGN(WALS_ALIGN, off);
}

/* Point a process's view at the sections of the memory at base. */
static void
map_sections(WalsSweeps *s, char *base)
{
	const WalsShared *sh = s->shared;
	const WalsLayout *l = &sh->layout;

	s->base = base;
	s->X = (float *) (base + l->x);
	s->Y = (float *) (base + l->y);
	s->GX = (float *) (base + l->gx);
	s->GY = (float *) (base + l->gy);
	s->by_user.nrows = sh->nusers;
	s->by_user.ncols = sh->nitems;
	s->by_user.indptr = (int64 *) (base + l->user_indptr);
	s->by_user.indices = (int32 *) (base + l->user_indices);
	s->by_user.values = (float *) (base + l->user_values);
	s->by_item.nrows = sh->nitems;
	s->by_item.ncols = sh->nusers;
	s->by_item.indptr = (int64 *) (base + l->item_indptr);
	s->by_item.indices = (int32 *) (base + l->item_indices);
	s->by_item.values = (float *) (base + l->item_values);
	s->user_chunks = (int64 *) (base + l->user_chunks);
	s->item_chunks = (int64 *) (base + l->item_chunks);
	s->loss_parts = (double *) (base + l->loss_parts);
}

/* Each process's solver scratch, in the memory of the current context. */
static float *
alloc_scratch(const WalsShared *sh)
{
	return MemoryContextAllocHuge(CurrentMemoryContext,
								  Max(sh->scratch_floats, 1) * sizeof(float));
}

/*
 * The peak of a training.  While the matrices are built, the rows read
 * (12 bytes each) and the scratch of the sorts live beside the item matrix
 * they are scattered into (8 bytes a rating), or beside the whole shared
 * segment, which is backed in full when it is created; while the sweeps
 * run, the matrices, the factors and every process's scratch.
 */
static double
estimate_bytes(const WalsLayout *l, int64 cells, int64 scratch_floats, int procs,
			   bool shared)
{
	double		rows = (double) cells * (sizeof(int32) * 2 + sizeof(float));
	double		sorts = (double) wals_csr_scratch_bytes((size_t) cells);
	double		build = rows + sorts + (shared ? (double) l->total :
								(double) cells * (sizeof(int32) + sizeof(float)));
	double		sweeps = (double) l->total +
		(double) procs * scratch_floats * sizeof(float);

	return Max(build, sweeps);
}

/*
 * The least memory a training of rows rows can need, whatever its users and
 * items: for refusing a hopeless training before it reads anything.
 */
double
wals_sweeps_min_bytes(const WalsTrainArgs *args, double rows)
{
	WalsLayout	l;
	int64		cells = (int64) rows;

	plan_layout(&l, 0, 0, cells, args->params.factors);
	return estimate_bytes(&l, cells, 0, args->workers + 1, args->workers > 0);
}

/*
 * Plan and allocate the memory of a training of raw (read in read_s
 * seconds, for the NOTICE), refusing it when it exceeds wals.max_memory, and
 * point data's matrices at it; the caller then builds them with
 * wals_build_matrices.
 */
WalsSweeps *
wals_sweeps_begin(const WalsTrainArgs *args, const WalsRatings *raw,
				  double read_s, WalsData *data)
{
	WalsSweeps *s = palloc0(sizeof(WalsSweeps));
	WalsShared *sh = palloc0(sizeof(WalsShared));
	int			f = args->params.factors;
	double		estimate;
	char	   *base;

	s->shared = sh;
	ConditionVariableInit(&sh->task_cv);
	ConditionVariableInit(&sh->done_cv);
	sh->params = args->params;
	sh->nusers = raw->nusers;
	sh->nitems = raw->nitems;
	/*
	 * The scratch grows with the longest row only up to one Cholesky block,
	 * so the number of ratings, a bound on any row, sizes it without a pass
	 * over them to find the longest.
	 */
	sh->scratch_floats = wals_solve_scratch(&args->params, raw->n);
	plan_layout(&sh->layout, raw->nusers, raw->nitems, raw->n, f);

	estimate = estimate_bytes(&sh->layout, raw->n, sh->scratch_floats, args->workers + 1,
							  args->workers > 0);
	ereport(NOTICE,
			(errmsg("training model \"%s\" on %lld rows read (%lld users, %lld items)",
					args->model_display, (long long) raw->n, (long long) raw->nusers,
					(long long) raw->nitems),
			 errdetail("Read in %.3f s. The training needs about %s, leader and workers together.",
					   read_s, wals_pretty_bytes(estimate))));
	wals_memory_check(estimate, "the matrices, factors and scratch");

	if (args->workers > 0)
		s->data_seg = dsm_create(sh->layout.total + WALS_ALIGN, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (s->data_seg != NULL)
	{
		base = dsm_segment_address(s->data_seg);
		sh->data_handle = dsm_segment_handle(s->data_seg);
	}
	else
		base = MemoryContextAllocHuge(CurrentMemoryContext, sh->layout.total + WALS_ALIGN);
	map_sections(s, (char *) TYPEALIGN(WALS_ALIGN, base));

	data->by_user = s->by_user;
	data->by_item = s->by_item;
	return s;
}

float *
wals_sweeps_user_factors(WalsSweeps *s)
{
	return s->X;
}

float *
wals_sweeps_item_factors(WalsSweeps *s)
{
	return s->Y;
}

/*
 * Cut rows into chunks of about equal cost: a rating costs O(f) per CG step
 * and a row about f/2 ratings' worth (its f x f products), and no chunk
 * holds more rows than a cancel check allows.
 */
static int64
cut_chunks(const WalsCsr *R, int f, int64 *bounds)
{
	double		total = (double) R->indptr[R->nrows] + (double) R->nrows * f / 2;
	double		target = Max(1.0, total / WALS_CHUNKS_PER_SWEEP);
	int64		cap = rows_per_check(f);
	int64		n = 0;
	int64		start = 0;
	double		cost = 0;

	bounds[0] = 0;
	for (int64 r = 0; r < R->nrows; r++)
	{
		cost += (double) (R->indptr[r + 1] - R->indptr[r]) + f / 2.0;
		if (cost >= target || r + 1 - start >= cap || r + 1 == R->nrows)
		{
			bounds[++n] = r + 1;
			start = r + 1;
			cost = 0;
		}
	}
	return n;
}

static void
run_chunk(WalsSweeps *s, WalsTask task, uint32 chunk)
{
	const WalsParams *params = &s->shared->params;
	int64		bad_row = -1;
	WalsStatus	status;

	switch (task)
	{
		case WALS_TASK_SOLVE_USERS:
			status = wals_solve_rows(params, &s->by_user, s->Y, s->GY, s->X,
									 s->user_chunks[chunk], s->user_chunks[chunk + 1],
									 s->scratch, &bad_row);
			wals_report_core_status(status, "solving user factors", bad_row);
			break;
		case WALS_TASK_SOLVE_ITEMS:
			status = wals_solve_rows(params, &s->by_item, s->X, s->GX, s->Y,
									 s->item_chunks[chunk], s->item_chunks[chunk + 1],
									 s->scratch, &bad_row);
			wals_report_core_status(status, "solving item factors", bad_row);
			break;
		case WALS_TASK_LOSS:
			s->loss_parts[chunk] = wals_loss_rows(params, &s->by_user, s->X, s->Y,
												  s->user_chunks[chunk],
												  s->user_chunks[chunk + 1]);
			break;
		case WALS_TASK_NONE:
		case WALS_TASK_QUIT:
			break;
	}
}

/*
 * Claim and run chunks of generation gen until none is left.  A claim is a
 * compare-and-swap on the whole cursor, so it fails once the leader has
 * moved on to another generation.
 */
static void
work_on(WalsSweeps *s, uint32 gen)
{
	WalsShared *sh = s->shared;
	WalsTask	task;
	uint32		nchunks;
	uint64		cur;

	pg_read_barrier();
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
		run_chunk(s, task, chunk);
		if (pg_atomic_add_fetch_u32(&sh->finished, 1) == nchunks)
			ConditionVariableBroadcast(&sh->done_cv);
		cur = pg_atomic_read_u64(&sh->cursor);
	}
}

/* Publish a task, work on it, and wait until every chunk is done. */
static void
run_task(WalsSweeps *s, WalsTask task, uint32 nchunks)
{
	WalsShared *sh = s->shared;
	uint32		gen = (uint32) (pg_atomic_read_u64(&sh->cursor) >> 32) + 1;

	sh->task = task;
	sh->nchunks = nchunks;
	pg_atomic_write_u32(&sh->finished, 0);
	pg_write_barrier();
	pg_atomic_write_u64(&sh->cursor, (uint64) gen << 32);
	if (s->pcxt != NULL)
		ConditionVariableBroadcast(&sh->task_cv);
	if (task == WALS_TASK_QUIT)
		return;

	work_on(s, gen);

	if (pg_atomic_read_u32(&sh->finished) < nchunks)
	{
		ConditionVariablePrepareToSleep(&sh->done_cv);
		while (pg_atomic_read_u32(&sh->finished) < nchunks)
			ConditionVariableSleep(&sh->done_cv, PG_WAIT_EXTENSION);
		ConditionVariableCancelSleep();
	}
}

/* G = Y^T Y over all rows, by the leader; O(rows f^2), small beside a sweep. */
static void
compute_gram(const float *Y, int64 nrows, int f, float *G)
{
	int64		step = WALS_ROWS_PER_CHECK * 16;

	memset(G, 0, sizeof(float) * f * f);
	for (int64 lo = 0; lo < nrows; lo += step)
	{
		CHECK_FOR_INTERRUPTS();
		wals_gram_rows(Y, lo, Min(nrows, lo + step), f, G);
	}
}

/* The exact objective; GX and GY must be those of the current factors. */
static double
compute_loss(WalsSweeps *s)
{
	WalsShared *sh = s->shared;
	const WalsParams *params = &sh->params;
	double		loss;

	run_task(s, WALS_TASK_LOSS, (uint32) sh->user_nchunks);
	loss = wals_loss_unobserved(params, s->GX, s->GY);
	for (int64 c = 0; c < sh->user_nchunks; c++)
		loss += s->loss_parts[c];
	return loss + wals_reg_rows(params, &s->by_item, s->Y, 0, sh->nitems);
}

/* Alternate the half-sweeps until the iterations run out or the loss settles. */
static void
iterate(WalsSweeps *s, const WalsTrainArgs *args, WalsTrainResult *result)
{
	WalsShared *sh = s->shared;
	int			f = args->params.factors;

	wals_iterations_begin(args, result);
	compute_gram(s->Y, sh->nitems, f, s->GY);
	for (int it = 0; it < args->iterations; it++)
	{
		instr_time	start;

		INSTR_TIME_SET_CURRENT(start);
		wals_report_progress(args, it, "solving user factors", result);
		run_task(s, WALS_TASK_SOLVE_USERS, (uint32) sh->user_nchunks);
		compute_gram(s->X, sh->nusers, f, s->GX);
		wals_report_progress(args, it, "solving item factors", result);
		run_task(s, WALS_TASK_SOLVE_ITEMS, (uint32) sh->item_nchunks);
		compute_gram(s->Y, sh->nitems, f, s->GY);
		wals_report_progress(args, it, "computing the loss", result);
		if (wals_iteration_done(args, result, it, compute_loss(s), wals_seconds_since(start)))
			break;
	}
}

/*
 * Launch the workers, which attach to the training's memory and wait for
 * tasks.  Without a shared segment, or when none can be launched, the
 * leader trains alone.
 */
static void
launch_workers(WalsSweeps *s, const WalsTrainArgs *args, WalsTrainResult *result)
{
	WalsShared *local = s->shared;
	WalsShared *sh;

	result->workers = 0;
	if (args->workers == 0)
		return;
	if (s->data_seg == NULL)
	{
		ereport(NOTICE,
				(errmsg("no dynamic shared memory segment is available; model \"%s\" trains in the leader alone",
						args->model_display),
				 errhint("Raise max_connections or free dynamic shared memory segments to train with parallel workers.")));
		return;
	}

	EnterParallelMode();
	s->pcxt = CreateParallelContext("wals", "wals_parallel_main", args->workers);
	shm_toc_estimate_chunk(&s->pcxt->estimator, sizeof(WalsShared));
	shm_toc_estimate_keys(&s->pcxt->estimator, 1);
	InitializeParallelDSM(s->pcxt);

	if (s->pcxt->seg != NULL)
	{
		sh = shm_toc_allocate(s->pcxt->toc, sizeof(WalsShared));
		memcpy(sh, local, sizeof(WalsShared));
		pg_atomic_init_u64(&sh->cursor, 0);
		pg_atomic_init_u32(&sh->finished, 0);
		ConditionVariableInit(&sh->task_cv);
		ConditionVariableInit(&sh->done_cv);
		shm_toc_insert(s->pcxt->toc, WALS_KEY_SHARED, sh);
		s->shared = sh;
		LaunchParallelWorkers(s->pcxt);
		result->workers = s->pcxt->nworkers_launched;
	}
	if (result->workers == 0)
		ereport(NOTICE,
				(errmsg("no parallel worker could be launched; model \"%s\" trains in the leader alone",
						args->model_display),
				 errhint("Raise max_worker_processes or max_parallel_workers, or pass workers => 0.")));
}

static void
stop_workers(WalsSweeps *s)
{
	if (s->pcxt == NULL)
		return;
	if (s->pcxt->nworkers_launched > 0)
	{
		run_task(s, WALS_TASK_QUIT, 0);
		WaitForParallelWorkersToFinish(s->pcxt);
	}
	DestroyParallelContext(s->pcxt);
	s->pcxt = NULL;
	ExitParallelMode();
}

/*
 * Run the training on matrices already built into the memory of
 * wals_sweeps_begin and factors already initialised; fills result's loss,
 * iterations, per-iteration log and worker count.
 */
void
wals_sweeps_run(WalsSweeps *s, const WalsTrainArgs *args, WalsTrainResult *result)
{
	WalsShared *sh = s->shared;
	int			f = args->params.factors;

	pg_atomic_init_u64(&sh->cursor, 0);
	pg_atomic_init_u32(&sh->finished, 0);
	sh->user_nchunks = cut_chunks(&s->by_user, f, s->user_chunks);
	sh->item_nchunks = cut_chunks(&s->by_item, f, s->item_chunks);
	s->scratch = alloc_scratch(sh);

	launch_workers(s, args, result);
	iterate(s, args, result);
	stop_workers(s);
	wals_report_progress_end();
}

/* Release the training's memory; the factors must have been stored. */
void
wals_sweeps_end(WalsSweeps *s)
{
	if (s->data_seg != NULL)
		dsm_detach(s->data_seg);
	s->data_seg = NULL;
}

/*
 * Entry point of a parallel worker: attach to the training's memory, then
 * work on each task the leader publishes until it says to quit.
 */
void
wals_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	WalsSweeps	s = {0};
	WalsShared *sh = shm_toc_lookup(toc, WALS_KEY_SHARED, false);
	dsm_segment *data_seg = dsm_attach(sh->data_handle);
	uint32		seen = 0;

	if (data_seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not map the shared memory of the training")));
	s.shared = sh;
	map_sections(&s, (char *) TYPEALIGN(WALS_ALIGN, dsm_segment_address(data_seg)));
	s.scratch = alloc_scratch(sh);

	for (;;)
	{
		uint32		gen;

		ConditionVariablePrepareToSleep(&sh->task_cv);
		while ((gen = (uint32) (pg_atomic_read_u64(&sh->cursor) >> 32)) == seen)
			ConditionVariableSleep(&sh->task_cv, PG_WAIT_EXTENSION);
		ConditionVariableCancelSleep();
		seen = gen;

		pg_read_barrier();
		if (sh->task == WALS_TASK_QUIT)
			break;
		work_on(&s, gen);
	}
	dsm_detach(data_seg);
}
