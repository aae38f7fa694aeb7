/*
 * workspace.c
 *	  The memory of a training: both rating matrices, both factor matrices
 *	  and their Grams, in two blocks that every engine trains from.
 *
 * The items' block holds the matrix by item, the item factors and their
 * Gram; the users' block the matrix by user, the user factors, their Gram
 * and the spare vectors.  They are allocated one after the other as the
 * matrices are built (matrices.c), so that the rows read, the items' block
 * and the users' block never all exist at once: the rows, grouped by item
 * in place and copied into the items' block, or coded and scattered into
 * it, are freed before the users' block is asked for, or, shared, hold
 * arrays of the blocks' cells.  A shared segment is backed in full when
 * it is created, so one block for everything would be, beside the rows.
 *
 * Where the ratings take at most WALS_CODES distinct values, as stars and
 * small counts do, each cell keeps a one-byte code instead of a float
 * (src/core/codebook.c), and the codebook lies in the items' block: a
 * rating then takes 10 bytes in the two matrices, not 16.  The GPU engine
 * reads floats, and gets them.
 *
 * When parallel workers are asked for, each block is a dynamic shared
 * memory segment, which the workers of the CPU engine attach to by its
 * handle and the shape; otherwise it is private memory of the training's
 * context.  The memory the whole training needs is checked against
 * wals.max_memory before either is allocated.
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

/* The bytes of one array of a block's cells. */
static Size
cell_array_bytes(const WalsWorkspaceShape *sh, WalsCellArray a)
{
	Size		value = sh->coded ? sizeof(uint8) : sizeof(float);

	return Max((Size) sh->cells * (a == WALS_CELLS_INDICES ? sizeof(int32) : value), 1);
}

/* The bytes of an array of a block's cells, from one section boundary to the next. */
static Size
cell_array_room(const WalsWorkspaceShape *sh, WalsCellArray a)
{
	return TYPEALIGN(WALS_ALIGN, cell_array_bytes(sh, a));
}

/*
 * The bytes of both arrays of a block's cells, as the block lays them out:
 * the part a training out of core keeps in a file.
 */
static Size
cells_bytes(const WalsWorkspaceShape *sh)
{
	return cell_array_room(sh, WALS_CELLS_INDICES) + cell_array_room(sh, WALS_CELLS_VALUES);
}

/* Whether array a of block's cells lies in a segment of its own. */
static bool
cells_apart(const WalsWorkspaceShape *sh, WalsBlock block, WalsCellArray a)
{
	return sh->cells_handle[block][a] != DSM_HANDLE_INVALID;
}

/*
 * Where array a of block's cells starts, from the block's cells: after
 * the arrays before it that the block holds, or its end where every array
 * is apart; each starts on a section's boundary.
 */
static Size
cells_offset(const WalsWorkspaceShape *sh, WalsBlock block, int a)
{
	Size		off = 0;

	for (int k = 0; k < a; k++)
		if (!cells_apart(sh, block, (WalsCellArray) k))
			off += cell_array_room(sh, (WalsCellArray) k);
	return off;
}

static void
plan_layout(WalsWorkspaceShape *shape)
{
	WalsWorkspaceLayout *l = &shape->layout;
	int			f = shape->factors;
	Size		off = 0;

	l->y = add_section(&off, (Size) shape->nitems * f * sizeof(float));
	l->gy = add_section(&off, (Size) f * f * sizeof(float));
	l->item_indptr = add_section(&off, (Size) (shape->nitems + 1) * sizeof(int64));
	l->codebook = add_section(&off, shape->coded ? sizeof(WalsCodebook) : 0);
	l->cells[WALS_BLOCK_ITEMS] = TYPEALIGN(WALS_ALIGN, off);
	l->total[WALS_BLOCK_ITEMS] = l->cells[WALS_BLOCK_ITEMS] + cells_bytes(shape);

	off = 0;
	l->x = add_section(&off, (Size) shape->nusers * f * sizeof(float));
	l->gx = add_section(&off, (Size) f * f * sizeof(float));
	l->user_indptr = add_section(&off, (Size) (shape->nusers + 1) * sizeof(int64));
	l->spares = add_section(&off, (Size) shape->spares * (shape->nusers + shape->nitems) *
							f * sizeof(float));
	l->cells[WALS_BLOCK_USERS] = TYPEALIGN(WALS_ALIGN, off);
	l->total[WALS_BLOCK_USERS] = l->cells[WALS_BLOCK_USERS] + cells_bytes(shape);
}

/*
 * The bytes of block that live in memory: all of it but the arrays of
 * cells apart, or, out of core, all but its cells.
 */
static Size
memory_part(const WalsWorkspaceShape *sh, WalsBlock block)
{
	return sh->layout.cells[block] +
		(sh->files ? 0 : cells_offset(sh, block, WALS_CELL_ARRAYS));
}

/* Each process's solver scratch, for the longest row the shape can have. */
static double
solver_scratch_bytes(const WalsWorkspaceShape *sh, const WalsParams *params)
{
	return sh->nusers + sh->nitems > 0 ?
		(double) wals_solve_scratch(params, wals_workspace_longest_row(sh)) * sizeof(float) : 0;
}

/*
 * Point csr's cells at the section at values: floats, or codes of the
 * codebook in the items' block.
 */
static void
map_values(const WalsWorkspace *ws, WalsCsr *csr, char *values)
{
	csr->values = ws->shape.coded ? NULL : (float *) values;
	csr->codes = ws->shape.coded ? (uint8 *) values : NULL;
	csr->codebook = ws->shape.coded ? ws->by_item.codebook : NULL;
}

/*
 * Point ws at the sections of block, mapped at base, its arrays of cells
 * at cells; the items' block comes first, as the users' matrix finds the
 * codebook there.
 */
static void
map_block(WalsWorkspace *ws, WalsBlock block, char *base, char *const *cells)
{
	const WalsWorkspaceShape *sh = &ws->shape;
	const WalsWorkspaceLayout *l = &sh->layout;

	if (block == WALS_BLOCK_ITEMS)
	{
		ws->Y = (float *) (base + l->y);
		ws->GY = (float *) (base + l->gy);
		ws->by_item.nrows = sh->nitems;
		ws->by_item.ncols = sh->nusers;
		ws->by_item.indptr = (int64 *) (base + l->item_indptr);
		ws->by_item.indices = (int32 *) cells[WALS_CELLS_INDICES];
		ws->by_item.codebook = sh->coded ? (WalsCodebook *) (base + l->codebook) : NULL;
		map_values(ws, &ws->by_item, cells[WALS_CELLS_VALUES]);
		return;
	}
	ws->X = (float *) (base + l->x);
	ws->GX = (float *) (base + l->gx);
	ws->by_user.nrows = sh->nusers;
	ws->by_user.ncols = sh->nitems;
	ws->by_user.indptr = (int64 *) (base + l->user_indptr);
	ws->by_user.indices = (int32 *) cells[WALS_CELLS_INDICES];
	map_values(ws, &ws->by_user, cells[WALS_CELLS_VALUES]);
	for (int k = 1; k <= sh->spares; k++)
		ws->spare[k] = (float *) (base + l->spares) +
			(Size) (k - 1) * (sh->nusers + sh->nitems) * sh->factors;
}

/*
 * The peak of a training.  While the matrices are built, with floats: the
 * rows read (12 bytes each) beside the scratch of their grouping by item;
 * then 8 bytes of them beside the items' block they are copied into; with
 * codes: the rows beside their codes (13 bytes), then 9 bytes of them
 * beside the items' block they are scattered into and the scratch of the
 * sorts; then both blocks and that scratch.  While the sweeps run: both
 * blocks, every process's solver scratch and what the engine keeps beside
 * them (engine_bytes).
 */
static double
estimate_bytes(const WalsWorkspaceShape *sh, const WalsParams *params, int procs,
			   double engine_bytes)
{
	const WalsWorkspaceLayout *l = &sh->layout;
	double		rows = (double) sh->cells * (sizeof(int32) * 2 + sizeof(float));
	double		coded_rows = (double) sh->cells * (sizeof(int32) * 2 + sizeof(uint8));
	double		grouped = (double) sh->cells * (sizeof(int32) + sizeof(float));
	double		blocks = (double) l->total[WALS_BLOCK_ITEMS] + l->total[WALS_BLOCK_USERS];
	double		sorts = (double) wals_csr_scratch_bytes((size_t) sh->cells);
	double		build;
	double		scratch = solver_scratch_bytes(sh, params);

	if (sh->coded)
		build = Max(rows + (double) sh->cells * sizeof(uint8),
					coded_rows + l->total[WALS_BLOCK_ITEMS] + sorts);
	else
		build = Max(rows + wals_csr_group_scratch_bytes(sh->nitems),
					grouped + l->total[WALS_BLOCK_ITEMS]);
	build = Max(build, blocks + sorts);
	return Max(build, blocks + procs * scratch + engine_bytes);
}

/*
 * The peak of a training out of core: what estimate_bytes counts less the
 * rows read and the cells, which are in temporary files; beside the
 * blocks, the grouping's scratch and the items' starts it fills, or the
 * sorts' scratch, or the sweeps'.
 */
static double
estimate_files_bytes(const WalsWorkspaceShape *sh, const WalsParams *params, int procs,
					 double engine_bytes)
{
	const WalsWorkspaceLayout *l = &sh->layout;
	double		blocks = (double) l->cells[WALS_BLOCK_ITEMS] + l->cells[WALS_BLOCK_USERS];
	double		group = (double) wals_csr_group_scratch_bytes(sh->nitems) +
		(double) (sh->nitems + 1) * sizeof(int64);
	double		build = blocks + Max(group, (double) wals_csr_scratch_bytes((size_t) sh->cells));
	double		scratch = solver_scratch_bytes(sh, params);

	return Max(build, blocks + procs * scratch + engine_bytes);
}

/* What the memory of a training of shape sh is for, in messages. */
static const char *
what_needs(const WalsWorkspaceShape *sh)
{
	return sh->files ? "the factors and scratch of a training out of core" :
		"the matrices, factors and scratch";
}

static double
estimate(const WalsWorkspaceShape *sh, const WalsParams *params, int procs, double engine_bytes)
{
	return sh->files ? estimate_files_bytes(sh, params, procs, engine_bytes) :
		estimate_bytes(sh, params, procs, engine_bytes);
}

/*
 * The least memory a training of rows rows, of at least users users and
 * items items, can need: for refusing a hopeless training before it reads
 * anything.
 */
double
wals_workspace_min_bytes(const WalsTrainArgs *args, double rows, double users, double items,
						 double engine_bytes)
{
	WalsWorkspaceShape shape = {0};

	shape.cells = (int64) rows;
	shape.nusers = (int64) Min(users, rows);
	shape.nitems = (int64) Min(items, rows);
	shape.factors = args->params.factors;
	shape.files = args->may_spill;
	shape.coded = !shape.files;
	plan_layout(&shape);
	return estimate(&shape, &args->params, 0, engine_bytes);
}

/*
 * A bound on the cells of a row of either matrix, for sizing the solvers'
 * scratch before the matrices are built: a row has at most one cell per
 * column.
 */
int64
wals_workspace_longest_row(const WalsWorkspaceShape *shape)
{
	return Min(shape->cells, Max(shape->nusers, shape->nitems));
}

/*
 * Plan the memory of a training of raw (read in read_s seconds, for the
 * NOTICE), refusing it when it exceeds wals.max_memory with engine_bytes
 * more for the engine; wals_build_matrices then allocates the blocks.
 * The matrices keep codes where may_code and raw's ratings have few
 * enough distinct values; in memory, raw keeps the codes as they are
 * taken, which the matrix by item is built from.  Where the workers took
 * them as the rows were renumbered (rows_prepare.c), they serve, and are
 * freed where may_code is not set.
 */
WalsWorkspace *
wals_workspace_create(const WalsTrainArgs *args, WalsRatings *raw, double read_s,
					  double engine_bytes, bool may_code)
{
	WalsWorkspace *ws = palloc0(sizeof(WalsWorkspace));
	WalsWorkspaceShape *sh = &ws->shape;
	double		bytes;
	int			procs = args->workers + 1;

	sh->nusers = raw->nusers;
	sh->nitems = raw->nitems;
	sh->cells = raw->n;
	sh->factors = args->params.factors;
	sh->spares = args->accelerate == WALS_ACCEL_NCG ? WALS_ACCEL_VECTORS - 1 : 0;
	if (may_code && raw->codebook != NULL)
	{
		ws->codebook = raw->codebook;
		sh->coded = true;
	}
	else if (may_code)
	{
		ws->codebook = palloc(sizeof(WalsCodebook));
		wals_codebook_init(ws->codebook);
		if (raw->spilled == NULL && !raw->codes_tried)
			wals_ratings_alloc_codes(raw);
		sh->coded = !raw->codes_tried &&
			wals_codebook_take(ws->codebook, raw->ratings, raw->n, raw->codes);
	}
	plan_layout(sh);
	ws->share = args->workers > 0;
	ws->model_display = args->model_display;
	ws->engine_bytes = engine_bytes;
	bytes = estimate_bytes(sh, &args->params, procs, engine_bytes);

	if (args->may_spill && wals_max_memory > 0 &&
		(raw->spilled != NULL || bytes > (double) wals_max_memory * 1024.0))
	{
		sh->files = true;
		bytes = estimate_files_bytes(sh, &args->params, procs, engine_bytes);
	}
	/* out of core, the matrix by item is built from the floats in files */
	if (!sh->coded || sh->files)
		wals_ratings_free_codes(raw);
	if (may_code)
		ereport(DEBUG1,
				(errmsg_internal("model \"%s\": %s%s", args->model_display,
								 sh->coded ?
								 psprintf("the ratings take one-byte codes, %d distinct values",
										  ws->codebook->n) :
								 "the ratings take floats, more distinct values than codes hold",
								 sh->files ? ", in temporary files" : "")));
	ereport(wals_call_notice_level(),
			(errmsg("training model \"%s\" on %lld rows read (%lld users, %lld items)",
					args->model_display, (long long) raw->n, (long long) raw->nusers,
					(long long) raw->nitems),
			 sh->files ?
			 errdetail("Read in %.3f s. The training needs about %s of memory, leader and workers together, and keeps its ratings in %s of temporary files: they do not fit in wals.max_memory (%s).",
					   read_s, wals_pretty_bytes(bytes),
					   wals_pretty_bytes(2.0 * cells_bytes(sh)),
					   wals_pretty_bytes((double) wals_max_memory * 1024.0)) :
			 errdetail("Read in %.3f s. The training needs about %s, leader and workers together.",
					   read_s, wals_pretty_bytes(bytes))));
	wals_memory_check(bytes, what_needs(sh));
	return ws;
}

/*
 * Whether dynamic shared memory has room for both blocks of ws, and for
 * the segments of the steps taken with the workers beside them: where
 * they are large enough for the workers to take them, the counts of a
 * transpose and the ring the rated items are packed into, at their
 * largest; else a few megabytes.  Where it has not, say that the training
 * goes without its workers.
 */
static bool
shared_room(const WalsWorkspace *ws)
{
	double		beside = ws->shape.cells >= WALS_BUILD_PARALLEL_MIN_CELLS ?
		(double) (WALS_BUILD_COUNT_BYTES + WALS_PACK_MAX_SLOTS * WALS_PACK_SLOT_BYTES) :
		8.0 * 1024 * 1024;
	double		need = (double) (memory_part(&ws->shape, WALS_BLOCK_ITEMS) +
								 memory_part(&ws->shape, WALS_BLOCK_USERS)) + beside;
	double		shared_free = wals_shared_free();

	if (shared_free < 0 || shared_free >= need)
		return true;
	ereport(NOTICE,
			(errmsg("model \"%s\" trains without its parallel workers: they would need about %s of dynamic shared memory, and /dev/shm has %s free",
					ws->model_display, wals_pretty_bytes(need), wals_pretty_bytes(shared_free)),
			 errhint("Give /dev/shm more room (in a container, docker run --shm-size), or train with workers => 0.")));
	return false;
}

/*
 * Give array a of block's cells, not yet allocated, the shared segment
 * *seg, whose contents are spent, where the block is in memory and the
 * segment large enough: false, and *seg left to the caller, where not.
 * Taken, *seg is NULL and the workspace's, detached with the block.  The
 * pages of a new segment are made and cleared as they are first written,
 * 0.7 to 0.9 s a gigabyte on a 2-core EPYC guest, where the leader has
 * faulted in those of the rows read already.
 */
bool
wals_workspace_take_segment(WalsWorkspace *ws, WalsBlock block, WalsCellArray a,
							dsm_segment **seg)
{
	if (*seg == NULL || ws->shape.files || ws->base[block] != NULL ||
		ws->cells_seg[block][a] != NULL ||
		dsm_segment_map_length(*seg) < cell_array_bytes(&ws->shape, a))
		return false;
	ws->cells_seg[block][a] = *seg;
	ws->shape.cells_handle[block][a] = dsm_segment_handle(*seg);
	*seg = NULL;
	return true;
}

/* Detach the segments that hold arrays of block's cells apart. */
static void
detach_cells(WalsWorkspace *ws, WalsBlock block)
{
	for (int a = 0; a < WALS_CELL_ARRAYS; a++)
	{
		if (ws->cells_seg[block][a] != NULL)
			dsm_detach(ws->cells_seg[block][a]);
		ws->cells_seg[block][a] = NULL;
	}
}

/*
 * Allocate block of ws: a shared segment when workers are asked for, the
 * blocks before it got one and /dev/shm has room for both, else private
 * memory; its arrays of cells where the segments given it are.
 */
void
wals_workspace_allocate(WalsWorkspace *ws, WalsBlock block)
{
	WalsWorkspaceShape *sh = &ws->shape;
	Size		bytes = memory_part(sh, block) + WALS_ALIGN;
	char	   *base;
	char	   *at;
	char	   *cells[WALS_CELL_ARRAYS];

	if (ws->share && block == WALS_BLOCK_ITEMS)
		ws->share = shared_room(ws);
	if (ws->share && (block == WALS_BLOCK_ITEMS || ws->seg[WALS_BLOCK_ITEMS] != NULL))
		ws->seg[block] = dsm_create(bytes, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (ws->seg[block] != NULL)
	{
		base = dsm_segment_address(ws->seg[block]);
		sh->handle[block] = dsm_segment_handle(ws->seg[block]);
	}
	else
		base = MemoryContextAllocHuge(CurrentMemoryContext, bytes);
	ws->base[block] = base;
	base = (char *) TYPEALIGN(WALS_ALIGN, base);
	at = base + sh->layout.cells[block];
	if (sh->files)
	{
		at = wals_temp_alloc(&ws->cells[block], cells_bytes(sh),
							 block == WALS_BLOCK_ITEMS ? "the matrix by item" :
							 "the matrix by user");
		strlcpy(sh->cells_path[block], wals_temp_path(&ws->cells[block]), MAXPGPATH);
	}
	for (int a = 0; a < WALS_CELL_ARRAYS; a++)
		cells[a] = ws->cells_seg[block][a] != NULL ?
			dsm_segment_address(ws->cells_seg[block][a]) : at + cells_offset(sh, block, a);
	map_block(ws, block, base, cells);
	if (block == WALS_BLOCK_ITEMS && sh->coded)
		memcpy(ws->by_item.codebook, ws->codebook, sizeof(WalsCodebook));
}

/*
 * Ready the matrix of block, about to be written: its pages faulted in,
 * but those of the arrays of cells apart, which the leader faulted in
 * when it read the rows; asking for huge pages is only a hint.  Out of
 * core the cells are the page cache's to stream.
 */
void
wals_workspace_prefault(const WalsWorkspace *ws, WalsBlock block)
{
	const WalsWorkspaceShape *sh = &ws->shape;
	const WalsCsr *csr = block == WALS_BLOCK_ITEMS ? &ws->by_item : &ws->by_user;
	void	   *cells[WALS_CELL_ARRAYS];
	Size		indptr_bytes = (csr->nrows + 1) * sizeof(int64);

	cells[WALS_CELLS_INDICES] = csr->indices;
	cells[WALS_CELLS_VALUES] = csr->values != NULL ? (void *) csr->values : (void *) csr->codes;
	wals_advise_huge_pages(csr->indptr, indptr_bytes);
	wals_prefault(csr->indptr, indptr_bytes);
	if (sh->files)
		return;
	for (int a = 0; a < WALS_CELL_ARRAYS; a++)
	{
		if (cells_apart(sh, block, (WalsCellArray) a))
			continue;
		wals_advise_huge_pages(cells[a], cell_array_bytes(sh, (WalsCellArray) a));
		wals_prefault(cells[a], cell_array_bytes(sh, (WalsCellArray) a));
	}
}

/*
 * Map the pages of block's cells into a parallel worker about to scatter
 * into them.  Its scatter writes all over them, and a process's first
 * write to each page of a segment that another made faults on its own,
 * 4 kB at a time: the half-gigabyte of a matrix of 100 million ratings
 * cost each new worker a quarter of a second of faults on a 2-core
 * virtual machine.  Faulting them in for reading maps sixteen pages a
 * fault, and maps them writable, as the segment is mapped, so the writes
 * after fault no more.  The pages exist by then, made by the leader, so
 * this only maps them.
 */
void
wals_workspace_map_cells(const WalsWorkspace *ws, WalsBlock block)
{
	const WalsWorkspaceShape *sh = &ws->shape;
	const WalsCsr *csr = block == WALS_BLOCK_ITEMS ? &ws->by_item : &ws->by_user;

	if (sh->files)
		return;
	wals_prefault_read(csr->indices, cell_array_bytes(sh, WALS_CELLS_INDICES));
	wals_prefault_read(csr->values != NULL ? (void *) csr->values : (void *) csr->codes,
					   cell_array_bytes(sh, WALS_CELLS_VALUES));
}

/* Free block of ws, allocated and not yet mapped by any worker. */
void
wals_workspace_free(WalsWorkspace *ws, WalsBlock block)
{
	if (ws->seg[block] != NULL)
		dsm_detach(ws->seg[block]);
	else if (ws->base[block] != NULL)
		pfree(ws->base[block]);
	if (ws->shape.files)
		wals_temp_free(&ws->cells[block]);
	detach_cells(ws, block);
	for (int a = 0; a < WALS_CELL_ARRAYS; a++)
		ws->shape.cells_handle[block][a] = DSM_HANDLE_INVALID;
	ws->seg[block] = NULL;
	ws->base[block] = NULL;
}

/*
 * Room for bytes that a training out of core keeps in a temporary file t,
 * else in the current context.  t must live in that context until it ends,
 * not on the stack: the context's end looks at it (tempfiles.c).
 */
static void *
scratch_alloc(const WalsWorkspace *ws, WalsTempArray *t, Size bytes, const char *what)
{
	if (ws->shape.files)
		return wals_temp_alloc(t, bytes, what);
	return MemoryContextAllocHuge(CurrentMemoryContext, bytes);
}

static void
scratch_free(const WalsWorkspace *ws, WalsTempArray *t, void *p)
{
	if (ws->shape.files)
		wals_temp_free(t);
	else
		pfree(p);
}

/*
 * Give up codes, when merging repeated cells made more distinct ratings
 * than they hold: the users' block is freed, the items' matrix (whose
 * cells the merge only read) is decoded aside, and the items' block is
 * allocated again with floats.  The ratings take 16 bytes at most
 * meanwhile, as they do without codes; the new plan is checked against
 * wals.max_memory again.  Out of core, the cells decoded aside are in
 * temporary files too.
 */
void
wals_workspace_uncode(const WalsTrainArgs *args, WalsWorkspace *ws)
{
	WalsWorkspaceShape *sh = &ws->shape;
	int64		nnz = ws->by_item.indptr[sh->nitems];
	Size		indptr_bytes = (sh->nitems + 1) * sizeof(int64);
	WalsTempArray *aside = palloc0(2 * sizeof(WalsTempArray));
	int64	   *indptr = MemoryContextAllocHuge(CurrentMemoryContext, indptr_bytes);
	int32	   *indices = scratch_alloc(ws, &aside[0], Max(nnz, 1) * sizeof(int32),
										"the matrix by item, aside");
	float	   *values = scratch_alloc(ws, &aside[1], Max(nnz, 1) * sizeof(float),
									   "the ratings by item, aside");

	ereport(DEBUG1,
			(errmsg_internal("model \"%s\": the ratings take floats, their repeats merged into more distinct values than codes hold",
							 args->model_display)));
	wals_workspace_free(ws, WALS_BLOCK_USERS);
	memcpy(indptr, ws->by_item.indptr, indptr_bytes);
	wals_copy_bytes(indices, ws->by_item.indices, nnz * sizeof(int32));
	wals_codebook_decode(ws->by_item.codebook, ws->by_item.codes, nnz, values);
	wals_workspace_free(ws, WALS_BLOCK_ITEMS);

	sh->coded = false;
	plan_layout(sh);
	wals_memory_check(estimate(sh, &args->params, args->workers + 1, ws->engine_bytes),
					  what_needs(sh));
	wals_workspace_allocate(ws, WALS_BLOCK_ITEMS);
	memcpy(ws->by_item.indptr, indptr, indptr_bytes);
	wals_copy_bytes(ws->by_item.indices, indices, nnz * sizeof(int32));
	wals_copy_bytes(ws->by_item.values, values, nnz * sizeof(float));
	pfree(indptr);
	scratch_free(ws, &aside[0], indices);
	scratch_free(ws, &aside[1], values);
}

/* Whether parallel workers can map ws: both blocks are shared segments. */
bool
wals_workspace_shared(const WalsWorkspace *ws)
{
	return ws->seg[WALS_BLOCK_ITEMS] != NULL && ws->seg[WALS_BLOCK_USERS] != NULL;
}

/* Map block b of ws's shape, which must exist, and its cells. */
static void
attach_block(WalsWorkspace *ws, WalsBlock b)
{
	const WalsWorkspaceShape *shape = &ws->shape;
	char	   *base;
	char	   *at;
	char	   *cells[WALS_CELL_ARRAYS];

	base = (char *) TYPEALIGN(WALS_ALIGN, wals_build_attach(shape->handle[b], &ws->seg[b]));
	at = base + shape->layout.cells[b];
	if (shape->files)
		at = unconstify(void *, wals_temp_attach(shape->cells_path[b], cells_bytes(shape)));
	for (int a = 0; a < WALS_CELL_ARRAYS; a++)
		cells[a] = cells_apart(shape, b, (WalsCellArray) a) ?
			wals_build_attach(shape->cells_handle[b][a], &ws->cells_seg[b][a]) :
			at + cells_offset(shape, b, a);
	map_block(ws, b, base, cells);
}

/*
 * Attach a parallel worker to the shared block of shape, and to the files
 * of its cells for reading; an error when either cannot be mapped.
 */
void
wals_workspace_attach(const WalsWorkspaceShape *shape, WalsWorkspace *ws)
{
	memset(ws, 0, sizeof(*ws));
	ws->shape = *shape;
	for (int b = 0; b < WALS_BLOCKS; b++)
		attach_block(ws, (WalsBlock) b);
}

/*
 * The same for the items' block alone, in memory: the build's scatter
 * shares it before the users' block exists.
 */
void
wals_workspace_attach_items(const WalsWorkspaceShape *shape, WalsWorkspace *ws)
{
	memset(ws, 0, sizeof(*ws));
	ws->shape = *shape;
	Assert(!shape->files);
	attach_block(ws, WALS_BLOCK_ITEMS);
}

/* Release the blocks; the factors must have been stored. */
void
wals_workspace_release(WalsWorkspace *ws)
{
	for (int b = 0; b < WALS_BLOCKS; b++)
	{
		if (ws->seg[b] != NULL)
			dsm_detach(ws->seg[b]);
		ws->seg[b] = NULL;
		detach_cells(ws, (WalsBlock) b);
		if (ws->shape.files)
			wals_temp_free(&ws->cells[b]);
	}
}
