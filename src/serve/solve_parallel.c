/*
 * solve_parallel.c
 *	  The rows of a refresh solved by the leader and parallel workers.
 *
 * Each row of a half-sweep is a system of its own, so a refresh hands
 * blocks of rows out from an atomic counter, as evaluate_round.c hands out
 * users: the leader and as many workers as max_parallel_maintenance_workers
 * allows solve them into one array of the segment, which the leader copies
 * back.  Each row is solved by the same code whoever takes it, so the
 * factors do not depend on the number of workers.  A system too small to
 * pay for starting workers (a few milliseconds each), or whose segment
 * would not fit in /dev/shm, is solved by the leader alone.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shm_toc.h"

#include "segments.h"
#include "wals_serve.h"

/* Rows a process takes at a time. */
#define SOLVE_BLOCK			64

/*
 * Floating-point operations below which the leader solves alone: about
 * 50 ms of one core, ten times what starting a worker costs on a KVM guest.
 */
#define SOLVE_PARALLEL_MIN_FLOPS	2e9

#define WALS_SOLVE_KEY		1

/*
 * The segment: this header, then indptr, indices, values, X, G and Y, at
 * the offsets it gives.
 */
typedef struct SolveArea
{
	WalsParams	params;
	int64		nrows;
	int64		ncols;
	int64		xrows;
	int			f;
	int64		max_nnz;
	Size		indptr;
	Size		indices;
	Size		values;
	Size		X;
	Size		G;
	Size		Y;
	Size		total;
	pg_atomic_uint64 next;		/* the next block to take */
	pg_atomic_uint32 failed;	/* a WalsStatus, once a row failed */
} SolveArea;

PGDLLEXPORT void wals_solve_main(dsm_segment *seg, shm_toc *toc);

/* Take blocks until none is left, in any process. */
static void
solve_blocks(char *base)
{
	SolveArea  *a = (SolveArea *) base;
	WalsCsr		R = {0};
	float	   *scratch = MemoryContextAllocHuge(CurrentMemoryContext,
												 sizeof(float) *
												 (wals_solve_scratch(&a->params, a->max_nnz) + 16));

	R.nrows = a->nrows;
	R.ncols = a->ncols;
	R.indptr = (int64 *) (base + a->indptr);
	R.indices = (int32 *) (base + a->indices);
	R.values = (float *) (base + a->values);
	for (;;)
	{
		int64		lo = (int64) pg_atomic_fetch_add_u64(&a->next, 1) * SOLVE_BLOCK;
		int64		bad = -1;
		WalsStatus	st;

		if (lo >= a->nrows || pg_atomic_read_u32(&a->failed) != WALS_OK)
			break;
		CHECK_FOR_INTERRUPTS();
		st = wals_solve_rows(&a->params, &R, (const float *) (base + a->X),
							 (const float *) (base + a->G), (float *) (base + a->Y), lo,
							 Min(lo + SOLVE_BLOCK, a->nrows), scratch, &bad);
		if (st != WALS_OK)
		{
			uint32		ok = WALS_OK;

			(void) pg_atomic_compare_exchange_u32(&a->failed, &ok, (uint32) st);
			break;
		}
	}
	pfree(scratch);
}

/* Entry point of a parallel worker: solve blocks of the leader's rows. */
void
wals_solve_main(dsm_segment *seg, shm_toc *toc)
{
	solve_blocks(shm_toc_lookup(toc, WALS_SOLVE_KEY, false));
}

/*
 * About the floating-point operations of solving R's rows: exactly, a Gram
 * of each row's cells and a factorization; by conjugate gradient, a few
 * passes over the cells and products with G.
 */
static double
solve_flops(const WalsParams *params, const WalsCsr *R, int f)
{
	double		nnz = (double) R->indptr[R->nrows];
	double		rows = (double) R->nrows;

	if (params->solver == WALS_CHOLESKY)
		return nnz * f * f + rows * f * f * f / 3;
	return (nnz * f * 4 + rows * f * f * 2) * (params->cg_steps + 1);
}

/* The cells of R's longest row, which size a solver's scratch. */
static int64
longest_row(const WalsCsr *R)
{
	int64		most = 0;

	for (int64 i = 0; i < R->nrows; i++)
		most = Max(most, R->indptr[i + 1] - R->indptr[i]);
	return most;
}

/* Lay the segment out for R, X (xrows x f) and Y. */
static void
plan(SolveArea *a, const WalsParams *params, const WalsCsr *R, int64 xrows, int f)
{
	int64		nnz = R->indptr[R->nrows];
	Size		at = MAXALIGN(sizeof(SolveArea));

	memset(a, 0, sizeof(*a));
	a->params = *params;
	a->nrows = R->nrows;
	a->ncols = R->ncols;
	a->xrows = xrows;
	a->f = f;
	a->max_nnz = longest_row(R);
#define PLACE(field, bytes) (a->field = at, at += MAXALIGN(bytes))
	PLACE(indptr, sizeof(int64) * (R->nrows + 1));
	PLACE(indices, sizeof(int32) * Max(nnz, 1));
	PLACE(values, sizeof(float) * Max(nnz, 1));
	PLACE(X, sizeof(float) * f * Max(xrows, 1));
	PLACE(G, sizeof(float) * f * f);
	PLACE(Y, sizeof(float) * f * Max(R->nrows, 1));
#undef PLACE
	a->total = at;
}

/* The rows of R solved by the leader alone, as wals_solve_all_rows solves them. */
static void
solve_alone(const WalsParams *params, const WalsCsr *R, const float *X, const float *G, float *Y,
			const char *what)
{
	float	   *scratch = palloc(sizeof(float) *
								 (wals_solve_scratch(params, longest_row(R)) + 16));
	int64		bad = -1;
	WalsStatus	st;

	for (int64 lo = 0; lo < R->nrows; lo += SOLVE_BLOCK)
	{
		CHECK_FOR_INTERRUPTS();
		st = wals_solve_rows(params, R, X, G, Y, lo, Min(R->nrows, lo + SOLVE_BLOCK),
							 scratch, &bad);
		if (st != WALS_OK)
			wals_report_core_status(st, what);
	}
	pfree(scratch);
}

/*
 * Solve every row of R into Y (R->nrows x f, holding each row's start),
 * against X (xrows x f) with Gram G, as wals_solve_rows does a block at a
 * time; with parallel workers where the work pays for them.  what names
 * the rows in an error.
 */
void
wals_solve_all_rows(const WalsParams *params, const WalsCsr *R, const float *X, int64 xrows,
					const float *G, float *Y, int f, const char *what)
{
	int64		nnz = R->indptr[R->nrows];
	int			workers = IsInParallelMode() || R->nrows <= SOLVE_BLOCK ||
		solve_flops(params, R, f) < SOLVE_PARALLEL_MIN_FLOPS ? 0 : max_parallel_maintenance_workers;
	ParallelContext *pcxt;
	SolveArea	shape = {0};
	SolveArea  *a;
	char	   *base;
	WalsStatus	st;

	if (workers > 0)
	{
		plan(&shape, params, R, xrows, f);
		if (!wals_segment_room_for(shape.total))
			workers = 0;
	}
	if (workers == 0)
	{
		solve_alone(params, R, X, G, Y, what);
		return;
	}
	EnterParallelMode();
	pcxt = CreateParallelContext("wals", "wals_solve_main", workers);
	shm_toc_estimate_chunk(&pcxt->estimator, shape.total);
	shm_toc_estimate_keys(&pcxt->estimator, 1);
	InitializeParallelDSM(pcxt);
	base = pcxt->seg != NULL ? shm_toc_allocate(pcxt->toc, shape.total) :
		MemoryContextAllocHuge(CurrentMemoryContext, shape.total);
	a = (SolveArea *) base;
	*a = shape;
	pg_atomic_init_u64(&a->next, 0);
	pg_atomic_init_u32(&a->failed, WALS_OK);
	wals_copy_bytes(base + a->indptr, R->indptr, sizeof(int64) * (R->nrows + 1));
	wals_copy_bytes(base + a->indices, R->indices, sizeof(int32) * nnz);
	wals_copy_bytes(base + a->values, R->values, sizeof(float) * nnz);
	wals_copy_bytes(base + a->X, X, sizeof(float) * f * xrows);
	wals_copy_bytes(base + a->G, G, sizeof(float) * f * f);
	wals_copy_bytes(base + a->Y, Y, sizeof(float) * f * R->nrows);
	if (pcxt->seg != NULL)
	{
		shm_toc_insert(pcxt->toc, WALS_SOLVE_KEY, base);
		LaunchParallelWorkers(pcxt);
		ereport(DEBUG1,
				(errmsg_internal("wals: %s, " INT64_FORMAT " rows, with %d parallel workers",
								 what, R->nrows, pcxt->nworkers_launched)));
	}
	solve_blocks(base);
	if (pcxt->nworkers_launched > 0)
		WaitForParallelWorkersToFinish(pcxt);
	st = (WalsStatus) pg_atomic_read_u32(&a->failed);
	if (st == WALS_OK)
		wals_copy_bytes(Y, base + a->Y, sizeof(float) * f * R->nrows);
	if (pcxt->seg == NULL)
		pfree(base);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	if (st != WALS_OK)
		wals_report_core_status(st, what);
}
