/*
 * evaluate.c
 *	  wals_evaluate: a model against held-out ratings.
 *
 * The test rows are read in user order through a cursor; a block of test
 * users at a time, their factors and the items they rated in training come
 * from one query, and the users go into a round, which evaluate_round.c
 * scores over every item with the leader and parallel workers, each user's
 * rated items left out of its ranking, and adds up with the metrics of
 * src/core/metrics.c.  An implicit model's held-out dislikes (negative
 * ratings) are not relevant items.  Test users and
 * items the model does not know cannot be scored; they are counted and
 * reported, so that a split that leaks cold-start users into the test set
 * shows up in the result instead of flattering it.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "wals_serve.h"
#include "wals_metrics.h"

PG_FUNCTION_INFO_V1(wals_evaluate);

/* Test rows fetched at a time. */
#define WALS_EVAL_FETCH 10000

/* What one evaluation has counted besides the metrics. */
typedef struct EvalCounts
{
	int64		users_unknown;
	int64		cells_unknown;	/* test cells whose item the model lacks */
	int64		null_ids;
} EvalCounts;

/* Test users whose factors and rated items one query reads. */
#define WALS_EVAL_BLOCK 128

/* The test cells of a block of users, gathered while the cursor moves on. */
typedef struct EvalBlock
{
	int			n;				/* users */
	int64		users[WALS_EVAL_BLOCK];
	int			start[WALS_EVAL_BLOCK + 1]; /* user j's cells: start[j] .. start[j + 1] */
	int			ncells;
	int			cap;
	int32	   *items;
	float	   *ratings;
	float	   *X;				/* WALS_EVAL_BLOCK x factors */
} EvalBlock;

/* Everything one evaluation accumulates. */
typedef struct EvalState
{
	WalsServeModel *m;
	bool		rmse;
	WalsMetricsAcc acc;
	WalsRmseAcc sq;
	EvalCounts	counts;
	WalsEvalRound round;		/* users gathered for scoring */
	int			k;
	int32	   *items;			/* one user's merged cells */
	float	   *ratings;
	MemoryContext block_cxt;	/* reset after each block of users */
} EvalState;

/*
 * Cells [lo, hi) of the block sorted by item with repeated items merged,
 * their ratings averaged, so that the metrics see each test item once.
 */
static int
merge_cells(const EvalBlock *b, int lo, int hi, int32 *items, float *ratings)
{
	int			n = 0;
	int			same = 0;

	memcpy(items, b->items + lo, sizeof(int32) * (hi - lo));
	memcpy(ratings, b->ratings + lo, sizeof(float) * (hi - lo));
	wals_sort_cells(items, ratings, hi - lo);
	for (int i = 0; i < hi - lo; i++)
	{
		if (n > 0 && items[n - 1] == items[i])
		{
			same++;
			ratings[n - 1] += (ratings[i] - ratings[n - 1]) / (float) (same + 1);
			continue;
		}
		items[n] = items[i];
		ratings[n++] = ratings[i];
		same = 0;
	}
	return n;
}

/*
 * The merged cells less the dislikes of an implicit model (a rating below
 * zero, the sign of the average being that of the sum training takes): a
 * held-out dislike is no item the user should be recommended, so it is not
 * relevant, and stays an eligible item like any other the user has not
 * rated.
 */
static int
drop_dislikes(int32 *items, float *ratings, int n)
{
	int			kept = 0;

	for (int i = 0; i < n; i++)
		if (ratings[i] >= 0.0f)
		{
			items[kept] = items[i];
			ratings[kept++] = ratings[i];
		}
	return kept;
}

/* Gather the block's users, with their factors and rated items, into the round. */
static void
evaluate_block(EvalState *e, EvalBlock *b)
{
	WalsServeModel *m = e->m;
	int64		known[WALS_EVAL_BLOCK];
	WalsRated	rated[WALS_EVAL_BLOCK];
	int			nknown = 0;
	MemoryContext old = MemoryContextSwitchTo(e->block_cxt);

	/* the test rows come in user order, so the block's users are sorted */
	memcpy(known, b->users, sizeof(int64) * b->n);
	if (b->n > 0)
		nknown = wals_serve_users(m, known, b->n, b->X, rated);
	for (int j = 0; j < b->n; j++)
	{
		int64		u = wals_ids_find(known, nknown, b->users[j]);
		int			n;

		if (u < 0)
		{
			e->counts.users_unknown++;
			continue;
		}
		if (b->start[j + 1] == b->start[j])
			continue;
		n = merge_cells(b, b->start[j], b->start[j + 1], e->items, e->ratings);
		if (m->info.params.feedback == WALS_IMPLICIT)
			n = drop_dislikes(e->items, e->ratings, n);
		if (e->round.n == WALS_EVAL_ROUND)
			wals_eval_round_score(m, &e->round, e->k, e->rmse, &e->acc, &e->sq);
		wals_eval_round_add(&e->round, m->factors, b->users[j], b->X + (size_t) u * m->factors,
							&rated[u], e->items, e->ratings, n);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(e->block_cxt);
	b->n = 0;
	b->ncells = 0;
	b->start[0] = 0;
	CHECK_FOR_INTERRUPTS();
}

/* Add one test cell (item index, or -1 when unknown) of user to the block. */
static void
add_cell(EvalState *e, EvalBlock *b, int64 user, int64 item, float rating)
{
	if (b->n == 0 || b->users[b->n - 1] != user)
	{
		if (b->n == WALS_EVAL_BLOCK)
			evaluate_block(e, b);
		b->users[b->n++] = user;
		b->start[b->n] = b->ncells;
	}
	if (item < 0)
	{
		e->counts.cells_unknown++;
		return;
	}
	if (b->ncells == b->cap)
	{
		b->cap *= 2;
		b->items = repalloc_huge(b->items, sizeof(int32) * b->cap);
		b->ratings = repalloc_huge(b->ratings, sizeof(float) * b->cap);
		e->items = repalloc_huge(e->items, sizeof(int32) * b->cap);
		e->ratings = repalloc_huge(e->ratings, sizeof(float) * b->cap);
	}
	b->items[b->ncells] = (int32) item;
	b->ratings[b->ncells++] = rating;
	b->start[b->n] = b->ncells;
}

static void
put_metric(ReturnSetInfo *rsinfo, const char *name, double value)
{
	Datum		values[2];
	bool		nulls[2] = {false, isnan(value)};

	values[0] = CStringGetTextDatum(name);
	values[1] = Float8GetDatum(value);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* A column of the test source, checked as a training checks its own. */
static const char *
column_arg(FunctionCallInfo fcinfo, int arg, const char *what, Oid source, bool id)
{
	const char *name;

	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"%s\" must not be null", what)));
	name = NameStr(*PG_GETARG_NAME(arg));
	return quote_identifier(wals_check_column(source, get_rel_name(source), name, what, id));
}

/* wals_evaluate's arguments, checked. */
typedef struct EvalArgs
{
	text	   *model;
	Oid			source;
	const char *user_col;		/* quoted */
	const char *item_col;
	const char *rating_col;		/* NULL: none */
	int			k;
} EvalArgs;

static void
eval_args(FunctionCallInfo fcinfo, EvalArgs *a)
{
	a->k = wals_arg_k(fcinfo, 5);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"model\" must not be null"),
				 errhint("Name the model to evaluate.")));
	a->model = PG_GETARG_TEXT_PP(0);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"test_source\" must not be null")));
	a->source = PG_GETARG_OID(1);
	wals_check_source(a->source, "test_source");
	a->user_col = column_arg(fcinfo, 2, "user_col", a->source, true);
	a->item_col = column_arg(fcinfo, 3, "item_col", a->source, true);
	a->rating_col = PG_ARGISNULL(4) ? NULL : column_arg(fcinfo, 4, "rating_col", a->source, false);
	{
		const char *cols[3] = {NameStr(*PG_GETARG_NAME(2)), NameStr(*PG_GETARG_NAME(3)),
		PG_ARGISNULL(4) ? NULL : NameStr(*PG_GETARG_NAME(4))};

		wals_check_readable(a->source, cols, PG_ARGISNULL(4) ? 2 : 3);
	}
	if (strcmp(a->user_col, a->item_col) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"user_col\" and \"item_col\" are both column %s", a->user_col),
				 errhint("Users and items must come from two different columns.")));
}

/*
 * The fetched rows into the block, which a NULL id skips; a NULL or
 * non-finite rating of a rating column is an error.  The block's queries
 * replace SPI_tuptable, so the rows are copied out first.
 */
static void
add_fetched(EvalState *e, EvalBlock *b, const char *rating_col)
{
	uint64		nrows = SPI_processed;
	int64	   *users = palloc(sizeof(int64) * nrows);
	int64	   *items = palloc(sizeof(int64) * nrows);
	float	   *ratings = palloc(sizeof(float) * nrows);
	bool	   *skip = palloc(sizeof(bool) * nrows);

	for (uint64 r = 0; r < nrows; r++)
	{
		bool		unull;
		bool		inull;
		bool		rnull;
		HeapTuple	tuple = SPI_tuptable->vals[r];

		users[r] = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &unull));
		items[r] = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &inull));
		ratings[r] = DatumGetFloat4(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 3, &rnull));
		if (rnull && rating_col != NULL && !unull && !inull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("test source has a NULL rating in column %s", rating_col),
					 errhint("Filter the NULL ratings out with a view, or pass rating_col => NULL.")));
		if (!rnull && !isfinite(ratings[r]))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("test source has the non-finite rating %g in column %s",
							ratings[r], rating_col),
					 errhint("Filter the non-finite ratings out with a view.")));
		skip[r] = unull || inull;
	}
	SPI_freetuptable(SPI_tuptable);
	for (uint64 r = 0; r < nrows; r++)
	{
		if (skip[r])
			e->counts.null_ids++;
		else
			add_cell(e, b, users[r], wals_serve_item(e->m, items[r]), ratings[r]);
	}
	pfree(users);
	pfree(items);
	pfree(ratings);
	pfree(skip);
}

/* The test source through a cursor in user order, every user scored. */
static void
read_test_source(EvalState *e, const EvalArgs *a)
{
	EvalBlock	b = {0};
	Portal		portal;

	b.cap = 1024;
	b.items = palloc(sizeof(int32) * b.cap);
	b.ratings = palloc(sizeof(float) * b.cap);
	e->items = palloc(sizeof(int32) * b.cap);
	e->ratings = palloc(sizeof(float) * b.cap);
	b.X = palloc(sizeof(float) * WALS_EVAL_BLOCK * e->m->factors);
	portal = wals_sql_cursor(psprintf("SELECT (%s)::pg_catalog.int8, (%s)::pg_catalog.int8, %s FROM %s ORDER BY 1",
									  a->user_col, a->item_col,
									  a->rating_col ? psprintf("(%s)::pg_catalog.float4", a->rating_col) : "NULL::pg_catalog.float4",
									  wals_relation_name(a->source)),
							 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		wals_sql_fetch(portal, WALS_EVAL_FETCH);
		if (SPI_processed == 0)
			break;
		add_fetched(e, &b, a->rating_col);
	}
	evaluate_block(e, &b);
	wals_eval_round_score(e->m, &e->round, e->k, e->rmse, &e->acc, &e->sq);
	SPI_cursor_close(portal);
}

/* The result's rows: the metrics, then what could not be evaluated. */
static void
put_results(ReturnSetInfo *rsinfo, const EvalState *e)
{
	WalsMetrics result;
	char		name[64];

	wals_metrics_finish(&e->acc, &result);
	{
		/* NaN where no user counted, which put_metric returns as NULL */
		const double values[] = {result.precision, result.recall, result.ndcg, result.map,
		result.auc};

		for (WalsMetricKind kind = WALS_METRIC_PRECISION; kind <= WALS_METRIC_AUC; kind++)
		{
			wals_metric_name(kind, e->k, name, sizeof(name));
			put_metric(rsinfo, name, values[kind]);
		}
	}
	if (e->rmse)
		put_metric(rsinfo, "rmse", wals_rmse_finish(&e->sq));
	put_metric(rsinfo, "users", (double) result.users);
	put_metric(rsinfo, "users_unknown", (double) e->counts.users_unknown);
	put_metric(rsinfo, "users_without_relevant", (double) result.users_without_relevant);
	put_metric(rsinfo, "items_unknown", (double) e->counts.cells_unknown);
	put_metric(rsinfo, "items_in_training", (double) result.test_in_train);
}

/*
 * wals_evaluate(model text, test_source regclass, user_col name,
 *				 item_col name, rating_col name, k int)
 *	 RETURNS TABLE(metric text, value float8)
 *
 * precision@k, recall@k, ndcg@k, map@k and auc of the model's ranking of
 * each test user's held-out items, rmse of its scores against the held-out
 * ratings (explicit models with a rating column), and the users evaluated,
 * unknown or without a held-out item left to rank.
 */
static Datum
evaluate_call(PG_FUNCTION_ARGS)
{
	EvalArgs	a;
	EvalState	e = {0};

	eval_args(fcinfo, &a);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	e.m = wals_serve_model(a.model);
	e.block_cxt = AllocSetContextCreate(CurrentMemoryContext, "wals evaluation block",
										ALLOCSET_DEFAULT_SIZES);
	e.rmse = a.rating_col != NULL && e.m->info.params.feedback == WALS_EXPLICIT;
	e.k = a.k;
	wals_metrics_init(&e.acc, a.k);
	wals_rmse_init(&e.sq);
	wals_eval_round_init(&e.round, e.m->factors);
	read_test_source(&e, &a);
	if (e.counts.null_ids > 0)
		ereport(NOTICE,
				(errmsg_plural("%lld test row with a NULL user or item was skipped",
							   "%lld test rows with a NULL user or item were skipped",
							   e.counts.null_ids, (long long) e.counts.null_ids)));
	put_results((ReturnSetInfo *) fcinfo->resultinfo, &e);
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_evaluate(PG_FUNCTION_ARGS)
{
	return wals_call(evaluate_call, fcinfo, "wals_evaluate", false);
}
