/*
 * engine_gpu.c
 *	  The GPU engine: the engine interface over the CUDA library of gpu/
 *	  (loaded by devices.c).
 *
 * The library uploads both matrices and the starting factors once, runs
 * each iteration on the device, hands back its exact loss, and downloads
 * the factors at the end.  Its failures come back as a kind, a side and a
 * row, which map onto the statuses of src/core, so that train.c reports
 * them exactly as it reports the CPU's; the library's own words (CUDA's)
 * go to the detail.  Whatever ends the training early first lets the
 * library free the device memory (end without X), so that a backend never
 * keeps a GPU's memory for a training that is over.
 *
 * An accelerated training (ALS-NCG) keeps its spare vectors on the device
 * beside the factors, numbered as the engine interface numbers them, so
 * that the combinations, the dot products and the line's quartic never
 * move a vector between host and device.
 */
#include "postgres.h"

#include "wals_train.h"
#include "wals_cuda.h"

/* The engine interface's vectors and line are the library's. */
StaticAssertDecl(WALS_VEC_FACTORS == 0, "vector 0 is the factors in both");
StaticAssertDecl(WALS_ACCEL_VECTORS - 1 <= WALS_CUDA_MAX_VECTORS,
				 "the library keeps every spare an accelerated training needs");
StaticAssertDecl(WALS_LINE_TERMS == WALS_CUDA_LINE_TERMS,
				 "a line's quartic has as many terms in both");

typedef struct GpuEngine
{
	const WalsCudaApi *cuda;
	void	   *training;
	WalsProblem *problem;
	instr_time	begun;
	double		upload_s;
	bool		cells_on_host;	/* the GPU reads the cells from host memory */
} GpuEngine;

static void
describe_problem(const WalsProblem *problem, WalsCudaProblem *p)
{
	const WalsParams *params = &problem->args->params;
	const WalsData *data = problem->data;

	p->device = 0;
	p->feedback = params->feedback == WALS_EXPLICIT ? 1 : 0;
	p->solver = params->solver == WALS_CG ? WALS_CUDA_CG :
		params->solver == WALS_SUBSPACE ? WALS_CUDA_SUBSPACE : WALS_CUDA_CHOLESKY;
	p->factors = params->factors;
	p->cg_steps = params->cg_steps;
	p->block_size = params->block_size;
	p->vectors = problem->accelerate ? WALS_ACCEL_VECTORS - 1 : 0;
	p->regularization = params->regularization;
	p->alpha = params->alpha;
	p->w0 = params->w0;
	p->frequency_scaled = params->frequency_scaled ? 1 : 0;
	p->reg_exponent = params->reg_exponent;
	p->nusers = data->nusers;
	p->nitems = data->nitems;
	p->user_indptr = data->by_user.indptr;
	p->user_indices = data->by_user.indices;
	p->user_values = data->by_user.values;
	p->item_indptr = data->by_item.indptr;
	p->item_indices = data->by_item.indices;
	p->item_values = data->by_item.values;
	p->X = problem->X;
	p->Y = problem->Y;
	/* cells in temporary files are the page cache's to stream, not to pin */
	p->may_map_cells = !problem->workspace->shape.files;
}

/* The library's failure as the failure of any engine. */
static bool
failed(const WalsCudaError *err, WalsFailure *failure)
{
	switch (err->code)
	{
		case WALS_CUDA_ESINGULAR:
			failure->status = WALS_ESINGULAR;
			break;
		case WALS_CUDA_ENONFINITE:
			failure->status = WALS_ENONFINITE;
			break;
		case WALS_CUDA_ENOMEM:
			failure->status = WALS_ENOMEM;
			break;
		case WALS_CUDA_EINVAL:
			failure->status = WALS_EINVAL;
			break;
		default:
			failure->status = WALS_EDEVICE;
			break;
	}
	failure->side = err->side == WALS_CUDA_USERS ? WALS_SIDE_USERS :
		err->side == WALS_CUDA_ITEMS ? WALS_SIDE_ITEMS : WALS_SIDE_NONE;
	failure->row = failure->side == WALS_SIDE_NONE ? -1 : err->row;
	strlcpy(failure->detail, err->msg, sizeof(failure->detail));
	return false;
}

static bool
gpu_begin(WalsProblem *problem, void **state, WalsFailure *failure)
{
	GpuEngine  *e = palloc0(sizeof(GpuEngine));
	WalsCudaProblem p;
	WalsCudaError err = {0};

	e->cuda = wals_cuda_api();
	e->problem = problem;
	describe_problem(problem, &p);
	problem->phase(problem->phase_arg, WALS_PHASE_GPU_UPLOAD, 0, "uploading to the GPU");
	INSTR_TIME_SET_CURRENT(e->begun);
	if (e->cuda->train_begin(&p, &e->training, &err) != 0)
		return failed(&err, failure);
	e->upload_s = wals_seconds_since(e->begun);
	e->cells_on_host = e->cuda->train_cells_on_host(e->training) != 0;
	if (e->cells_on_host)
		ereport(DEBUG1,
				(errmsg_internal("model \"%s\": the GPU reads the ratings from host memory, where they are pinned: they do not fit in its own",
								 problem->args->model_display)));
	problem->workers = 0;
	*state = e;
	return true;
}

static bool
gpu_iterate(void *state, double *loss, WalsFailure *failure)
{
	GpuEngine  *e = state;
	WalsCudaError err = {0};
	double		unused;

	e->problem->phase(e->problem->phase_arg, WALS_PHASE_GPU_SWEEP, 0, "sweeping on the GPU");
	if (e->cuda->train_iterate(e->training, loss != NULL ? loss : &unused, &err) != 0)
		return failed(&err, failure);
	return true;
}

static bool
gpu_factors(void *state, float *X, float *Y, WalsFailure *failure)
{
	GpuEngine  *e = state;
	WalsCudaError err = {0};

	if (e->cuda->train_download(e->training, X, Y, &err) != 0)
		return failed(&err, failure);
	return true;
}

static bool
gpu_end(void *state, float *X, float *Y, WalsFailure *failure)
{
	GpuEngine  *e = state;
	WalsCudaError err = {0};
	instr_time	start;

	if (e == NULL)
		return true;
	INSTR_TIME_SET_CURRENT(start);
	if (e->cuda->train_end(e->training, X, Y, &err) != 0)
		return X == NULL || failed(&err, failure);
	if (X != NULL)
		ereport(wals_call_notice_level(),
				(errmsg("model \"%s\" trained on the GPU", e->problem->args->model_display),
				 e->cells_on_host ?
				 errdetail("Uploaded in %.3f s, downloaded in %.3f s. The ratings did not fit in the GPU's memory: it read them from host memory, pinned.",
						   e->upload_s, wals_seconds_since(start)) :
				 errdetail("Uploaded in %.3f s, downloaded in %.3f s.",
						   e->upload_s, wals_seconds_since(start))));
	return true;
}

static bool
gpu_combine(void *state, int dst, double a, int x, double b, int y, WalsFailure *failure)
{
	GpuEngine  *e = state;
	WalsCudaError err = {0};

	if (e->cuda->train_combine(e->training, dst, a, x, b, y, &err) != 0)
		return failed(&err, failure);
	return true;
}

static bool
gpu_dot(void *state, int x, int y, double *out, WalsFailure *failure)
{
	GpuEngine  *e = state;
	WalsCudaError err = {0};

	if (e->cuda->train_dot(e->training, x, y, out, &err) != 0)
		return failed(&err, failure);
	return true;
}

static bool
gpu_line(void *state, int base, int dir, double coef[WALS_LINE_TERMS], WalsFailure *failure)
{
	GpuEngine  *e = state;
	WalsCudaError err = {0};

	if (e->cuda->train_line(e->training, base, dir, coef, &err) != 0)
		return failed(&err, failure);
	return true;
}

const WalsEngine wals_gpu_engine = {
	.name = "gpu",
	.begin = gpu_begin,
	.iterate = gpu_iterate,
	.factors = gpu_factors,
	.end = gpu_end,
	.combine = gpu_combine,
	.dot = gpu_dot,
	.line = gpu_line,
};
