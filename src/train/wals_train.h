/*
 * wals_train.h
 *	  Training: the arguments of wals_train, the ratings read, the devices,
 *	  the engines that sweep, and what is stored.
 */
#ifndef WALS_TRAIN_H
#define WALS_TRAIN_H

#include "access/parallel.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/fd.h"
#include "utils/relcache.h"

#include "wals_catalog.h"
#include "wals_metrics.h"

/* Initial factors are normal with this deviation, as in ref_wals.py. */
#define WALS_INIT_SCALE				0.01f

/*
 * The vectors of an accelerated training, each the size of all factors (X
 * then Y): WALS_VEC_FACTORS is the factors themselves, and the engine keeps
 * WALS_ACCEL_VECTORS - 1 spares beside them when the problem asks for them.
 */
#define WALS_VEC_FACTORS	0
#define WALS_ACCEL_VECTORS	5

/*
 * When a trial of wals_tune stops iterating: once budget_s seconds since
 * since, less what the final training will take, have passed.  That is the
 * larger of reserve_s, the final training of the best trial so far, and,
 * should this trial be the best, own_factor times the seconds it has run so
 * far plus the store of its factors (wals_store_estimate_s).
 * budget_s 0: no deadline.
 */
typedef struct WalsDeadline
{
	instr_time	since;
	double		budget_s;
	double		reserve_s;
	double		own_factor;
} WalsDeadline;

/*
 * The seconds that storing rows rows of f factors takes, from 7.6 s for
 * 766,666 rows at f = 64 on a 2-core Zen 5, with their indexes.
 */
static inline double
wals_store_estimate_s(int64 rows, int f)
{
	return (double) rows * f * 0.16e-6;
}

/* Everything wals_train was asked, checked and resolved (args.c). */
typedef struct WalsTrainArgs
{
	Oid			source;
	char	   *source_name;	/* schema-qualified and quoted, for SQL */
	char	   *source_display; /* as the user would write it, for messages */
	Oid			schema;			/* the model's schema, where its tables go */
	char	   *user_col;
	char	   *item_col;
	char	   *rating_col;		/* NULL: every pair counts 1 */
	char	   *changed_col;	/* NULL: none, and no mark */
	char	   *changed_mark;	/* the mark taken before reading (marks.c) */
	char	   *model;			/* the model's name in its schema */
	char	   *model_display;	/* schema.model, for messages */
	Oid			owner;			/* who owns it, and creates its tables */
	WalsModelInfo *old;			/* the model trained before, or NULL */
	WalsParams	params;
	int			iterations;
	WalsDevice	device;
	int			workers;
	bool		workers_given;	/* else each shard of a sharded training uses its own */
	int			seed;
	bool		warm_start;
	bool		replace;		/* may replace a model of another source,
								 * feedback or width */
	double		tolerance;		/* negative: no early stop */
	float		init_std;		/* start from N(0, init_std / sqrt(f)); negative:
								 * from N(0, WALS_INIT_SCALE) */
	double		validation;		/* share held out for early stopping; 0: none */
	Oid			validation_table;	/* or the cells of this relation */
	Oid			validation_owner;	/* its owner, as the catalog records it */
	char	   *validation_table_display;
	char	   *validation_metric;	/* as parsed into kind and k */
	WalsMetricKind validation_kind;
	int			validation_k;
	int			patience;		/* iterations without a better validation */
	WalsAccelerate accelerate;
	bool		may_spill;		/* may train out of core: not a tuning's */
	WalsDeadline deadline;
	instr_time	began;			/* the training's start, its read included */
} WalsTrainArgs;

/* Whether the training stops early on held-out cells, a share or a table. */
static inline bool
wals_validating(const WalsTrainArgs *args)
{
	return args->validation > 0 || OidIsValid(args->validation_table);
}

/*
 * An array kept in a temporary file mapped into memory (tempfiles.c), for
 * a training out of core.
 */
typedef struct WalsTempArray
{
	File		file;
	void	   *base;
	Size		bytes;
	const char *what;			/* for messages */
} WalsTempArray;

/* tempfiles.c */
extern void *wals_temp_alloc(WalsTempArray *t, Size bytes, const char *what);
extern void *wals_temp_grow(WalsTempArray *t, Size bytes);
extern void wals_temp_free(WalsTempArray *t);
extern void wals_temp_advise(WalsTempArray *t, int advice);
extern const char *wals_temp_path(const WalsTempArray *t);
extern const void *wals_temp_attach(const char *path, Size bytes);

/* The three arrays of the rows read, as WalsRatings keeps them. */
typedef enum WalsRowArray
{
	WALS_ROWS_USERS,
	WALS_ROWS_ITEMS,
	WALS_ROWS_RATINGS,
	WALS_ROWS_ARRAYS
} WalsRowArray;

/*
 * The ratings as read (ingest.c): ids already dense and numbered in id
 * order, cells not yet merged.  The three arrays are palloc'd, or shared
 * segments where workers read the table, and consumed by
 * wals_build_matrices.
 */
typedef struct WalsRatings
{
	int64		n;				/* rows read */
	int32	   *users;			/* n dense user indices */
	int32	   *items;			/* n dense item indices */
	float	   *ratings;		/* n ratings (1 when there is no rating_col) */
	uint8	   *codes;			/* n codes of the ratings, once the workspace
								 * took them, in memory; else NULL */
	int64		nusers;
	int64		nitems;
	int64	   *user_ids;		/* nusers, increasing */
	int64	   *item_ids;		/* nitems, increasing */
	int64		null_ids;		/* rows skipped for a NULL id */
	uint64	   *held_pairs;		/* validation_table's cells, user << 32 | item,
								 * increasing, known ids only */
	int64		nheld_pairs;
	WalsTempArray *spilled;		/* the three arrays' files, out of core; else
								 * NULL, and they are palloc'd */
	dsm_segment *seg[WALS_ROWS_ARRAYS]; /* or in these shared segments, which
										 * the build's workers map */
	dsm_segment *codes_seg;		/* the codes', likewise */
	bool		codes_tried;	/* codes were taken as the rows were renumbered
								 * (rows_prepare.c)... */
	WalsCodebook *codebook;		/* ... with this book; NULL where the ratings
								 * take too many values */
} WalsRatings;

/*
 * The ratings a tuning reads once for all its trainings (train.c): the
 * first keeps a copy of what it read in cxt, which outlives the
 * transactions that wals_tune_concurrently commits, and the later ones
 * start from that copy instead of reading the source again, so that every
 * trial and the final training see the same ratings.
 */
typedef struct WalsKeptRatings
{
	MemoryContext cxt;
	bool		read;
	WalsRatings raw;			/* no held_pairs: a tuning holds out a share */
} WalsKeptRatings;

struct WalsShards;

/* The ratings of one training, dense and merged (ingest.c). */
typedef struct WalsData
{
	int64		nusers;
	int64		nitems;
	int64		nratings;		/* distinct (user, item) cells */
	int64		null_ids;		/* rows skipped for a NULL id */
	int64	   *user_ids;		/* nusers, increasing */
	int64	   *item_ids;		/* nitems, increasing */
	WalsCsr		by_user;		/* nusers x nitems */
	WalsCsr		by_item;		/* nitems x nusers */
	WalsCsr		held;			/* by user: the validation cells, if any */
	struct WalsShards *shards;	/* a sharded training's: no matrices here */
} WalsData;

/* Training results and timings, for the catalog and the summary row. */
typedef struct WalsTrainResult
{
	int			iterations;		/* iterations run */
	double		loss;
	double	   *iteration_loss;
	double	   *iteration_seconds;
	bool	   *iteration_ncg;	/* the iteration moved beyond its sweep */
	double	   *iteration_score;	/* on the validation cells; NaN: none */
	int			best_iteration; /* from 1, with a validation; else 0 */
	double		validation_score;	/* the best iterate's */
	double		validation_s;	/* of train_s, scoring the validation */
	const char *device;
	int			workers;
	double		load_s;
	double		train_s;
	double		store_s;
	double		total_s;
	int64		version;
} WalsTrainResult;

/* The arguments of wals_train, at their positions in its SQL signature. */
typedef enum WalsTrainArg
{
	WALS_ARG_SOURCE,
	WALS_ARG_USER_COL,
	WALS_ARG_ITEM_COL,
	WALS_ARG_RATING_COL,
	WALS_ARG_MODEL,
	WALS_ARG_FACTORS,
	WALS_ARG_ITERATIONS,
	WALS_ARG_REGULARIZATION,
	WALS_ARG_FEEDBACK,
	WALS_ARG_ALPHA,
	WALS_ARG_UNOBSERVED_WEIGHT,
	WALS_ARG_SOLVER,
	WALS_ARG_CG_STEPS,
	WALS_ARG_DEVICE,
	WALS_ARG_WORKERS,
	WALS_ARG_SEED,
	WALS_ARG_WARM_START,
	WALS_ARG_TOLERANCE,
	WALS_ARG_ACCELERATE,
	WALS_ARG_BLOCK_SIZE,
	WALS_ARG_REGULARIZATION_EXPONENT,
	WALS_ARG_INIT_STD,
	WALS_ARG_VALIDATION,
	WALS_ARG_PATIENCE,
	WALS_ARG_VALIDATION_METRIC,
	WALS_ARG_VALIDATION_TABLE,
	WALS_ARG_REPLACE,
	WALS_ARG_CHANGED_COL,
	WALS_TRAIN_NARGS
} WalsTrainArg;

/*
 * A training asked for: wals_train's arguments as SQL passes them, each a
 * Datum of its declared type or NULL.  wals_train takes them from its
 * call, wals_retrain from the model's catalog row, wals_tune from each
 * trial's configuration; wals_train_request_init puts in the defaults sql/
 * declares.  A trial is checked, read and trained as any training, and
 * stores nothing: its model would be dropped unread, and storing it took
 * most of a trial's time at large f.
 */
typedef struct WalsTrainRequest
{
	Datum		value[WALS_TRAIN_NARGS];
	bool		isnull[WALS_TRAIN_NARGS];
	bool		trial;
	WalsDeadline deadline;
	Oid			validation_owner;	/* the owner the catalog recorded for the
									 * validation table (wals_retrain);
									 * InvalidOid: the caller named it */
	WalsKeptRatings *kept;		/* NULL, or a tuning's ratings */
} WalsTrainRequest;

/* What a training did: wals_train's summary row, and a trial's score. */
typedef struct WalsTrainSummary
{
	char	   *model;
	int64		users;
	int64		items;
	int64		ratings;
	int			factors;
	int			iterations;
	double		loss;
	char	   *device;
	double		load_s;
	double		train_s;
	double		store_s;
	double		total_s;
	double		validation_score;	/* NaN without a validation */
	int			best_iteration;
	double		validation_s;	/* of train_s, scoring the validation */
} WalsTrainSummary;

/* args.c */
extern void wals_train_args_parse(const WalsTrainRequest *req, WalsTrainArgs *args);

/* train.c: the training's one entry point, and its SQL function's row */
extern void wals_train_request_init(WalsTrainRequest *req);
extern void wals_train_run(const WalsTrainRequest *req, WalsTrainSummary *summary);
extern void wals_train_summary_row(FunctionCallInfo fcinfo, const WalsTrainSummary *summary);

/*
 * ingest.c: an empty source is an error, unless may_be_empty (a shard's
 * partition, one of many)
 */
extern void wals_ingest(const WalsTrainArgs *args, WalsRatings *raw, bool may_be_empty);
extern double wals_ingest_estimate(Relation rel);
extern double wals_ratings_bytes(const WalsRatings *raw);
extern void wals_ratings_copy(const WalsRatings *from, WalsRatings *to, MemoryContext cxt);
extern void wals_ratings_spill(WalsRatings *raw);
extern void **wals_ratings_array(WalsRatings *raw, WalsRowArray which);
extern void wals_ratings_free(WalsRatings *raw, WalsRowArray which);
extern void wals_ratings_alloc_codes(WalsRatings *raw);
extern void wals_ratings_free_codes(WalsRatings *raw);

/*
 * The two blocks of a training's memory: the item matrix and the item
 * factors, then the user matrix, the user factors and the spares, each
 * allocated only when the build needs it (workspace.c).
 */
typedef enum WalsBlock
{
	WALS_BLOCK_ITEMS,
	WALS_BLOCK_USERS,
	WALS_BLOCKS
} WalsBlock;

/* The two arrays of a block's cells, in the order the block lays them out. */
typedef enum WalsCellArray
{
	WALS_CELLS_INDICES,
	WALS_CELLS_VALUES,			/* floats, or codes */
	WALS_CELL_ARRAYS
} WalsCellArray;

/*
 * Where each section lies in its block.  The cells of its matrix come
 * last, from cells[block] on, so that a training out of core can keep
 * them in a temporary file and the rest in memory; an array of cells
 * that a segment of its own holds (WalsWorkspaceShape) takes no room
 * there, and the arrays after it move up.  total counts both arrays.
 */
typedef struct WalsWorkspaceLayout
{
	Size		y;				/* the items' block */
	Size		gy;
	Size		item_indptr;
	Size		codebook;		/* of both matrices, when coded */
	Size		x;				/* the users' block */
	Size		gx;
	Size		user_indptr;
	Size		spares;			/* the spare vectors of an accelerated training */
	Size		cells[WALS_BLOCKS];
	Size		total[WALS_BLOCKS];
} WalsWorkspaceLayout;

/* What a parallel worker needs to find a workspace and map it. */
typedef struct WalsWorkspaceShape
{
	int64		nusers;
	int64		nitems;
	int64		cells;			/* rows read: a bound on the cells merged */
	int			factors;
	int			spares;			/* spare vectors: 0, or WALS_ACCEL_VECTORS - 1 */
	bool		coded;			/* the matrices keep codes, not floats */
	bool		files;			/* out of core: the cells in temporary files */
	dsm_handle	handle[WALS_BLOCKS];	/* of the shared segments, when shared */
	/* of the segments that hold arrays of cells apart from their block */
	dsm_handle	cells_handle[WALS_BLOCKS][WALS_CELL_ARRAYS];
	char		cells_path[WALS_BLOCKS][MAXPGPATH]; /* of the files, when files */
	WalsWorkspaceLayout layout;
} WalsWorkspaceShape;

/*
 * The memory of a training (workspace.c): both matrices, both factor
 * matrices and their Grams, and the spare vectors of an accelerated
 * training, shared with parallel workers when both blocks are segments
 * (wals_workspace_shared).  The spares are kept whatever the device, so
 * that a training that falls back from the GPU to the CPU finds them.
 */
typedef struct WalsWorkspace
{
	WalsWorkspaceShape shape;
	bool		share;			/* ask for segments, for parallel workers */
	const char *model_display;	/* for messages */
	dsm_segment *seg[WALS_BLOCKS];	/* NULL where the block is private */
	dsm_segment *cells_seg[WALS_BLOCKS][WALS_CELL_ARRAYS];	/* the same, or NULL */
	void	   *base[WALS_BLOCKS];	/* as allocated */
	WalsTempArray cells[WALS_BLOCKS];	/* out of core */
	double		engine_bytes;	/* what the engine needs beside the blocks */
	WalsCsr		by_user;
	WalsCsr		by_item;
	float	   *X;
	float	   *Y;
	float	   *GX;
	float	   *GY;
	float	   *spare[WALS_ACCEL_VECTORS];	/* 1 .. spares: X's part, then Y's */
	WalsCodebook *codebook;		/* of the rows read, until the items' block */
} WalsWorkspace;

/* workspace.c */
extern double wals_workspace_min_bytes(const WalsTrainArgs *args, double rows,
									   double users, double items, double engine_bytes);
extern WalsWorkspace *wals_workspace_create(const WalsTrainArgs *args, WalsRatings *raw,
											double read_s, double engine_bytes, bool may_code);
extern bool wals_workspace_take_segment(WalsWorkspace *ws, WalsBlock block, WalsCellArray a,
										dsm_segment **seg);
extern void wals_workspace_allocate(WalsWorkspace *ws, WalsBlock block);
extern void wals_workspace_prefault(const WalsWorkspace *ws, WalsBlock block);
extern void wals_workspace_map_cells(const WalsWorkspace *ws, WalsBlock block);
extern void wals_workspace_free(WalsWorkspace *ws, WalsBlock block);
extern void wals_workspace_uncode(const WalsTrainArgs *args, WalsWorkspace *ws);
extern int64 wals_workspace_longest_row(const WalsWorkspaceShape *shape);
extern bool wals_workspace_shared(const WalsWorkspace *ws);
extern void wals_workspace_attach(const WalsWorkspaceShape *shape, WalsWorkspace *ws);
extern void wals_workspace_attach_items(const WalsWorkspaceShape *shape, WalsWorkspace *ws);
extern void wals_workspace_release(WalsWorkspace *ws);

/*
 * matrices.c: build both matrices of data from raw in ws, allocating its
 * blocks as they are needed, and point data's matrices at them.  Frees
 * raw's three arrays as soon as they are consumed and moves its ids and
 * counts into data.
 */
extern void wals_build_matrices(const WalsTrainArgs *args, WalsRatings *raw,
								WalsWorkspace *ws, WalsData *data);

/*
 * build_parallel.c: a transpose of the build, and the starting factors,
 * with the training's workers
 */
extern WalsStatus wals_build_transpose(const WalsTrainArgs *args, WalsWorkspace *ws,
									   bool to_users, void *scratch, Size scratch_bytes);

/*
 * raw's rows, with codes, scattered by item into ws's items' block, which
 * it faults in, as wals_csr_scatter_codes does.  Where the training's
 * workers can take the sorting of its partitions, they are left sorting
 * and their context returned, raw's rows no longer read: the leader may
 * do what does not touch the matrix by item before it joins them with
 * wals_build_scatter_end, which returns the scatter's status.  Otherwise
 * NULL, the scatter done and its status in *status.
 */
extern ParallelContext *wals_build_scatter_begin(const WalsTrainArgs *args, WalsWorkspace *ws,
												 const WalsRatings *raw, void *scratch,
												 Size scratch_bytes, WalsStatus *status);
extern WalsStatus wals_build_scatter_end(ParallelContext *pcxt, WalsWorkspace *ws,
										 void *scratch);
extern bool wals_build_init(const WalsTrainArgs *args, WalsWorkspace *ws, const WalsData *data,
							uint64 seed_x, uint64 seed_y, float scale);

/*
 * Cells below which the leader transposes alone: some 40 ms of one core,
 * several times what starting a worker and mapping the blocks cost.
 */
#define WALS_BUILD_PARALLEL_MIN_CELLS	((int64) 4 << 20)

/*
 * What the chunks' counts of a transpose's rows may take in its segment:
 * 64 chunks of 200,000 rows, 4 of 5 million, none (the leader alone) past
 * 8 million.
 */
#define WALS_BUILD_COUNT_BYTES	((Size) 64 << 20)

/*
 * The ring the store's workers pack rated items into (store_pack.c): slots
 * of 2 MB (a batch of users of a few hundred ratings each packs into a
 * fraction of one; a user too large for it goes to the leader), up to a
 * ring of 32 MB whatever the workers asked for.
 */
#define WALS_PACK_SLOT_BYTES	((Size) 2 << 20)
#define WALS_PACK_MAX_SLOTS		16

/*
 * In parallel mode, a context for workers of entry with an area of bytes
 * under key in its segment, *area; NULL, out of parallel mode again,
 * where no segment could be made.  Closing it leaves parallel mode.
 */
extern ParallelContext *wals_build_open_context(const char *entry, int workers, Size bytes,
												uint64 key, void **area);
extern void wals_build_close_context(ParallelContext *pcxt);

/*
 * Whether a step of the build may be shared with the training's workers:
 * it has some, is not in a parallel worker already, and the blocks of its
 * workspace made so far, the items' at least, are shared segments, their
 * cells not in temporary files.
 */
extern bool wals_build_may_share(const WalsTrainArgs *args, const WalsWorkspace *ws);

/* Sleep on cv until *done reaches n, then see what was written before. */
extern void wals_build_wait(ConditionVariable *cv, pg_atomic_uint64 *done, int64 n);

/*
 * Steps that the leader opens one after the other and the workers wait
 * for: open sets *step to the step and wakes them; wait_step sleeps on cv
 * until *step reaches at_least, then sees what was written before, and
 * returns the step open.
 */
extern void wals_build_open_step(ConditionVariable *cv, pg_atomic_uint32 *step, uint32 open);
extern uint32 wals_build_wait_step(ConditionVariable *cv, pg_atomic_uint32 *step,
								   uint32 at_least);

/* Map the shared segment of handle h at *seg (a worker); its address. */
extern void *wals_build_attach(dsm_handle h, dsm_segment **seg);

/*
 * build_rows.c: sort the rows of ws's matrix by item, as the scatter
 * left them, and merge their repeats, with the training's workers where it
 * pays: what wals_csr_sort_rows returns.
 */
/*
 * rows_prepare.c: renumber raw's rows, shared segments, through the ranks
 * of their provisional indices, and where code is set take codes of their
 * ratings (raw->codes_tried, raw->codebook, raw->codes), with the
 * training's workers; false, having done nothing, where the rows are not
 * shared or too few, or no workers can be asked for.
 */
extern bool wals_rows_prepare(const WalsTrainArgs *args, WalsRatings *raw,
							  const int32 *user_rank, const int32 *item_rank, bool code);

extern WalsStatus wals_build_sort_rows(const WalsTrainArgs *args, WalsWorkspace *ws,
									   void *scratch, Size scratch_bytes);

/*
 * A training as every engine receives it: the arguments, the matrices and
 * starting factors in the workspace, and where to say which phase of an
 * iteration it is in.  begin sets workers, the parallel workers it runs.
 */
typedef struct WalsProblem
{
	const WalsTrainArgs *args;
	const WalsData *data;
	WalsWorkspace *workspace;
	float	   *X;				/* the workspace's, which receive the result */
	float	   *Y;
	/* a phase begins, over rows rows (0: not counted), shown as text */
	void		(*phase) (void *arg, WalsPhase phase, int64 rows, const char *text);
	void	   *phase_arg;
	int			workers;
	bool		accelerate;		/* keep the spare vectors of ALS-NCG */
} WalsProblem;

/*
 * A training engine.  begin takes the problem, iterate runs one iteration
 * (both half-sweeps and, unless loss is NULL, the exact loss of the factors
 * they leave; an engine may skip that pass when it is), and end
 * hands back the factors into X and Y.  Each returns false with *failure
 * filled, which train.c reports through errors.c, so that a failure reads
 * the same on every engine; only what the server itself raises (a cancel, a
 * parallel worker's error) is raised inside.  end with X NULL is called from
 * an error's cleanup: it releases what the transaction's abort would not
 * (device memory), and neither fails nor waits.
 */
typedef struct WalsEngine
{
	const char *name;			/* as wals_models.device records it */
	bool		(*begin) (WalsProblem *problem, void **state, WalsFailure *failure);
	bool		(*iterate) (void *state, double *loss, WalsFailure *failure);
	bool		(*end) (void *state, float *X, float *Y, WalsFailure *failure);
	/* copy the current factors into X and Y and go on: a validation's view */
	bool		(*factors) (void *state, float *X, float *Y, WalsFailure *failure);
	/*
	 * The validation metrics of the current factors on the held-out cells
	 * (validate.c), where the engine scores them itself; NULL where
	 * validate.c scores a copy from factors instead.
	 */
	bool		(*validate) (void *state, WalsMetrics *out, WalsFailure *failure);

	/*
	 * The whole-factor operations of an accelerated training, on the
	 * vectors numbered as above (only when the problem asked for them):
	 * combine sets dst = a x + b y, reading neither x nor y where its
	 * coefficient is 0, and leaves what the next sweep reads (the Gram of
	 * Y) current when dst is the factors; dot gives x.y in double; line
	 * gives the coefficients of the quartic L(base + t dir) (src/core's
	 * wals_line_*).
	 */
	bool		(*combine) (void *state, int dst, double a, int x, double b, int y,
							WalsFailure *failure);
	bool		(*dot) (void *state, int x, int y, double *out, WalsFailure *failure);
	bool		(*line) (void *state, int base, int dir, double coef[WALS_LINE_TERMS],
						 WalsFailure *failure);
} WalsEngine;

/* ncg.c: what an ALS-NCG training carries from one iteration to the next */
typedef struct WalsNcg
{
	bool		first;			/* the training's first iteration is to come */
	bool		restart;		/* the next direction is the sweep's own */
	double		pp;				/* p.p of the last preconditioned gradient p */
	int			precond;		/* the vector holding that p */
} WalsNcg;

extern void wals_ncg_init(WalsNcg *ncg);

/*
 * One iteration of ALS-NCG on an engine that has begun with the spare
 * vectors: a sweep, then a step along the NCG direction when it lowers the
 * loss further.  *step is the step length taken, 0 when the iteration kept
 * its sweep.
 */
extern bool wals_ncg_iterate(const WalsEngine *engine, void *state, WalsNcg *ncg,
							 double *loss, double *step, WalsFailure *failure);

/*
 * validate_shared.c: the validation's part of the CPU engine's shared
 * block, and a process's view of it
 */
typedef struct WalsValidationView
{
	void	   *area;
	const WalsWorkspace *ws;	/* this process's mapping */
	WalsCsr		held;
	int64	   *users;
	WalsMetricsAcc *parts;
	MemoryContext cxt;			/* where scratch goes */
	void	   *scratch;		/* this process's, at its first chunk */
} WalsValidationView;

/* 0 without a validation. */
extern Size wals_validation_area_bytes(const WalsTrainArgs *args, const WalsData *data);
extern void wals_validation_area_fill(void *mem, const WalsTrainArgs *args, const WalsData *data);
extern int64 wals_validation_area_chunks(void *mem);
extern void wals_validation_area_map(void *mem, const WalsWorkspace *ws, WalsValidationView *view);
extern void wals_validation_index_begin(WalsValidationView *view);
extern int64 wals_validation_index_chunks(void *mem);
extern void wals_validation_index_chunk(WalsValidationView *view, int64 chunk);
extern void wals_validation_index_end(WalsValidationView *view);
extern void wals_validation_area_chunk(WalsValidationView *view, int64 chunk);
extern void wals_validation_area_merge(const WalsValidationView *view, WalsMetrics *out);

/* validate.c: early stopping on a held-out share of the ratings */
typedef struct WalsValidation
{
	bool		on;
	float	   *X;				/* the factors scored, without engine->validate */
	float	   *Y;
	void	   *index;			/* and the int8 index of Y */
	void	   *scratch;
	float	   *best_X;			/* the best iterate's */
	float	   *best_Y;
	double		best;
	int			best_it;		/* from 0; -1 before the first */
	int			last_it;		/* the last iteration scored */
	double		last;			/* its score */
	bool		steep;			/* it rose fast: the next may be skipped */
	double		seconds;		/* spent scoring so far */
} WalsValidation;

extern double wals_validation_bytes(const WalsTrainArgs *args, const WalsRatings *raw);
/* Read validation_table's cells into raw->held_pairs, once the ids are known. */
extern void wals_validation_read(const WalsTrainArgs *args, WalsRatings *raw);
/*
 * Fill data->held: the validation share's cells, moved out of
 * data->by_user, or raw's held pairs that are not training cells; true
 * where cells left data->by_user.
 */
extern bool wals_validation_split(const WalsTrainArgs *args, WalsRatings *raw, WalsData *data);
extern void wals_validation_begin(const WalsTrainArgs *args, const WalsData *data,
								  const WalsEngine *engine, WalsValidation *v);
/* Whether iteration it is scored; last: it ends the training. */
extern bool wals_validation_due(const WalsValidation *v, int it, bool last);
/* Score iteration it (from 0) into *score, keeping the best iterate. */
extern bool wals_validation_step(const WalsTrainArgs *args, const WalsData *data,
								 const WalsEngine *engine, void *state, WalsValidation *v,
								 int it, double *score, WalsFailure *failure);
/* Whether patience iterations have passed since the best. */
extern bool wals_validation_stop(const WalsTrainArgs *args, const WalsValidation *v, int it);
/* Put the best iterate into X and Y, and its figures into result. */
extern void wals_validation_end(const WalsData *data, const WalsValidation *v, int f,
								float *X, float *Y, WalsTrainResult *result);

/* engine_cpu.c: the leader and parallel workers */
extern const WalsEngine wals_cpu_engine;
extern double wals_cpu_engine_bytes(const WalsTrainArgs *args, int64 nusers, int64 nitems);

/* engine_gpu.c: the CUDA engine of gpu/, through devices.c */
extern const WalsEngine wals_gpu_engine;

/* devices.c */
struct WalsCudaApi;
extern void wals_device_check(const WalsTrainArgs *args);
extern WalsDevice wals_device_choose(const WalsTrainArgs *args, int64 nratings);
extern const struct WalsCudaApi *wals_cuda_api(void);

/* progress.c */
extern void wals_report_progress(const WalsTrainArgs *args, int it, const char *phase,
								 const WalsTrainResult *result);
extern void wals_report_progress_end(void);
extern void wals_iterations_begin(const WalsTrainArgs *args, WalsTrainResult *result);
/*
 * Put context (NULL: none) before the progress of the trainings to come in
 * pg_stat_activity.
 */
extern void wals_progress_context(const char *context);
extern bool wals_loss_flat(const WalsTrainArgs *args, const WalsTrainResult *result, int it,
						   double loss);
extern bool wals_iteration_done(const WalsTrainArgs *args, WalsTrainResult *result,
								int it, double loss, double step, double score,
								double seconds);

/* store.c */

/* Users a multi-insert of a factor table writes at once. */
#define WALS_STORE_BATCH	1000

extern void wals_store_model(const WalsTrainArgs *args, const WalsData *data,
							 const WalsWorkspace *ws, const float *X, const float *Y,
							 WalsTrainResult *result);
extern void wals_check_factor_tables_free(const WalsTrainArgs *args);

/* store_pack.c */
typedef struct WalsRatedPacker WalsRatedPacker;

/*
 * Start workers packing the rated items of the users of ws's shared matrix
 * by user, item_ids naming its columns, for the leader to take in order
 * with wals_rated_packer_row, in batches of WALS_STORE_BATCH users; NULL
 * where the leader had better pack them alone (too few ratings, no
 * workers asked for, no shared blocks).  The leader is then in parallel
 * mode until wals_rated_packer_end.
 */
extern WalsRatedPacker *wals_rated_packer_begin(const WalsTrainArgs *args,
												const WalsWorkspace *ws,
												const int64 *item_ids);

/*
 * The rated items of user r, a bytea that stays valid until the leader
 * asks for the next batch's first user; the users before r's batch must
 * have been written by then.
 */
extern Datum wals_rated_packer_row(WalsRatedPacker *p, int64 r);
extern void wals_rated_packer_end(WalsRatedPacker *p);

/* warm.c */
extern void wals_warm_start(const WalsTrainArgs *args, const WalsData *data,
							float *X, float *Y);

#endif							/* WALS_TRAIN_H */
