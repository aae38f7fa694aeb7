/*
 * engine_gpu.c
 *	  The sweeps of a training on the CUDA engine.
 *
 * The engine uploads both matrices and the starting factors once, runs each
 * iteration on the device, hands back its exact loss, and downloads the
 * factors at the end.  The host checks for a cancel between iterations, and
 * whatever ends the training early (a cancel, an error of the engine or of
 * the server) first lets the engine free the device memory, so that a
 * backend never keeps a GPU's memory for a training that is over.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "portability/instr_time.h"

#include "wals_train.h"
#include "wals_cuda.h"

static void
describe_problem(const WalsTrainArgs *args, const WalsData *data,
				 const float *X, const float *Y, WalsCudaProblem *p)
{
	p->feedback = args->params.feedback == WALS_EXPLICIT ? 1 : 0;
	p->solver = args->params.solver == WALS_CG ? WALS_CUDA_CG : WALS_CUDA_CHOLESKY;
	p->factors = args->params.factors;
	p->cg_steps = args->params.cg_steps;
	p->regularization = args->params.regularization;
	p->alpha = args->params.alpha;
	p->w0 = args->params.w0;
	p->nusers = data->nusers;
	p->nitems = data->nitems;
	p->user_indptr = data->by_user.indptr;
	p->user_indices = data->by_user.indices;
	p->user_values = data->by_user.values;
	p->item_indptr = data->by_item.indptr;
	p->item_indices = data->by_item.indices;
	p->item_values = data->by_item.values;
	p->X = X;
	p->Y = Y;
}

bool
wals_gpu_train(const WalsTrainArgs *args, const WalsData *data,
			   float *X, float *Y, WalsTrainResult *result)
{
	const WalsCudaApi *cuda = wals_cuda_api();
	WalsCudaProblem problem;
	void	   *state = NULL;
	char		msg[512] = "";
	instr_time	start;
	double		upload_s;

	describe_problem(args, data, X, Y, &problem);
	wals_report_progress(args, 0, "uploading to the GPU", result);
	INSTR_TIME_SET_CURRENT(start);
	if (cuda->train_begin(&problem, &state, msg, sizeof(msg)) != 0)
	{
		if (args->device == WALS_DEVICE_AUTO)
		{
			ereport(NOTICE,
					(errmsg("model \"%s\" trains on the CPU: the GPU engine could not start: %s",
							args->model_display, msg)));
			return false;
		}
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("the GPU engine could not start training model \"%s\": %s",
						args->model_display, msg),
				 errhint("Pass device => 'auto' to train on the CPU when the GPU cannot.")));
	}
	upload_s = wals_seconds_since(start);

	wals_iterations_begin(args, result);
	PG_TRY();
	{
		for (int it = 0; it < args->iterations; it++)
		{
			double		loss;

			CHECK_FOR_INTERRUPTS();
			INSTR_TIME_SET_CURRENT(start);
			wals_report_progress(args, it, "sweeping on the GPU", result);
			if (cuda->train_iterate(state, &loss, msg, sizeof(msg)) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
						 errmsg("the GPU engine failed in iteration %d of model \"%s\": %s",
								it + 1, args->model_display, msg),
						 errhint("Pass device => 'cpu' to train on the CPU.")));
			if (wals_iteration_done(args, result, it, loss, wals_seconds_since(start)))
				break;
		}
	}
	PG_CATCH();
	{
		char		ignored[512];

		cuda->train_end(state, NULL, NULL, ignored, sizeof(ignored));
		PG_RE_THROW();
	}
	PG_END_TRY();

	INSTR_TIME_SET_CURRENT(start);
	if (cuda->train_end(state, X, Y, msg, sizeof(msg)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("the GPU engine could not hand back the factors of model \"%s\": %s",
						args->model_display, msg)));
	wals_report_progress_end();
	ereport(NOTICE,
			(errmsg("model \"%s\" trained on the GPU", args->model_display),
			 errdetail("Uploaded in %.3f s, downloaded in %.3f s.",
					   upload_s, wals_seconds_since(start))));
	result->workers = 0;
	return true;
}
