/*
 * retrain.c
 *	  wals_retrain: a model trained again from its recorded source with its
 *	  recorded settings.
 *
 * A nightly job should not have to repeat, and keep in step with the model,
 * the source, columns and parameters the model was trained with (or those
 * a tuning chose): the catalog row holds them all.  wals_retrain fills the
 * arguments of wals_train from that row, replaces those given by name, and
 * runs the training itself, so that every check, lock and privilege of
 * wals_train applies unchanged; its result is wals_train's.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/varlena.h"

#include "wals_train.h"

PG_FUNCTION_INFO_V1(wals_retrain);

/* The arguments of wals_retrain, in its SQL order. */
enum
{
	R_MODEL,
	R_WARM_START,
	R_FACTORS,
	R_ITERATIONS,
	R_REGULARIZATION,
	R_ALPHA,
	R_UNOBSERVED_WEIGHT,
	R_SOLVER,
	R_CG_STEPS,
	R_DEVICE,
	R_WORKERS,
	R_SEED,
	R_TOLERANCE,
	R_ACCELERATE,
	R_BLOCK_SIZE,
	R_REGULARIZATION_EXPONENT,
	R_INIT_STD,
	R_VALIDATION,
	R_PATIENCE,
	R_VALIDATION_METRIC,
	R_VALIDATION_TABLE,
	R_NARGS
};

/* The arguments of wals_train, in its SQL order (args.c). */
enum
{
	T_SOURCE,
	T_USER_COL,
	T_ITEM_COL,
	T_RATING_COL,
	T_MODEL,
	T_FACTORS,
	T_ITERATIONS,
	T_REGULARIZATION,
	T_FEEDBACK,
	T_ALPHA,
	T_UNOBSERVED_WEIGHT,
	T_SOLVER,
	T_CG_STEPS,
	T_DEVICE,
	T_WORKERS,
	T_SEED,
	T_WARM_START,
	T_TOLERANCE,
	T_ACCELERATE,
	T_BLOCK_SIZE,
	T_REGULARIZATION_EXPONENT,
	T_INIT_STD,
	T_VALIDATION,
	T_PATIENCE,
	T_VALIDATION_METRIC,
	T_VALIDATION_TABLE,
	T_REPLACE,
	T_NARGS
};

/* The settings of the catalog row that WalsModelInfo does not hold. */
static const char *const stored_columns =
"max_iterations, seed, tolerance, accelerate, block_size, regularization_exponent,"
" init_std, validation, validation_table, validation_metric, patience";

static void
set_arg(FunctionCallInfo train, int arg, Datum value, bool isnull)
{
	train->args[arg].value = value;
	train->args[arg].isnull = isnull;
}

/* The stored value of column col (1-based) of the row read, or a null. */
static void
set_stored(FunctionCallInfo train, int arg, int col)
{
	bool		isnull;
	Datum		value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);

	set_arg(train, arg, isnull ? (Datum) 0 :
			datumCopy(value, TupleDescAttr(SPI_tuptable->tupdesc, col - 1)->attbyval,
					  TupleDescAttr(SPI_tuptable->tupdesc, col - 1)->attlen),
			isnull);
}

static Datum
name_datum(const char *name)
{
	return DirectFunctionCall1(namein, CStringGetDatum(name));
}

/*
 * The relation a stored qualified name means now, for a validation table:
 * the catalog keeps its name as given, since an OID would outlive it.
 */
static Oid
stored_relation(const char *name, const WalsModelInfo *info)
{
	Oid			relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
										 NoLock, true);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the validation table \"%s\" of model \"%s\" no longer exists", name,
						info->display),
				 errhint("Pass validation_table => another relation, or validation => 0 to train without one.")));
	return relid;
}

/*
 * Fill train, wals_train's arguments, from the catalog row of the model
 * given, and info with that row.  The name of a
 * recorded validation table is left in held, resolved only if no argument
 * replaces it.
 */
static void
fill_from_catalog(FunctionCallInfo fcinfo, FunctionCallInfo train, WalsModelInfo *out,
				  char **held)
{
	WalsModelInfo info;
	Oid			types[2] = {NAMEOID, TEXTOID};
	Datum		key[2];

	if (PG_ARGISNULL(R_MODEL))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"model\" must not be null"),
				 errhint("Name the model to retrain, as 'name' or 'schema.name'.")));
	wals_model_resolve(PG_GETARG_TEXT_PP(R_MODEL), &info);
	wals_model_check(&info);
	wals_model_check_owner(&info);
	if (!OidIsValid(info.source) || get_rel_name(info.source) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the source of model \"%s\" no longer exists", info.display),
				 errhint("Train it from its new source with wals_train(..., model => '%s').",
						 info.display)));

	set_arg(train, T_SOURCE, ObjectIdGetDatum(info.source), false);
	set_arg(train, T_USER_COL, name_datum(info.user_col), false);
	set_arg(train, T_ITEM_COL, name_datum(info.item_col), false);
	set_arg(train, T_RATING_COL, info.rating_col ? name_datum(info.rating_col) : (Datum) 0,
			info.rating_col == NULL);
	set_arg(train, T_MODEL, CStringGetTextDatum(wals_model_quoted(info.schema, info.name)),
			false);
	set_arg(train, T_FACTORS, Int32GetDatum(info.factors), false);
	set_arg(train, T_REGULARIZATION, Float4GetDatum(info.params.regularization), false);
	set_arg(train, T_FEEDBACK, CStringGetTextDatum(wals_feedback_name(info.params.feedback)),
			false);
	set_arg(train, T_ALPHA, Float4GetDatum(info.params.alpha), false);
	set_arg(train, T_UNOBSERVED_WEIGHT, Float4GetDatum(info.params.w0), false);
	set_arg(train, T_SOLVER, CStringGetTextDatum(wals_solver_name(info.params.solver)), false);
	set_arg(train, T_CG_STEPS, Int32GetDatum(info.params.cg_steps), false);
	set_arg(train, T_DEVICE, (Datum) 0, true);
	set_arg(train, T_WORKERS, (Datum) 0, true);
	set_arg(train, T_WARM_START, PG_GETARG_DATUM(R_WARM_START), PG_ARGISNULL(R_WARM_START));
	set_arg(train, T_REPLACE, BoolGetDatum(true), false);

	key[0] = name_datum(info.schema);
	key[1] = CStringGetTextDatum(info.name);
	if (wals_sql(psprintf("SELECT %s FROM %s WHERE schema OPERATOR(pg_catalog.=) $1"
						  " AND model OPERATOR(pg_catalog.=) $2",
						  stored_columns, wals_catalog_table("wals_models")),
				 2, types, key, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "wals: could not read the catalog row of model \"%s\"", info.display);
	set_stored(train, T_ITERATIONS, 1);
	set_stored(train, T_SEED, 2);
	set_stored(train, T_TOLERANCE, 3);
	set_stored(train, T_ACCELERATE, 4);
	set_stored(train, T_BLOCK_SIZE, 5);
	set_stored(train, T_REGULARIZATION_EXPONENT, 6);
	set_stored(train, T_INIT_STD, 7);
	set_stored(train, T_VALIDATION, 8);
	set_stored(train, T_VALIDATION_TABLE, 9);
	if (!train->args[T_VALIDATION_TABLE].isnull)
	{
		*held = TextDatumGetCString(train->args[T_VALIDATION_TABLE].value);
		set_arg(train, T_VALIDATION_TABLE, (Datum) 0, true);
	}
	set_stored(train, T_VALIDATION_METRIC, 10);
	set_stored(train, T_PATIENCE, 11);
	*out = info;
}

/* Replace the stored settings with those given by name. */
static void
apply_overrides(FunctionCallInfo fcinfo, FunctionCallInfo train)
{
	static const struct
	{
		int			from;
		int			to;
	}			map[] = {
		{R_FACTORS, T_FACTORS}, {R_ITERATIONS, T_ITERATIONS},
		{R_REGULARIZATION, T_REGULARIZATION}, {R_ALPHA, T_ALPHA},
		{R_UNOBSERVED_WEIGHT, T_UNOBSERVED_WEIGHT}, {R_SOLVER, T_SOLVER},
		{R_CG_STEPS, T_CG_STEPS}, {R_DEVICE, T_DEVICE}, {R_WORKERS, T_WORKERS},
		{R_SEED, T_SEED}, {R_TOLERANCE, T_TOLERANCE}, {R_ACCELERATE, T_ACCELERATE},
		{R_BLOCK_SIZE, T_BLOCK_SIZE}, {R_REGULARIZATION_EXPONENT, T_REGULARIZATION_EXPONENT},
		{R_INIT_STD, T_INIT_STD}, {R_PATIENCE, T_PATIENCE},
		{R_VALIDATION_METRIC, T_VALIDATION_METRIC},
	};

	for (int i = 0; i < (int) lengthof(map); i++)
		if (!PG_ARGISNULL(map[i].from))
			set_arg(train, map[i].to, PG_GETARG_DATUM(map[i].from), false);

	/* a block size belongs to the subspace solver alone */
	if (!PG_ARGISNULL(R_SOLVER) && PG_ARGISNULL(R_BLOCK_SIZE) &&
		pg_strcasecmp(text_to_cstring(PG_GETARG_TEXT_PP(R_SOLVER)), "subspace") != 0)
		set_arg(train, T_BLOCK_SIZE, (Datum) 0, true);

	/*
	 * One way of holding cells out replaces the other; validation => 0
	 * trains without any, with neither its metric nor its patience.
	 */
	if (!PG_ARGISNULL(R_VALIDATION_TABLE))
	{
		set_arg(train, T_VALIDATION_TABLE, PG_GETARG_DATUM(R_VALIDATION_TABLE), false);
		set_arg(train, T_VALIDATION, (Datum) 0, true);
	}
	else if (!PG_ARGISNULL(R_VALIDATION) && PG_GETARG_FLOAT4(R_VALIDATION) == 0)
	{
		set_arg(train, T_VALIDATION, (Datum) 0, true);
		set_arg(train, T_VALIDATION_TABLE, (Datum) 0, true);
		set_arg(train, T_PATIENCE, (Datum) 0, true);
		set_arg(train, T_VALIDATION_METRIC, (Datum) 0, true);
	}
	else if (!PG_ARGISNULL(R_VALIDATION))
	{
		set_arg(train, T_VALIDATION, PG_GETARG_DATUM(R_VALIDATION), false);
		set_arg(train, T_VALIDATION_TABLE, (Datum) 0, true);
	}
}

/*
 * wals_retrain(model text, warm_start bool, and any of wals_train's
 * settings but the source, its columns and the feedback) RETURNS SETOF
 * wals_train_result
 */
static Datum
retrain_call(PG_FUNCTION_ARGS)
{
	LOCAL_FCINFO(train, T_NARGS);
	WalsModelInfo info;
	char	   *held = NULL;
	Oid			owner;
	WalsRoleSave save;
	Datum		result;

	InitFunctionCallInfoData(*train, fcinfo->flinfo, T_NARGS, fcinfo->fncollation, NULL,
							 fcinfo->resultinfo);

	/*
	 * Connected until the training ends: the catalog's values, and the
	 * arguments made of them, live in SPI's memory, where each catalog read
	 * leaves the current context.
	 */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "wals: SPI_connect failed");
	fill_from_catalog(fcinfo, train, &info, &held);
	apply_overrides(fcinfo, train);
	if (held != NULL && PG_ARGISNULL(R_VALIDATION) && PG_ARGISNULL(R_VALIDATION_TABLE))
		set_arg(train, T_VALIDATION_TABLE, ObjectIdGetDatum(stored_relation(held, &info)), false);

	/*
	 * The source is the one the owner chose, not the caller: a superuser or
	 * another member of the owner role retrains as the owner, so that the
	 * owner's views and their functions never run with the caller's rights
	 * (as wals_refresh_users reads the source).
	 */
	owner = wals_model_owner(&info);
	if (owner == GetUserId())
		result = wals_train_call(train);
	else
	{
		wals_become(owner, &save);
		result = wals_train_call(train);
		wals_unbecome(&save);
	}
	SPI_finish();
	return result;
}

Datum
wals_retrain(PG_FUNCTION_ARGS)
{
	return wals_call(retrain_call, fcinfo, "wals_retrain", true);
}
