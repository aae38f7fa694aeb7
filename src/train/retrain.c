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

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

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

/*
 * The settings of the catalog row that WalsModelInfo does not hold, and the
 * owner recorded with the validation table.
 */
static const char *const stored_columns =
"max_iterations, seed, tolerance, accelerate, block_size, regularization_exponent,"
" init_std, validation, validation_table, validation_metric, patience,"
" validation_owner::pg_catalog.oid, changed_col";

/*
 * The validation table as the catalog row records it: the relation's OID
 * and the role that owned it when a training read it, or neither; unknown
 * where the row keeps validation_table NULL beside a validation_metric
 * and no validation share: a table the update to 0.6.0, or
 * wals_attach_model, could not tell from the name the model had of it.
 */
typedef struct StoredValidation
{
	Oid			relid;
	Oid			owner;
	bool		unknown;
} StoredValidation;

static void
set_arg(WalsTrainRequest *train, int arg, Datum value, bool isnull)
{
	train->value[arg] = value;
	train->isnull[arg] = isnull;
}

/* The stored value of column col (1-based) of the row read, or a null. */
static void
set_stored(WalsTrainRequest *train, int arg, int col)
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
 * Refuse a retraining of a model whose recorded validation table is not
 * known (see StoredValidation), unless an argument replaced it.
 */
static void
unknown_validation_table(const WalsModelInfo *info)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("the validation table of model \"%s\" is not known", info->display),
			 errdetail("The model stopped early on the cells of a table that wals could not find again when it was updated to 0.6.0, or when the model was attached."),
			 errhint("Pass validation_table => the relation of its held-out cells, or validation => 0 to train without one.")));
}

/*
 * The validation table the catalog row records, checked as every relation
 * wals keeps is checked at each use, before anything locks it: still
 * there, and still the relation the model validated on, which the owner
 * recorded with it tells (a dump and restore keeps the number of a
 * relation dropped before the dump, which may then name another role's);
 * and readable by the caller, as by the model's owner, as whom the
 * training reads it (args.c).  Renamed or moved, it is still the same
 * relation, and followed.
 */
static void
stored_validation_table(WalsTrainRequest *train, const StoredValidation *held,
						const WalsModelInfo *info)
{
	Oid			owner;

	if (held->unknown)
		unknown_validation_table(info);
	if (!OidIsValid(held->relid))
		return;
	owner = wals_relation_owner(held->relid);
	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the validation table of model \"%s\" no longer exists", info->display),
				 errdetail("The relation the model validated on was dropped."),
				 errhint("Pass validation_table => another relation, or validation => 0 to train without one.")));
	if (owner != held->owner)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the validation table of model \"%s\" is no longer the relation it validated on",
						info->display),
				 OidIsValid(held->owner) ?
				 errdetail("Relation %s belongs to role %s, and the model validated on a relation of role %s: it was given to another role, or the model's catalog row outlived its relation (a dump and restore keeps such a row's number, which then names another relation).",
						   wals_relation_name(held->relid), wals_role_display(owner),
						   wals_role_display(held->owner)) :
				 errdetail("The catalog records no owner for relation %s.",
						   wals_relation_name(held->relid)),
				 errhint("Pass validation_table => the relation to validate on, or validation => 0 to train without one.")));
	wals_check_readable(held->relid, (const char *[]) {info->user_col, info->item_col}, 2);
	set_arg(train, WALS_ARG_VALIDATION_TABLE, ObjectIdGetDatum(held->relid), false);
	train->validation_owner = held->owner;
}

/*
 * Fill train, wals_train's arguments, from the catalog row of the model
 * given, and info with that row.  A recorded validation table is left in
 * held, checked only if no argument replaces it.
 */
static void
fill_from_catalog(FunctionCallInfo fcinfo, WalsTrainRequest *train, WalsModelInfo *out,
				  StoredValidation *held)
{
	bool		isnull;
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

	set_arg(train, WALS_ARG_SOURCE, ObjectIdGetDatum(info.source), false);
	set_arg(train, WALS_ARG_USER_COL, name_datum(info.user_col), false);
	set_arg(train, WALS_ARG_ITEM_COL, name_datum(info.item_col), false);
	set_arg(train, WALS_ARG_RATING_COL, info.rating_col ? name_datum(info.rating_col) : (Datum) 0,
			info.rating_col == NULL);
	set_arg(train, WALS_ARG_MODEL, CStringGetTextDatum(wals_model_quoted(info.schema, info.name)),
			false);
	set_arg(train, WALS_ARG_FACTORS, Int32GetDatum(info.factors), false);
	set_arg(train, WALS_ARG_REGULARIZATION, Float4GetDatum(info.params.regularization), false);
	set_arg(train, WALS_ARG_FEEDBACK, CStringGetTextDatum(wals_feedback_name(info.params.feedback)),
			false);
	set_arg(train, WALS_ARG_ALPHA, Float4GetDatum(info.params.alpha), false);
	set_arg(train, WALS_ARG_UNOBSERVED_WEIGHT, Float4GetDatum(info.params.w0), false);
	set_arg(train, WALS_ARG_SOLVER, CStringGetTextDatum(wals_solver_name(info.params.solver)), false);
	set_arg(train, WALS_ARG_CG_STEPS, Int32GetDatum(info.params.cg_steps), false);
	set_arg(train, WALS_ARG_DEVICE, (Datum) 0, true);
	set_arg(train, WALS_ARG_WORKERS, (Datum) 0, true);
	set_arg(train, WALS_ARG_WARM_START, PG_GETARG_DATUM(R_WARM_START), PG_ARGISNULL(R_WARM_START));
	set_arg(train, WALS_ARG_REPLACE, BoolGetDatum(true), false);

	key[0] = name_datum(info.schema);
	key[1] = CStringGetTextDatum(info.name);
	if (wals_sql(psprintf("SELECT %s FROM %s WHERE schema OPERATOR(pg_catalog.=) $1"
						  " AND model OPERATOR(pg_catalog.=) $2",
						  stored_columns, wals_catalog_table("wals_models")),
				 2, types, key, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "wals: could not read the catalog row of model \"%s\"", info.display);
	set_stored(train, WALS_ARG_ITERATIONS, 1);
	set_stored(train, WALS_ARG_SEED, 2);
	set_stored(train, WALS_ARG_TOLERANCE, 3);
	set_stored(train, WALS_ARG_ACCELERATE, 4);
	set_stored(train, WALS_ARG_BLOCK_SIZE, 5);
	set_stored(train, WALS_ARG_REGULARIZATION_EXPONENT, 6);
	set_stored(train, WALS_ARG_INIT_STD, 7);
	set_stored(train, WALS_ARG_VALIDATION, 8);
	held->relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 9, &isnull));
	if (isnull)
		held->relid = InvalidOid;
	held->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 12, &isnull));
	if (isnull)
		held->owner = InvalidOid;
	set_stored(train, WALS_ARG_VALIDATION_METRIC, 10);
	set_stored(train, WALS_ARG_PATIENCE, 11);
	{
		char	   *changed = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 13);

		/* a nightly retraining goes on when the column is dropped */
		if (changed != NULL && get_attnum(info.source, changed) == InvalidAttrNumber)
		{
			ereport(NOTICE,
					(errmsg("the changed column \"%s\" of model \"%s\" is gone from its source; the model is retrained without one",
							changed, info.display),
					 errhint("Give one again with wals_train(..., changed_col => ...) for wals_refresh.")));
			changed = NULL;
		}
		set_arg(train, WALS_ARG_CHANGED_COL, changed ? name_datum(changed) : (Datum) 0,
				changed == NULL);
	}
	held->unknown = !OidIsValid(held->relid) && train->isnull[WALS_ARG_VALIDATION] &&
		!train->isnull[WALS_ARG_VALIDATION_METRIC];
	*out = info;
}

/* Replace the stored settings with those given by name. */
static void
apply_overrides(FunctionCallInfo fcinfo, WalsTrainRequest *train)
{
	static const struct
	{
		int			from;
		int			to;
	}			map[] = {
		{R_FACTORS, WALS_ARG_FACTORS}, {R_ITERATIONS, WALS_ARG_ITERATIONS},
		{R_REGULARIZATION, WALS_ARG_REGULARIZATION}, {R_ALPHA, WALS_ARG_ALPHA},
		{R_UNOBSERVED_WEIGHT, WALS_ARG_UNOBSERVED_WEIGHT}, {R_SOLVER, WALS_ARG_SOLVER},
		{R_CG_STEPS, WALS_ARG_CG_STEPS}, {R_DEVICE, WALS_ARG_DEVICE}, {R_WORKERS, WALS_ARG_WORKERS},
		{R_SEED, WALS_ARG_SEED}, {R_TOLERANCE, WALS_ARG_TOLERANCE}, {R_ACCELERATE, WALS_ARG_ACCELERATE},
		{R_BLOCK_SIZE, WALS_ARG_BLOCK_SIZE}, {R_REGULARIZATION_EXPONENT, WALS_ARG_REGULARIZATION_EXPONENT},
		{R_INIT_STD, WALS_ARG_INIT_STD}, {R_PATIENCE, WALS_ARG_PATIENCE},
		{R_VALIDATION_METRIC, WALS_ARG_VALIDATION_METRIC},
	};
	int			solver;

	for (int i = 0; i < (int) lengthof(map); i++)
		if (!PG_ARGISNULL(map[i].from))
			set_arg(train, map[i].to, PG_GETARG_DATUM(map[i].from), false);

	/*
	 * A block size belongs to the subspace solver alone; a solver that is
	 * none of them is wals_train's to refuse.
	 */
	if (!PG_ARGISNULL(R_SOLVER) && PG_ARGISNULL(R_BLOCK_SIZE) &&
		!(wals_word_parse(wals_solver_words, text_to_cstring(PG_GETARG_TEXT_PP(R_SOLVER)),
						  &solver) && solver == WALS_SUBSPACE))
		set_arg(train, WALS_ARG_BLOCK_SIZE, (Datum) 0, true);

	/*
	 * One way of holding cells out replaces the other; validation => 0
	 * trains without any, with neither its metric nor its patience.
	 */
	if (!PG_ARGISNULL(R_VALIDATION_TABLE))
	{
		set_arg(train, WALS_ARG_VALIDATION_TABLE, PG_GETARG_DATUM(R_VALIDATION_TABLE), false);
		set_arg(train, WALS_ARG_VALIDATION, (Datum) 0, true);
	}
	else if (!PG_ARGISNULL(R_VALIDATION) && PG_GETARG_FLOAT4(R_VALIDATION) == 0)
	{
		set_arg(train, WALS_ARG_VALIDATION, (Datum) 0, true);
		set_arg(train, WALS_ARG_VALIDATION_TABLE, (Datum) 0, true);
		set_arg(train, WALS_ARG_PATIENCE, (Datum) 0, true);
		set_arg(train, WALS_ARG_VALIDATION_METRIC, (Datum) 0, true);
	}
	else if (!PG_ARGISNULL(R_VALIDATION))
	{
		set_arg(train, WALS_ARG_VALIDATION, PG_GETARG_DATUM(R_VALIDATION), false);
		set_arg(train, WALS_ARG_VALIDATION_TABLE, (Datum) 0, true);
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
	WalsTrainRequest train;
	WalsTrainSummary summary;
	WalsModelInfo info;
	StoredValidation held;
	WalsRoleSave save;

	wals_train_request_init(&train);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	/*
	 * Connected until the training ends: the catalog's values, and the
	 * arguments made of them, live in SPI's memory, where each catalog read
	 * leaves the current context.
	 */
	wals_spi_connect();
	fill_from_catalog(fcinfo, &train, &info, &held);
	apply_overrides(fcinfo, &train);
	if (PG_ARGISNULL(R_VALIDATION) && PG_ARGISNULL(R_VALIDATION_TABLE))
		stored_validation_table(&train, &held, &info);

	/*
	 * The source is the one the owner chose, not the caller: whoever
	 * retrains (the owner, a member of the owner role, a superuser) does so
	 * as the owner, in a security-restricted operation, so that the owner's
	 * views, policies and triggers never run with the caller's rights, as
	 * every other path that works on a model's relations (roles.c).
	 */
	wals_become_model_owner(&info, &save);
	wals_train_run(&train, &summary);
	wals_unbecome(&save);
	wals_train_summary_row(fcinfo, &summary);
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_retrain(PG_FUNCTION_ARGS)
{
	return wals_call(retrain_call, fcinfo, "wals_retrain", true);
}
