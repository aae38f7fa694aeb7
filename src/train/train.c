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

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "wals_train.h"

PG_FUNCTION_INFO_V1(wals_train);

/*
 * Refuse a training that cannot fit in wals.max_memory from the rows the
 * planner's statistics give the source (a table or materialized view).
 */
static void
check_source_size(const WalsTrainArgs *args)
{
	HeapTuple	tuple;
	double		rows;
	char		relkind;

	if (wals_max_memory <= 0)
		return;
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(args->source));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "wals: cache lookup failed for relation %u", args->source);
	rows = ((Form_pg_class) GETSTRUCT(tuple))->reltuples;
	relkind = ((Form_pg_class) GETSTRUCT(tuple))->relkind;
	ReleaseSysCache(tuple);
	if ((relkind == RELKIND_RELATION || relkind == RELKIND_MATVIEW) && rows > 0)
		wals_memory_check(wals_sweeps_min_bytes(args, rows),
						  psprintf("the %.0f rows of \"%s\" its statistics count",
								   rows, args->source_display));
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

/*
 * Everything that can refuse a training, checked before the ratings are
 * read: a read-only transaction or a standby, the caller's rights on the
 * model and its schema, a warm start of another dimension, names taken,
 * the memory the source's size already implies, and the device.  Sets
 * args->old and args->owner, with the model locked against other trainings.
 */
static void
check_before_reading(WalsTrainArgs *args)
{
	char	   *schema = get_namespace_name(args->schema);
	WalsModelInfo *old = palloc0(sizeof(WalsModelInfo));
	AclResult	acl;

	PreventCommandIfReadOnly("wals_train()");
	PreventCommandDuringRecovery("wals_train()");

	wals_lock_model(schema, args->model);
	if (wals_catalog_lookup(schema, args->model, old))
	{
		wals_model_check_owner(old);
		wals_model_check(old);
		args->old = old;
		args->owner = wals_model_owner(old);
	}
	else
		args->owner = GetUserId();
	acl = pg_namespace_aclcheck(args->schema, args->owner, ACL_CREATE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_SCHEMA, schema);

	if (args->warm_start && args->old != NULL && args->old->factors != args->params.factors)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot warm start %d factors from model \"%s\", which has %d",
						args->params.factors, args->model_display, args->old->factors),
				 errhint("Pass factors => %d, or warm_start => false.", args->old->factors)));
	wals_check_factor_tables_free(args);
	check_source_size(args);
	wals_device_check(args);
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

	check_before_reading(&args);
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
