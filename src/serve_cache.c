/*
 * serve_cache.c
 *	  The item factors of each model this backend serves, loaded once per
 *	  version.
 *
 * A call reads the model's catalog row and locks its factor tables
 * (wals_model_get); when the row's version and the tables are those cached,
 * the call goes straight to scoring.  Every training draws a new version and
 * creates new tables, and a drop removes the row, so a retraining or drop
 * committed by any session is seen by the next call here.  The cache holds
 * the factors in one aligned matrix with their ids, Y^T Y for fold-in, the
 * compact index of the scoring engine, and the plans of the per-call
 * queries, so that a call parses and plans nothing.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "serve.h"

/* Rows fetched at a time by the queries over many users. */
#define WALS_USERS_FETCH 65536

/* Models cached at once per backend; the least recently used goes first. */
#define WALS_SERVE_MODELS 8

static WalsServeModel *models[WALS_SERVE_MODELS];

static void *
alloc_aligned(MemoryContext cxt, Size size)
{
	char	   *p = MemoryContextAllocHuge(cxt, size + 64);

	return (void *) TYPEALIGN(64, p);
}

static char *
copy_text(MemoryContext cxt, const char *s)
{
	return s == NULL ? NULL : MemoryContextStrdup(cxt, s);
}

static void
forget(WalsServeModel *m)
{
	if (m->user_plan != NULL)
		SPI_freeplan(m->user_plan);
	if (m->rated_plan != NULL)
		SPI_freeplan(m->rated_plan);
	MemoryContextDelete(m->cxt);
}

/* Read the item factors of info's table into m. */
static void
load_items(WalsServeModel *m, const WalsModelInfo *info)
{
	int			f = info->factors;
	char	   *query = psprintf("SELECT item_id, factors FROM %s ORDER BY item_id", info->item_table);
	int			rc = SPI_execute(query, false, 0);
	size_t		index_size;

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "wals: query \"%s\" failed: %s", query, SPI_result_code_string(rc));
	m->factors = f;
	m->nitems = (int64) SPI_processed;
	m->ids = MemoryContextAllocHuge(m->cxt, sizeof(int64) * Max(m->nitems, 1));
	m->Y = alloc_aligned(m->cxt, sizeof(float) * f * Max(m->nitems, 1));
	for (int64 i = 0; i < m->nitems; i++)
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[i];

		m->ids[i] = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull));
		wals_read_factors(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull), f,
						  m->Y + i * f, info->item_table);
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	SPI_freetuptable(SPI_tuptable);

	m->G = MemoryContextAllocZero(m->cxt, sizeof(float) * f * f);
	wals_gram_rows(m->Y, 0, m->nitems, f, m->G);
	index_size = wals_score_index_size(m->nitems, f);
	if (wals_score_index_build(&m->index, m->Y, m->nitems, f,
							   MemoryContextAllocHuge(m->cxt, Max(index_size, 1))) != WALS_OK)
		elog(ERROR, "wals: could not index the item factors of model \"%s\"", info->name);
}

/*
 * The plan of the query for one user's factors.  The plan of the query of
 * the source comes later, when first needed: the source may be gone while
 * the model still serves with exclude_rated => false.
 */
static void
prepare_plans(WalsServeModel *m, const WalsModelInfo *info)
{
	Oid			int8type = INT8OID;

	m->user_plan = wals_keep_plan(psprintf("SELECT factors FROM %s WHERE user_id OPERATOR(pg_catalog.=) $1",
									  info->user_table), 1, &int8type);
}

static SPIPlanPtr
rated_plan(WalsServeModel *m)
{
	const WalsModelInfo *info = &m->info;
	Oid			int8type = INT8OID;
	const char *rating = info->rating_col != NULL ?
		psprintf("(%s)::pg_catalog.float4", quote_identifier(info->rating_col)) :
		"NULL::pg_catalog.float4";

	if (m->rated_plan == NULL)
		m->rated_plan = wals_keep_plan(psprintf("SELECT (%s)::pg_catalog.int8, %s FROM %s"
										   " WHERE %s OPERATOR(pg_catalog.=) $1",
										   quote_identifier(info->item_col), rating, info->source,
										   quote_identifier(info->user_col)),
								  1, &int8type);
	return m->rated_plan;
}

static void
copy_info(WalsServeModel *m, const WalsModelInfo *info)
{
	m->info = *info;
	m->info.name = copy_text(m->cxt, info->name);
	m->info.feedback = copy_text(m->cxt, info->feedback);
	m->info.source = copy_text(m->cxt, info->source);
	m->info.user_col = copy_text(m->cxt, info->user_col);
	m->info.item_col = copy_text(m->cxt, info->item_col);
	m->info.factor_schema = copy_text(m->cxt, info->factor_schema);
	m->info.user_factors = copy_text(m->cxt, info->user_factors);
	m->info.item_factors = copy_text(m->cxt, info->item_factors);
	m->info.user_table = copy_text(m->cxt, info->user_table);
	m->info.item_table = copy_text(m->cxt, info->item_table);
	m->info.rating_col = copy_text(m->cxt, info->rating_col);
}

/*
 * A fresh entry for info, built completely before it replaces anything, so
 * that an error or a cancel while loading leaves no half-built entry.
 */
static WalsServeModel *
load(const WalsModelInfo *info)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "wals served model",
											  ALLOCSET_DEFAULT_SIZES);
	WalsServeModel *volatile m = MemoryContextAllocZero(cxt, sizeof(WalsServeModel));

	m->cxt = cxt;
	m->loaded_by = GetUserId();
	PG_TRY();
	{
		copy_info(m, info);
		load_items(m, info);
		prepare_plans(m, info);
	}
	PG_CATCH();
	{
		forget(m);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return m;
}

/* Whether row-level security is enabled on a table, for any role. */
static bool
has_row_security(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		rls;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "wals: cache lookup failed for relation %u", relid);
	rls = ((Form_pg_class) GETSTRUCT(tuple))->relrowsecurity;
	ReleaseSysCache(tuple);
	return rls;
}

/*
 * The served state of the model a call names, loaded or reloaded when its
 * version or tables changed.  The caller needs SELECT on both factor
 * tables, checked on every call: the cache is shared by every role this
 * backend runs as, except where row-level security on the item factors
 * makes what a role sees depend on the role, and the items are read again
 * for each new role.  Must run inside an SPI connection.
 */
WalsServeModel *
wals_serve_model(text *model)
{
	WalsModelInfo *info = wals_model_get(model);
	int			slot = WALS_SERVE_MODELS - 1;
	WalsServeModel *m;

	if (pg_class_aclcheck(info->item_rel, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, info->item_factors);
	if (pg_class_aclcheck(info->user_rel, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, info->user_factors);

	for (int i = 0; i < WALS_SERVE_MODELS; i++)
		if (models[i] != NULL && strcmp(models[i]->info.name, info->name) == 0)
		{
			slot = i;
			break;
		}
	m = models[slot];
	if (m == NULL || m->info.version != info->version || m->info.item_rel != info->item_rel ||
		m->info.user_rel != info->user_rel || strcmp(m->info.name, info->name) != 0 ||
		(m->loaded_by != GetUserId() && has_row_security(info->item_rel)))
	{
		WalsServeModel *fresh = load(info);

		if (m != NULL)
			forget(m);
		m = fresh;
	}
	/* Most recently used first. */
	memmove(&models[1], &models[0], sizeof(WalsServeModel *) * slot);
	models[0] = m;
	return m;
}

/* Index of item id in m, or -1. */
int64
wals_serve_item(const WalsServeModel *m, int64 id)
{
	return wals_ids_find(m->ids, m->nitems, id);
}

/* The factors of user_id into x; false for a user the model does not know. */
bool
wals_serve_user(WalsServeModel *m, int64 user_id, float *x)
{
	Datum		arg = Int64GetDatum(user_id);
	bool		isnull;
	int			rc = SPI_execute_plan(m->user_plan, &arg, NULL, false, 1);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "wals: reading user factors failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	wals_read_factors(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull),
					  m->factors, x, m->info.user_table);
	return true;
}

/* The index of id in ids[0..n) (sorted, distinct), which a query over them returned. */
int
wals_serve_user_index(const int64 *ids, int n, int64 id)
{
	int64		index = wals_ids_find(ids, n, id);

	if (index < 0)
		elog(ERROR, "wals: a query returned user " INT64_FORMAT ", which was not asked for", id);
	return (int) index;
}

/*
 * Run query with ids[0..n) as its bigint[] $1 and hand every row to
 * each_row, a batch of rows at a time, in the caller's memory context.
 */
void
wals_serve_each_row(const char *query, const int64 *ids, int n,
					void (*each_row) (HeapTuple tuple, TupleDesc desc, void *state),
					void *state)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	Oid			type = INT8ARRAYOID;
	Datum		arg;
	Portal		portal;

	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(ids[i]);
	arg = PointerGetDatum(construct_array(elems, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	portal = SPI_cursor_open_with_args(NULL, query, 1, &type, &arg, NULL, false, 0);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, WALS_USERS_FETCH);
		/* SPI leaves its own context current */
		MemoryContextSwitchTo(cxt);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
			each_row(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, state);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_freetuptable(SPI_tuptable);
	SPI_cursor_close(portal);
	MemoryContextSwitchTo(cxt);
}

/* Where wals_serve_users puts the factors its query returns. */
typedef struct UsersState
{
	WalsServeModel *m;
	const int64 *ids;
	int			n;
	float	   *X;
	bool	   *known;
} UsersState;

static void
user_row(HeapTuple tuple, TupleDesc desc, void *state)
{
	UsersState *s = state;
	bool		isnull;
	int			u = wals_serve_user_index(s->ids, s->n,
										  DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull)));

	wals_read_factors(SPI_getbinval(tuple, desc, 2, &isnull), s->m->factors,
					  s->X + (size_t) u * s->m->factors, s->m->info.user_table);
	s->known[u] = true;
}

/*
 * The factors of the users ids[0..n) (sorted, distinct) into the rows of X,
 * with one query for all of them; known[u] is false, and row u zero, for a
 * user the model does not know.
 */
void
wals_serve_users(WalsServeModel *m, const int64 *ids, int n, float *X, bool *known)
{
	UsersState	s = {m, ids, n, X, known};

	memset(X, 0, sizeof(float) * m->factors * n);
	memset(known, 0, sizeof(bool) * n);
	wals_serve_each_row(psprintf("SELECT user_id, factors FROM %s"
								 " WHERE user_id OPERATOR(pg_catalog.=) ANY ($1)",
								 m->info.user_table),
						ids, n, user_row, &s);
}

/* The rated items of many users, gathered as (user, item) pairs. */
typedef struct RatedPairs
{
	WalsServeModel *m;
	const int64 *ids;
	int			n;
	int64		count;
	int64		cap;
	int32	   *user;
	int32	   *item;
} RatedPairs;

static void
rated_row(HeapTuple tuple, TupleDesc desc, void *state)
{
	RatedPairs *p = state;
	bool		unull;
	bool		inull;
	Datum		user = SPI_getbinval(tuple, desc, 1, &unull);
	Datum		item = SPI_getbinval(tuple, desc, 2, &inull);
	int64		index;

	if (unull || inull || (index = wals_serve_item(p->m, DatumGetInt64(item))) < 0)
		return;
	if (p->count == p->cap)
	{
		p->cap *= 2;
		p->user = repalloc_huge(p->user, sizeof(int32) * p->cap);
		p->item = repalloc_huge(p->item, sizeof(int32) * p->cap);
	}
	p->user[p->count] = wals_serve_user_index(p->ids, p->n, DatumGetInt64(user));
	p->item[p->count] = (int32) index;
	p->count++;
}

/*
 * The items each of the users ids[0..n) (sorted, distinct) rates in the
 * model's source now, known to the model, with one query for all of them:
 * user u's sorted items at rated[u], nrated[u] of them.
 */
void
wals_serve_rated_users(WalsServeModel *m, const int64 *ids, int n, int64 *nrated,
					   int32 **rated)
{
	RatedPairs	p = {m, ids, n, 0, 1024, NULL, NULL};
	int32	   *all;
	int64		at = 0;
	const WalsModelInfo *info = &m->info;

	wals_serve_check_source(m, "Pass exclude_rated => false, or train the model again.");
	p.user = palloc(sizeof(int32) * p.cap);
	p.item = palloc(sizeof(int32) * p.cap);
	wals_serve_each_row(psprintf("SELECT (%s)::pg_catalog.int8, (%s)::pg_catalog.int8 FROM %s"
								 " WHERE %s OPERATOR(pg_catalog.=) ANY ($1)",
								 quote_identifier(info->user_col), quote_identifier(info->item_col),
								 info->source, quote_identifier(info->user_col)),
						ids, n, rated_row, &p);

	/* each user's items together, by a counting pass */
	all = palloc(sizeof(int32) * Max(p.count, 1));
	memset(nrated, 0, sizeof(int64) * n);
	for (int64 r = 0; r < p.count; r++)
		nrated[p.user[r]]++;
	for (int u = 0; u < n; u++)
	{
		rated[u] = all + at;
		at += nrated[u];
		nrated[u] = 0;
	}
	for (int64 r = 0; r < p.count; r++)
		rated[p.user[r]][nrated[p.user[r]]++] = p.item[r];
	for (int u = 0; u < n; u++)
		qsort(rated[u], nrated[u], sizeof(int32), wals_compare_int32);
	pfree(p.user);
	pfree(p.item);
}

/* The model's source must still exist for a call that reads it. */
void
wals_serve_check_source(const WalsServeModel *m, const char *hint)
{
	List	   *names = stringToQualifiedNameList(m->info.source);

	if (!OidIsValid(RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("source relation %s of model \"%s\" does not exist",
						m->info.source, m->info.name),
				 errhint("%s", hint)));
}

/*
 * The items user_id rates in the model's source now, known to the model,
 * sorted, with their ratings (1 for a model without a rating column), in
 * the caller's memory context.
 */
void
wals_serve_rated(WalsServeModel *m, int64 user_id, WalsRated *rated)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum		arg = Int64GetDatum(user_id);
	int			rc;
	int32	   *items;
	float	   *ratings;
	int64		n = 0;

	wals_serve_check_source(m, "Pass exclude_rated => false, or train the model again.");
	rc = SPI_execute_plan(rated_plan(m), &arg, NULL, false, 0);
	/* SPI leaves its own context current: allocate in the caller's */
	MemoryContextSwitchTo(cxt);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "wals: reading the ratings of user " INT64_FORMAT " failed: %s",
			 user_id, SPI_result_code_string(rc));

	items = palloc(sizeof(int32) * Max(SPI_processed, 1));
	ratings = palloc(sizeof(float) * Max(SPI_processed, 1));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		bool		rnull;
		Datum		item = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);
		Datum		rating = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &rnull);
		int64		index = isnull ? -1 : wals_serve_item(m, DatumGetInt64(item));

		if (index < 0)
			continue;
		items[n] = (int32) index;
		ratings[n] = rnull ? 1.0f : DatumGetFloat4(rating);
		n++;
	}
	SPI_freetuptable(SPI_tuptable);

	wals_sort_cells(items, ratings, n);
	rated->n = n;
	rated->items = items;
	rated->ratings = ratings;
}

/*
 * The index over the unit rows of Y, for cosine similarity, built the first
 * time a call needs it.  A zero row stays zero: its similarity to anything
 * is 0.
 */
const WalsScoreIndex *
wals_serve_cosine(WalsServeModel *m)
{
	int			f = m->factors;
	float	   *unit;
	WalsScoreIndex *ix;
	size_t		index_size;

	if (m->cosine != NULL)
		return m->cosine;
	unit = alloc_aligned(m->cxt, sizeof(float) * f * Max(m->nitems, 1));
	for (int64 i = 0; i < m->nitems; i++)
	{
		const float *y = m->Y + i * f;
		double		norm = 0.0;

		for (int a = 0; a < f; a++)
			norm += (double) y[a] * y[a];
		norm = sqrt(norm);
		for (int a = 0; a < f; a++)
			unit[i * f + a] = norm > 0.0 ? (float) (y[a] / norm) : 0.0f;
	}
	ix = MemoryContextAllocZero(m->cxt, sizeof(WalsScoreIndex));
	index_size = wals_score_index_size(m->nitems, f);
	if (wals_score_index_build(ix, unit, m->nitems, f,
							   MemoryContextAllocHuge(m->cxt, Max(index_size, 1))) != WALS_OK)
		elog(ERROR, "wals: could not index the item factors of model \"%s\"", m->info.name);
	m->cosine = ix;
	return ix;
}
