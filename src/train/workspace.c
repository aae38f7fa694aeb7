/*
 * workspace.c
 *	  The memory of a training: both rating matrices, both factor matrices
 *	  and their Grams, in one block that every engine trains from.
 *
 * When parallel workers are asked for, the block is a dynamic shared memory
 * segment, which the workers of the CPU engine attach to by its handle and
 * its shape; otherwise it is private memory of the training's context.  It
 * is planned and allocated before the matrices are built, so that they are
 * built in place, and the memory the whole training needs is checked
 * against wals.max_memory first.
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "wals_train.h"

/* Sections of the block start on cache-line boundaries. */
#define WALS_ALIGN				64

static Size
add_section(Size *offset, Size bytes)
{
	Size		at = TYPEALIGN(WALS_ALIGN, *offset);

	*offset = at + Max(bytes, 1);
	return at;
}

static void
plan_layout(WalsWorkspaceShape *shape)
{
	WalsWorkspaceLayout *l = &shape->layout;
	int64		cells = shape->cells;
	int			f = shape->factors;
	Size		off = 0;

	l->x = add_section(&off, (Size) shape->nusers * f * sizeof(float));
	l->y = add_section(&off, (Size) shape->nitems * f * sizeof(float));
	l->gx = add_section(&off, (Size) f * f * sizeof(float));
	l->gy = add_section(&off, (Size) f * f * sizeof(float));
	l->user_indptr = add_section(&off, (Size) (shape->nusers + 1) * sizeof(int64));
	l->user_indices = add_section(&off, (Size) cells * sizeof(int32));
	l->user_values = add_section(&off, (Size) cells * sizeof(float));
	l->item_indptr = add_section(&off, (Size) (shape->nitems + 1) * sizeof(int64));
	l->item_indices = add_section(&off, (Size) cells * sizeof(int32));
	l->item_values = add_section(&off, (Size) cells * sizeof(float));
	l->spares = add_section(&off, (Size) shape->spares * (shape->nusers + shape->nitems) *
							f * sizeof(float));
	l->total = TYPEALIGN(WALS_ALIGN, off);
}

/* Point ws at the sections of the block at base. */
static void
map_sections(WalsWorkspace *ws, char *base)
{
	const WalsWorkspaceShape *sh = &ws->shape;
	const WalsWorkspaceLayout *l = &sh->layout;

	ws->X = (float *) (base + l->x);
	ws->Y = (float *) (base + l->y);
	ws->GX = (float *) (base + l->gx);
	ws->GY = (float *) (base + l->gy);
	ws->by_user.nrows = sh->nusers;
	ws->by_user.ncols = sh->nitems;
	ws->by_user.indptr = (int64 *) (base + l->user_indptr);
	ws->by_user.indices = (int32 *) (base + l->user_indices);
	ws->by_user.values = (float *) (base + l->user_values);
	ws->by_item.nrows = sh->nitems;
	ws->by_item.ncols = sh->nusers;
	ws->by_item.indptr = (int64 *) (base + l->item_indptr);
	ws->by_item.indices = (int32 *) (base + l->item_indices);
	ws->by_item.values = (float *) (base + l->item_values);
	for (int k = 1; k <= sh->spares; k++)
		ws->spare[k] = (float *) (base + l->spares) +
			(Size) (k - 1) * (sh->nusers + sh->nitems) * sh->factors;
}

/*
 * The peak of a training.  While the matrices are built, the rows read
 * (12 bytes each) and the scratch of the sorts live beside the item matrix
 * they are scattered into (8 bytes a rating), or beside the whole shared
 * segment, which is backed in full when it is created; while the sweeps
 * run, the matrices, the factors, every process's solver scratch and what
 * the engine keeps beside them (engine_bytes).
 */
static double
estimate_bytes(const WalsWorkspaceShape *sh, const WalsParams *params, int procs, bool shared,
			   double engine_bytes)
{
	double		rows = (double) sh->cells * (sizeof(int32) * 2 + sizeof(float));
	double		sorts = (double) wals_csr_scratch_bytes((size_t) sh->cells);
	double		build = rows + sorts + (shared ? (double) sh->layout.total :
								(double) sh->cells * (sizeof(int32) + sizeof(float)));
	double		scratch = sh->nusers + sh->nitems > 0 ?
		(double) wals_solve_scratch(params, sh->cells) * sizeof(float) : 0;
	double		sweeps = (double) sh->layout.total + procs * scratch + engine_bytes;

	return Max(build, sweeps);
}

/*
 * The least memory a training of rows rows can need, whatever its users and
 * items: for refusing a hopeless training before it reads anything.
 */
double
wals_workspace_min_bytes(const WalsTrainArgs *args, double rows, double engine_bytes)
{
	WalsWorkspaceShape shape = {0};

	shape.cells = (int64) rows;
	shape.factors = args->params.factors;
	plan_layout(&shape);
	return estimate_bytes(&shape, &args->params, 0, args->workers > 0, engine_bytes);
}

/*
 * Plan and allocate the memory of a training of raw (read in read_s
 * seconds, for the NOTICE), refusing it when it exceeds wals.max_memory
 * with engine_bytes more for the engine, and
 * point data's matrices at it; the caller then builds them with
 * wals_build_matrices.
 */
WalsWorkspace *
wals_workspace_create(const WalsTrainArgs *args, const WalsRatings *raw, double read_s,
					  double engine_bytes, WalsData *data)
{
	WalsWorkspace *ws = palloc0(sizeof(WalsWorkspace));
	WalsWorkspaceShape *sh = &ws->shape;
	double		estimate;
	char	   *base;

	sh->nusers = raw->nusers;
	sh->nitems = raw->nitems;
	sh->cells = raw->n;
	sh->factors = args->params.factors;
	sh->spares = args->accelerate == WALS_ACCEL_NCG ? WALS_ACCEL_VECTORS - 1 : 0;
	plan_layout(sh);

	estimate = estimate_bytes(sh, &args->params, args->workers + 1, args->workers > 0,
							  engine_bytes);
	ereport(wals_call_notice_level(),
			(errmsg("training model \"%s\" on %lld rows read (%lld users, %lld items)",
					args->model_display, (long long) raw->n, (long long) raw->nusers,
					(long long) raw->nitems),
			 errdetail("Read in %.3f s. The training needs about %s, leader and workers together.",
					   read_s, wals_pretty_bytes(estimate))));
	wals_memory_check(estimate, "the matrices, factors and scratch");

	if (args->workers > 0)
		ws->seg = dsm_create(sh->layout.total + WALS_ALIGN, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (ws->seg != NULL)
	{
		base = dsm_segment_address(ws->seg);
		sh->handle = dsm_segment_handle(ws->seg);
	}
	else
		base = MemoryContextAllocHuge(CurrentMemoryContext, sh->layout.total + WALS_ALIGN);
	map_sections(ws, (char *) TYPEALIGN(WALS_ALIGN, base));

	data->by_user = ws->by_user;
	data->by_item = ws->by_item;
	return ws;
}

/*
 * Attach a parallel worker to the shared block of shape; an error when it
 * cannot be mapped.
 */
void
wals_workspace_attach(const WalsWorkspaceShape *shape, WalsWorkspace *ws)
{
	memset(ws, 0, sizeof(*ws));
	ws->shape = *shape;
	ws->seg = dsm_attach(shape->handle);
	if (ws->seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not map the shared memory of the training")));
	map_sections(ws, (char *) TYPEALIGN(WALS_ALIGN, dsm_segment_address(ws->seg)));
}

/* Release the block; the factors must have been stored. */
void
wals_workspace_release(WalsWorkspace *ws)
{
	if (ws->seg != NULL)
		dsm_detach(ws->seg);
	ws->seg = NULL;
}
