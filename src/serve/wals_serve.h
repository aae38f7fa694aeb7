/*
 * wals_serve.h
 *	  The serving side: a model's item factors cached per backend, and the
 *	  arguments every serving function shares.
 */
#ifndef WALS_SERVE_H
#define WALS_SERVE_H

#include "executor/spi.h"
#include "storage/dsm.h"
#include "utils/array.h"

#include "segments.h"
#include "wals_catalog.h"
#include "wals_metrics.h"
#include "wals_score.h"

/*
 * The item side of one version of a model, with the plans of the queries a
 * call runs against the model's tables, in its own memory context under
 * TopMemoryContext; the items themselves (ids, Y, G, the index) lie in the
 * version's shared segment where it has one (items.c), else in that
 * context.  All of them are read-only once loaded.
 */
/*
 * A user's row is read through the user table's primary key where nothing
 * but the row itself would come of a query (cache.c).
 */
typedef enum WalsUserRead
{
	WALS_USER_READ_UNKNOWN,		/* not decided since the table last changed */
	WALS_USER_READ_IN_PLACE,
	WALS_USER_READ_QUERY
} WalsUserRead;

typedef struct WalsServeModel
{
	MemoryContext cxt;
	WalsModelInfo info;			/* the catalog row, copied into cxt */
	bool		stale;			/* the item table's definition changed since */
	dsm_segment *seg;			/* mapping of the shared items, or NULL */
	dsm_segment *cosine_seg;	/* and of the shared cosine index */
	bool		own_items;		/* read for this backend alone (wals.shared_items off) */
	int			factors;
	int64		nitems;
	int64	   *ids;			/* increasing */
	WalsIdDirectory item_dir;	/* over ids, to find an item by id */
	float	   *Y;				/* nitems x factors, 64-byte aligned */
	float	   *G;				/* Y^T Y, for fold-in and explanations */
	WalsScoreIndex index;
	WalsScoreIndex *cosine;		/* over the unit rows of Y, built on demand */
	WalsUserRead user_read;		/* how a user's row is read */
	AttrNumber	factors_att;	/* of the user table, where read in place */
	AttrNumber	rated_att;
	SPIPlanPtr	user_plan;		/* factors, rated items of user $1, or NULL */
	void	   *scratch;		/* of the queries, grown as k needs */
	size_t		scratch_size;
} WalsServeModel;

/*
 * What a refresh changed of a version's items (items.c): the rows of
 * ids[0..n) (increasing) replaced by Y's rows, added where the version
 * before has none, removed where !known; G the Gram of the result.
 */
typedef struct WalsItemsPatch
{
	const WalsServeModel *from;
	const int64 *ids;
	int64		n;
	const float *Y;
	const bool *known;
	const float *G;
} WalsItemsPatch;

/* cache.c */
extern WalsServeModel *wals_serve_model(text *model);
extern void wals_serve_preload(const char *schema, const char *name,
							   const WalsItemsPatch *patch, const WalsModelInfo *replaced);
extern int64 wals_serve_item(const WalsServeModel *m, int64 id);
extern bool wals_serve_user(WalsServeModel *m, int64 user_id, float *x, WalsRated *rated);
extern int	wals_serve_users(WalsServeModel *m, int64 *ids, int n, float *X, WalsRated *rated);
extern bool wals_serve_known_users(WalsServeModel *m, int64 *ids, int *n);

/* items.c */
extern void wals_area_layout(WalsArea *h, WalsAreaKind kind, int64 n, int f);
extern WalsArea *wals_area_new(const WalsArea *key, bool share, MemoryContext cxt,
							   dsm_segment **seg);
extern WalsArea *wals_area_finish(WalsArea *h, dsm_segment **seg);
extern void wals_area_map_items(WalsServeModel *m, const WalsArea *h);
extern void wals_items_load(WalsServeModel *m, const WalsModelInfo *info, bool retire,
							const WalsItemsPatch *patch);
extern const WalsScoreIndex *wals_cosine_load(WalsServeModel *m);
extern void wals_items_release(WalsServeModel *m);

/* item_images.c: a version's items copied from images, not built */
typedef enum WalsImageFound
{
	WALS_IMAGE_NONE,			/* nothing usable: build */
	WALS_IMAGE_COPIED,			/* the version's own, copied and mapped */
	WALS_IMAGE_PATCH			/* an earlier version's, and what changed since */
} WalsImageFound;

extern WalsImageFound wals_items_from_image(WalsServeModel *m, const WalsModelInfo *info,
											WalsArea *key, WalsItemsPatch *patch,
											MemoryContext cxt);
extern void wals_items_write_image(const WalsArea *area, const WalsItemsPatch *patch);

/*
 * evaluate_round.c: wals_evaluate's test users, gathered a round at a time
 * and scored by the leader and parallel workers
 */
#define WALS_EVAL_ROUND 32768

typedef struct WalsEvalRound
{
	int64		n;				/* users gathered */
	int64	   *ids;			/* their ids, to name one that fails */
	float	   *X;				/* their factors, n rows */
	int64	   *rated_ptr;		/* user j's rated items: rated[rated_ptr[j], rated_ptr[j + 1]) */
	int32	   *rated;
	int64		rated_cap;
	int64	   *test_ptr;		/* user j's merged test cells, likewise */
	int32	   *test_items;
	float	   *test_ratings;
	int64		test_cap;
} WalsEvalRound;

extern void wals_eval_round_init(WalsEvalRound *r, int f);
extern void wals_eval_round_add(WalsEvalRound *r, int f, int64 id, const float *x,
								const WalsRated *rated, const int32 *items,
								const float *ratings, int64 ntest);
extern void wals_eval_round_score(WalsServeModel *m, WalsEvalRound *r, int k, bool rmse,
								  WalsMetricsAcc *acc, WalsRmseAcc *sq);

/* foldin.c: a user's factors from their ratings, as training solves them */
extern void wals_one_row(const WalsServeModel *m, const int32 *items, const float *ratings,
						 int64 n, WalsCsr *row);
extern void wals_fold_in(const WalsServeModel *m, const WalsCsr *row, float *x);

/* factor_rows.c: the rows a refresh writes, one at a time */
typedef struct WalsRowWriter WalsRowWriter;

extern WalsRowWriter *wals_row_writer_open(const WalsModelInfo *info, bool user_side);
extern bool wals_row_write(WalsRowWriter *w, int64 id, const float *x, int f, bytea *rated);
extern int64 wals_row_remove(WalsRowWriter *w, int64 id);
extern void wals_row_writer_close(WalsRowWriter *w);

/* refresh_items.c: what the refreshes share */

/* Every user's factors, ids increasing, and their Gram */
typedef struct WalsUserSide
{
	int64		n;
	int64	   *ids;
	float	   *X;
	float	   *G;
	int64		total;			/* the model's users, n or more: a row's scale */
} WalsUserSide;

/* A rating of the source, by ids */
typedef struct WalsCell
{
	int64		user;
	int64		item;
	float		rating;
} WalsCell;

/* What a refresh did, for its result and the catalog */
typedef struct WalsRefreshDone
{
	int64		ratings;		/* read above the mark */
	int64		users;			/* stored */
	int64		users_added;	/* net of those removed */
	int64		items;
	int64		items_added;
	bool		items_changed;
	const char *mark;			/* the new mark, or NULL to keep it */
	bool		by_refresh;		/* wals_refresh, which sets refreshed_at */
	const float *user_gram;		/* XᵀX of the users now, to keep, or NULL */
	const int32 *item_counts;	/* ratings of each item now, to keep, or NULL */
	int64		nitem_counts;
} WalsRefreshDone;

extern void wals_user_side_load(const WalsModelInfo *info, WalsUserSide *us);
extern void wals_user_side_raters(const WalsModelInfo *info, float *G, int64 users,
								  const WalsCell *cells, int64 ncells, WalsUserSide *us);
extern void wals_gram_swap(float *G, const float *gone, int64 ngone, const float *come,
						   int64 ncome, int f);
extern void wals_user_side_update(WalsUserSide *us, int f, const int64 *ids, const float *X,
								  int64 n);
extern void wals_solve_items(const WalsModelInfo *info, const WalsUserSide *us, const int64 *ids,
							 int64 n, const WalsCell *cells, int64 ncells, float *Y, bool *known);
extern Datum wals_int8_array(const int64 *v, int64 n);
extern char *wals_cells_query(const WalsSourceNames *src, const char *from, const char *where);
extern WalsCell *wals_read_cells(const WalsModelInfo *info, SPIPlanPtr plan, Datum *args,
								 WalsCell *cells, int64 *n, int64 *cap);
extern WalsCell *wals_item_ratings(const WalsModelInfo *info, const WalsSourceNames *src,
								   const int64 *ids, int64 n, double expected, int64 *ncells);
extern double wals_items_rated(const WalsServeModel *m, const int32 *counts, const int64 *ids,
							   int64 n);
extern bool wals_cell_read(const WalsModelInfo *info, HeapTuple tuple, TupleDesc desc,
						   WalsCell *cell);
extern void wals_store_items(const WalsModelInfo *info, const int64 *ids, int64 n, const float *Y,
							 const bool *known, WalsRefreshDone *done);
extern float *wals_patched_gram(const WalsServeModel *from, const int64 *ids, int64 n,
							   const float *Y, const bool *known);
extern void wals_catalog_refreshed(const WalsModelInfo *info, const WalsRefreshDone *done,
								   const WalsItemsPatch *patch);

/* refresh_source.c */
extern bool wals_refresh_reads_whole(const WalsModelInfo *info, double expected);
extern WalsCell *wals_refresh_read_whole(const WalsModelInfo *info, const int64 *ids, int64 n,
										 int64 *ncells);

/* solve_parallel.c */
extern void wals_solve_all_rows(const WalsParams *params, const WalsCsr *R, const float *X,
								int64 xrows, const float *G, float *Y, int f, const char *what);

/* args.c */
extern int	wals_compare_int32(const void *a, const void *b);
extern int	wals_compare_int64(const void *a, const void *b);
extern void wals_sort_cells(int32 *items, float *ratings, int64 n);
extern int	wals_arg_k(FunctionCallInfo fcinfo, int arg);
extern bool wals_arg_bool(FunctionCallInfo fcinfo, int arg, const char *name);
extern int64 *wals_arg_ids(FunctionCallInfo fcinfo, int arg, const char *name, int *n);
extern int32 *wals_ids_to_items(const WalsServeModel *m, const int64 *ids, int n,
								int64 *count, int *unknown);
extern int32 *wals_merge_items(const int32 *a, int64 na, const int32 *b, int64 nb,
							   int64 *n);
extern void wals_filter_args(FunctionCallInfo fcinfo, int exclude_arg, int only_arg,
							 const WalsServeModel *m, WalsScoreFilter *filter);
extern void *wals_serve_scratch(WalsServeModel *m, const WalsScoreIndex *ix, int k);
extern void wals_put_topk(FunctionCallInfo fcinfo, WalsServeModel *m, const WalsScoreIndex *ix,
						  const float *x, const WalsScoreFilter *filter, int k);

#endif							/* WALS_SERVE_H */
