/*
 * tune_call.c
 *	  The SQL entry points of a tuning: wals_tune, a function that tunes in
 *	  its caller's transaction, and wals_tune_concurrently, a procedure
 *	  that commits after each trial; their arguments, checked, and what
 *	  every trial needs before the first.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "tune_internal.h"

PG_FUNCTION_INFO_V1(wals_tune);
PG_FUNCTION_INFO_V1(wals_tune_concurrently);

/*
 * The arguments of both entry points, the first twelve of each, checked
 * into ta:
 *
 * wals_tune(source regclass, user_col name, item_col name, rating_col name,
 *			 model text, metric text, validation real, budget interval,
 *			 space jsonb, seed int, max_trials int, feedback text)
 *	 RETURNS TABLE(trial int, parameters jsonb, score float8,
 *				   iterations int, seconds float8, chosen bool)
 */
static void
tune_args(FunctionCallInfo fcinfo, int nargs, const char *fn, TuneArgs *ta)
{
	WalsMetricKind kind;
	int			k;
	WalsFeedback feedback = WALS_IMPLICIT;

	wals_require_nargs(fcinfo, nargs, fn);
	for (int a = 0; a < 3; a++)
		if (PG_ARGISNULL(a))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("\"%s\" must not be null", a == 0 ? "source" : a == 1 ? "user_col" : "item_col")));
	if (!PG_ARGISNULL(11))
		feedback = (WalsFeedback) wals_word_arg(wals_feedback_words,
												text_to_cstring(PG_GETARG_TEXT_PP(11)), "feedback");
	ta->feedback = feedback;
	if (feedback == WALS_EXPLICIT && PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("feedback => 'explicit' needs a \"rating_col\""),
				 errhint("Name the column of the ratings the model predicts.")));
	/* by default, what each feedback is judged by: the values, or the ranking */
	ta->metric = !PG_ARGISNULL(5) ? text_to_cstring(PG_GETARG_TEXT_PP(5)) :
		feedback == WALS_EXPLICIT ? "rmse" : "ndcg@20";
	if (!wals_metric_parse(ta->metric, WALS_MAX_VALIDATION_K, &kind, &k))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"metric\": \"%s\"", ta->metric),
				 errhint("\"metric\" must be %s.", wals_metric_choices())));
	if (kind == WALS_METRIC_RMSE && feedback != WALS_EXPLICIT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"metric\" => 'rmse' applies only to explicit feedback"),
				 errhint("Pass feedback => 'explicit' for ratings whose values the model predicts, or a ranking metric such as 'ndcg@20'.")));
	ta->lower = wals_metric_lower_better(kind);
	ta->validation = PG_ARGISNULL(6) ? -1 : PG_GETARG_FLOAT4(6);
	if (!(ta->validation > 0 && ta->validation <= WALS_MAX_VALIDATION))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"validation\": %g", ta->validation),
				 errhint("\"validation\" must be above 0 and at most %g.", WALS_MAX_VALIDATION)));
	if (PG_ARGISNULL(7))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"budget\" must not be null")));
	ta->budget_s = DatumGetFloat8(DirectFunctionCall2(interval_part, CStringGetTextDatum("epoch"),
													  PG_GETARG_DATUM(7)));
	if (!(ta->budget_s > 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"budget\": it must be positive")));
	ta->seed = PG_ARGISNULL(9) ? 42 : PG_GETARG_INT32(9);
	ta->max_trials = PG_ARGISNULL(10) ? 1000 : PG_GETARG_INT32(10);
	if (ta->max_trials < 1 || ta->max_trials > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"max_trials\": %d", ta->max_trials),
				 errhint("\"max_trials\" must be between 1 and 1000.")));
}

/*
 * The model tuned: as given, or named after the source; qualified here,
 * where wals_train would put it, since the trainings run with search_path
 * pinned to pg_catalog.
 */
static void
tune_model(FunctionCallInfo fcinfo, TuneArgs *ta)
{
	WalsModelName *mn = &ta->mn;

	if (PG_ARGISNULL(4))
	{
		mn->schema = NULL;
		mn->name = get_rel_name(PG_GETARG_OID(0));
		if (mn->name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation with OID %u does not exist", PG_GETARG_OID(0))));
	}
	else
		wals_model_name_parse(text_to_cstring(PG_GETARG_TEXT_PP(4)), "model", mn);
	ta->shown = mn->schema ? wals_model_quoted(mn->schema, mn->name) :
		pstrdup(quote_identifier(mn->name));
	if (mn->schema == NULL)
		mn->schema = get_namespace_name(RangeVarGetCreationNamespace(makeRangeVar(NULL, mn->name,
																				  -1)));
}

/*
 * The trainings' common arguments, in cxt: the source, its columns and the
 * seed, each replacing the model of its name.  A tuning trains as
 * wals_train does, so its caller needs EXECUTE on wals_train, as a call
 * through SQL would.
 */
static void
tune_base(FunctionCallInfo fcinfo, const TuneArgs *ta, WalsTrainRequest *base, MemoryContext cxt)
{
	static const Oid types[WALS_TRAIN_NARGS] = {
		REGCLASSOID, NAMEOID, NAMEOID, NAMEOID, TEXTOID, INT4OID, INT4OID, FLOAT4OID,
		TEXTOID, FLOAT4OID, FLOAT4OID, TEXTOID, INT4OID, TEXTOID, INT4OID, INT4OID,
		BOOLOID, FLOAT4OID, TEXTOID, INT4OID, FLOAT4OID, FLOAT4OID, FLOAT4OID, INT4OID,
		TEXTOID, REGCLASSOID, BOOLOID, NAMEOID
	};
	Oid			train;

	train = LookupFuncName(list_make2(makeString(get_namespace_name(wals_extension_schema())),
									  makeString("wals_train")),
						   WALS_TRAIN_NARGS, types, false);
	if (pg_proc_aclcheck(train, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, "wals_train");
	MemoryContextSwitchTo(cxt);
	wals_train_request_init(base);
	for (int a = 0; a < 4; a++)
	{
		base->value[WALS_ARG_SOURCE + a] = PG_GETARG_DATUM(a);
		base->isnull[WALS_ARG_SOURCE + a] = PG_ARGISNULL(a);
	}
	base->value[WALS_ARG_SEED] = Int32GetDatum(ta->seed);
	base->value[WALS_ARG_REPLACE] = BoolGetDatum(true);
	base->value[WALS_ARG_FEEDBACK] = CStringGetTextDatum(wals_feedback_name(ta->feedback));
}

/* The trials, one row each, into the call's tuplestore; best the one trained. */
static void
return_trials(FunctionCallInfo fcinfo, const TuneTrial *trials, int n, int best)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	for (int t = 0; t < n; t++)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};

		values[0] = Int32GetDatum(t + 1);
		values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(wals_tune_trial_json(&trials[t])));
		values[2] = Float8GetDatum(trials[t].score);
		values[3] = Int32GetDatum(trials[t].best_iteration);
		values[4] = wals_seconds_datum(trials[t].seconds);
		values[5] = BoolGetDatum(t == best);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * Refuse to tune when a model already has the trials' name: each trial
 * would take that model's lock and replace it in name.  The schema is the
 * one wals_train would put the trials in.
 */
static void
check_trial_name(const WalsModelName *mn, const char *trial_name)
{
	Oid			schema;
	WalsModelInfo info;

	if (mn->schema != NULL)
		schema = get_namespace_oid(mn->schema, true);
	else
		schema = RangeVarGetCreationNamespace(makeRangeVar(NULL, pstrdup(trial_name), -1));
	if (!OidIsValid(schema) || !wals_catalog_lookup(get_namespace_name(schema), trial_name, &info))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("model \"%s\" already exists", info.display),
			 errdetail("wals_tune trains its trials under the name \"%s\".", info.display),
			 errhint("Drop or rename that model, or tune into another model name.")));
}

/* What a tuning begins with: its call's arguments, and where they go. */
typedef struct TuneBegin
{
	FunctionCallInfo fcinfo;
	TuneArgs   *ta;
	TuneDim    *dims;
	WalsTrainRequest *base;
	TuneRun    *run;
	char	   *model;			/* the model tuned, quoted */
} TuneBegin;

/*
 * Everything the trials need, checked, in the current memory context,
 * which lives as long as the tuning: the model's name, the space, the
 * trainings' common arguments and the run, and the tuning's number.
 */
static void
tune_begin(void *arg)
{
	TuneBegin  *b = arg;
	FunctionCallInfo fcinfo = b->fcinfo;
	TuneArgs   *ta = b->ta;
	TuneRun    *run = b->run;
	MemoryContext cxt = CurrentMemoryContext;

	tune_model(fcinfo, ta);
	b->model = wals_model_quoted(ta->mn.schema, ta->mn.name);
	run->trials = palloc0(sizeof(TuneTrial) * ta->max_trials);
	run->kept.cxt = AllocSetContextCreate(cxt, "wals_tune ratings", ALLOCSET_DEFAULT_SIZES);
	wals_spi_connect();
	MemoryContextSwitchTo(cxt);
	wals_tune_default_space(b->dims, ta->feedback);
	if (!PG_ARGISNULL(8))
		wals_tune_parse_space(PG_GETARG_JSONB_P(8), b->dims);
	tune_base(fcinfo, ta, b->base, cxt);
	b->base->kept = &run->kept;
	check_trial_name(&ta->mn, psprintf("%s_trial", ta->mn.name));
	MemoryContextSwitchTo(cxt);

	run->base = b->base;
	run->mn = &ta->mn;
	run->trial_model = wals_model_quoted(ta->mn.schema, psprintf("%s_trial", ta->mn.name));
	run->shown = ta->shown;
	run->metric = ta->metric;
	run->validation = ta->validation;
	run->lower = ta->lower;
	run->budget_s = ta->budget_s;
	run->max_trials = ta->max_trials;
	run->tuning = wals_next_version();
	MemoryContextSwitchTo(cxt);
	INSTR_TIME_SET_CURRENT(run->start);
	wals_work_begin(WALS_WORK_TUNE, get_namespace_oid(ta->mn.schema, false), ta->mn.name);
	SPI_finish();
}

static Datum
tune_call(PG_FUNCTION_ARGS)
{
	TuneArgs	ta;
	TuneDim		dims[NDIMS];
	TuneRun		run = {0};
	WalsTrainRequest base;
	TuneBegin	b = {fcinfo, &ta, dims, &base, &run};

	tune_args(fcinfo, 12, "wals_tune", &ta);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	tune_begin(&b);
	wals_tune_and_train(&run, dims, ta.seed, b.model);
	wals_work_end();
	return_trials(fcinfo, run.trials, run.n, run.best);
	MemoryContextDelete(run.kept.cxt);
	return (Datum) 0;
}

Datum
wals_tune(PG_FUNCTION_ARGS)
{
	return wals_call(tune_call, fcinfo, "wals_tune", true);
}

/*
 * CALL wals_tune_concurrently(wals_tune's arguments, INOUT tuning bigint,
 *							   INOUT chosen_trial int, INOUT score float8)
 *
 * wals_tune, committing after each trial: the ratings are read once, by
 * the first trial, into memory that outlives the transactions, and every
 * trial runs in a transaction of its own, with a snapshot of its own, so
 * that VACUUM is held back by one trial at most rather than by the whole
 * budget.  A procedure can commit only where it was called outside a
 * transaction block and outside a function (a non-atomic CALL).  Between
 * the transactions no wals call is running (calls.c): each step is a call
 * of its own.  The final training and its mark in wals_tuning_log commit
 * together, when the procedure returns.
 */
Datum
wals_tune_concurrently(PG_FUNCTION_ARGS)
{
	TuneArgs	ta;
	TuneDim		dims[NDIMS];
	TuneRun		run = {0};
	WalsTrainRequest base;
	TuneBegin	b = {fcinfo, &ta, dims, &base, &run};
	MemoryContext cxt;
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		castNode(CallContext, fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("wals_tune_concurrently cannot run inside a transaction block"),
				 errdetail("It commits after each trial, and a procedure can commit only where CALL is a statement of its own."),
				 errhint("CALL it outside BEGIN and COMMIT and outside a function, or tune in one transaction with SELECT ... FROM wals_tune(...).")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "wals_tune_concurrently: its result is not a row");
	tune_args(fcinfo, 15, "wals_tune_concurrently", &ta);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "wals_tune_concurrently",
								ALLOCSET_DEFAULT_SIZES);
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "wals_tune_concurrently: SPI_connect_ext failed");
	MemoryContextSwitchTo(cxt);
	run.commits = true;
	wals_call_from_c(tune_begin, &b, "wals_tune_concurrently", true);
	wals_tune_and_train(&run, dims, ta.seed, b.model);
	wals_work_end();
	SPI_finish();

	values[0] = Int64GetDatum(run.tuning);
	values[1] = Int32GetDatum(run.best + 1);
	values[2] = Float8GetDatum(run.trials[run.best].score);
	MemoryContextDelete(cxt);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
