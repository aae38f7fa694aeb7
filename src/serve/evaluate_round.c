/*
 * evaluate_round.c
 *	  wals_evaluate's scoring: the test users evaluate.c gathers, a round
 *	  at a time, scored by the leader and parallel workers together.
 *
 * A round holds up to WALS_EVAL_ROUND users: their factors, the items the
 * model keeps as rated by each and their merged test cells.  To score it,
 * the leader places them in one area by offsets, with a copy of the item
 * factors, in a parallel context's segment; the processes take chunks of
 * WALS_EVAL_CHUNK users from an atomic counter, score each chunk over every
 * item with one matrix product (wals_score_product, which cuts it where
 * one call would keep a cancel waiting), and write each user's sums and
 * status into the user's own slot.  The leader adds the slots up in user order, so the
 * figures have the same bits whatever the number of workers, and reports
 * the first user that failed in that order.  With no worker (none allowed,
 * too few users, or a leader already in parallel mode, as that of a
 * parallel query is) the leader scores the area in its own memory, reading
 * the item factors in place.
 *
 * The workers are as many as max_parallel_maintenance_workers allows, as a
 * training's default: each holds a chunk's scores, WALS_EVAL_CHUNK rows of
 * every item, and reads the item factors, which stay in the cache lines of
 * both cores on two.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "wals_serve.h"

PGDLLEXPORT void wals_evaluate_main(dsm_segment *seg, shm_toc *toc);

/* Users scored by one matrix product: rows of scores that stay in L2. */
#define WALS_EVAL_CHUNK 128

/* The only key of the round's table of contents. */
#define WALS_EVAL_KEY UINT64CONST(0xE7A1000000000001)

typedef struct EvalArea
{
	int64		nusers;
	int64		nitems;
	int			f;
	int			k;
	bool		rmse;
	pg_atomic_uint64 next;		/* the next chunk to take */
	Size		Y;				/* offsets from the area; Y 0 where not copied */
	Size		X;
	Size		rated_ptr;
	Size		rated;
	Size		test_ptr;
	Size		test_items;
	Size		test_ratings;
	Size		parts;
	Size		sq;
	Size		status;
	Size		total;
} EvalArea;

/* The area's shape for round r, with a copy of Y or not. */
static void
plan(const WalsEvalRound *r, const WalsServeModel *m, int k, bool rmse, bool copy_y,
	 EvalArea *a)
{
	Size		off = TYPEALIGN(WALS_AREA_ALIGN, sizeof(EvalArea));
	int64		nrated = r->rated_ptr[r->n];
	int64		ntest = r->test_ptr[r->n];
	int64		nitems = m->nitems;
	int			f = m->factors;

	memset(a, 0, sizeof(*a));
	a->nusers = r->n;
	a->nitems = nitems;
	a->f = f;
	a->k = k;
	a->rmse = rmse;
	a->Y = copy_y ? wals_area_section(&off, sizeof(float) * nitems * f) : 0;
	a->X = wals_area_section(&off, sizeof(float) * r->n * f);
	a->rated_ptr = wals_area_section(&off, sizeof(int64) * (r->n + 1));
	a->rated = wals_area_section(&off, sizeof(int32) * nrated);
	a->test_ptr = wals_area_section(&off, sizeof(int64) * (r->n + 1));
	a->test_items = wals_area_section(&off, sizeof(int32) * ntest);
	a->test_ratings = wals_area_section(&off, sizeof(float) * ntest);
	a->parts = wals_area_section(&off, sizeof(WalsMetricsAcc) * r->n);
	a->sq = wals_area_section(&off, sizeof(WalsRmseAcc) * r->n);
	a->status = wals_area_section(&off, sizeof(int) * r->n);
	a->total = MAXALIGN(off);
}

static void
fill(char *base, const EvalArea *shape, const WalsEvalRound *r, const float *Y)
{
	EvalArea   *a = (EvalArea *) base;
	int64		n = r->n;

	memcpy(a, shape, sizeof(EvalArea));
	pg_atomic_init_u64(&a->next, 0);
	if (a->Y != 0)
		memcpy(base + a->Y, Y, sizeof(float) * a->nitems * a->f);
	memcpy(base + a->X, r->X, sizeof(float) * n * a->f);
	memcpy(base + a->rated_ptr, r->rated_ptr, sizeof(int64) * (n + 1));
	memcpy(base + a->rated, r->rated, sizeof(int32) * r->rated_ptr[n]);
	memcpy(base + a->test_ptr, r->test_ptr, sizeof(int64) * (n + 1));
	memcpy(base + a->test_items, r->test_items, sizeof(int32) * r->test_ptr[n]);
	memcpy(base + a->test_ratings, r->test_ratings, sizeof(float) * r->test_ptr[n]);
}

/* Users [lo, hi) of the area, each into its slots. */
static void
score_chunk(char *base, const float *Y, int64 lo, int64 hi, float *scores, void *mscratch)
{
	EvalArea   *a = (EvalArea *) base;
	const float *X = (const float *) (base + a->X);
	const int64 *rated_ptr = (const int64 *) (base + a->rated_ptr);
	const int32 *rated = (const int32 *) (base + a->rated);
	const int64 *test_ptr = (const int64 *) (base + a->test_ptr);
	const int32 *test_items = (const int32 *) (base + a->test_items);
	const float *test_ratings = (const float *) (base + a->test_ratings);
	WalsMetricsAcc *parts = (WalsMetricsAcc *) (base + a->parts);
	WalsRmseAcc *sq = (WalsRmseAcc *) (base + a->sq);
	int		   *status = (int *) (base + a->status);

	wals_score_product(X + lo * a->f, (int) (hi - lo), Y, a->nitems, a->f, scores);
	for (int64 u = lo; u < hi; u++)
	{
		const float *s = scores + (u - lo) * a->nitems;
		int64		ntest = test_ptr[u + 1] - test_ptr[u];
		WalsStatus	st;

		wals_metrics_init(&parts[u], a->k);
		wals_rmse_init(&sq[u]);
		st = wals_metrics_user(&parts[u], s, a->nitems, rated + rated_ptr[u],
							   rated_ptr[u + 1] - rated_ptr[u], test_items + test_ptr[u], ntest,
							   mscratch);
		if (st == WALS_OK && a->rmse)
			st = wals_rmse_user(&sq[u], s, a->nitems, test_items + test_ptr[u],
								test_ratings + test_ptr[u], ntest);
		status[u] = (int) st;
	}
}

/* Take chunks until none is left, in any process. */
static void
score_chunks(char *base, const float *Y)
{
	EvalArea   *a = (EvalArea *) base;
	float	   *scores = MemoryContextAllocHuge(CurrentMemoryContext,
												sizeof(float) * WALS_EVAL_CHUNK * Max(a->nitems, 1));
	void	   *mscratch = MemoryContextAllocHuge(CurrentMemoryContext,
												  Max(wals_metrics_scratch_size(a->nitems, a->k), 1));

	for (;;)
	{
		int64		lo = (int64) pg_atomic_fetch_add_u64(&a->next, 1) * WALS_EVAL_CHUNK;

		if (lo >= a->nusers)
			break;
		CHECK_FOR_INTERRUPTS();
		score_chunk(base, Y, lo, Min(lo + WALS_EVAL_CHUNK, a->nusers), scores, mscratch);
	}
	pfree(scores);
	pfree(mscratch);
}

/* Entry point of a parallel worker: score chunks of the leader's round. */
void
wals_evaluate_main(dsm_segment *seg, shm_toc *toc)
{
	char	   *base = shm_toc_lookup(toc, WALS_EVAL_KEY, false);
	EvalArea   *a = (EvalArea *) base;

	score_chunks(base, (const float *) (base + a->Y));
}

/* The workers a round of n users may use. */
static int
round_workers(int64 n)
{
	int64		chunks = (n + WALS_EVAL_CHUNK - 1) / WALS_EVAL_CHUNK;

	if (IsInParallelMode() || chunks < 2)
		return 0;
	return (int) Min(max_parallel_maintenance_workers, chunks - 1);
}

void
wals_eval_round_score(WalsServeModel *m, WalsEvalRound *r, int k, bool rmse,
					  WalsMetricsAcc *acc, WalsRmseAcc *sq)
{
	int			workers = round_workers(r->n);
	ParallelContext *pcxt = NULL;
	EvalArea	shape;
	EvalArea   *a;
	char	   *base;
	const float *Y = m->Y;
	int64		failed = -1;
	WalsStatus	failure_status = WALS_OK;

	if (r->n == 0)
		return;
	plan(r, m, k, rmse, workers > 0, &shape);
	if (workers > 0 && !wals_segment_room_for(shape.total))
	{
		/* a container's small /dev/shm: the leader scores the round alone */
		workers = 0;
		plan(r, m, k, rmse, false, &shape);
	}
	if (workers > 0)
	{
		EnterParallelMode();
		pcxt = CreateParallelContext("wals", "wals_evaluate_main", workers);
		shm_toc_estimate_chunk(&pcxt->estimator, shape.total);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
		InitializeParallelDSM(pcxt);
		if (pcxt->seg == NULL)
			plan(r, m, k, rmse, false, &shape);
	}
	if (shape.Y != 0)
		base = shm_toc_allocate(pcxt->toc, shape.total);
	else
		base = MemoryContextAllocHuge(CurrentMemoryContext, shape.total);
	fill(base, &shape, r, Y);
	a = (EvalArea *) base;
	if (shape.Y != 0)
	{
		Y = (const float *) (base + shape.Y);
		shm_toc_insert(pcxt->toc, WALS_EVAL_KEY, base);
		LaunchParallelWorkers(pcxt);
	}
	score_chunks(base, Y);
	if (pcxt != NULL && pcxt->nworkers_launched > 0)
		WaitForParallelWorkersToFinish(pcxt);

	for (int64 u = 0; u < r->n && failed < 0; u++)
	{
		failure_status = (WalsStatus) ((int *) (base + a->status))[u];
		if (failure_status != WALS_OK)
			failed = u;
		wals_metrics_merge(acc, (WalsMetricsAcc *) (base + a->parts) + u);
		wals_rmse_merge(sq, (WalsRmseAcc *) (base + a->sq) + u);
	}
	if (shape.Y == 0)
		pfree(base);
	if (pcxt != NULL)
	{
		DestroyParallelContext(pcxt);
		ExitParallelMode();
	}
	if (failed >= 0)
	{
		WalsFailure failure = {failure_status, WALS_SIDE_USERS, 0, ""};

		wals_report_failure(&failure, psprintf("evaluating model \"%s\"", m->info.display),
							&r->ids[failed], NULL);
	}
	r->n = 0;
}

/* An empty round, in the caller's memory context. */
void
wals_eval_round_init(WalsEvalRound *r, int f)
{
	memset(r, 0, sizeof(*r));
	r->ids = palloc(sizeof(int64) * WALS_EVAL_ROUND);
	r->X = palloc(sizeof(float) * WALS_EVAL_ROUND * f);
	r->rated_ptr = palloc0(sizeof(int64) * (WALS_EVAL_ROUND + 1));
	r->test_ptr = palloc0(sizeof(int64) * (WALS_EVAL_ROUND + 1));
	r->rated_cap = 1024;
	r->rated = palloc(sizeof(int32) * r->rated_cap);
	r->test_cap = 1024;
	r->test_items = palloc(sizeof(int32) * r->test_cap);
	r->test_ratings = palloc(sizeof(float) * r->test_cap);
}

/* Add a user; the round must have room (n < WALS_EVAL_ROUND). */
void
wals_eval_round_add(WalsEvalRound *r, int f, int64 id, const float *x, const WalsRated *rated,
					const int32 *items, const float *ratings, int64 ntest)
{
	int64		n = r->n;
	int64		nrated = r->rated_ptr[n];
	int64		ncells = r->test_ptr[n];

	Assert(n < WALS_EVAL_ROUND);
	while (nrated + rated->n > r->rated_cap)
	{
		r->rated_cap *= 2;
		r->rated = repalloc_huge(r->rated, sizeof(int32) * r->rated_cap);
	}
	while (ncells + ntest > r->test_cap)
	{
		r->test_cap *= 2;
		r->test_items = repalloc_huge(r->test_items, sizeof(int32) * r->test_cap);
		r->test_ratings = repalloc_huge(r->test_ratings, sizeof(float) * r->test_cap);
	}
	r->ids[n] = id;
	memcpy(r->X + n * f, x, sizeof(float) * f);
	if (rated->n > 0)
		memcpy(r->rated + nrated, rated->items, sizeof(int32) * rated->n);
	memcpy(r->test_items + ncells, items, sizeof(int32) * ntest);
	memcpy(r->test_ratings + ncells, ratings, sizeof(float) * ntest);
	r->rated_ptr[n + 1] = nrated + rated->n;
	r->test_ptr[n + 1] = ncells + ntest;
	r->n = n + 1;
}
