/*
 * train.c
 *	  wals_train: ingest, alternate the two half-sweeps, store.
 *
 * The whole training runs inside the caller's transaction: ratings are read
 * with the caller's snapshot and privileges, the matrices and factors live
 * in memory owned by the transaction (shared with parallel workers, see
 * parallel.c), and the new model is written by store.c only once every
 * iteration has succeeded.  An error or a cancel anywhere unwinds the
 * transaction and leaves the previous model as it was.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "wals.h"

PG_FUNCTION_INFO_V1(wals_train);

/* Seconds elapsed since start, for the timings of a training. */
double
wals_seconds_since(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_DOUBLE(now);
}

/*
 * Seeded starting factors, drawn per id so that they do not depend on the
 * order or number of rows, then overwritten by the stored model's rows on a
 * warm start.
 */
static void
init_factors(const WalsTrainArgs *args, const WalsData *data, float *X, float *Y)
{
	int			f = args->params.factors;

	wals_init_rows(X, data->user_ids, 0, data->nusers, f, (uint64) args->seed, WALS_INIT_SCALE);
	wals_init_rows(Y, data->item_ids, 0, data->nitems, f,
				   (uint64) args->seed ^ UINT64CONST(0x9e3779b97f4a7c15), WALS_INIT_SCALE);
	if (args->warm_start)
		wals_warm_start(args, data, X, Y);
}

static void
return_summary(FunctionCallInfo fcinfo, const WalsTrainArgs *args,
			   const WalsData *data, const WalsTrainResult *result)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[12];
	bool		nulls[12] = {0};

	values[0] = CStringGetTextDatum(args->model);
	values[1] = Int64GetDatum(data->nusers);
	values[2] = Int64GetDatum(data->nitems);
	values[3] = Int64GetDatum(data->nratings);
	values[4] = Int32GetDatum(args->params.factors);
	values[5] = Int32GetDatum(result->iterations);
	values[6] = Float8GetDatum(result->loss);
	values[7] = CStringGetTextDatum(result->device);
	values[8] = Float8GetDatum(result->load_s);
	values[9] = Float8GetDatum(result->train_s);
	values[10] = Float8GetDatum(result->store_s);
	values[11] = Float8GetDatum(result->total_s);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * wals_train(source regclass, user_col name, item_col name, rating_col name,
 *			  model text, factors int, iterations int, regularization real,
 *			  feedback text, alpha real, unobserved_weight real, solver text,
 *			  cg_steps int, device text, workers int, seed int,
 *			  warm_start bool, tolerance real) RETURNS SETOF wals_train_result
 *
 * Train (or retrain) a model and return one summary row.
 */
Datum
wals_train(PG_FUNCTION_ARGS)
{
	WalsTrainArgs args;
	WalsRatings raw;
	WalsData	data;
	WalsSweeps *sweeps;
	float	   *X;
	float	   *Y;
	WalsTrainResult result = {0};
	MemoryContext cxt;
	MemoryContext oldcxt;
	instr_time	start;
	instr_time	phase;

	INSTR_TIME_SET_CURRENT(start);
	wals_train_args_parse(fcinfo, &args);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "wals training", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "wals: SPI_connect failed");
	MemoryContextSwitchTo(cxt);

	wals_lock_model(args.model);
	wals_check_factor_tables_free(&args);

	wals_device_check(&args);
	wals_ingest(&args, &raw);
	result.device = wals_device_choose(&args, raw.n);
	sweeps = wals_sweeps_begin(&args, &raw, wals_seconds_since(start), &data);
	wals_build_matrices(&args, &raw, &data);
	result.load_s = wals_seconds_since(start);

	INSTR_TIME_SET_CURRENT(phase);
	X = wals_sweeps_user_factors(sweeps);
	Y = wals_sweeps_item_factors(sweeps);
	init_factors(&args, &data, X, Y);
	if (strcmp(result.device, "gpu") != 0 || !wals_gpu_train(&args, &data, X, Y, &result))
	{
		result.device = "cpu";
		wals_sweeps_run(sweeps, &args, &result);
	}
	result.train_s = wals_seconds_since(phase);

	wals_store_model(&args, &data, X, Y, &result);
	wals_sweeps_end(sweeps);

	SPI_finish();
	MemoryContextSwitchTo(oldcxt);
	return_summary(fcinfo, &args, &data, &result);
	MemoryContextDelete(cxt);
	return (Datum) 0;
}
