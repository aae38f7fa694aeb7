/*
 * validate.c
 *	  Early stopping on a validation share held out of the ratings.
 *
 * With validation => v, a share v of each user's distinct items (by a hash
 * of seed, user and item: src/core/holdout.c) is held out of the training
 * before its matrices are built.  After every iteration the engine hands
 * back the factors, their ndcg@WALS_VALIDATION_K on the held-out cells is
 * measured as wals_evaluate measures it (over at most
 * WALS_VALIDATION_USERS users, evenly spread), and the best iterate's
 * factors are kept in a second pair of buffers; the training stops once
 * patience iterations have passed without a better one, and the model
 * stored is the best iterate.  The held-out cells stay among the user's
 * rated items, which serving leaves out.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"

#include "wals_train.h"
#include "wals_metrics.h"

double
wals_validation_bytes(const WalsTrainArgs *args, int64 nratings, int64 nusers, int64 nitems)
{
	int			f = args->params.factors;

	if (args->validation <= 0)
		return 0;
	return 2.0 * (double) (nusers + nitems) * f * sizeof(float) +
		(double) nratings * args->validation * 2 * (sizeof(int32) + sizeof(float)) +
		(double) (nusers + 1) * sizeof(int64) * 2 +
		(double) wals_holdout_scratch(nitems, f, WALS_VALIDATION_K);
}

void
wals_validation_split(const WalsTrainArgs *args, WalsData *data)
{
	WalsCsr    *held = &data->held;
	int64		n;

	if (args->validation <= 0)
		return;
	n = wals_holdout_count(&data->by_user, data->user_ids, data->item_ids, args->validation,
						   (uint64) args->seed);
	held->indptr = MemoryContextAllocHuge(CurrentMemoryContext,
										  sizeof(int64) * (data->nusers + 1));
	held->indices = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(n, 1));
	held->values = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * Max(n, 1));
	wals_holdout_split(&data->by_user, data->user_ids, data->item_ids, args->validation,
					   (uint64) args->seed, held);
	data->nratings -= n;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"validation\" => %g holds out none of the ratings", args->validation),
				 errhint("Raise \"validation\", or train without it: every user has one item, or the share is too small for these ratings.")));
}

void
wals_validation_begin(const WalsTrainArgs *args, const WalsData *data, WalsValidation *v)
{
	size_t		xs = sizeof(float) * data->nusers * args->params.factors;
	size_t		ys = sizeof(float) * data->nitems * args->params.factors;

	memset(v, 0, sizeof(*v));
	v->best_it = -1;
	if (args->validation <= 0)
		return;
	v->on = true;
	v->X = MemoryContextAllocHuge(CurrentMemoryContext, Max(xs, 1));
	v->Y = MemoryContextAllocHuge(CurrentMemoryContext, Max(ys, 1));
	v->best_X = MemoryContextAllocHuge(CurrentMemoryContext, Max(xs, 1));
	v->best_Y = MemoryContextAllocHuge(CurrentMemoryContext, Max(ys, 1));
	v->scratch = MemoryContextAllocHuge(CurrentMemoryContext,
										wals_holdout_scratch(data->nitems, args->params.factors,
															 WALS_VALIDATION_K));
}

bool
wals_validation_step(const WalsTrainArgs *args, const WalsData *data, const WalsEngine *engine,
					 void *state, WalsValidation *v, int it, double *ndcg, WalsFailure *failure)
{
	WalsStatus	st;

	if (!engine->factors(state, v->X, v->Y, failure))
		return false;
	CHECK_FOR_INTERRUPTS();
	st = wals_holdout_ndcg(v->X, v->Y, args->params.factors, &data->by_user, &data->held,
						   WALS_VALIDATION_K, WALS_VALIDATION_USERS, v->scratch, ndcg);
	if (st != WALS_OK)
		wals_report_core_status(st, "measuring the validation ndcg");
	if (v->best_it < 0 || *ndcg > v->best)
	{
		float	   *t = v->best_X;

		v->best_X = v->X;
		v->X = t;
		t = v->best_Y;
		v->best_Y = v->Y;
		v->Y = t;
		v->best = *ndcg;
		v->best_it = it;
	}
	return true;
}

bool
wals_validation_stop(const WalsTrainArgs *args, const WalsValidation *v, int it)
{
	return v->on && it - v->best_it >= args->patience;
}

void
wals_validation_end(const WalsData *data, const WalsValidation *v, int f, float *X, float *Y,
					WalsTrainResult *result)
{
	if (!v->on)
		return;
	result->best_iteration = v->best_it + 1;
	result->validation_ndcg = v->best;
	if (v->best_it == result->iterations - 1)
		return;
	memcpy(X, v->best_X, sizeof(float) * data->nusers * f);
	memcpy(Y, v->best_Y, sizeof(float) * data->nitems * f);
	result->loss = result->iteration_loss[v->best_it];
}
