/*
 * train.c
 *	  wals_train: ingest, iterate an engine, store.
 *
 * The whole training runs inside the caller's transaction: ratings are read
 * with the caller's snapshot and privileges, the matrices and factors live
 * in memory owned by the transaction (the workspace, shared with parallel
 * workers, see workspace.c), and the new model is written by store.c only
 * once every iteration has succeeded.  An error or a cancel anywhere
 * unwinds the transaction and leaves the previous model as it was.
 *
 * The engines (engine_cpu.c, engine_gpu.c) only begin, iterate and end;
 * the one loop over iterations is here, with everything that does not
 * depend on the device: cancel checks, progress, the training log, the
 * early stop, and the report of a failure through errors.c.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_statistic.h"
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

#include "wals_shard.h"
#include "wals_train.h"

PG_FUNCTION_INFO_V1(wals_train);

/*
 * At least how many distinct values column col of relation relid holds, by
 * its statistics, for rows rows: half their estimate, which a sample can
 * overstate; 0 where it has none.
 */
static double
distinct_values(Oid relid, const char *col, double rows)
{
	AttrNumber	attnum = get_attnum(relid, col);
	HeapTuple	tuple;
	double		n;

	if (attnum == InvalidAttrNumber)
		return 0;
	tuple = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid), Int16GetDatum(attnum),
							BoolGetDatum(false));
	if (!HeapTupleIsValid(tuple))
		return 0;
	n = ((Form_pg_statistic) GETSTRUCT(tuple))->stadistinct;
	ReleaseSysCache(tuple);
	return (n < 0 ? -n * rows : n) / 2;
}

/*
 * Refuse a training that cannot fit in wals.max_memory from the rows the
 * planner's statistics give the source (a table or materialized view), and
 * the users and items they give its columns: out of core, the factors of
 * these have to fit.
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
		wals_memory_check(wals_workspace_min_bytes(args, rows,
												   distinct_values(args->source, args->user_col, rows),
												   distinct_values(args->source, args->item_col, rows),
												   wals_cpu_engine_bytes(args, 0, 0)),
						  psprintf("the %.0f rows of \"%s\" its statistics count",
								   rows, args->source_display));
}

/*
 * Seeded starting factors, drawn per id so that they do not depend on the
 * order or number of rows (nor on who draws them: the training's workers
 * too, where X and Y are ws's shared blocks), then overwritten by the
 * stored model's rows on a warm start.
 */
static void
init_factors(const WalsTrainArgs *args, const WalsData *data, WalsWorkspace *ws, float *X,
			 float *Y)
{
	int			f = args->params.factors;
	float		scale = args->init_std < 0 ? WALS_INIT_SCALE : args->init_std / sqrtf((float) f);
	uint64		seed_x = (uint64) args->seed;
	uint64		seed_y = (uint64) args->seed ^ UINT64CONST(0x9e3779b97f4a7c15);

	if (ws == NULL || !wals_build_init(args, ws, data, seed_x, seed_y, scale))
	{
		wals_init_rows(X, data->user_ids, 0, data->nusers, f, seed_x, scale);
		wals_init_rows(Y, data->item_ids, 0, data->nitems, f, seed_y, scale);
	}
	if (args->warm_start)
		wals_warm_start(args, data, X, Y);
}

/*
 * A training onto a model of another source, feedback or width replaces
 * it rather than retraining it: refused unless replace => true, and said in
 * a NOTICE where allowed, since nothing else tells the model's readers.  A
 * source dropped since is not compared: its OID says nothing of the
 * relation that took its name, as a nightly rebuild of a source does.
 */
static void
check_replacement(const WalsTrainArgs *args)
{
	const WalsModelInfo *old = args->old;
	char	   *old_source = OidIsValid(old->source) ? get_rel_name(old->source) : NULL;
	char	   *was;
	char	   *now;

	if (old_source != NULL)
		old_source = wals_relation_name(old->source);
	if ((old_source == NULL || old->source == args->source) &&
		old->params.feedback == args->params.feedback && old->factors == args->params.factors)
		return;
	was = psprintf("%s (%s feedback, %d factors)",
				   old_source ? old_source : "a relation dropped since",
				   wals_feedback_name(old->params.feedback), old->factors);
	now = psprintf("%s (%s feedback, %d factors)", wals_relation_name(args->source),
				   wals_feedback_name(args->params.feedback), args->params.factors);
	if (!args->replace)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("model \"%s\" already exists, trained otherwise", args->model_display),
				 errdetail("It was trained from %s; this training is from %s.", was, now),
				 errhint("Pass replace => true to replace it, or give another \"model\"; wals_retrain('%s') trains it again with its own settings.",
						 args->model_display)));
	ereport(wals_call_notice_level(),
			(errmsg("model \"%s\" is replaced", args->model_display),
			 errdetail("It was trained from %s; it is now trained from %s.", was, now)));
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

	PreventCommandIfReadOnly("wals_train()");
	PreventCommandDuringRecovery("wals_train()");

	/* a new model: the error's hint may name the source's schema */
	if (!wals_catalog_lookup(schema, args->model, old))
		wals_check_create(args->schema, GetUserId(), args->model, args->source);
	if (wals_lock_model(schema, args->model, old, true))
	{
		wals_model_check(old);
		args->old = old;
		args->owner = wals_model_owner(old);
		/* its owner was dropped: only a superuser passed the check above */
		if (GetUserNameFromId(args->owner, true) == NULL)
			args->owner = GetUserId();
	}
	else
		args->owner = GetUserId();
	wals_check_create(args->schema, args->owner, args->model, args->source);

	if (args->warm_start && args->old != NULL && args->old->factors != args->params.factors)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot warm start %d factors from model \"%s\", which has %d",
						args->params.factors, args->model_display, args->old->factors),
				 errhint("Pass factors => %d, or warm_start => false.", args->old->factors)));
	if (args->warm_start && args->old != NULL)
		wals_model_check_tables(args->old);
	if (args->old != NULL)
		wals_model_check_rules(args->old);
	wals_check_factor_tables_free(args);
	check_source_size(args);
	wals_device_check(args);
	if (args->old != NULL)
		check_replacement(args);
}

/* What the training did, in the caller's memory context. */
static void
summarize(const WalsTrainArgs *args, const WalsData *data, const WalsTrainResult *result,
		  WalsTrainSummary *summary)
{
	summary->model = pstrdup(args->model);
	summary->users = data->nusers;
	summary->items = data->nitems;
	summary->ratings = data->nratings;
	summary->factors = args->params.factors;
	summary->iterations = result->iterations;
	summary->loss = result->loss;
	summary->device = pstrdup(result->device);
	summary->load_s = result->load_s;
	summary->train_s = result->train_s;
	summary->store_s = result->store_s;
	summary->total_s = result->total_s;
	summary->validation_score = result->validation_score;
	summary->best_iteration = result->best_iteration;
	summary->validation_s = result->validation_s;
}

/* wals_train's row, into the tuplestore of a materialized call. */
void
wals_train_summary_row(FunctionCallInfo fcinfo, const WalsTrainSummary *summary)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[12];
	bool		nulls[12] = {0};

	values[0] = CStringGetTextDatum(summary->model);
	values[1] = Int64GetDatum(summary->users);
	values[2] = Int64GetDatum(summary->items);
	values[3] = Int64GetDatum(summary->ratings);
	values[4] = Int32GetDatum(summary->factors);
	values[5] = Int32GetDatum(summary->iterations);
	values[6] = Float8GetDatum(summary->loss);
	values[7] = CStringGetTextDatum(summary->device);
	values[8] = wals_seconds_datum(summary->load_s);
	values[9] = wals_seconds_datum(summary->train_s);
	values[10] = wals_seconds_datum(summary->store_s);
	values[11] = wals_seconds_datum(summary->total_s);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Where the progress callback of an engine finds its iteration. */
typedef struct Progress
{
	const WalsTrainArgs *args;
	const WalsTrainResult *result;
	int			it;
} Progress;

static void
report_phase(void *arg, WalsPhase phase, int64 rows, const char *text)
{
	Progress   *p = arg;

	wals_work_phase(phase, rows);
	wals_work_iteration(p->it + 1, p->args->iterations);
	wals_report_progress(p->args, p->it, text, p->result);
}

/* What a failure of the engine was doing, for its message. */
static char *
doing(const WalsTrainArgs *args, const WalsEngine *engine, int it)
{
	if (it < 0)
		return psprintf("starting to train model \"%s\" on the %s", args->model_display,
						engine == &wals_gpu_engine ? "GPU" : "CPU");
	if (it >= args->iterations)
		return psprintf("handing back the factors of model \"%s\"", args->model_display);
	return psprintf("training model \"%s\", iteration %d", args->model_display, it + 1);
}

/*
 * Begin training on the engine of device; false when device 'auto' chose a
 * GPU whose engine could not start (a NOTICE says why), and the CPU should
 * train instead.
 */
static bool
begin(const WalsEngine *engine, WalsProblem *problem, void **state)
{
	const WalsTrainArgs *args = problem->args;
	WalsFailure failure = {0};

	if (engine->begin(problem, state, &failure))
		return true;
	if (engine == &wals_gpu_engine && args->device == WALS_DEVICE_AUTO)
	{
		ereport(NOTICE,
				(errmsg("model \"%s\" trains on the CPU: the GPU engine could not start: %s",
						args->model_display, failure.detail)));
		return false;
	}
	wals_report_failure(&failure, doing(args, engine, -1), problem->data->user_ids,
						problem->data->item_ids);
	return false;
}

/*
 * Whether a trial of wals_tune should stop after this iteration, which took
 * iteration_s: whether one more as long would leave less of the budget than
 * the final training will take (WalsDeadline).
 */
static bool
past_deadline(const WalsTrainArgs *args, const WalsData *data, double iteration_s)
{
	const WalsDeadline *d = &args->deadline;
	double		own;

	if (d->budget_s <= 0)
		return false;
	own = d->own_factor * (wals_seconds_since(args->began) + iteration_s) +
		wals_store_estimate_s(data->nusers + data->nitems, args->params.factors);
	return wals_seconds_since(d->since) + iteration_s + Max(d->reserve_s, own) >= d->budget_s;
}

/*
 * Run the iterations on an engine that has begun, letting it release what
 * it holds when anything ends them with an error.
 */
static void
run_iterations(const WalsEngine *engine, void *state, const WalsProblem *problem,
			   Progress *progress, WalsValidation *validation, WalsTrainResult *result)
{
	const WalsTrainArgs *args = problem->args;
	const WalsData *data = problem->data;
	WalsFailure failure = {0};
	WalsNcg		ncg;

	wals_iterations_begin(args, result);
	wals_ncg_init(&ncg);
	wals_validation_begin(args, data, engine, validation);
	PG_TRY();
	{
		for (int it = 0; it < args->iterations; it++)
		{
			instr_time	start;
			double		loss = 0;
			double		step = 0;
			double		score = NAN;
			bool		ok;

			bool		late;

			CHECK_FOR_INTERRUPTS();
			INSTR_TIME_SET_CURRENT(start);
			progress->it = it;
			if (args->accelerate == WALS_ACCEL_NCG)
				ok = wals_ncg_iterate(engine, state, &ncg, &loss, &step, &failure);
			else
				ok = engine->iterate(state, &loss, &failure);
			late = past_deadline(args, data, wals_seconds_since(start));
			if (ok && wals_validation_due(validation, it, it == args->iterations - 1 || late ||
										  wals_loss_flat(args, result, it, loss)))
				ok = wals_validation_step(args, data, engine, state, validation, it, &score,
										  &failure);
			if (!ok)
				wals_report_failure(&failure, doing(args, engine, it), data->user_ids,
									data->item_ids);
			if (wals_iteration_done(args, result, it, loss, step, score, wals_seconds_since(start)) ||
				wals_validation_stop(args, validation, it) || late)
				break;
		}
	}
	PG_CATCH();
	{
		engine->end(state, NULL, NULL, &failure);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * Train on the engine of device from the initialised factors of problem,
 * which receive the result.
 */
static void
train(WalsDevice device, WalsProblem *problem, WalsTrainResult *result)
{
	const WalsTrainArgs *args = problem->args;
	const WalsEngine *engine = problem->data->shards != NULL ? &wals_shard_engine :
		device == WALS_DEVICE_GPU ? &wals_gpu_engine : &wals_cpu_engine;
	Progress	progress = {args, result, 0};
	WalsFailure failure = {0};
	void	   *state = NULL;
	WalsValidation validation;

	problem->phase = report_phase;
	problem->phase_arg = &progress;
	problem->accelerate = args->accelerate != WALS_ACCEL_NONE;
	if (!begin(engine, problem, &state))
	{
		engine = &wals_cpu_engine;
		begin(engine, problem, &state);
	}
	result->device = engine->name;
	result->workers = problem->workers;

	run_iterations(engine, state, problem, &progress, &validation, result);
	if (!engine->end(state, problem->X, problem->Y, &failure))
		wals_report_failure(&failure, doing(args, engine, args->iterations),
							problem->data->user_ids, problem->data->item_ids);
	wals_validation_end(problem->data, &validation, args->params.factors, problem->X,
						problem->Y, result);
	wals_report_progress_end();
}

/*
 * What a training on the shards of a sharded source cannot do yet, refused
 * before anything is read.
 */
static void
check_sharded(const WalsTrainArgs *args, List *shards)
{
	const char *what = args->device == WALS_DEVICE_GPU ? "device => 'gpu'" :
		args->accelerate != WALS_ACCEL_NONE ? "accelerate => 'ncg'" :
		wals_validating(args) ? "a validation" : NULL;

	if (what != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s is not supported with a sharded source",
						what),
				 errdetail(wals_shards_citus(shards) ?
						   "\"%s\" is a Citus distributed table, and trains on its nodes." :
						   "\"%s\" is partitioned over postgres_fdw foreign tables, and trains on their servers.",
						   args->source_display),
				 errhint("Train without it, or from a local copy of the ratings.")));
}

/*
 * The ratings of a training: read from the source, or, for a tuning's
 * (kept not NULL), from what its first training read and kept.
 */
static void
read_ratings(const WalsTrainArgs *args, WalsKeptRatings *kept, WalsRatings *raw)
{
	if (kept != NULL && kept->read)
	{
		wals_ratings_copy(&kept->raw, raw, CurrentMemoryContext);
		return;
	}
	wals_ingest(args, raw, false);
	if (kept != NULL)
	{
		wals_memory_check(2 * wals_ratings_bytes(raw), "the ratings a tuning keeps for its trials");
		wals_ratings_copy(raw, &kept->raw, kept->cxt);
		kept->read = true;
	}
}

/*
 * Train here, from the ratings read into this server's memory.
 */
static void
train_here(WalsTrainArgs *args, WalsKeptRatings *kept, instr_time start, WalsData *data,
		   WalsTrainResult *result, bool trial)
{
	WalsRatings raw;
	WalsWorkspace *ws;
	WalsProblem problem = {0};
	WalsDevice	device;
	instr_time	phase;

	read_ratings(args, kept, &raw);
	wals_validation_read(args, &raw);
	device = wals_device_choose(args, raw.n);
	ws = wals_workspace_create(args, &raw, wals_seconds_since(start),
							   wals_cpu_engine_bytes(args, raw.nusers, raw.nitems) +
							   wals_validation_bytes(args, &raw) +
							   (kept != NULL ? wals_ratings_bytes(&kept->raw) : 0),
							   device != WALS_DEVICE_GPU);
	if (ws->shape.files)
		wals_ratings_spill(&raw);
	wals_work_phase(WALS_PHASE_BUILDING, 0);
	wals_build_matrices(args, &raw, ws, data);
	result->load_s = wals_seconds_since(start);

	INSTR_TIME_SET_CURRENT(phase);
	init_factors(args, data, ws, ws->X, ws->Y);
	problem.args = args;
	problem.data = data;
	problem.workspace = ws;
	problem.X = ws->X;
	problem.Y = ws->Y;
	train(device, &problem, result);
	result->train_s = wals_seconds_since(phase);

	if (!trial)
		wals_store_model(args, data, ws, ws->X, ws->Y, result);
	wals_workspace_release(ws);
}

/*
 * Train from the shards of a sharded source: the ratings stay there, the
 * factors are here (shard/coord_plan.c, shard/coord_engine.c).
 */
static void
train_sharded(WalsTrainArgs *args, List *shards, instr_time start, WalsData *data,
			  WalsTrainResult *result)
{
	WalsProblem problem = {0};
	float	   *X;
	float	   *Y;
	instr_time	phase;
	int			f = args->params.factors;

	wals_shards_open(args, shards, data);
	wals_memory_check(sizeof(float) * (double) (data->nusers + data->nitems) * f,
					  "the factors of a sharded training");
	X = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * data->nusers * f);
	Y = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * data->nitems * f);
	init_factors(args, data, NULL, X, Y);
	wals_shards_start(data->shards, X, Y, data);
	result->load_s = wals_seconds_since(start);

	INSTR_TIME_SET_CURRENT(phase);
	problem.args = args;
	problem.data = data;
	problem.X = X;
	problem.Y = Y;
	train(WALS_DEVICE_CPU, &problem, result);
	result->train_s = wals_seconds_since(phase);
	wals_store_model(args, data, NULL, X, Y, result);
	wals_shards_disconnect(shards);
}

/*
 * The defaults sql/ declares for wals_train's arguments (its DEFAULT
 * clauses), for a request made in C: tune.sql checks that a tuning's
 * model records the settings a plain wals_train records.
 */
void
wals_train_request_init(WalsTrainRequest *req)
{
	memset(req, 0, sizeof(*req));
	for (int a = 0; a < WALS_TRAIN_NARGS; a++)
		req->isnull[a] = true;
#define SET(arg, datum) (req->value[arg] = (datum), req->isnull[arg] = false)
	SET(WALS_ARG_FACTORS, Int32GetDatum(64));
	SET(WALS_ARG_ITERATIONS, Int32GetDatum(15));
	SET(WALS_ARG_REGULARIZATION, Float4GetDatum(0.1f));
	SET(WALS_ARG_FEEDBACK, CStringGetTextDatum(wals_feedback_name(WALS_IMPLICIT)));
	SET(WALS_ARG_ALPHA, Float4GetDatum(1.0f));
	SET(WALS_ARG_SOLVER, CStringGetTextDatum(wals_solver_name(WALS_CG)));
	SET(WALS_ARG_CG_STEPS, Int32GetDatum(3));
	SET(WALS_ARG_SEED, Int32GetDatum(42));
	SET(WALS_ARG_WARM_START, BoolGetDatum(false));
	SET(WALS_ARG_ACCELERATE, CStringGetTextDatum(wals_accelerate_name(WALS_ACCEL_NONE)));
	SET(WALS_ARG_REPLACE, BoolGetDatum(false));
#undef SET
}

/*
 * The mark of args->changed_col, in the snapshot the ratings are read in:
 * the call's (ingest.c).
 */
static void
take_mark(WalsTrainArgs *args)
{
	Oid			type;
	Datum		value;

	if (args->changed_col == NULL)
		return;
	type = wals_changed_col_type(args->source, args->changed_col, args->model_display);
	wals_changed_col_advice(args->source, args->source_name, args->changed_col,
							args->user_col, args->item_col);
	if (wals_mark_read(args->source_name, args->changed_col, type, &value))
		args->changed_mark = wals_mark_text(value, type);
}

/*
 * Train (or retrain) a model as req asks, into summary: the one entry
 * point of a training, for wals_train, wals_retrain and wals_tune.
 */
void
wals_train_run(const WalsTrainRequest *req, WalsTrainSummary *summary)
{
	WalsTrainArgs args;
	WalsData	data = {0};
	WalsTrainResult result = {0};
	MemoryContext cxt;
	MemoryContext oldcxt;
	instr_time	start;
	List	   *shards;

	INSTR_TIME_SET_CURRENT(start);
	wals_train_args_parse(req, &args);
	/* a tuning keeps its ratings in memory for every trial */
	args.may_spill = req->kept == NULL;
	wals_work_begin(WALS_WORK_TRAIN, args.schema, args.model);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "wals training", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	wals_spi_connect();
	MemoryContextSwitchTo(cxt);

	shards = wals_shards_find(args.source, args.user_col, args.item_col, args.rating_col);
	if (shards != NIL && wals_shards_in_transaction(shards))
	{
		bool		citus = wals_shards_citus(shards);

		ereport(NOTICE,
				(errmsg("model \"%s\" trains here, reading \"%s\" through %s",
						args.model_display, args.source_display,
						citus ? "Citus" : "postgres_fdw"),
				 citus ?
				 errdetail("This transaction has run distributed commands, whose changes the nodes show only to Citus's own connections.") :
				 errdetail("This transaction block may have written to the shards, whose changes they show only to postgres_fdw's own connections."),
				 errhint("Train in a transaction of its own to train on the shards.")));
		shards = NIL;
	}
	if (shards != NIL)
		check_sharded(&args, shards);
	check_before_reading(&args);
	take_mark(&args);

	/*
	 * The checks' SPI calls leave SPI's procedure context current.  The
	 * training's memory is cxt, where the shards were found: a sharded
	 * training's cleanup, registered on the current context, must go with
	 * them, since on an error cxt goes with the portal before the
	 * transaction's contexts (SPI's among them) are deleted.
	 */
	MemoryContextSwitchTo(cxt);
	if (shards != NIL)
		train_sharded(&args, shards, start, &data, &result);
	else
		train_here(&args, req->kept, start, &data, &result, req->trial);

	SPI_finish();
	MemoryContextSwitchTo(oldcxt);
	summarize(&args, &data, &result, summary);
	MemoryContextDelete(cxt);
	wals_work_end();
}

/* wals_train(source, user_col, item_col, ...): see sql/ for its signature. */
static Datum
train_call(PG_FUNCTION_ARGS)
{
	WalsTrainRequest req;
	WalsTrainSummary summary;

	wals_require_nargs(fcinfo, WALS_TRAIN_NARGS, "wals_train");

	/* no deadline, no tuning's ratings: a plain training */
	memset(&req, 0, sizeof(req));
	for (int a = 0; a < WALS_TRAIN_NARGS; a++)
	{
		req.value[a] = PG_GETARG_DATUM(a);
		req.isnull[a] = PG_ARGISNULL(a);
	}
	req.validation_owner = InvalidOid;
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_train_run(&req, &summary);
	wals_train_summary_row(fcinfo, &summary);
	return (Datum) 0;
}

Datum
wals_train(PG_FUNCTION_ARGS)
{
	return wals_call(train_call, fcinfo, "wals_train", true);
}
