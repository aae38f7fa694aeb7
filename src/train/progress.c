/*
 * progress.c
 *	  What a training says as it goes, on any device: the per-iteration
 *	  NOTICE and log, the early stop, and the progress text that other
 *	  sessions see in pg_stat_activity.
 */
#include "postgres.h"

#include <math.h>

#include "pgstat.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"

#include "wals_train.h"

/* What calls the training, such as wals_tune's trial; empty: the statement. */
static char progress_context[256];

void
wals_progress_context(const char *context)
{
	strlcpy(progress_context, context ? context : "", sizeof(progress_context));
}

/*
 * Tell other sessions how far the training got: pg_stat_activity shows it
 * in the query column while the training runs.
 */
void
wals_report_progress(const WalsTrainArgs *args, int it, const char *phase,
					 const WalsTrainResult *result)
{
	char		buf[768];
	int			len = 0;

	if (progress_context[0] != '\0')
		len = snprintf(buf, sizeof(buf), "%s: ", progress_context);
	if (it == 0)
		snprintf(buf + len, sizeof(buf) - len, "wals_train: model \"%s\", iteration 1 of %d, %s",
				 args->model_display, args->iterations, phase);
	else
		snprintf(buf + len, sizeof(buf) - len,
				 "wals_train: model \"%s\", iteration %d of %d, %s; loss %.6g after iteration %d (%.3f s)",
				 args->model_display, it + 1, args->iterations, phase, result->iteration_loss[it - 1],
				 it, result->iteration_seconds[it - 1]);
	pgstat_report_activity(STATE_RUNNING, buf);
}

/* Put the statement back in pg_stat_activity once the sweeps are over. */
void
wals_report_progress_end(void)
{
	if (debug_query_string != NULL)
		pgstat_report_activity(STATE_RUNNING, debug_query_string);
}

/* Room for the per-iteration log of result. */
void
wals_iterations_begin(const WalsTrainArgs *args, WalsTrainResult *result)
{
	result->iterations = 0;
	result->iteration_loss = palloc(sizeof(double) * args->iterations);
	result->iteration_seconds = palloc(sizeof(double) * args->iterations);
	result->iteration_ncg = palloc0(sizeof(bool) * args->iterations);
	result->iteration_score = palloc(sizeof(double) * args->iterations);
}

/*
 * Whether loss, iteration it's, improved on the previous iteration's by
 * less than the tolerance, relative to it: the training stops there.
 */
bool
wals_loss_flat(const WalsTrainArgs *args, const WalsTrainResult *result, int it, double loss)
{
	if (it == 0 || args->tolerance < 0)
		return false;
	return (result->iteration_loss[it - 1] - loss) <
		args->tolerance * fabs(result->iteration_loss[it - 1]);
}

/*
 * Record iteration it (from 0) with its loss, the step of ALS-NCG beyond
 * its sweep (0 for none) and its duration, say so in a NOTICE (DEBUG1 in
 * a training of wals_tune, which reports its trials itself), and return
 * true when the training should stop early: the loss improved by less
 * than the tolerance, relative to the previous one.
 */
bool
wals_iteration_done(const WalsTrainArgs *args, WalsTrainResult *result, int it,
					double loss, double step, double score, double seconds)
{
	result->loss = loss;
	result->iteration_score[it] = score;
	result->iteration_loss[it] = loss;
	result->iteration_seconds[it] = seconds;
	result->iteration_ncg[it] = step > 0;
	result->iterations = it + 1;
	ereport(wals_call_notice_level(),
			(errmsg("model \"%s\" iteration %d of %d", args->model_display, it + 1,
					args->iterations),
			 errdetail("Loss %.6g after %.3f s%s%s.", loss, seconds,
					   step > 0 ? psprintf(", with a step of %.3g along the NCG direction", step) : "",
					   isnan(score) ? "" : psprintf(", validation %s %.4f", args->validation_metric,
													score))));

	return wals_loss_flat(args, result, it, loss);
}
