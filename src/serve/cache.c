/*
 * cache.c
 *	  The item factors of each model this backend serves, loaded once per
 *	  version.
 *
 * A call reads the model's catalog row and locks its factor tables
 * (wals_model_get); when the row's version and the tables are those cached,
 * the call goes straight to scoring.  Every training draws a new version
 * (a retraining writes into the same tables, a replacement may make new
 * ones), and a drop removes the row, so a retraining or drop committed by
 * any session is seen by the next call here.  An entry says how a user's
 * row is read (through the user table's key, or by a query whose plan it
 * keeps), so that a call parses and plans nothing, and maps the version's
 * items (the factors in one aligned matrix with their ids,
 * Y^T Y for fold-in, the compact index of the scoring engine), which the
 * training built once for every backend of the server (items.c).
 *
 * The caller's rights are checked on every call (SELECT on both tables,
 * wals_model_get), but the tables are read, and the queries planned, as
 * the model's owner in a security-restricted operation (roles.c): an index
 * expression, a policy or an IMMUTABLE function the owner put on a factor
 * table runs as the owner, never as a superuser or application role that
 * serves the model.  So what is cached is what the owner sees, the same for
 * every role; a role that row-level security would filter is refused
 * (model.c) rather than served rows its policies hide.  What the owner sees
 * changes with the item table's definition as well as with its rows (a
 * policy, row security forced on the owner): any change of it, which
 * PostgreSQL announces to every backend as a relation cache invalidation,
 * makes the entry stale, and the next call reads the items again.
 *
 * Each user's rated items are kept with the model, in its user factor
 * table, beside the user's factors: serving never reads the model's source,
 * so it never runs the source's code (a view's functions) as the caller,
 * and leaving out the rated items costs the same whether or not the source
 * is indexed.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "pg_compat.h"
#include "segments.h"
#include "wals_serve.h"

/* Rows fetched at a time by the queries over many users. */
#define WALS_USERS_FETCH 65536

/*
 * A list of users is filtered down to the known ones by one pass over the
 * user table when it has more than WALS_KNOWN_PASS_MIN ids and at least one
 * per WALS_KNOWN_PASS_RATIO rows of the table: an id looked up through the
 * index costs about as much as that many rows of the pass.
 */
#define WALS_KNOWN_PASS_MIN 8192
#define WALS_KNOWN_PASS_RATIO 4

/* Models cached at once per backend; the least recently used goes first. */
#define WALS_SERVE_MODELS 8

static WalsServeModel *models[WALS_SERVE_MODELS];

/*
 * Entries replaced or evicted by a call made from inside another (from a
 * row-security policy of a factor table, say): the outer call may still be
 * reading them, so they are freed only once no call is running.
 */
static List *retired = NIL;
static bool callbacks_registered = false;

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
	wals_items_release(m);
	MemoryContextDelete(m->cxt);
}

static void
forget_retired(void)
{
	ListCell   *lc;

	foreach(lc, retired)
		forget(lfirst(lc));
	list_free(retired);
	retired = NIL;
}

static void
xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		forget_retired();
}

/*
 * relid's definition changed (InvalidOid: any relation's may have): the
 * item table's makes the entry stale, the user table's only the choice of
 * how a user's row is read.
 */
static void
relcache_callback(Datum arg, Oid relid)
{
	for (int i = 0; i < WALS_SERVE_MODELS; i++)
	{
		if (models[i] == NULL)
			continue;
		if (!OidIsValid(relid) || models[i]->info.item_rel == relid)
			models[i]->stale = true;
		if (!OidIsValid(relid) || models[i]->info.user_rel == relid)
			models[i]->user_read = WALS_USER_READ_UNKNOWN;
	}
}

/* Free an entry no longer cached, unless a call outside this one may hold it. */
static void
release(WalsServeModel *m)
{
	MemoryContext old;

	if (wals_call_depth() <= 1)
	{
		forget(m);
		return;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	retired = lappend(retired, m);
	MemoryContextSwitchTo(old);
}

static void
copy_info(WalsServeModel *m, const WalsModelInfo *info)
{
	m->info = *info;
	m->info.schema = copy_text(m->cxt, info->schema);
	m->info.name = copy_text(m->cxt, info->name);
	m->info.display = copy_text(m->cxt, info->display);
	m->info.user_col = copy_text(m->cxt, info->user_col);
	m->info.item_col = copy_text(m->cxt, info->item_col);
	m->info.rating_col = copy_text(m->cxt, info->rating_col);
}

/*
 * A fresh entry for info, built completely before it replaces anything, so
 * that an error or a cancel while loading leaves no half-built entry.  Read
 * as the model's owner (see the head of the file); how a user's row is read
 * is chosen at its first call (choose_user_read); retire: as for
 * wals_items_load.
 */
static WalsServeModel *
load(const WalsModelInfo *info, bool retire, const WalsItemsPatch *patch)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "wals served model",
											  ALLOCSET_DEFAULT_SIZES);
	WalsServeModel *volatile m = MemoryContextAllocZero(cxt, sizeof(WalsServeModel));

	m->cxt = cxt;
	PG_TRY();
	{
		wals_check_factor_table(info, info->user_rel, true);
		wals_check_factor_table(info, info->item_rel, false);
		copy_info(m, info);
		wals_items_load(m, info, retire, patch);
	}
	PG_CATCH();
	{
		forget(m);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return m;
}

static bool
same_model(const WalsModelInfo *a, const WalsModelInfo *b)
{
	return strcmp(a->schema, b->schema) == 0 && strcmp(a->name, b->name) == 0;
}

static void
register_callbacks(void)
{
	if (callbacks_registered)
		return;
	RegisterXactCallback(xact_callback, NULL);
	CacheRegisterRelcacheCallback(relcache_callback, (Datum) 0);
	callbacks_registered = true;
}

/* Put m first in the cache, in place of slot's entry. */
static void
put_first(WalsServeModel *m, int slot)
{
	memmove(&models[1], &models[0], sizeof(WalsServeModel *) * slot);
	models[0] = m;
}

/* The slot of the model info names, or the last slot, the least recently used. */
static int
slot_of(const WalsModelInfo *info)
{
	for (int i = 0; i < WALS_SERVE_MODELS; i++)
		if (models[i] != NULL && same_model(&models[i]->info, info))
			return i;
	return WALS_SERVE_MODELS - 1;
}

/*
 * The served state of the model a call names, loaded or reloaded when its
 * version or tables changed.  The caller needs USAGE on their schemas and
 * SELECT on both factor tables, checked on every call (by wals_model_get,
 * before it locks them): the cache is shared by every role this backend
 * runs as, since it holds what the model's owner sees.  Must run inside an
 * SPI connection.
 */
WalsServeModel *
wals_serve_model(text *model)
{
	WalsModelInfo *info;
	int			slot;
	WalsServeModel *m;

	Assert(wals_call_depth() > 0);
	register_callbacks();
	if (wals_call_depth() == 1)
		forget_retired();
	info = wals_model_get(model);
	slot = slot_of(info);
	m = models[slot];
	if (m == NULL || m->info.version != info->version || m->info.item_rel != info->item_rel ||
		m->info.user_rel != info->user_rel || !same_model(&m->info, info) ||
		m->info.owner != info->owner || m->stale || m->own_items != !wals_shared_items)
	{
		WalsServeModel *fresh = load(info, true, NULL);

		if (m != NULL)
			release(m);
		m = fresh;
	}
	put_first(m, slot);
	return m;
}

/*
 * Build the items of the version of model schema.name that the caller's
 * transaction has just stored, for every backend of the server, and cache
 * them here: the training's own, so that no reader pays for it after the
 * commit.  The caller holds the model's lock and wrote its rows.  patch,
 * where not NULL, says what a refresh changed of the version before, to
 * build from (items.c) rather than from the item table.  replaced, where
 * not NULL, is the model as committed before: the areas of its item table
 * older than its version are retired, as the first reader of the new
 * version would retire them, so that a model retrained or refreshed again
 * and again with no call between keeps two versions in shared memory, not
 * one per change.  A training's shared version is also written as its
 * image (images.c), for standbys and for the server after a restart; a
 * refresh's is not.
 */
void
wals_serve_preload(const char *schema, const char *name, const WalsItemsPatch *patch,
				   const WalsModelInfo *replaced)
{
	WalsModelInfo info;
	int			slot;
	WalsServeModel *fresh;

	register_callbacks();
	if (!wals_catalog_lookup(schema, name, &info))
		return;
	fresh = load(&info, false, patch);
	if (fresh->seg != NULL)
		wals_items_write_image(dsm_segment_address(fresh->seg), patch);
	else
		wals_image_forget(info.item_rel);
	slot = slot_of(&info);
	if (models[slot] != NULL)
		release(models[slot]);
	put_first(fresh, slot);
	if (replaced != NULL)
		wals_segment_retire_older(replaced->item_rel, replaced->version);
}

/* Index of item id in m, or -1. */
int64
wals_serve_item(const WalsServeModel *m, int64 id)
{
	return wals_id_directory_find(&m->item_dir, id);
}

/*
 * How m's user rows are read, decided as the model's owner: in place where
 * the table has the primary key wals gives it and no row security applies
 * to the owner, so that a query would find the same row through the same
 * index; else by a query, whose plan is kept.  A new backend's first call
 * thus parses and plans nothing for the user's row, and every call skips
 * the executor's start and end.
 */
static void
choose_user_read(WalsServeModel *m)
{
	Oid			relid = m->info.user_rel;

	m->factors_att = get_attnum(relid, "factors");
	m->rated_att = get_attnum(relid, "rated");
	if (wals_factor_table_keyed(relid, true) && m->factors_att > 0 && m->rated_att > 0 &&
		check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED)
	{
		m->user_read = WALS_USER_READ_IN_PLACE;
		return;
	}
	if (m->user_plan == NULL)
	{
		Oid			int8type = INT8OID;

		m->user_plan = wals_keep_plan(psprintf("SELECT factors, rated FROM %s"
											   " WHERE user_id OPERATOR(pg_catalog.=) $1",
											   wals_relation_name(relid)),
									  1, &int8type);
	}
	m->user_read = WALS_USER_READ_QUERY;
}

/* user_id's row of m's user table, found through its primary key. */
static bool
user_in_place(WalsServeModel *m, int64 user_id, float *x, WalsRated *rated)
{
	Relation	rel;
	Relation	index;
	AclResult	acl = pg_class_aclcheck(m->info.user_rel, GetUserId(), ACL_SELECT);
	IndexScanDesc scan;
	TupleTableSlot *slot;
	ScanKeyData key;
	bool		found;

	/* what the query would check */
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, get_rel_name(m->info.user_rel));
	rel = table_open(m->info.user_rel, AccessShareLock);
	index = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	slot = table_slot_create(rel, NULL);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(user_id));
	scan = wals_index_beginscan(rel, index, GetActiveSnapshot(), 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		bool		should_free;
		HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);
		TupleDesc	desc = RelationGetDescr(rel);

		wals_read_factors(tuple, desc, m->factors_att, m->factors, x, &m->info);
		if (rated != NULL)
			wals_read_rated(tuple, desc, m->rated_att, &m->info, &m->item_dir, rated);
		if (should_free)
			heap_freetuple(tuple);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/* user_id's row of m's user table, by the kept query. */
static bool
user_by_query(WalsServeModel *m, int64 user_id, float *x, WalsRated *rated)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum		arg = Int64GetDatum(user_id);
	int			rc = wals_sql_plan(m->user_plan, &arg, NULL, true, 1);
	HeapTuple	tuple;
	TupleDesc	desc;

	/* SPI leaves its own context current: allocate in the caller's */
	MemoryContextSwitchTo(cxt);
	wals_sql_expect(rc, SPI_OK_SELECT, m->info.user_rel);
	if (SPI_processed == 0)
		return false;
	tuple = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	wals_read_factors(tuple, desc, 1, m->factors, x, &m->info);
	if (rated != NULL)
		wals_read_rated(tuple, desc, 2, &m->info, &m->item_dir, rated);
	SPI_freetuptable(SPI_tuptable);
	return true;
}

/*
 * The factors of user_id into x, and, unless rated is NULL, the user's rated
 * items; false for a user the model does not know.  Read as the model's
 * owner.
 */
bool
wals_serve_user(WalsServeModel *m, int64 user_id, float *x, WalsRated *rated)
{
	WalsRoleSave save;
	bool		found;

	wals_become_model_owner(&m->info, &save);
	if (m->user_read == WALS_USER_READ_UNKNOWN)
		choose_user_read(m);
	if (m->user_read == WALS_USER_READ_IN_PLACE)
		found = user_in_place(m, user_id, x, rated);
	else
		found = user_by_query(m, user_id, x, rated);
	wals_unbecome(&save);
	return found;
}

/*
 * Run query over m's user table with ids[0..n) as its bigint[] $1 and hand
 * every row to each_row, a batch of rows at a time, in the caller's memory
 * context; planned and run as the model's owner.
 */
static void
each_row(const WalsServeModel *m, const char *query, const int64 *ids, int n,
		 void (*row) (HeapTuple tuple, TupleDesc desc, void *state), void *state)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	Oid			type = INT8ARRAYOID;
	Datum		arg;
	Portal		portal;
	WalsRoleSave save;

	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(ids[i]);
	arg = PointerGetDatum(construct_array(elems, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	wals_become_model_owner(&m->info, &save);
	portal = wals_sql_cursor(query, ids != NULL ? 1 : 0, &type, &arg, NULL, true, 0);
	for (;;)
	{
		wals_sql_fetch(portal, WALS_USERS_FETCH);
		/* SPI leaves its own context current */
		MemoryContextSwitchTo(cxt);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
			row(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, state);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_freetuptable(SPI_tuptable);
	SPI_cursor_close(portal);
	wals_unbecome(&save);
	MemoryContextSwitchTo(cxt);
}

/* Where a query over many users puts what it returns. */
typedef struct UsersState
{
	WalsServeModel *m;
	const int64 *ids;
	int			n;
	bool	   *known;
	float	   *X;
	WalsRated  *rated;
} UsersState;

/* The index of a user a query returned among the sorted ids asked for, or -1. */
static int
user_index(UsersState *s, HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;
	int64		id = wals_read_id(tuple, desc, 1, &s->m->info, &isnull);

	return isnull ? -1 : (int) wals_ids_find(s->ids, s->n, id);
}

static void
user_row(HeapTuple tuple, TupleDesc desc, void *state)
{
	UsersState *s = state;
	int			u = user_index(s, tuple, desc);

	if (u < 0 || s->known[u])
		return;
	wals_read_factors(tuple, desc, 2, s->m->factors, s->X + (size_t) u * s->m->factors,
					  &s->m->info);
	if (s->rated != NULL)
		wals_read_rated(tuple, desc, 3, &s->m->info, &s->m->item_dir, &s->rated[u]);
	s->known[u] = true;
}

/*
 * The factors of the users ids[0..n) (sorted, distinct) into the rows of X,
 * and, unless rated is NULL, their rated items, with one query for all of
 * them.  The users the model does not know are taken out: ids, X and rated
 * keep the known users, in order, and their number is returned.
 */
int
wals_serve_users(WalsServeModel *m, int64 *ids, int n, float *X, WalsRated *rated)
{
	UsersState	s = {m, ids, n, palloc0(sizeof(bool) * Max(n, 1)), X, rated};
	int			f = m->factors;
	int			known = 0;

	each_row(m, psprintf("SELECT user_id, factors, rated FROM %s"
					  " WHERE user_id OPERATOR(pg_catalog.=) ANY ($1)",
					  wals_relation_name(m->info.user_rel)),
			 ids, n, user_row, &s);
	for (int u = 0; u < n; u++)
	{
		if (!s.known[u])
			continue;
		ids[known] = ids[u];
		memmove(X + (size_t) known * f, X + (size_t) u * f, sizeof(float) * f);
		if (rated != NULL)
			rated[known] = rated[u];
		known++;
	}
	pfree(s.known);
	return known;
}

static void
known_row(HeapTuple tuple, TupleDesc desc, void *state)
{
	UsersState *s = state;
	int			u = user_index(s, tuple, desc);

	if (u >= 0)
		s->known[u] = true;
}

/*
 * Keep, in place, the users among ids[0..*n) (sorted, distinct) the model
 * knows, from one pass over the user ids of its table, and return true;
 * return false, doing nothing, when the list is short enough that looking
 * each id up costs less than the pass.  For a long list the pass costs the
 * same whatever the ids, so a list of unknown ids costs next to nothing.
 */
bool
wals_serve_known_users(WalsServeModel *m, int64 *ids, int *n)
{
	UsersState	s = {m, ids, *n, NULL, NULL, NULL};
	int			known = 0;
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(m->info.user_rel));
	double		rows;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "wals: cache lookup failed for relation %u", m->info.user_rel);
	rows = ((Form_pg_class) GETSTRUCT(tuple))->reltuples;
	ReleaseSysCache(tuple);
	if (*n <= WALS_KNOWN_PASS_MIN || (rows >= 0 && (double) *n * WALS_KNOWN_PASS_RATIO < rows))
		return false;
	s.known = palloc0(sizeof(bool) * *n);

	each_row(m, psprintf("SELECT user_id FROM %s", wals_relation_name(m->info.user_rel)),
			 NULL, 0, known_row, &s);
	for (int u = 0; u < *n; u++)
		if (s.known[u])
			ids[known++] = ids[u];
	pfree(s.known);
	*n = known;
	return true;
}
