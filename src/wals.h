/*
 * wals.h
 *	  Declarations shared by the PostgreSQL glue of wals: limits, settings,
 *	  the training arguments, the ingested data and the model catalog.
 */
#ifndef WALS_H
#define WALS_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tupdesc.h"
#include "fmgr.h"
#include "portability/instr_time.h"
#include "wals_core.h"

/* Limits of the arguments of wals_train, as DEFAULT/MIN/MAX triples. */
#define WALS_DEFAULT_FACTORS		64
#define WALS_MIN_FACTORS			1
#define WALS_MAX_FACTORS			1024
#define WALS_DEFAULT_ITERATIONS		15
#define WALS_MIN_ITERATIONS			1
#define WALS_MAX_ITERATIONS			10000
#define WALS_DEFAULT_CG_STEPS		3
#define WALS_MIN_CG_STEPS			1
#define WALS_MAX_CG_STEPS			1000
#define WALS_MIN_WORKERS			0
#define WALS_MAX_WORKERS			1024
#define WALS_MAX_K					1000000

/*
 * regularization, alpha and unobserved_weight: beyond this the systems
 * solved lose every digit of the data to the regularization or overflow.
 */
#define WALS_MAX_REAL_PARAM			1e6f

/* Below this many ratings, device => 'auto' trains on the CPU. */
#define WALS_DEFAULT_GPU_MIN_RATINGS	1000000

/* Factor tables are named <model>_user_factors and <model>_item_factors. */
#define WALS_USER_SUFFIX			"_user_factors"
#define WALS_ITEM_SUFFIX			"_item_factors"
#define WALS_MAX_MODEL_NAME			(NAMEDATALEN - 1 - (int) strlen(WALS_USER_SUFFIX))

/* Initial factors are normal with this deviation, as in ref_wals.py. */
#define WALS_INIT_SCALE				0.01f

/* Rows solved between two checks for a cancel. */
#define WALS_ROWS_PER_CHECK			256

typedef enum WalsDevice
{
	WALS_DEVICE_AUTO,
	WALS_DEVICE_CPU,
	WALS_DEVICE_GPU
} WalsDevice;

/* Settings (wals.c). */
extern char *wals_default_model;
extern int	wals_device;
extern int	wals_max_memory;	/* kB; 0 means no limit */
extern char *wals_cuda_library;
extern int	wals_gpu_min_ratings;

/* Everything wals_train was asked, checked and resolved (train_args.c). */
typedef struct WalsTrainArgs
{
	Oid			source;
	char	   *source_name;	/* schema-qualified and quoted, for SQL */
	char	   *source_display; /* as the user would write it, for messages */
	Oid			schema;			/* the model's schema, where its tables go */
	char	   *user_col;
	char	   *item_col;
	char	   *rating_col;		/* NULL: every pair counts 1 */
	char	   *model;			/* the model's name in its schema */
	char	   *model_display;	/* schema.model, for messages */
	Oid			owner;			/* who owns it, and creates its tables */
	struct WalsModelInfo *old;	/* the model trained before, or NULL */
	WalsParams	params;
	int			iterations;
	WalsDevice	device;
	int			workers;
	int			seed;
	bool		warm_start;
	double		tolerance;		/* negative: no early stop */
} WalsTrainArgs;

/*
 * The ratings as read (ingest.c): ids already dense and numbered in id
 * order, cells not yet merged.  The three arrays are palloc'd and consumed by
 * wals_build_matrices.
 */
typedef struct WalsRatings
{
	int64		n;				/* rows read */
	int32	   *users;			/* n dense user indices */
	int32	   *items;			/* n dense item indices */
	float	   *ratings;		/* n ratings (1 when there is no rating_col) */
	int64		nusers;
	int64		nitems;
	int64	   *user_ids;		/* nusers, increasing */
	int64	   *item_ids;		/* nitems, increasing */
	int64		null_ids;		/* rows skipped for a NULL id */
} WalsRatings;

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
} WalsData;

/* Training results and timings, for the catalog and the summary row. */
typedef struct WalsTrainResult
{
	int			iterations;		/* iterations run */
	double		loss;
	double	   *iteration_loss;
	double	   *iteration_seconds;
	const char *device;
	int			workers;
	double		load_s;
	double		train_s;
	double		store_s;
	double		total_s;
	int64		version;
} WalsTrainResult;

/*
 * A model as its catalog row describes it (catalog.c), every value checked.
 * Relations are OIDs: their names are looked up when a statement needs
 * them, never taken from the catalog's text.
 */
typedef struct WalsModelInfo
{
	char	   *schema;
	char	   *name;
	char	   *display;		/* schema.name, for messages */
	int64		version;
	int			factors;
	Oid			source;			/* InvalidOid when unknown */
	char	   *user_col;
	char	   *item_col;
	char	   *rating_col;		/* NULL: every pair counted 1 */
	WalsParams	params;			/* as trained */
	Oid			user_rel;
	Oid			item_rel;
	char	   *invalid;		/* the first value wals never writes, or NULL */
} WalsModelInfo;

/* A model's name as given: schema is NULL when it is not qualified. */
typedef struct WalsModelName
{
	char	   *schema;
	char	   *name;
} WalsModelName;

/*
 * A model's source for SQL text: its name and its columns, quoted, looked
 * up from its OID (train_args.c).
 */
typedef struct WalsSourceNames
{
	char	   *relation;
	const char *user_col;
	const char *item_col;
	const char *rating_col;		/* NULL: every pair counted 1 */
} WalsSourceNames;

/* What wals_become saves, to go back to the caller's role. */
typedef struct WalsRoleSave
{
	Oid			userid;
	int			sec_context;
	int			guc_level;
} WalsRoleSave;

/* errors.c */
extern void wals_report_core_status(WalsStatus status, const char *what, int64 row);

/* train_args.c */
extern void wals_train_args_parse(FunctionCallInfo fcinfo, WalsTrainArgs *args);
extern const char *wals_feedback_name(WalsFeedback feedback);
extern char *wals_check_source(Oid relid, const char *argname);
extern char *wals_check_column(Oid relid, const char *reldisplay, const char *name,
							  const char *argname, bool id);
extern void wals_model_source(const WalsModelInfo *info, WalsSourceNames *src);
extern const char *wals_solver_name(WalsSolver solver);

/* train.c */
extern double wals_seconds_since(instr_time start);

/* ingest.c */
extern void wals_ingest(const WalsTrainArgs *args, WalsRatings *raw);

/*
 * Build both matrices of data from raw into buffers the caller has already
 * set in data->by_user and data->by_item: indptr of nusers + 1 and
 * nitems + 1 entries, indices and values of raw->n entries each.  Frees
 * raw's three arrays as soon as they are consumed and moves its ids and
 * counts into data.
 */
extern void wals_build_matrices(const WalsTrainArgs *args, WalsRatings *raw,
								WalsData *data);

/* parallel.c: the sweeps, in the leader and parallel workers */
typedef struct WalsSweeps WalsSweeps;
extern double wals_sweeps_min_bytes(const WalsTrainArgs *args, double rows);
extern WalsSweeps *wals_sweeps_begin(const WalsTrainArgs *args, const WalsRatings *raw,
									 double read_s, WalsData *data);
extern float *wals_sweeps_user_factors(WalsSweeps *s);
extern float *wals_sweeps_item_factors(WalsSweeps *s);
extern void wals_sweeps_run(WalsSweeps *s, const WalsTrainArgs *args,
							WalsTrainResult *result);
extern void wals_sweeps_end(WalsSweeps *s);

/* gpu.c */
struct WalsCudaApi;
extern void wals_device_check(const WalsTrainArgs *args);
extern const char *wals_device_choose(const WalsTrainArgs *args, int64 nratings);
extern const struct WalsCudaApi *wals_cuda_api(void);

/*
 * gpu_train.c: train on the CUDA engine from the initialised X and Y, which
 * receive the result.  False when device 'auto' could not start the engine
 * (a NOTICE says why) and the CPU should train instead.
 */
extern bool wals_gpu_train(const WalsTrainArgs *args, const WalsData *data,
						   float *X, float *Y, WalsTrainResult *result);

/* progress.c */
extern void wals_report_progress(const WalsTrainArgs *args, int it, const char *phase,
								 const WalsTrainResult *result);
extern void wals_report_progress_end(void);
extern void wals_iterations_begin(const WalsTrainArgs *args, WalsTrainResult *result);
extern bool wals_iteration_done(const WalsTrainArgs *args, WalsTrainResult *result,
								int it, double loss, double seconds);

/* memory.c */
extern char *wals_pretty_bytes(double bytes);
extern void wals_memory_check(double bytes, const char *what);

/* store.c */
extern void wals_store_model(const WalsTrainArgs *args, const WalsData *data,
							 const float *X, const float *Y,
							 WalsTrainResult *result);
extern void wals_check_factor_tables_free(const WalsTrainArgs *args);

/* warm.c */
extern void wals_warm_start(const WalsTrainArgs *args, const WalsData *data,
							float *X, float *Y);

/* roles.c */
extern void wals_become(Oid role, WalsRoleSave *save);
extern void wals_unbecome(const WalsRoleSave *save);
extern void wals_become_catalog_writer(WalsRoleSave *save);
extern Oid	wals_extension_schema(void);

/* catalog.c */
extern char *wals_catalog_table(const char *table);
extern void wals_model_name_parse(const char *given, const char *what, WalsModelName *out);
extern char *wals_model_display(const char *schema, const char *name);
extern char *wals_model_quoted(const char *schema, const char *name);
extern bool wals_catalog_lookup(const char *schema, const char *name, WalsModelInfo *info);
extern void wals_model_resolve(text *model, WalsModelInfo *info);
extern void wals_no_such_model(const char *schema, const char *name);
extern void wals_model_check(const WalsModelInfo *info);
extern void wals_catalog_delete(const WalsModelInfo *info);
extern int64 wals_next_version(void);
extern struct _SPI_plan *wals_keep_plan(const char *query, int nargs, Oid *types);
extern void wals_spi_exec(const char *query, int nargs, const Oid *types,
						  const Datum *values, int expected);

/* model.c */
extern void wals_lock_model(const char *schema, const char *name);
extern WalsModelInfo *wals_model_get(text *model);
extern Oid	wals_model_owner(const WalsModelInfo *info);
extern void wals_model_check_owner(const WalsModelInfo *info);
extern void wals_drop_factor_tables(const WalsModelInfo *info);
extern char *wals_relation_name(Oid relid);

/* factors.c: what is read back from factor tables, checked */
extern void wals_check_factor_table(const WalsModelInfo *info, Oid relid, bool user_side);
extern void wals_read_factors(HeapTuple tuple, TupleDesc desc, int col, int f, float *out,
							  const WalsModelInfo *info);
extern int64 wals_read_id(HeapTuple tuple, TupleDesc desc, int col, const WalsModelInfo *info,
						  bool *isnull);
extern struct ArrayType *wals_real_array(const float *v, int64 n);
extern bytea *wals_rated_bytea(const int64 *item_ids, const int32 *indices,
							   const float *values, int64 n);

#endif							/* WALS_H */
