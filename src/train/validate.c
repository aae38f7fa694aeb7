/*
 * validate.c
 *	  Early stopping on cells held out of the training: a share of the
 *	  ratings, or the cells of a table.
 *
 * With validation => v, a share v of each user's distinct items (by a hash
 * of seed, user and item: src/core/holdout.c) is held out of the training
 * before its matrices are built (never a dislike of implicit feedback,
 * which is no item to recommend); those cells stay among the user's rated
 * items, which serving leaves out.  With validation_table, its (user,
 * item) cells of known users and items that are not training cells are
 * held out; the caller keeps them out of the source.  After every
 * iteration the held-out cells are scored by validation_metric as
 * wals_evaluate measures it (over at most WALS_VALIDATION_USERS users,
 * evenly spread): the top k comes from the int8 first pass and exact
 * rescoring of wals_recommend (src/core/score/score_query.c), AUC from every item's
 * score.  The CPU engine scores in its parallel workers, which take chunks
 * of the users as they take rows in a sweep (validate_shared.c); other
 * engines hand back a copy of the factors, which the leader scores.  RMSE,
 * of explicit feedback, is lower the better and goes over every held-out
 * rating, a dot product each, which the leader computes on a copy of the
 * factors from any engine (validation_table's cells come without their
 * ratings, so it needs a share).  The
 * best iterate's factors are copied into a second pair of buffers; the
 * training stops once patience iterations have passed without a better
 * one, and the model stored is the best iterate.
 *
 * Not every iteration is scored.  While the metric improves steeply (by
 * more than WALS_VALIDATION_STEEP of its value in one iteration), the next
 * iterate is all but sure to score better still, so the iteration after a
 * steep gain is skipped and the one after it scored: the best iterate and
 * the stop are decided where the metric flattens, and there every
 * iteration is scored.  The first iteration and the last (the iterations
 * asked for, or the one where the loss stops improving by the tolerance)
 * are always scored.
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "wals_train.h"

/* Rows of validation_table fetched at a time. */
#define VALIDATION_FETCH 10000

/* A rise of the metric, relative to its value, that skips the next iteration. */
#define WALS_VALIDATION_STEEP 0.05

/*
 * The best iterate's factors and, at most, a copy of the current ones
 * (without engine->validate); the held-out cells and their copy in the
 * engine's shared block; the index of Y, the users' accumulators and each
 * process's scratch.
 */
double
wals_validation_bytes(const WalsTrainArgs *args, const WalsRatings *raw)
{
	int			f = args->params.factors;
	int			k = args->validation_k;
	double		held;
	double		index;
	double		scratch;

	if (!wals_validating(args))
		return 0;
	held = args->validation > 0 ? (double) raw->n * args->validation : (double) raw->nheld_pairs;
	index = (double) wals_score_index_size(raw->nitems, f);
	scratch = (double) wals_holdout_scratch(raw->nitems, f, k,
											args->validation_kind == WALS_METRIC_AUC);
	return 4.0 * (double) (raw->nusers + raw->nitems) * f * sizeof(float) +
		held * 2 * (sizeof(int32) + sizeof(float)) +
		(double) (raw->nusers + 1) * sizeof(int64) * 2 + 2 * index +
		(double) WALS_VALIDATION_USERS * (sizeof(int64) + sizeof(WalsMetricsAcc)) +
		(args->workers + 1) * scratch;
}

static int
pair_cmp(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return x < y ? -1 : x > y;
}

/*
 * Through SPI as the caller, so that PostgreSQL applies its privileges and
 * row security to the table as to any query of theirs.
 */
void
wals_validation_read(const WalsTrainArgs *args, WalsRatings *raw)
{
	Portal		portal;
	int64		cap = 1024;
	int64		n = 0;
	uint64	   *pairs;

	raw->held_pairs = NULL;
	raw->nheld_pairs = 0;
	if (!OidIsValid(args->validation_table))
		return;
	pairs = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(uint64) * cap);
	portal = wals_sql_cursor(psprintf("SELECT (%s)::pg_catalog.int8, (%s)::pg_catalog.int8 FROM %s",
									  quote_identifier(args->user_col),
									  quote_identifier(args->item_col),
									  wals_relation_name(args->validation_table)),
							 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		wals_sql_fetch(portal, VALIDATION_FETCH);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[r];
			bool		unull;
			bool		inull;
			int64		user = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &unull));
			int64		item = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &inull));
			int64		u;
			int64		i;

			if (unull || inull)
				continue;
			u = wals_ids_find(raw->user_ids, raw->nusers, user);
			i = wals_ids_find(raw->item_ids, raw->nitems, item);
			if (u < 0 || i < 0)
				continue;
			if (n == cap)
			{
				cap *= 2;
				pairs = repalloc_huge(pairs, sizeof(uint64) * cap);
			}
			pairs[n++] = (uint64) u << 32 | (uint64) i;
		}
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	qsort(pairs, n, sizeof(uint64), pair_cmp);
	raw->nheld_pairs = 0;
	for (int64 j = 0; j < n; j++)
		if (j == 0 || pairs[j] != pairs[j - 1])
			pairs[raw->nheld_pairs++] = pairs[j];
	raw->held_pairs = pairs;
}

/* Whether item is among the sorted cells of row u of R. */
static bool
has_cell(const WalsCsr *R, int64 u, int32 item)
{
	int64		lo = R->indptr[u];
	int64		hi = R->indptr[u + 1];

	while (lo < hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (R->indices[mid] < item)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < R->indptr[u + 1] && R->indices[lo] == item;
}

/* raw's held pairs into data->held, less the training cells among them. */
static void
split_table(const WalsTrainArgs *args, WalsRatings *raw, WalsData *data)
{
	WalsCsr    *held = &data->held;
	int64		n = 0;
	int64		u = 0;

	held->nrows = data->nusers;
	held->ncols = data->nitems;
	held->indptr = MemoryContextAllocHuge(CurrentMemoryContext,
										  sizeof(int64) * (data->nusers + 1));
	held->indices = MemoryContextAllocHuge(CurrentMemoryContext,
										   sizeof(int32) * Max(raw->nheld_pairs, 1));
	held->values = MemoryContextAllocHuge(CurrentMemoryContext,
										  sizeof(float) * Max(raw->nheld_pairs, 1));
	held->indptr[0] = 0;
	for (int64 j = 0; j < raw->nheld_pairs; j++)
	{
		int64		pu = (int64) (raw->held_pairs[j] >> 32);
		int32		pi = (int32) (raw->held_pairs[j] & 0xffffffff);

		while (u < pu)
			held->indptr[++u] = n;
		if (has_cell(&data->by_user, pu, pi))
			continue;
		held->indices[n] = pi;
		held->values[n++] = 1.0f;
	}
	while (u < data->nusers)
		held->indptr[++u] = n;
	pfree(raw->held_pairs);
	raw->held_pairs = NULL;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" given as \"validation_table\" holds no cell to validate on",
						args->validation_table_display),
				 errhint("Its cells count when their user and item are in the source and the cell is not: keep the validation cells out of the source.")));
}

bool
wals_validation_split(const WalsTrainArgs *args, WalsRatings *raw, WalsData *data)
{
	WalsCsr    *held = &data->held;
	int64		n;

	if (OidIsValid(args->validation_table))
	{
		split_table(args, raw, data);
		return false;
	}
	if (args->validation <= 0)
		return false;
	n = wals_holdout_count(&data->by_user, args->params.feedback, data->user_ids,
						   data->item_ids, args->validation, (uint64) args->seed);
	held->indptr = MemoryContextAllocHuge(CurrentMemoryContext,
										  sizeof(int64) * (data->nusers + 1));
	held->indices = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(n, 1));
	held->values = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * Max(n, 1));
	wals_holdout_split(&data->by_user, args->params.feedback, data->user_ids, data->item_ids,
					   args->validation, (uint64) args->seed, held);
	data->nratings -= n;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"validation\" => %g holds out none of the ratings", args->validation),
				 errhint("Raise \"validation\", or train without it: every user has one item, or the share is too small for these ratings.")));
	return true;
}

void
wals_validation_begin(const WalsTrainArgs *args, const WalsData *data, const WalsEngine *engine,
					  WalsValidation *v)
{
	size_t		xs = sizeof(float) * data->nusers * args->params.factors;
	size_t		ys = sizeof(float) * data->nitems * args->params.factors;

	memset(v, 0, sizeof(*v));
	v->best_it = -1;
	v->last_it = -1;
	if (!wals_validating(args))
		return;
	v->on = true;
	v->best_X = MemoryContextAllocHuge(CurrentMemoryContext, Max(xs, 1));
	v->best_Y = MemoryContextAllocHuge(CurrentMemoryContext, Max(ys, 1));
	if (engine->validate != NULL && args->validation_kind != WALS_METRIC_RMSE)
		return;
	v->X = MemoryContextAllocHuge(CurrentMemoryContext, Max(xs, 1));
	v->Y = MemoryContextAllocHuge(CurrentMemoryContext, Max(ys, 1));
	if (args->validation_kind == WALS_METRIC_RMSE)
		return;
	v->index = MemoryContextAllocHuge(CurrentMemoryContext,
									  wals_score_index_size(data->nitems, args->params.factors));
	v->scratch = MemoryContextAllocHuge(CurrentMemoryContext,
										wals_holdout_scratch(data->nitems, args->params.factors,
															 args->validation_k,
															 args->validation_kind == WALS_METRIC_AUC));
}

bool
wals_validation_due(const WalsValidation *v, int it, bool last)
{
	return v->on && (last || v->last_it < 0 || !v->steep || it - v->last_it >= 2);
}

/* The metrics of a copy of the factors, by the leader. */
static bool
score_copy(const WalsTrainArgs *args, const WalsData *data, const WalsEngine *engine,
		   void *state, WalsValidation *v, WalsMetrics *m, WalsFailure *failure)
{
	WalsScoreIndex ix;
	WalsStatus	st;
	bool		with_auc = args->validation_kind == WALS_METRIC_AUC;

	if (!engine->factors(state, v->X, v->Y, failure))
		return false;
	CHECK_FOR_INTERRUPTS();
	st = wals_score_index_build(&ix, v->Y, data->nitems, args->params.factors, v->index);
	if (st == WALS_OK)
		st = wals_holdout_metrics(&ix, v->X, &data->by_user, &data->held, args->validation_k,
								  with_auc, WALS_VALIDATION_USERS, v->scratch, m);
	if (st != WALS_OK)
		wals_report_core_status(st, "measuring the validation metric");
	return true;
}

/* The RMSE of a copy of the factors on every held-out rating, by the leader. */
static bool
rmse_copy(const WalsTrainArgs *args, const WalsData *data, const WalsEngine *engine,
		  void *state, WalsValidation *v, double *rmse, WalsFailure *failure)
{
	WalsStatus	st;

	if (!engine->factors(state, v->X, v->Y, failure))
		return false;
	CHECK_FOR_INTERRUPTS();
	st = wals_holdout_rmse(v->X, v->Y, args->params.factors, &data->held, rmse);
	if (st != WALS_OK)
		wals_report_core_status(st, "measuring the validation metric");
	return true;
}

bool
wals_validation_step(const WalsTrainArgs *args, const WalsData *data, const WalsEngine *engine,
					 void *state, WalsValidation *v, int it, double *score, WalsFailure *failure)
{
	WalsMetrics m;
	instr_time	start;
	bool		lower = wals_metric_lower_better(args->validation_kind);
	double		gain;

	INSTR_TIME_SET_CURRENT(start);
	if (args->validation_kind == WALS_METRIC_RMSE)
	{
		if (!rmse_copy(args, data, engine, state, v, score, failure))
			return false;
	}
	else
	{
		if (engine->validate != NULL ? !engine->validate(state, &m, failure) :
			!score_copy(args, data, engine, state, v, &m, failure))
			return false;
		*score = wals_metric_value(&m, args->validation_kind);
	}
	v->seconds += wals_seconds_since(start);
	gain = lower ? v->last - *score : *score - v->last;
	v->steep = v->last_it >= 0 &&
		gain > WALS_VALIDATION_STEEP * fabs(*score) * (it - v->last_it);
	v->last_it = it;
	v->last = *score;
	if (v->best_it >= 0 && !(lower ? *score < v->best : *score > v->best))
		return true;
	v->best = *score;
	v->best_it = it;
	if (engine->validate != NULL)
		return engine->factors(state, v->best_X, v->best_Y, failure);
	wals_copy_floats(v->best_X, v->X, (size_t) data->nusers * args->params.factors);
	wals_copy_floats(v->best_Y, v->Y, (size_t) data->nitems * args->params.factors);
	return true;
}

bool
wals_validation_stop(const WalsTrainArgs *args, const WalsValidation *v, int it)
{
	return v->on && v->last_it == it && it - v->best_it >= args->patience;
}

void
wals_validation_end(const WalsData *data, const WalsValidation *v, int f, float *X, float *Y,
					WalsTrainResult *result)
{
	if (!v->on)
		return;
	result->best_iteration = v->best_it + 1;
	result->validation_score = v->best;
	result->validation_s = v->seconds;
	if (v->best_it == result->iterations - 1)
		return;
	wals_copy_floats(X, v->best_X, (size_t) data->nusers * f);
	wals_copy_floats(Y, v->best_Y, (size_t) data->nitems * f);
	result->loss = result->iteration_loss[v->best_it];
}
