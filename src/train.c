/*
 * train.c
 *	  wals_train: ingest, alternate the two half-sweeps, store.
 *
 * The whole training runs inside the caller's transaction: ratings are read
 * with the caller's snapshot and privileges, factors live in a private
 * memory context, and the new model is written by store.c only once every
 * iteration has succeeded.  An error or a cancel anywhere unwinds the
 * transaction and leaves the previous model as it was.
 *
 * Work is handed to src/core in blocks of rows with a check for a cancel
 * between blocks; parallel workers will take the same blocks.
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "wals.h"

PG_FUNCTION_INFO_V1(wals_train);

/* The state of one training, its buffers in one memory context. */
typedef struct WalsTraining
{
	const WalsTrainArgs *args;
	const WalsData *data;
	float	   *X;				/* nusers x f */
	float	   *Y;				/* nitems x f */
	float	   *GX;				/* X^T X */
	float	   *GY;				/* Y^T Y */
	float	   *scratch;
} WalsTraining;

static double
seconds_since(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_DOUBLE(now);
}

static float *
alloc_floats(int64 count)
{
	return MemoryContextAllocHuge(CurrentMemoryContext, Max(count, 1) * sizeof(float));
}

static int64
max_row_nnz(const WalsCsr *R)
{
	int64		best = 0;

	for (int64 r = 0; r < R->nrows; r++)
		best = Max(best, R->indptr[r + 1] - R->indptr[r]);
	return best;
}

/* G = Y^T Y over all nrows rows. */
static void
compute_gram(const float *Y, int64 nrows, int f, float *G)
{
	memset(G, 0, sizeof(float) * f * f);
	for (int64 lo = 0; lo < nrows; lo += WALS_ROWS_PER_CHECK * 16)
	{
		CHECK_FOR_INTERRUPTS();
		wals_gram_rows(Y, lo, Min(nrows, lo + WALS_ROWS_PER_CHECK * 16), f, G);
	}
}

/*
 * Rows to solve between two checks for a cancel: a row costs about f^2 (CG)
 * to f^3 (Cholesky) operations, so wide models check more often and a cancel
 * still lands within a fraction of a second.
 */
static int64
rows_per_check(int f)
{
	return Max(1, Min(WALS_ROWS_PER_CHECK, (1 << 22) / ((int64) f * f)));
}

/* One half-sweep: every row of X solved against Y, whose Gram is G. */
static void
half_sweep(WalsTraining *t, const WalsCsr *R, const float *Y, const float *G,
		   float *X, const char *what)
{
	int64		step = rows_per_check(t->args->params.factors);

	for (int64 lo = 0; lo < R->nrows; lo += step)
	{
		int64		bad_row = -1;
		WalsStatus	status;

		CHECK_FOR_INTERRUPTS();
		status = wals_solve_rows(&t->args->params, R, Y, G, X, lo,
								 Min(R->nrows, lo + step), t->scratch, &bad_row);
		wals_report_core_status(status, what, bad_row);
	}
}

/* The exact objective of the current factors; GX and GY must be current. */
static double
compute_loss(WalsTraining *t)
{
	const WalsParams *params = &t->args->params;
	const WalsData *data = t->data;
	double		loss = wals_loss_unobserved(params, t->GX, t->GY);

	for (int64 lo = 0; lo < data->nusers; lo += WALS_ROWS_PER_CHECK * 16)
	{
		CHECK_FOR_INTERRUPTS();
		loss += wals_loss_rows(params, &data->by_user, t->X, t->Y, lo,
							   Min(data->nusers, lo + WALS_ROWS_PER_CHECK * 16));
	}
	loss += wals_reg_rows(params, &data->by_item, t->Y, 0, data->nitems);
	return loss;
}

static bool
converged(const WalsTrainArgs *args, double previous, double loss)
{
	if (args->tolerance < 0)
		return false;
	return (previous - loss) < args->tolerance * fabs(previous);
}

/*
 * Alternate the half-sweeps until the iterations run out or the loss stops
 * improving by more than the tolerance; fills the per-iteration log.
 */
static void
run_sweeps(WalsTraining *t, WalsTrainResult *result)
{
	const WalsTrainArgs *args = t->args;
	const WalsData *data = t->data;
	int			f = args->params.factors;

	result->iteration_loss = palloc(sizeof(double) * args->iterations);
	result->iteration_seconds = palloc(sizeof(double) * args->iterations);

	compute_gram(t->Y, data->nitems, f, t->GY);
	for (int it = 0; it < args->iterations; it++)
	{
		instr_time	start;

		INSTR_TIME_SET_CURRENT(start);
		half_sweep(t, &data->by_user, t->Y, t->GY, t->X, "solving user factors");
		compute_gram(t->X, data->nusers, f, t->GX);
		half_sweep(t, &data->by_item, t->X, t->GX, t->Y, "solving item factors");
		compute_gram(t->Y, data->nitems, f, t->GY);

		result->loss = compute_loss(t);
		result->iteration_loss[it] = result->loss;
		result->iteration_seconds[it] = seconds_since(start);
		result->iterations = it + 1;
		elog(DEBUG1, "wals: model \"%s\" iteration %d of %d: loss %.6g, %.3f s",
			 args->model, it + 1, args->iterations, result->loss,
			 result->iteration_seconds[it]);

		if (it > 0 && converged(args, result->iteration_loss[it - 1], result->loss))
			break;
	}
}

static void
train_factors(const WalsTrainArgs *args, const WalsData *data,
			  WalsTraining *t, WalsTrainResult *result)
{
	int			f = args->params.factors;
	int64		widest = Max(max_row_nnz(&data->by_user), max_row_nnz(&data->by_item));

	t->args = args;
	t->data = data;
	t->X = alloc_floats(data->nusers * f);
	t->Y = alloc_floats(data->nitems * f);
	t->GX = alloc_floats((int64) f * f);
	t->GY = alloc_floats((int64) f * f);
	t->scratch = alloc_floats(wals_solve_scratch(&args->params, widest));

	wals_init_rows(t->X, data->user_ids, 0, data->nusers, f, (uint64) args->seed, WALS_INIT_SCALE);
	wals_init_rows(t->Y, data->item_ids, 0, data->nitems, f,
				   (uint64) args->seed ^ UINT64CONST(0x9e3779b97f4a7c15), WALS_INIT_SCALE);
	if (args->warm_start)
		wals_warm_start(args, data, t->X, t->Y);
	run_sweeps(t, result);
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
	WalsData	data;
	WalsTraining training;
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

	{
		WalsRatings raw;

		wals_ingest(&args, &raw);
		data.by_user.indptr = MemoryContextAllocHuge(cxt, (raw.nusers + 1) * sizeof(int64));
		data.by_user.indices = MemoryContextAllocHuge(cxt, Max(raw.n, 1) * sizeof(int32));
		data.by_user.values = MemoryContextAllocHuge(cxt, Max(raw.n, 1) * sizeof(float));
		data.by_item.indptr = MemoryContextAllocHuge(cxt, (raw.nitems + 1) * sizeof(int64));
		data.by_item.indices = MemoryContextAllocHuge(cxt, Max(raw.n, 1) * sizeof(int32));
		data.by_item.values = MemoryContextAllocHuge(cxt, Max(raw.n, 1) * sizeof(float));
		wals_build_matrices(&args, &raw, &data);
	}
	result.load_s = seconds_since(start);

	INSTR_TIME_SET_CURRENT(phase);
	result.device = "cpu";
	result.workers = 0;
	train_factors(&args, &data, &training, &result);
	result.train_s = seconds_since(phase);

	wals_store_model(&args, &data, training.X, training.Y, &result);

	SPI_finish();
	MemoryContextSwitchTo(oldcxt);
	return_summary(fcinfo, &args, &data, &result);
	MemoryContextDelete(cxt);
	return (Datum) 0;
}
