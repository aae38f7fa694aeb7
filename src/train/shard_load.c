/*
 * shard_load.c
 *	  A shard's side of a sharded training, up to its matrices: the
 *	  functions the coordinator (shard_plan.c) calls on each server that
 *	  holds part of the ratings, in this order, inside one remote
 *	  transaction; shard_solve.c has the rest.
 *
 *	  wals_shard_load		read a partition's rows, as the calling role
 *	  wals_shard_ids		what was read: rows, NULL ids, distinct ids
 *	  wals_shard_id_page	the distinct ids of a side, a page at a time
 *	  wals_shard_plan		the training's parameters and its size
 *	  wals_shard_plan_page	every id with its owner shard, a page at a time
 *	  wals_shard_route		each cell read to its owners' boxes
 *	  wals_shard_outbox		cells another shard owns, a chunk at a time
 *	  wals_shard_inbox		cells this shard owns, from another
 *
 * Every user and every item has one owner shard, which keeps all of its
 * cells (those read elsewhere come through the coordinator once, at the
 * start) and solves it: a shard holds its own users' rows by user and its
 * own items' rows by item, its share of both matrices, never all of them.
 * Every message is at most wals.shard_message_size, so that no side's ids
 * or factors are bounded by the 1 GB of one value: the coordinator pages
 * through what is larger.
 *
 * The state lives in the backend that serves the coordinator's connection
 * and belongs to the transaction: whatever ends the transaction, a commit,
 * an abort, a cancel or the coordinator's disconnection, frees it, so that
 * nothing of a training outlives it on a shard.  A training begun in a
 * subtransaction (the savepoint postgres_fdw opens there for a
 * coordinator's PL/pgSQL EXCEPTION block) ends with its abort, so that the
 * next training in the same transaction begins anew.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "shard_session.h"

PG_FUNCTION_INFO_V1(wals_shard_load);
PG_FUNCTION_INFO_V1(wals_shard_ids);
PG_FUNCTION_INFO_V1(wals_shard_id_page);
PG_FUNCTION_INFO_V1(wals_shard_plan);
PG_FUNCTION_INFO_V1(wals_shard_plan_page);
PG_FUNCTION_INFO_V1(wals_shard_route);
PG_FUNCTION_INFO_V1(wals_shard_outbox);
PG_FUNCTION_INFO_V1(wals_shard_inbox);

/* The rows the solves read start on a cache line, as in a workspace. */
#define WALS_SHARD_ALIGN	64

static Session *session;
static bool callback_registered;

void
wals_shard_session_free(void)
{
	if (session != NULL)
	{
		if (session->seg != NULL)
			dsm_detach(session->seg);
		MemoryContextDelete(session->cxt);
	}
	session = NULL;
}

static void
end_of_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			wals_shard_session_free();
			break;
		default:
			break;
	}
}

/*
 * A training begun in the subtransaction that aborts ends with it; one
 * begun in a subtransaction that commits now belongs to its parent.
 */
static void
end_of_subxact(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
			   void *arg)
{
	if (session == NULL || session->subid != mySubid)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		wals_shard_session_free();
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		session->subid = parentSubid;
}

/* This backend's training, begun when create; fn names the caller. */
Session *
wals_shard_session(bool create, const char *fn)
{
	if (session == NULL && create)
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "wals shard",
												  ALLOCSET_DEFAULT_SIZES);

		if (!callback_registered)
		{
			RegisterXactCallback(end_of_xact, NULL);
			RegisterSubXactCallback(end_of_subxact, NULL);
			callback_registered = true;
		}
		session = MemoryContextAllocZero(cxt, sizeof(Session));
		session->cxt = cxt;
		session->subid = GetCurrentSubTransactionId();
	}
	if (session == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s() needs a sharded training begun in this transaction", fn),
				 errhint("These functions are called by wals_train() on a coordinator; they are not meant to be called by hand.")));
	return session;
}

void *
wals_shard_alloc(Size bytes)
{
	return MemoryContextAllocHuge(session->cxt, Max(bytes, 1));
}

/* The room wals_shard_alloc_rows takes for bytes. */
Size
wals_shard_rows_bytes(Size bytes)
{
	return TYPEALIGN(WALS_SHARD_ALIGN, bytes) + WALS_SHARD_ALIGN;
}

/*
 * What the solves read, laid out as a training's workspace lays it out
 * (workspace.c): on cache lines, since they read the other side's factors
 * at random and a row that straddles a line costs a line more; in the
 * segment shared with parallel workers when there is one, else in
 * transparent huge pages.  Freed with the session only.
 */
void *
wals_shard_alloc_rows(Size bytes)
{
	char	   *p;

	if (session->seg != NULL)
	{
		p = (char *) TYPEALIGN(WALS_SHARD_ALIGN, session->seg_next);
		if (p + bytes > session->seg_end)
			elog(ERROR, "wals: a shard's shared memory is too small");
		session->seg_next = p + bytes;
		return p;
	}
	p = wals_alloc_huge(session->rows_cxt, bytes + WALS_SHARD_ALIGN);
	return (void *) TYPEALIGN(WALS_SHARD_ALIGN, p);
}

void
wals_shard_note_peak(Session *s)
{
	s->peak = Max(s->peak, MemoryContextMemAllocated(s->cxt, true) +
				  (s->seg != NULL ? dsm_segment_map_length(s->seg) : 0));
}

/* Room for c->cap cells, counted beforehand. */
static void
cells_reserve(Cells *c)
{
	c->row = wals_shard_alloc(sizeof(int32) * Max(c->cap, 1));
	c->col = wals_shard_alloc(sizeof(int32) * Max(c->cap, 1));
	c->val = wals_shard_alloc(sizeof(float) * Max(c->cap, 1));
}

void
wals_shard_cells_free(Cells *c)
{
	if (c->row != NULL)
	{
		pfree(c->row);
		pfree(c->col);
		pfree(c->val);
	}
	c->row = NULL;
	c->col = NULL;
	c->val = NULL;
	c->cap = 0;
}

static void
cells_add(Cells *c, int32 row, int32 col, float val)
{
	if (c->n == c->cap)
	{
		int64		cap = c->cap > 0 ? c->cap * 2 : 1024;

		c->row = c->row ? repalloc_huge(c->row, sizeof(int32) * cap) :
			wals_shard_alloc(sizeof(int32) * cap);
		c->col = c->col ? repalloc_huge(c->col, sizeof(int32) * cap) :
			wals_shard_alloc(sizeof(int32) * cap);
		c->val = c->val ? repalloc_huge(c->val, sizeof(float) * cap) :
			wals_shard_alloc(sizeof(float) * cap);
		c->cap = cap;
	}
	c->row[c->n] = row;
	c->col[c->n] = col;
	c->val[c->n] = val;
	c->n++;
}

/*
 * wals_shard_load(source text, user_col text, item_col text,
 *				   rating_col text, feedback text) RETURNS bigint
 *
 * Read one partition's ratings as the calling role (its privileges and row
 * security, as wals_train reads a source); the rows read.  source is a
 * qualified name, quoted where it needs to be, as regclass reads one.
 */
Datum
wals_shard_load(PG_FUNCTION_ARGS)
{
	WalsTrainArgs args = {0};
	Session    *s;
	Loaded	   *l;
	MemoryContext old;
	List	   *names;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("wals_shard_load() takes no NULL but rating_col")));
	s = wals_shard_session(true, "wals_shard_load");
	if (s->local_users != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_load() after wals_shard_ids()")));
	names = stringToQualifiedNameList(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	args.source = RangeVarGetRelid(makeRangeVarFromNameList(names), AccessShareLock, false);
	args.source_display = wals_check_source(args.source, "source");
	args.source_name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(args.source)),
												  args.source_display);
	args.user_col = wals_check_column(args.source, args.source_display,
									  text_to_cstring(PG_GETARG_TEXT_PP(1)), "user_col", true);
	args.item_col = wals_check_column(args.source, args.source_display,
									  text_to_cstring(PG_GETARG_TEXT_PP(2)), "item_col", true);
	if (!PG_ARGISNULL(3))
		args.rating_col = wals_check_column(args.source, args.source_display,
											text_to_cstring(PG_GETARG_TEXT_PP(3)), "rating_col",
											false);
	if (strcmp(text_to_cstring(PG_GETARG_TEXT_PP(4)), "explicit") == 0)
		args.params.feedback = WALS_EXPLICIT;

	old = MemoryContextSwitchTo(s->cxt);
	l = palloc0(sizeof(Loaded));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "wals: SPI_connect failed");
	MemoryContextSwitchTo(s->cxt);
	wals_ingest(&args, &l->raw, true);
	SPI_finish();
	MemoryContextSwitchTo(old);
	l->next = s->loaded;
	s->loaded = l;
	s->rows += l->raw.n;
	s->null_ids += l->raw.null_ids;
	PG_RETURN_INT64(l->raw.n);
}

/* The distinct ids of every load of a side, increasing, into out; the count. */
static int64
merge_ids(const Session *s, bool users, int64 **out)
{
	int64		total = 0;
	int64		n = 0;
	int64	   *all;

	for (Loaded *l = s->loaded; l != NULL; l = l->next)
		total += users ? l->raw.nusers : l->raw.nitems;
	all = wals_shard_alloc(sizeof(int64) * total);
	for (Loaded *l = s->loaded; l != NULL; l = l->next)
	{
		int64		m = users ? l->raw.nusers : l->raw.nitems;

		memcpy(all + n, users ? l->raw.user_ids : l->raw.item_ids, sizeof(int64) * m);
		n += m;
	}
	if (s->loaded != NULL && s->loaded->next != NULL)
		n = wals_ids_sort_unique(all, n);
	*out = all;
	return n;
}

/*
 * wals_shard_ids() RETURNS bytea
 *
 * rows read, rows with a NULL id, and the counts of the distinct user ids
 * and item ids, which wals_shard_id_page gives.
 */
Datum
wals_shard_ids(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_session(false, "wals_shard_ids");
	StringInfoData buf;

	if (s->local_users == NULL)
	{
		s->nlocal_users = merge_ids(s, true, &s->local_users);
		s->nlocal_items = merge_ids(s, false, &s->local_items);
	}
	wals_shard_buffer(&buf, 4 * sizeof(int64));
	wals_put_int64(&buf, s->rows);
	wals_put_int64(&buf, s->null_ids);
	wals_put_int64(&buf, s->nlocal_users);
	wals_put_int64(&buf, s->nlocal_items);
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/*
 * wals_shard_id_page(side int, first bigint, count bigint) RETURNS bytea
 *
 * The distinct ids read of side (0 users, 1 items) from the first-th, at
 * most count of them.
 */
Datum
wals_shard_id_page(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_session(false, "wals_shard_id_page");
	bool		users = PG_GETARG_INT32(0) == 0;
	int64		first = PG_GETARG_INT64(1);
	int64		count = PG_GETARG_INT64(2);
	int64		n = users ? s->nlocal_users : s->nlocal_items;
	StringInfoData buf;

	if (s->local_users == NULL || first < 0 || first > n || count < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_id_page(): no page from " INT64_FORMAT, first)));
	count = Min(count, n - first);
	wals_shard_buffer(&buf, sizeof(int64) * count);
	wals_put_int64s(&buf, (users ? s->local_users : s->local_items) + first, count);
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/*
 * The parameters as wals_train's arguments bound them: the coordinator
 * checked them, and a shard checks again what it is sent.
 */
static void
check_params(const WalsParams *p)
{
	if (p->factors < WALS_MIN_FACTORS ||
		(p->solver == WALS_CG && p->cg_steps < WALS_MIN_CG_STEPS) ||
		(p->solver == WALS_SUBSPACE && p->block_size < 1) ||
		!(p->regularization >= 0 && p->regularization <= WALS_MAX_REAL_PARAM) ||
		!(p->alpha >= 0 && p->alpha <= WALS_MAX_REAL_PARAM) ||
		!(p->w0 >= 0 && p->w0 <= WALS_MAX_REAL_PARAM) ||
		!(p->reg_exponent >= 0 && p->reg_exponent <= WALS_MAX_REG_EXPONENT))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a sharded training's parameters are out of range")));
}

/*
 * wals_shard_plan(params bytea, shard int, nshards int, nusers bigint,
 *				   nitems bigint) RETURNS void
 *
 * params: the WalsParams fields in wire order, then the parallel workers a
 * half-sweep may use (negative: max_parallel_maintenance_workers of this
 * server, whose cores they are); this shard's number, the
 * shards, and every user and item of the training, whose ids and owners
 * wals_shard_plan_page then gives, in order.
 */
Datum
wals_shard_plan(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_session(false, "wals_shard_plan");
	bytea	   *pb = PG_GETARG_BYTEA_PP(0);
	WalsWire	w;
	MemoryContext old;

	if (s->planned || s->local_users == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_plan() out of turn")));
	s->shard = PG_GETARG_INT32(1);
	s->nshards = PG_GETARG_INT32(2);
	s->nusers = PG_GETARG_INT64(3);
	s->nitems = PG_GETARG_INT64(4);
	if (s->nshards < 1 || s->nshards > WALS_MAX_SHARDS || s->shard < 0 ||
		s->shard >= s->nshards)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_plan(): shard %d of %d is out of range", s->shard,
						s->nshards)));
	if (s->nusers < s->nlocal_users || s->nusers > INT32_MAX ||
		s->nitems < s->nlocal_items || s->nitems > INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals_shard_plan(): " INT64_FORMAT " users and " INT64_FORMAT
						" items cannot hold the ids read here", s->nusers, s->nitems)));

	wals_wire_start(&w, VARDATA_ANY(pb), VARSIZE_ANY_EXHDR(pb), "parameters");
	s->params.feedback = wals_wire_int64(&w) == WALS_EXPLICIT ? WALS_EXPLICIT : WALS_IMPLICIT;
	s->params.solver = (WalsSolver) wals_wire_count(&w, WALS_SUBSPACE);
	s->params.factors = (int) wals_wire_count(&w, WALS_MAX_FACTORS);
	s->params.cg_steps = (int) wals_wire_count(&w, WALS_MAX_CG_STEPS);
	s->params.regularization = (float) wals_wire_double(&w);
	s->params.alpha = (float) wals_wire_double(&w);
	s->params.w0 = (float) wals_wire_double(&w);
	s->params.block_size = (int) wals_wire_count(&w, WALS_MAX_FACTORS);
	s->params.frequency_scaled = wals_wire_int64(&w) != 0;
	s->params.reg_exponent = (float) wals_wire_double(&w);
	s->workers = (int) wals_wire_int64(&w);
	wals_wire_done(&w);
	check_params(&s->params);
	if (s->workers < 0 || s->workers > WALS_MAX_WORKERS)
		s->workers = max_parallel_maintenance_workers;

	old = MemoryContextSwitchTo(s->cxt);
	s->user_ids = wals_shard_alloc(sizeof(int64) * s->nusers);
	s->item_ids = wals_shard_alloc(sizeof(int64) * s->nitems);
	s->user_owner = wals_shard_alloc(s->nusers);
	s->item_owner = wals_shard_alloc(s->nitems);
	MemoryContextSwitchTo(old);
	s->planned = true;
	PG_RETURN_VOID();
}

/*
 * wals_shard_plan_page(side int, page bytea) RETURNS void
 *
 * The next ids of side (0 users, 1 items) with their owners: a count, the
 * ids (increasing across pages), then a byte each, the owner's number.
 */
Datum
wals_shard_plan_page(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_session(false, "wals_shard_plan_page");
	bool		users = PG_GETARG_INT32(0) == 0;
	bytea	   *page = PG_GETARG_BYTEA_PP(1);
	int64	   *ids = users ? s->user_ids : s->item_ids;
	uint8	   *owner = users ? s->user_owner : s->item_owner;
	int64	   *in = users ? &s->user_ids_in : &s->item_ids_in;
	int64		total = users ? s->nusers : s->nitems;
	WalsWire	w;
	int64		n;
	const uint8 *o;

	if (!s->planned || s->routed)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_plan_page() out of turn")));
	wals_wire_start(&w, VARDATA_ANY(page), VARSIZE_ANY_EXHDR(page), "plan");
	n = wals_wire_count_of(&w, sizeof(int64) + 1, total - *in);
	wals_wire_int64s(&w, ids + *in, n);
	o = wals_wire_bytes(&w, n);
	wals_wire_done(&w);
	for (int64 k = 0; k < n; k++)
	{
		int64		j = *in + k;

		if (o[k] >= s->nshards || (j > 0 && ids[j - 1] >= ids[j]))
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals: a sharded training's plan has an owner out of range or ids out of order")));
		owner[j] = o[k];
	}
	*in += n;
	PG_RETURN_VOID();
}

/*
 * The dense rows of one side that shard owns, increasing, from the owner
 * of each row: as the coordinator and the shard both list them.
 */
int32 *
wals_shard_owned(const uint8 *owner, int64 n, int shard, int64 *nown)
{
	int32	   *own;
	int64		k = 0;

	*nown = 0;
	for (int64 j = 0; j < n; j++)
		*nown += owner[j] == shard;
	own = palloc_extended(sizeof(int32) * Max(*nown, 1), MCXT_ALLOC_HUGE);
	for (int64 j = 0; j < n; j++)
		if (owner[j] == shard)
			own[k++] = (int32) j;
	return own;
}

/* Whether dense row j is among the own rows. */
static bool
owns(const int32 *own, int64 nown, int32 j)
{
	return wals_index_find(own, nown, j) >= 0;
}

/* The dense index of every id of ids (n) in all (nall, increasing). */
static int32 *
dense_of(const int64 *ids, int64 n, const int64 *all, int64 nall)
{
	int32	   *map = palloc_extended(sizeof(int32) * (n > 0 ? n : 1), MCXT_ALLOC_HUGE);

	for (int64 k = 0; k < n; k++)
	{
		int64		j = wals_ids_find(all, nall, ids[k]);

		if (j < 0)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals: id " INT64_FORMAT " of this shard is not in the training's plan",
							ids[k])));
		map[k] = (int32) j;
	}
	return map;
}

static void
loaded_free(Loaded *l)
{
	pfree(l->umap);
	pfree(l->imap);
	if (l->raw.n > 0)
	{
		pfree(l->raw.users);
		pfree(l->raw.items);
		pfree(l->raw.ratings);
	}
	pfree(l);
}

/*
 * wals_shard_route() RETURNS void
 *
 * Once the whole plan has come: each cell read goes to the owner of its
 * user (by user) and of its item (by item); those this shard owns stay,
 * the others wait in its outboxes.  Every box is sized first, so that none
 * grows by copies, and each partition's rows are freed once routed.
 */
Datum
wals_shard_route(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_session(false, "wals_shard_route");
	MemoryContext old;

	if (!s->planned || s->routed || s->user_ids_in != s->nusers ||
		s->item_ids_in != s->nitems)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_route() before the whole plan")));
	old = MemoryContextSwitchTo(s->cxt);
	for (int side = 0; side < 2; side++)
	{
		s->rows_of[side] = palloc(sizeof(int32 *) * s->nshards);
		s->nrows_of[side] = palloc(sizeof(int64) * s->nshards);
		for (int t = 0; t < s->nshards; t++)
			s->rows_of[side][t] = wals_shard_owned(side == 0 ? s->user_owner : s->item_owner,
												   side == 0 ? s->nusers : s->nitems, t,
												   &s->nrows_of[side][t]);
	}
	s->own_users = s->rows_of[0][s->shard];
	s->own_nusers = s->nrows_of[0][s->shard];
	s->own_items = s->rows_of[1][s->shard];
	s->own_nitems = s->nrows_of[1][s->shard];
	s->other_in = palloc0(sizeof(int64) * s->nshards);
	s->out_users = palloc0(sizeof(Cells) * s->nshards);
	s->out_items = palloc0(sizeof(Cells) * s->nshards);
	s->out_sent = palloc0(sizeof(int64) * s->nshards);
	for (Loaded *l = s->loaded; l != NULL; l = l->next)
	{
		l->umap = dense_of(l->raw.user_ids, l->raw.nusers, s->user_ids, s->nusers);
		l->imap = dense_of(l->raw.item_ids, l->raw.nitems, s->item_ids, s->nitems);
		for (int64 k = 0; k < l->raw.n; k++)
		{
			s->out_users[s->user_owner[l->umap[l->raw.users[k]]]].cap++;
			s->out_items[s->item_owner[l->imap[l->raw.items[k]]]].cap++;
		}
	}
	for (int t = 0; t < s->nshards; t++)
	{
		cells_reserve(&s->out_users[t]);
		cells_reserve(&s->out_items[t]);
	}
	while (s->loaded != NULL)
	{
		Loaded	   *l = s->loaded;

		for (int64 k = 0; k < l->raw.n; k++)
		{
			int32		u = l->umap[l->raw.users[k]];
			int32		i = l->imap[l->raw.items[k]];
			float		v = l->raw.ratings[k];

			cells_add(&s->out_users[s->user_owner[u]], u, i, v);
			cells_add(&s->out_items[s->item_owner[i]], u, i, v);
			if ((k & 0xffff) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		s->loaded = l->next;
		loaded_free(l);
	}
	pfree(s->local_users);
	pfree(s->local_items);
	pfree(s->user_owner);
	pfree(s->item_owner);
	s->user_owner = s->item_owner = NULL;
	s->routed = true;
	wals_shard_note_peak(s);
	MemoryContextSwitchTo(old);
	PG_RETURN_VOID();
}

/*
 * wals_shard_outbox(target int, max_cells bigint) RETURNS bytea
 *
 * The next chunk, of at most max_cells, of the cells shard target owns
 * (users' cells, then items'), NULL once all are sent: a flag (users or
 * items), a count, and (user, item, value) each.
 */
Datum
wals_shard_outbox(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_session(false, "wals_shard_outbox");
	int			t = PG_GETARG_INT32(0);
	int64		most = PG_GETARG_INT64(1);
	Cells	   *c;
	int64		from;
	int64		n;
	bool		users;
	StringInfoData buf;

	if (!s->routed || t < 0 || t >= s->nshards || t == s->shard || most < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_outbox(): no outbox for shard %d", t)));
	users = s->out_sent[t] < s->out_users[t].n;
	c = users ? &s->out_users[t] : &s->out_items[t];
	from = users ? s->out_sent[t] : s->out_sent[t] - s->out_users[t].n;
	n = Min(c->n - from, most);
	if (n <= 0)
	{
		wals_shard_cells_free(&s->out_users[t]);
		wals_shard_cells_free(&s->out_items[t]);
		PG_RETURN_NULL();
	}
	wals_shard_buffer(&buf, 2 * sizeof(int64) + 12 * n);
	wals_put_int64(&buf, users ? 1 : 0);
	wals_put_int64(&buf, n);
	for (int64 k = from; k < from + n; k++)
	{
		wals_put_int32(&buf, c->row[k]);
		wals_put_int32(&buf, c->col[k]);
		wals_put_floats(&buf, &c->val[k], 1);
	}
	s->out_sent[t] += n;
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/*
 * wals_shard_inbox(cells bytea) RETURNS void
 *
 * A chunk of another shard's outbox for this one: every cell's user (or
 * item, for an items' chunk) must be one this shard owns.
 */
Datum
wals_shard_inbox(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_session(false, "wals_shard_inbox");
	bytea	   *cells = PG_GETARG_BYTEA_PP(0);
	WalsWire	w;
	bool		users;
	int64		n;
	Cells	   *into;

	if (!s->routed || s->started)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_inbox() outside of a sharded training's exchange")));
	wals_wire_start(&w, VARDATA_ANY(cells), VARSIZE_ANY_EXHDR(cells), "cells");
	users = wals_wire_int64(&w) != 0;
	n = wals_wire_count_of(&w, 12, PG_INT64_MAX);
	into = users ? &s->out_users[s->shard] : &s->out_items[s->shard];
	for (int64 k = 0; k < n; k++)
	{
		int32		u;
		int32		i;
		float		v;

		wals_wire_int32s(&w, &u, 1);
		wals_wire_int32s(&w, &i, 1);
		wals_wire_floats(&w, &v, 1);
		if (u < 0 || u >= s->nusers || i < 0 || i >= s->nitems ||
			!(users ? owns(s->own_users, s->own_nusers, u) :
			  owns(s->own_items, s->own_nitems, i)))
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals: a cell sent to shard %d is not one it owns", s->shard)));
		cells_add(into, u, i, v);
	}
	wals_wire_done(&w);
	wals_shard_note_peak(s);
	PG_RETURN_VOID();
}
