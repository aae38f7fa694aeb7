/*
 * wals_catalog.h
 *	  What wals keeps in the database: the catalog of models, their factor
 *	  tables, their sources, the roles a call acts as, and the SPI plans
 *	  that read and write them.
 */
#ifndef WALS_CATALOG_H
#define WALS_CATALOG_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "wals.h"

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
	Oid			owner;			/* as recorded; InvalidOid while updating wals */
	char	   *invalid;		/* the first value wals never writes, or NULL */
} WalsModelInfo;

/*
 * What a row of wals_models records of a model: written by a training
 * (src/train/store.c) and by wals_attach_model, through wals_catalog_write,
 * and carried as the description of the model's user factor table
 * (describe.c).  A NULL of the catalog is a NULL string, or the value noted.
 */
typedef struct WalsCatalogRow
{
	const char *schema;
	const char *model;
	Oid			source;			/* InvalidOid: NULL */
	const char *user_col;
	const char *item_col;
	const char *rating_col;		/* NULL: every pair counted 1 */
	WalsParams	params;			/* block_size NULL unless the solver is
								 * subspace, regularization_exponent unless
								 * frequency_scaled */
	int			iterations;		/* run */
	int			max_iterations; /* asked for */
	int			seed;
	double		tolerance;		/* negative: NULL */
	bool		warm_start;
	int64		users;
	int64		items;
	int64		ratings;
	double		loss;
	const char *device;
	int			workers;
	double		load_s;
	double		train_s;
	double		store_s;
	double		total_s;
	int64		version;
	Oid			user_rel;
	Oid			item_rel;
	const char *accelerate;
	float		init_std;		/* negative: NULL */
	double		validation;		/* 0: NULL */
	Oid			validation_table;	/* InvalidOid: NULL, no table, or one no
									 * longer known (validation_metric set) */
	Oid			validation_owner;	/* its owner when it was read; InvalidOid
									 * with it */
	const char *validation_metric;	/* NULL: no validation, and the three
									 * below NULL */
	int			patience;
	int			best_iteration;
	double		validation_score;
	Oid			owner;
	TimestampTz trained_at;
	const char *changed_col;	/* NULL: no refreshes by wals_refresh */
	const char *changed_mark;	/* the mark's text (marks.c), or NULL */
	const float *user_gram;		/* XᵀX, params.factors squared, or NULL */
	const int32 *item_counts;	/* ratings of each of the items, or NULL */
} WalsCatalogRow;

/*
 * The most factors for which a training keeps XᵀX in the catalog: its cost,
 * users f^2, is a few percent of one iteration's up to there.
 */
#define WALS_USER_GRAM_MAX_FACTORS	256

extern bytea *wals_gram_bytea(const float *G, int f);
extern float *wals_gram_from_bytea(bytea *b, int f);
extern bytea *wals_counts_bytea(const int32 *counts, int64 n);
extern int32 *wals_counts_from_bytea(bytea *b, int64 n);
extern bool wals_catalog_state(const char *schema, const char *name, bytea **user_gram,
							   bytea **item_counts, int64 *users);
extern void wals_catalog_keep_state(const char *schema, const char *name, bytea *user_gram,
									bytea *item_counts, bool items_changed);

/* What starts the description of a model's user factor table (describe.c). */
#define WALS_DESCRIPTION_PREFIX		"wals model settings: "

/*
 * A relation a model's description names (describe.c), for the caller to
 * look up: its schema and its name, both NULL where it names none.  The
 * schema is NULL alone where the description gives the name alone, as the
 * validation table of a description of 0.4.0 and 0.5.0 (format 1).
 */
typedef struct WalsDescribedRelation
{
	char	   *schema;
	char	   *name;
} WalsDescribedRelation;

/* A model's name as given: schema is NULL when it is not qualified. */
typedef struct WalsModelName
{
	char	   *schema;
	char	   *name;
} WalsModelName;

/*
 * A model's source for SQL text: its name and its columns, quoted, looked
 * up from its OID (source.c).
 */
typedef struct WalsSourceNames
{
	char	   *relation;
	const char *user_col;
	const char *item_col;
	const char *rating_col;		/* NULL: every pair counted 1 */
} WalsSourceNames;

/*
 * How a column of a type wals reads is read, through any domain over it:
 * the first three are the types of ids, all six those of ratings.
 */
typedef enum WalsValueKind
{
	WALS_VALUE_INT2,
	WALS_VALUE_INT4,
	WALS_VALUE_INT8,
	WALS_VALUE_FLOAT4,
	WALS_VALUE_FLOAT8,
	WALS_VALUE_NUMERIC
} WalsValueKind;

#define WALS_VALUE_IS_ID(kind)	((kind) <= WALS_VALUE_INT8)

/* A user's rated items, as indices into the model's items, and ratings. */
typedef struct WalsRated
{
	int64		n;
	int32	   *items;			/* sorted, may repeat */
	float	   *ratings;
} WalsRated;

/* What wals_become saves, to go back to the caller's role. */
typedef struct WalsRoleSave
{
	Oid			userid;
	int			sec_context;
	int			guc_level;
} WalsRoleSave;

/* What wraps the ALS sweeps of a training (src/train/ncg.c). */
typedef enum WalsAccelerate
{
	WALS_ACCEL_NONE = 0,
	WALS_ACCEL_NCG				/* ALS-NCG: sweeps precondition a nonlinear CG */
} WalsAccelerate;

/*
 * vocabulary.c: the words of an option's values, each table ended by a
 * NULL name
 */
typedef struct WalsWord
{
	const char *name;
	int			value;
} WalsWord;

extern const WalsWord wals_feedback_words[];
extern const WalsWord wals_solver_words[];
extern const WalsWord wals_accelerate_words[];
extern bool wals_word_parse(const WalsWord *words, const char *given, int *value);
extern int	wals_word_arg(const WalsWord *words, const char *given, const char *arg);
extern const char *wals_word_name(const WalsWord *words, int value);
extern char *wals_word_choices(const WalsWord *words);
extern char *wals_metric_choices(void);
extern const char *wals_feedback_name(WalsFeedback feedback);
extern const char *wals_solver_name(WalsSolver solver);
extern const char *wals_accelerate_name(WalsAccelerate accelerate);

/* catalog.c: model names, and writing the rows of wals_models */
extern char *wals_catalog_table(const char *table);
extern void wals_model_name_parse(const char *given, const char *what, WalsModelName *out);
extern char *wals_model_display(const char *schema, const char *name);
extern char *wals_model_quoted(const char *schema, const char *name);
extern void wals_model_resolve(text *model, WalsModelInfo *info);
extern Oid	wals_model_new_schema(const WalsModelName *mn);
extern char *wals_model_argument(const char *schema, const char *name);
extern char *wals_unattached_hint(const char *schema, const char *name);
extern void wals_catalog_write(const WalsCatalogRow *row);
extern void wals_no_such_model(const char *schema, const char *name);
extern char *wals_model_grant_hint(const WalsModelInfo *info);
extern void wals_catalog_delete(const WalsModelInfo *info);
extern void wals_catalog_add_users(const WalsModelInfo *info, int64 delta);
extern int64 wals_next_version(void);

/* images.c: the areas serving shares, kept in wals_serving_images */
extern void wals_image_write(Oid item_rel, int64 version, const void *area, Size head_bytes,
							 Size bytes, bool replace);
extern void wals_image_forget(Oid item_rel);
extern int64 wals_image_bytes(Oid item_rel, int64 version, bool *present);
extern uint64 wals_image_rows(Oid item_rel);
extern void wals_image_row(SPITupleTable *rows, uint64 k, int64 *version, int32 *chunk);
extern bytea *wals_image_data(SPITupleTable *rows, uint64 k, Size *len);

/* model_row.c: a model's catalog row, read in place */
extern bool wals_catalog_lookup(const char *schema, const char *name, WalsModelInfo *info);
extern bool wals_catalog_lookup_along(List *schemas, const char *name, WalsModelInfo *info);
extern int	wals_catalog_models_along(List *schemas, WalsModelInfo *infos, int max);
extern void wals_model_check(const WalsModelInfo *info);

/* spi.c: every statement wals runs, search_path pinned */
extern void wals_spi_connect(void);
extern int	wals_sql(const char *query, int nargs, const Oid *types, const Datum *values,
					 const char *nulls, bool read_only, long count);
extern void wals_spi_exec(const char *query, int nargs, const Oid *types,
						  const Datum *values, int expected);
extern void wals_sql_expect(int rc, int expected, Oid relid);
extern int	wals_sql_extended(const char *query, const SPIExecuteOptions *options);
extern SPIPlanPtr wals_sql_prepare(const char *query, int nargs, Oid *types);
extern SPIPlanPtr wals_keep_plan(const char *query, int nargs, Oid *types);
extern int	wals_sql_plan(SPIPlanPtr plan, const Datum *values, const char *nulls,
						  bool read_only, long count);
extern Portal wals_sql_cursor(const char *query, int nargs, const Oid *types,
							  const Datum *values, const char *nulls, bool read_only,
							  int options);
extern Portal wals_sql_cursor_plan(SPIPlanPtr plan, const Datum *values, const char *nulls,
								   bool read_only);
extern void wals_sql_fetch(Portal portal, long count);

/* model.c: a model as a whole, its lock, its owner, its tables */
extern bool wals_lock_model(const char *schema, const char *name, WalsModelInfo *info,
							bool creating);
extern WalsModelInfo *wals_model_get(text *model);
extern Oid	wals_model_owner(const WalsModelInfo *info);
extern void wals_check_create(Oid nsp, Oid role, const char *name, Oid source);
extern void wals_model_check_owner(const WalsModelInfo *info);
extern void wals_model_check_tables(const WalsModelInfo *info);
extern void wals_drop_factor_tables(const WalsModelInfo *info, DropBehavior behavior);
extern void wals_drop_factor_table(const WalsModelInfo *info, Oid relid, bool user_side);
extern bool wals_factor_table_reusable(const WalsModelInfo *info, Oid relid, bool user_side);
extern void wals_model_check_rules(const WalsModelInfo *info);
extern bool wals_model_has_tables(const WalsModelInfo *info);

/* source.c: relations and columns of ratings */
extern char *wals_relation_name(Oid relid);
extern Oid	wals_relation_owner(Oid relid);
extern char *wals_check_source(Oid relid, const char *argname);
extern void wals_check_readable(Oid relid, const char *const *cols, int ncols);
extern void wals_check_readable_hint(Oid relid, const char *const *cols, int ncols,
									 const char *hint);
extern bool wals_value_kind(Oid type, WalsValueKind *kind);
extern char *wals_check_column(Oid relid, const char *reldisplay, const char *name,
							   const char *argname, bool id);
extern void wals_model_source(const WalsModelInfo *info, WalsSourceNames *src);

/* factors.c: what is read back from factor tables, checked */
extern void wals_check_factor_table(const WalsModelInfo *info, Oid relid, bool user_side);
extern void wals_check_no_rules(const WalsModelInfo *info, Oid relid);
extern bool wals_factor_table_in_form(Oid relid, bool user_side);
extern bool wals_factor_table_keyed(Oid relid, bool user_side);
extern EState *wals_write_estate(Relation rel, CommandId cid, ResultRelInfo **rri);
extern void wals_write_estate_end(EState *estate, ResultRelInfo *rri);
extern void wals_read_factors(HeapTuple tuple, TupleDesc desc, int col, int f, float *out,
							  const WalsModelInfo *info);
extern int64 wals_read_id(HeapTuple tuple, TupleDesc desc, int col, const WalsModelInfo *info,
						  bool *isnull);
extern void wals_read_rated(HeapTuple tuple, TupleDesc desc, int col, const WalsModelInfo *info,
							const WalsIdDirectory *items, WalsRated *rated);
extern ArrayType *wals_real_array(const float *v, int64 n);
extern bytea *wals_rated_pack_bytea(const int64 *ids, const float *values, int64 n);
extern bytea *wals_rated_bytea(const int64 *item_ids, const int32 *indices,
							   const float *values, int64 n);
extern Size wals_rated_row_bound(const WalsCsr *R, int64 r);
extern void wals_rated_row_into(const int64 *item_ids, const WalsCsr *R, int64 r, bytea *out,
								int64 *ids, float *vals);
extern bytea *wals_rated_row_bytea(const int64 *item_ids, const WalsCsr *R, int64 r);

/* marks.c: the changed column of a source, and the mark wals_refresh reads from */
extern char *wals_check_changed_col(Oid relid, const char *reldisplay, const char *name);
extern Oid	wals_changed_col_type(Oid relid, const char *col, const char *display);
extern char *wals_mark_text(Datum value, Oid type);
extern Datum wals_mark_value(const char *text, Oid type, const char *display);
extern bool wals_mark_read(const char *source, const char *col, Oid type, Datum *value);
extern void wals_changed_col_advice(Oid source, const char *source_name, const char *col,
									const char *user_col, const char *item_col);

/* describe.c: the settings a model's tables carry, for wals_attach_model */
extern void wals_model_describe(const WalsCatalogRow *row);
extern char *wals_description_text(const WalsCatalogRow *row);
extern void wals_description_parse(const char *text, const char *display, WalsCatalogRow *row,
								   WalsDescribedRelation *source,
								   WalsDescribedRelation *validation);

/* roles.c */
extern void wals_become(Oid role, WalsRoleSave *save);
extern void wals_unbecome(const WalsRoleSave *save);
extern void wals_become_model_owner(const WalsModelInfo *info, WalsRoleSave *save);
extern void wals_become_catalog_writer(WalsRoleSave *save);
extern char *wals_role_display(Oid role);
extern Oid	wals_extension_schema(void);
extern void wals_require_nargs(FunctionCallInfo fcinfo, int nargs, const char *fn);
extern bool wals_extension_installed(Oid *schema, Oid *owner);

#endif							/* WALS_CATALOG_H */
