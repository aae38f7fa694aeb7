/*
 * tune.c
 *	  wals_tune: a search of training parameters, each trial a real
 *	  training scored on a held-out share of the source, then the model
 *	  trained on every rating with the best of them.
 *
 * The search samples configurations at random, over a space of ranges and
 * choices, by a hash of (seed, configuration, parameter): configuration c
 * has the same parameters for a seed whatever came before it, and every
 * trial holds out the same cells.  It spends them by successive halving
 * (Jamieson and Talwalkar, AISTATS 2016), in brackets of TUNE_BRACKET
 * configurations: each trains for TUNE_FIRST_ITERATIONS iterations, the
 * best third goes on to three times as many, and the best of those to
 * TUNE_MAX_ITERATIONS, each trial stopping early on its validation score
 * (validate.c) with a patience of TUNE_PATIENCE.  Within a round the
 * narrowest models train first, so that a budget that runs out ends among
 * the costliest.  A few iterations rank configurations of ALS much as
 * their convergence does, so most of the budget goes to the promising
 * ones.  Trials run until the budget is spent (at least one, and at most
 * max_trials), so the same seed and number of trials give the same
 * results.  The budget covers the final training too: no trial starts
 * unless its read and first iteration fit before what is left of the
 * budget is what training and storing the best so far on every rating
 * will take, estimated from that trial's read and iterations
 * (budget_left), and a trial stops after the iteration where one more as
 * long would leave less than that, or than its own final training would
 * take (its seconds so far, scaled to every rating), keeping its best
 * iterate so far (WalsDeadline).  The solver follows the width: CG below
 * TUNE_SUBSPACE_FACTORS, the subspace solver with ALS-NCG from there on,
 * the fastest of them at each width in make bench-accel.  Each trial
 * trains under the tuned model's name with "_trial" appended, through
 * wals_train's entry point (wals_train_run, counted as a call of
 * wals_train), so a trial checks and trains exactly as that training
 * would; but it stores no model, handing its outcome back instead, since
 * storing factors that nobody reads took most of a trial's time at large
 * f.  The source is read once, by the first trial, which keeps a copy of
 * the rows read (WalsKeptRatings); the later trials and the final
 * training start from that copy, so that every trial is judged on the
 * same ratings.  Then the model is trained with the best parameters for
 * as many iterations as the best trial found best, stopping where one
 * more iteration and the store would run past the budget.
 * wals_tune runs in the caller's transaction: a cancel or an error leaves
 * the previous model, and the log of earlier tunings, as they were.
 * wals_tune_concurrently, a procedure, commits after each trial instead,
 * so that its snapshots hold VACUUM back for a trial at most; each trial
 * is logged in its own transaction, and the final training and its mark
 * commit together.
 *
 * The caller hears one NOTICE per trial: the trainings' own NOTICEs of
 * their progress (each iteration, the rows read) go to the server's log at
 * DEBUG1 (calls.c); wals_tuning_log keeps each trial, wals_training_log
 * the final training's iterations, and pg_stat_activity shows the one
 * under way.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "catalog/namespace.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "portability/instr_time.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "wals_train.h"

PG_FUNCTION_INFO_V1(wals_tune);
PG_FUNCTION_INFO_V1(wals_tune_concurrently);

/* The iterations a trial may run; early stopping ends most sooner. */
#define TUNE_MAX_ITERATIONS 50
#define TUNE_PATIENCE 2
#define TUNE_CHOICES 16

/* Successive halving: a bracket's configurations, its rounds, the first's iterations. */
#define TUNE_BRACKET 9
#define TUNE_ROUNDS 3
#define TUNE_FIRST_ITERATIONS 3

/* The width from which the subspace solver with ALS-NCG trains a trial. */
#define TUNE_SUBSPACE_FACTORS 512

/* One parameter of the space: a range (log-uniform when min > 0) or choices. */
typedef struct TuneDim
{
	const char *name;
	bool		integer;
	int			nchoices;		/* 0: the range */
	double		choices[TUNE_CHOICES];	/* NaN: NULL */
	double		min;
	double		max;
} TuneDim;

enum
{
	DIM_FACTORS,
	DIM_REGULARIZATION,
	DIM_EXPONENT,
	DIM_UNOBSERVED,
	DIM_ALPHA,
	DIM_INIT_STD,
	NDIMS
};

/* The parameters of one trial, in the order of the dimensions. */
typedef struct TuneTrial
{
	double		v[NDIMS];
	double		score;			/* the metric's value */
	double		rank;			/* higher is better, whatever the metric */
	int			config;			/* the configuration sampled, from 0 */
	int			max_iterations; /* the trial's round's */
	int			best_iteration;
	int			iterations;		/* run */
	double		seconds;
	double		validation_s;	/* of seconds, scoring the validation */
	double		load_s;
	int64		rows;			/* users and items */
} TuneTrial;

/*
 * The default space of implicit feedback, after Rendle et al.:
 * frequency-scaled or classic regularization, whose useful ranges differ
 * by the scale n + w0 N of the first, small unobserved weights, little or
 * no extra confidence.  Of explicit feedback, ALS-WR as Spark's ALS and
 * Zhou et al. tune it: the observed ratings alone (no unobserved weight,
 * no confidence), lambda scaled by each row's ratings, narrower models.
 */
static void
default_space(TuneDim *dims, WalsFeedback feedback)
{
	TuneDim		implicit[NDIMS] = {
		{"factors", true, 5, {32, 64, 128, 256, 512}},
		{"regularization", false, 0, {0}, 0, 0},
		{"regularization_exponent", false, 2, {NAN, 1}},
		{"unobserved_weight", false, 0, {0}, 0.001, 1.0},
		{"alpha", false, 4, {0, 1, 4, 16}},
		{"init_std", false, 1, {0.1}},
	};
	TuneDim		explicit[NDIMS] = {
		{"factors", true, 5, {8, 16, 32, 64, 128}},
		{"regularization", false, 0, {0}, 0.005, 0.5},
		{"regularization_exponent", false, 1, {NAN}},
		{"unobserved_weight", false, 1, {0}},
		{"alpha", false, 1, {1}},
		{"init_std", false, 1, {0.1}},
	};

	memcpy(dims, feedback == WALS_EXPLICIT ? explicit : implicit, sizeof(implicit));
}

/* A uniform in [0, 1) for (seed, trial, dimension). */
static double
uniform(int seed, int trial, int dim)
{
	uint64		h = wals_mix64((uint64) (uint32) seed * UINT64CONST(0x9e3779b97f4a7c15) +
							   (uint64) trial * UINT64CONST(0xbf58476d1ce4e5b9) +
							   (uint64) dim + 1);

	return (double) (h >> 11) * (1.0 / 9007199254740992.0);
}

static double
sample(const TuneDim *d, double u, double min, double max)
{
	if (d->nchoices > 0)
		return d->choices[Min((int) (u * d->nchoices), d->nchoices - 1)];
	if (min > 0)
		return exp(log(min) + u * (log(max) - log(min)));
	return min + u * (max - min);
}

static void
sample_trial(const TuneDim *dims, int seed, int t, TuneTrial *trial)
{
	/* the exponent decides lambda's range: sample it first */
	trial->v[DIM_EXPONENT] = sample(&dims[DIM_EXPONENT], uniform(seed, t, DIM_EXPONENT), 0, 0);
	for (int k = 0; k < NDIMS; k++)
	{
		double		min = dims[k].min;
		double		max = dims[k].max;

		if (k == DIM_EXPONENT)
			continue;
		/* unless the space sets it, lambda's range follows the scale */
		if (k == DIM_REGULARIZATION && min == 0 && max == 0)
		{
			bool		scaled = !isnan(trial->v[DIM_EXPONENT]);

			min = scaled ? 1e-4 : 0.01;
			max = scaled ? 0.1 : 1000.0;
		}
		trial->v[k] = sample(&dims[k], uniform(seed, t, k), min, max);
		if (dims[k].integer)
			trial->v[k] = rint(trial->v[k]);
	}
}

static void
bad_space(const char *key, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid \"space\" for \"%s\": %s", key, why),
			 errhint("Give each parameter an array of values, such as [32, 64], or a range, such as {\"min\": 0.001, \"max\": 1}.")));
}

/* A value of the space, checked as wals_train will check it. */
static double
space_value(const char *key, const char *text, bool allow_null)
{
	char	   *end;
	double		v;

	if (text == NULL)
	{
		if (!allow_null)
			bad_space(key, "null is allowed only for regularization_exponent");
		return NAN;
	}
	v = strtod(text, &end);
	if (*end != '\0' || !isfinite(v) || v < 0)
		bad_space(key, psprintf("\"%s\" is not a number of 0 or more", text));
	return v;
}

/* Override dims with the keys of space, through jsonb's own functions. */
static void
parse_space(Jsonb *space, TuneDim *dims)
{
	Oid			type = JSONBOID;
	Datum		arg = JsonbPGetDatum(space);
	SPITupleTable *keys;

	if (wals_sql("SELECT key, pg_catalog.jsonb_typeof(value), value FROM pg_catalog.jsonb_each($1)",
				 1, &type, &arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "wals: could not read \"space\"");
	keys = SPI_tuptable;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *key = SPI_getvalue(keys->vals[r], keys->tupdesc, 1);
		char	   *kind = SPI_getvalue(keys->vals[r], keys->tupdesc, 2);
		bool		isnull;
		Datum		value = SPI_getbinval(keys->vals[r], keys->tupdesc, 3, &isnull);
		TuneDim    *d = NULL;
		uint64		n = SPI_processed;

		for (int k = 0; k < NDIMS; k++)
			if (strcmp(key, dims[k].name) == 0)
				d = &dims[k];
		if (d == NULL)
			bad_space(key, "not a parameter wals_tune searches (factors, regularization, regularization_exponent, unobserved_weight, alpha, init_std)");
		if (strcmp(kind, "array") == 0)
		{
			SPITupleTable *items;

			if (wals_sql("SELECT pg_catalog.jsonb_array_elements($1)"
						 " OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[]",
						 1, &type, &value, NULL, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "wals: could not read \"space\"");
			items = SPI_tuptable;
			if (SPI_processed == 0 || SPI_processed > TUNE_CHOICES)
				bad_space(key, psprintf("give 1 to %d values", TUNE_CHOICES));
			d->nchoices = (int) SPI_processed;
			for (uint64 i = 0; i < SPI_processed; i++)
				d->choices[i] = space_value(key, SPI_getvalue(items->vals[i], items->tupdesc, 1),
											d == &dims[DIM_EXPONENT]);
			SPI_freetuptable(items);
		}
		else if (strcmp(kind, "object") == 0 && !d->integer && d != &dims[DIM_EXPONENT])
		{
			SPITupleTable *range;

			if (wals_sql("SELECT $1 OPERATOR(pg_catalog.->>) 'min'::pg_catalog.text,"
						 " $1 OPERATOR(pg_catalog.->>) 'max'::pg_catalog.text",
						 1, &type, &value, NULL, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "wals: could not read \"space\"");
			range = SPI_tuptable;
			d->nchoices = 0;
			d->min = space_value(key, SPI_getvalue(range->vals[0], range->tupdesc, 1), false);
			d->max = space_value(key, SPI_getvalue(range->vals[0], range->tupdesc, 2), false);
			if (!(d->min <= d->max) || (d->min == 0 && d->max == 0))
				bad_space(key, "give a range with 0 <= min <= max, max above 0");
			SPI_freetuptable(range);
		}
		else
			bad_space(key, d->integer || d == &dims[DIM_EXPONENT] ?
					  "give an array of values" : "give an array of values or a range");
		SPI_processed = n;
	}
}

/* The solver of a trial, and what wraps it: see TUNE_SUBSPACE_FACTORS. */
static WalsSolver
trial_solver(const TuneTrial *t)
{
	return t->v[DIM_FACTORS] >= TUNE_SUBSPACE_FACTORS ? WALS_SUBSPACE : WALS_CG;
}

static WalsAccelerate
trial_accelerate(const TuneTrial *t)
{
	return trial_solver(t) == WALS_SUBSPACE ? WALS_ACCEL_NCG : WALS_ACCEL_NONE;
}

/* The trial's parameters as jsonb text, NULL exponent as null. */
static char *
trial_json(const TuneTrial *t)
{
	return psprintf("{\"factors\": %d, \"regularization\": %.6g, \"regularization_exponent\": %s,"
					" \"unobserved_weight\": %.6g, \"alpha\": %.6g, \"init_std\": %.6g,"
					" \"solver\": \"%s\", \"accelerate\": \"%s\", \"configuration\": %d,"
					" \"max_iterations\": %d}",
					(int) t->v[DIM_FACTORS], t->v[DIM_REGULARIZATION],
					isnan(t->v[DIM_EXPONENT]) ? "null" : psprintf("%.6g", t->v[DIM_EXPONENT]),
					t->v[DIM_UNOBSERVED], t->v[DIM_ALPHA], t->v[DIM_INIT_STD],
					wals_solver_name(trial_solver(t)), wals_accelerate_name(trial_accelerate(t)),
					t->config + 1, t->max_iterations);
}

/* A training of wals_tune's, as wals_call_from_c runs it. */
typedef struct TuneTraining
{
	WalsTrainRequest req;
	WalsTrainSummary summary;
} TuneTraining;

static void
run_training(void *arg)
{
	TuneTraining *tt = arg;

	wals_train_run(&tt->req, &tt->summary);
}

/*
 * Train model with the trial's parameters, base's source and seed, through
 * wals_train's entry point, counted as a call of it: with a validation
 * share, to at most TUNE_MAX_ITERATIONS, or without one, for iterations.
 * Trials differ in width, and the model tuned takes the best one's: each
 * training may replace the model of the name it trains.
 */
static void
train_with(const WalsTrainRequest *base, const char *model, const TuneTrial *t,
		   double validation, const char *metric, int iterations, bool trial,
		   const WalsDeadline *deadline, WalsTrainSummary *summary)
{
	TuneTraining tt;

	tt.req = *base;
	tt.req.trial = trial;
	tt.req.deadline = *deadline;
#define SET(arg, datum) (tt.req.value[arg] = (datum), tt.req.isnull[arg] = false)
	SET(WALS_ARG_MODEL, CStringGetTextDatum(model));
	SET(WALS_ARG_FACTORS, Int32GetDatum((int32) t->v[DIM_FACTORS]));
	SET(WALS_ARG_ITERATIONS, Int32GetDatum(iterations));
	SET(WALS_ARG_REGULARIZATION, Float4GetDatum((float) t->v[DIM_REGULARIZATION]));
	SET(WALS_ARG_ALPHA, Float4GetDatum((float) t->v[DIM_ALPHA]));
	SET(WALS_ARG_UNOBSERVED_WEIGHT, Float4GetDatum((float) t->v[DIM_UNOBSERVED]));
	if (!isnan(t->v[DIM_EXPONENT]))
		SET(WALS_ARG_REGULARIZATION_EXPONENT, Float4GetDatum((float) t->v[DIM_EXPONENT]));
	SET(WALS_ARG_INIT_STD, Float4GetDatum((float) t->v[DIM_INIT_STD]));
	if (validation > 0)
	{
		SET(WALS_ARG_VALIDATION, Float4GetDatum((float) validation));
		SET(WALS_ARG_PATIENCE, Int32GetDatum(TUNE_PATIENCE));
		SET(WALS_ARG_VALIDATION_METRIC, CStringGetTextDatum(metric));
	}
	SET(WALS_ARG_SOLVER, CStringGetTextDatum(wals_solver_name(trial_solver(t))));
	SET(WALS_ARG_ACCELERATE, CStringGetTextDatum(wals_accelerate_name(trial_accelerate(t))));
#undef SET
	wals_call_allow_write();
	wals_call_from_c(run_training, &tt, "wals_train", true);
	if (wals_call_depth() > 0)
		wals_call_new_snapshot();
	*summary = tt.summary;
}

/* Train config's trial as model: checked, read and trained, not stored. */
static void
train_trial(const WalsTrainRequest *base, const char *model, TuneTrial *t, double validation,
			const char *metric, bool lower, int iterations, const WalsDeadline *deadline)
{
	WalsTrainSummary summary;

	train_with(base, model, t, validation, metric, iterations, true, deadline, &summary);
	t->score = summary.validation_score;
	if (!lower && isnan(t->score))
		t->score = 0;
	t->rank = isnan(t->score) ? -INFINITY : lower ? -t->score : t->score;
	t->best_iteration = summary.best_iteration;
	t->iterations = summary.iterations;
	t->seconds = summary.train_s;
	t->validation_s = summary.validation_s;
	t->load_s = summary.load_s;
	t->rows = summary.users + summary.items;
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

/* One tuning's search: what every trial needs, and the trials run so far. */
typedef struct TuneRun
{
	const WalsTrainRequest *base;	/* the source, its columns, the seed */
	const char *trial_model;
	const char *shown;
	const char *metric;
	const WalsModelName *mn;	/* the model tuned, its schema resolved */
	bool		lower;			/* better lower (rmse) */
	double		validation;
	instr_time	start;
	double		budget_s;
	int			max_trials;
	int64		tuning;			/* its number in wals_tuning_log */
	bool		commits;		/* wals_tune_concurrently's: a trial a transaction */
	WalsKeptRatings kept;		/* the ratings, read by the first trial */
	TuneTrial  *trials;
	int			n;
	int			best;
} TuneRun;

/* What a step of a tuning works on: its run, and a trial of it (from 0). */
typedef struct TuneStep
{
	TuneRun    *run;
	int			trial;
} TuneStep;

/*
 * Run fn(step) as a call of wals_tune's own, with a snapshot of its own,
 * as its trainings are: between the transactions of wals_tune_concurrently
 * no call is running.
 */
static void
tune_step(void (*fn) (void *arg), TuneStep *step)
{
	wals_call_allow_write();
	wals_call_from_c(fn, step, "wals_tune", true);
}

/*
 * Write trial step->trial into wals_tuning_log as the catalog's writer,
 * not chosen (mark_chosen marks the one the model is trained with), as
 * soon as it ends: the trials that wals_tune_concurrently committed stay
 * in the log should it stop before its end.
 */
static void
log_trial(void *arg)
{
	TuneStep   *step = arg;
	TuneRun    *run = step->run;
	const TuneTrial *t = &run->trials[step->trial];
	WalsRoleSave save;
	Oid			types[10] = {NAMEOID, TEXTOID, INT8OID, INT4OID, JSONBOID, TEXTOID, FLOAT8OID,
		INT4OID, FLOAT8OID, BOOLOID};
	Datum		values[10];

	wals_spi_connect();
	values[0] = DirectFunctionCall1(namein, CStringGetDatum(run->mn->schema));
	values[1] = CStringGetTextDatum(run->mn->name);
	values[2] = Int64GetDatum(run->tuning);
	values[3] = Int32GetDatum(step->trial + 1);
	values[4] = DirectFunctionCall1(jsonb_in, CStringGetDatum(trial_json(t)));
	values[5] = CStringGetTextDatum(run->metric);
	values[6] = Float8GetDatum(t->score);
	values[7] = Int32GetDatum(t->best_iteration);
	values[8] = wals_seconds_datum(t->seconds);
	values[9] = BoolGetDatum(false);
	wals_become_catalog_writer(&save);
	wals_spi_exec(psprintf("INSERT INTO %s (schema, model, tuning, trial, parameters, metric,"
						   " value, iterations, seconds, chosen)"
						   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
						   wals_catalog_table("wals_tuning_log")),
				  10, types, values, SPI_OK_INSERT);
	wals_unbecome(&save);
	SPI_finish();
}

/* Mark trial step->trial in wals_tuning_log as the one the model took. */
static void
mark_chosen(void *arg)
{
	TuneStep   *step = arg;
	TuneRun    *run = step->run;
	WalsRoleSave save;
	Oid			types[4] = {NAMEOID, TEXTOID, INT8OID, INT4OID};
	Datum		values[4];

	wals_spi_connect();
	values[0] = DirectFunctionCall1(namein, CStringGetDatum(run->mn->schema));
	values[1] = CStringGetTextDatum(run->mn->name);
	values[2] = Int64GetDatum(run->tuning);
	values[3] = Int32GetDatum(step->trial + 1);
	wals_become_catalog_writer(&save);
	wals_spi_exec(psprintf("UPDATE %s SET chosen = true"
						   " WHERE schema OPERATOR(pg_catalog.=) $1"
						   " AND model OPERATOR(pg_catalog.=) $2"
						   " AND tuning OPERATOR(pg_catalog.=) $3"
						   " AND trial OPERATOR(pg_catalog.=) $4",
						   wals_catalog_table("wals_tuning_log")),
				  4, types, values, SPI_OK_UPDATE);
	wals_unbecome(&save);
	SPI_finish();
}

/*
 * The seconds an iteration of trial t took, and what training its
 * parameters on every rating and storing the model will take, with a
 * tenth more for what the estimate misses.
 */
static double
iteration_s(const TuneTrial *t)
{
	return Max(t->seconds - t->validation_s, 0) / Max(t->iterations, 1);
}

static double
final_s(const TuneRun *run, const TuneTrial *t)
{
	return 1.1 * (t->load_s +
				  iteration_s(t) * Max(t->best_iteration, 1) / (1 - run->validation) +
				  wals_store_estimate_s(t->rows, (int) t->v[DIM_FACTORS]));
}

/*
 * Whether another trial, next (NULL: one as wide as the best so far), fits:
 * a read of the source and its first iteration, estimated from the best's
 * by the square of their widths, before only the best's final training is
 * left of the budget.  The first trial always runs.
 */
static bool
budget_left(const TuneRun *run, const TuneTrial *next)
{
	const TuneTrial *best = &run->trials[run->best];
	double		first;

	if (run->n >= run->max_trials)
		return false;
	if (run->n == 0)
		return true;
	/* the first iteration of next, as the best's scaled by f^2 (CG) */
	first = iteration_s(best);
	if (next != NULL)
		first *= pow(next->v[DIM_FACTORS] / best->v[DIM_FACTORS], 2);
	return wals_seconds_since(run->start) + best->load_s + first + final_s(run, best) <
		run->budget_s;
}

/*
 * The next trial's deadline: it stops once no more than the final training
 * is left of the budget, its own, were it the best (its seconds so far on
 * the whole ratings, with a tenth more), or the best's so far.
 */
static WalsDeadline
trial_deadline(const TuneRun *run)
{
	WalsDeadline d;

	d.since = run->start;
	d.budget_s = run->budget_s;
	d.reserve_s = run->n == 0 ? 0 : final_s(run, &run->trials[run->best]);
	d.own_factor = 1.1 / (1 - run->validation);
	return d;
}

/* Train config for at most max_iterations into the next trial. */
static void
run_trial(TuneRun *run, TuneTrial *config, int max_iterations)
{
	TuneTrial  *t = &run->trials[run->n];
	TuneTrial  *best = &run->trials[run->best];
	WalsDeadline deadline;
	TuneStep	step;

	CHECK_FOR_INTERRUPTS();
	*t = *config;
	t->max_iterations = max_iterations;
	wals_work_trial(run->n + 1, run->max_trials, run->budget_s);
	wals_progress_context(run->n == 0 ?
						  psprintf("wals_tune: model %s, trial 1, %.0f s of %.0f s spent",
								   run->shown, wals_seconds_since(run->start), run->budget_s) :
						  psprintf("wals_tune: model %s, trial %d, %.0f s of %.0f s spent; best %s %.4f (trial %d)",
								   run->shown, run->n + 1, wals_seconds_since(run->start),
								   run->budget_s, run->metric, best->score, run->best + 1));
	deadline = trial_deadline(run);
	train_trial(run->base, run->trial_model, t, run->validation, run->metric, run->lower,
				max_iterations, &deadline);
	config->score = t->score;
	config->rank = t->rank;
	if (run->n == 0 || t->rank > best->rank)
		run->best = run->n;
	ereport(NOTICE,
			(errmsg("wals_tune trial %d: %s %.4f after %d iterations, in %.1f s (%.1f s of it scoring the validation)",
					run->n + 1, run->metric, t->score, t->best_iteration, t->seconds,
					t->validation_s),
			 errdetail("Parameters %s; the best so far is trial %d (%.4f).", trial_json(t),
					   run->best + 1, run->trials[run->best].score)));
	step.run = run;
	step.trial = run->n++;
	tune_step(log_trial, &step);
	if (run->commits)
		SPI_commit();
}

/* Narrowest first, then in the order sampled. */
static int
cheaper(const void *a, const void *b)
{
	const TuneTrial *x = a;
	const TuneTrial *y = b;

	if (x->v[DIM_FACTORS] != y->v[DIM_FACTORS])
		return x->v[DIM_FACTORS] < y->v[DIM_FACTORS] ? -1 : 1;
	return x->config - y->config;
}

/* The better score first (by rank), then in the order sampled. */
static int
better(const void *a, const void *b)
{
	const TuneTrial *x = a;
	const TuneTrial *y = b;

	if (x->rank != y->rank)
		return x->rank > y->rank ? -1 : 1;
	return x->config - y->config;
}

/*
 * Brackets of successive halving until the budget or max_trials ends the
 * search: each round trains its configurations, cheapest first, and the
 * best third of them goes on to the next with three times the iterations.
 */
static void
search(TuneRun *run, const TuneDim *dims, int seed)
{
	for (int bracket = 0; budget_left(run, NULL); bracket++)
	{
		TuneTrial	round[TUNE_BRACKET];
		int			nround = TUNE_BRACKET;
		int			iterations = TUNE_FIRST_ITERATIONS;

		memset(round, 0, sizeof(round));
		for (int j = 0; j < TUNE_BRACKET; j++)
		{
			round[j].config = bracket * TUNE_BRACKET + j;
			sample_trial(dims, seed, round[j].config, &round[j]);
		}
		for (int r = 0; r < TUNE_ROUNDS; r++)
		{
			if (r == TUNE_ROUNDS - 1)
				iterations = TUNE_MAX_ITERATIONS;
			qsort(round, nround, sizeof(TuneTrial), cheaper);
			for (int j = 0; j < nround; j++)
			{
				if (!budget_left(run, &round[j]))
					return;
				run_trial(run, &round[j], iterations);
			}
			qsort(round, nround, sizeof(TuneTrial), better);
			nround = (nround + 2) / 3;
			iterations *= 3;
		}
	}
}

/*
 * wals_tune(source regclass, user_col name, item_col name, rating_col name,
 *			 model text, metric text, validation real, budget interval,
 *			 space jsonb, seed int, max_trials int, feedback text)
 *	 RETURNS TABLE(trial int, parameters jsonb, score float8,
 *				   iterations int, seconds float8, chosen bool)
 */
/* wals_tune's arguments, checked. */
typedef struct TuneArgs
{
	char	   *metric;
	double		validation;
	double		budget_s;
	int			seed;
	int			max_trials;
	WalsFeedback feedback;
	bool		lower;			/* the metric is better lower (rmse) */
	WalsModelName mn;			/* the model tuned, its schema resolved */
	char	   *shown;			/* the model as given, for progress */
} TuneArgs;

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
		values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(trial_json(&trials[t])));
		values[2] = Float8GetDatum(trials[t].score);
		values[3] = Int32GetDatum(trials[t].best_iteration);
		values[4] = wals_seconds_datum(trials[t].seconds);
		values[5] = BoolGetDatum(t == best);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * The search, then the model trained with the best trial's parameters and
 * the trial marked chosen, in one transaction.  The final training stops
 * once one more iteration and the store would run past the budget.
 */
static void
tune_and_train(TuneRun *run, const TuneDim *dims, const TuneArgs *ta, const char *model)
{
	WalsTrainSummary summary;
	WalsDeadline last = {0};
	TuneStep	step;

	last.since = run->start;
	last.budget_s = run->budget_s;
	PG_TRY();
	{
		search(run, dims, ta->seed);
		wals_progress_context(psprintf("wals_tune: model %s, final training with trial %d's parameters",
									   ta->shown, run->best + 1));
		wals_work_trial(run->best + 1, run->max_trials, run->budget_s);
		train_with(run->base, model, &run->trials[run->best], 0, ta->metric,
				   Max(run->trials[run->best].best_iteration, 1), false, &last, &summary);
		step.run = run;
		step.trial = run->best;
		tune_step(mark_chosen, &step);
	}
	PG_CATCH();
	{
		wals_progress_context(NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	wals_progress_context(NULL);
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
	default_space(b->dims, ta->feedback);
	if (!PG_ARGISNULL(8))
		parse_space(PG_GETARG_JSONB_P(8), b->dims);
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
	tune_and_train(&run, dims, &ta, b.model);
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
	tune_and_train(&run, dims, &ta, b.model);
	wals_work_end();
	SPI_finish();

	values[0] = Int64GetDatum(run.tuning);
	values[1] = Int32GetDatum(run.best + 1);
	values[2] = Float8GetDatum(run.trials[run.best].score);
	MemoryContextDelete(cxt);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
