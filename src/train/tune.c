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
 * commit together.  The space and its sampling are in tune_space.c, the
 * SQL entry points and their arguments in tune_call.c.
 *
 * The caller hears one NOTICE per trial: the trainings' own NOTICEs of
 * their progress (each iteration, the rows read) go to the server's log at
 * DEBUG1 (calls.c); wals_tuning_log keeps each trial, wals_training_log
 * the final training's iterations, and pg_stat_activity shows the one
 * under way.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "tune_internal.h"

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
	SET(WALS_ARG_SOLVER, CStringGetTextDatum(wals_solver_name(wals_tune_trial_solver(t))));
	SET(WALS_ARG_ACCELERATE, CStringGetTextDatum(wals_accelerate_name(wals_tune_trial_accelerate(t))));
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
	values[4] = DirectFunctionCall1(jsonb_in, CStringGetDatum(wals_tune_trial_json(t)));
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
			 errdetail("Parameters %s; the best so far is trial %d (%.4f).", wals_tune_trial_json(t),
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
			wals_tune_sample_trial(dims, seed, round[j].config, &round[j]);
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
 * The search, then the model trained with the best trial's parameters and
 * the trial marked chosen, in one transaction.  The final training stops
 * once one more iteration and the store would run past the budget.
 */
void
wals_tune_and_train(TuneRun *run, const TuneDim *dims, int seed, const char *model)
{
	WalsTrainSummary summary;
	WalsDeadline last = {0};
	TuneStep	step;

	last.since = run->start;
	last.budget_s = run->budget_s;
	PG_TRY();
	{
		search(run, dims, seed);
		wals_progress_context(psprintf("wals_tune: model %s, final training with trial %d's parameters",
									   run->shown, run->best + 1));
		wals_work_trial(run->best + 1, run->max_trials, run->budget_s);
		train_with(run->base, model, &run->trials[run->best], 0, run->metric,
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

