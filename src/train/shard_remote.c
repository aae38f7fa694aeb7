/*
 * shard_remote.c
 *	  A shard's side of a sharded training: the functions the coordinator
 *	  calls on each server that holds part of the ratings (engine_shard.c
 *	  drives them, in this order, inside one remote transaction).
 *
 *	  wals_shard_load		read a partition's rows, as the calling role
 *	  wals_shard_ids		the distinct user and item ids read
 *	  wals_shard_plan		the training's parameters, every id, who owns what
 *	  wals_shard_outbox		cells another shard owns, a chunk at a time
 *	  wals_shard_inbox		cells this shard owns, from another
 *	  wals_shard_start		both matrices of the owned rows, their factors
 *	  wals_shard_solve		a half-sweep over the owned rows of a side
 *	  wals_shard_loss		the owned users' part of the loss
 *	  wals_shard_rated		the owned users' rated items, as stored
 *	  wals_shard_end		free everything
 *
 * Every user and every item has one owner shard, which keeps all of its
 * cells (those read elsewhere come through the coordinator once, at the
 * start) and solves it.  A shard thus holds its own users' rows by user and
 * its own items' rows by item: its share of both matrices, never all of
 * them.  A half-sweep sends it the other side's factors and Gram; it
 * returns its rows solved, the Gram of those rows and its part of the loss,
 * so that the coordinator adds up exactly the loss src/core computes.
 *
 * The state lives in the backend that serves the coordinator's connection
 * and belongs to the transaction: whatever ends the transaction, a commit,
 * an abort, a cancel or the coordinator's disconnection, frees it, so that
 * nothing of a training outlives it on a shard.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "shard_wire.h"
#include "wals_train.h"

PG_FUNCTION_INFO_V1(wals_shard_load);
PG_FUNCTION_INFO_V1(wals_shard_ids);
PG_FUNCTION_INFO_V1(wals_shard_plan);
PG_FUNCTION_INFO_V1(wals_shard_outbox);
PG_FUNCTION_INFO_V1(wals_shard_inbox);
PG_FUNCTION_INFO_V1(wals_shard_start);
PG_FUNCTION_INFO_V1(wals_shard_solve);
PG_FUNCTION_INFO_V1(wals_shard_loss);
PG_FUNCTION_INFO_V1(wals_shard_rated);
PG_FUNCTION_INFO_V1(wals_shard_end);

/* The rows the solves read start on a cache line, as in a workspace. */
#define WALS_SHARD_ALIGN	64

/* The cells of one chunk of wals_shard_outbox: 48 MB of message. */
#define SHARD_CHUNK_CELLS	(4 * 1024 * 1024)

/* Cells as (row, column, value), growing. */
typedef struct Cells
{
	int64		n;
	int64		cap;
	int32	   *row;
	int32	   *col;
	float	   *val;
} Cells;

/* One partition's rows as read, dense in its own ids. */
typedef struct Loaded
{
	WalsRatings raw;
	int32	   *umap;			/* its dense users and items in the training's */
	int32	   *imap;
	struct Loaded *next;
} Loaded;

typedef struct Session
{
	MemoryContext cxt;
	Size		peak;			/* the most the session held, in bytes */
	Loaded	   *loaded;
	int64		rows;
	int64		null_ids;

	/* from wals_shard_plan */
	bool		planned;
	WalsParams	params;
	int			shard;
	int			nshards;
	int64		nusers;
	int64		nitems;
	int64	   *user_ids;		/* every user's id, increasing */
	int64	   *item_ids;
	int64		own_nusers;
	int64		own_nitems;
	int32	   *own_users;		/* the dense users this shard owns, increasing */
	int32	   *own_items;
	Cells	   *out_users;		/* per shard: cells of users it owns */
	Cells	   *out_items;		/* per shard: cells of items it owns */
	int64	   *out_sent;		/* per shard: out cells sent, users then items */

	/* from wals_shard_start */
	bool		started;
	WalsCsr		by_user;		/* own users x every item */
	WalsCsr		by_item;		/* own items x every user */
	float	   *X;				/* own users' factors */
	float	   *Y;				/* own items' factors */
	float	   *other;			/* the other side's factors of a half-sweep */
	bool		other_items;	/* other holds every item's, from wals_shard_loss */
	float	   *scratch;
} Session;

static Session *session;
static bool callback_registered;

static void
session_free(void)
{
	if (session != NULL)
		MemoryContextDelete(session->cxt);
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
			session_free();
			break;
		default:
			break;
	}
}

static Session *
session_get(bool create, const char *fn)
{
	if (session == NULL && create)
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "wals shard",
												  ALLOCSET_DEFAULT_SIZES);

		if (!callback_registered)
		{
			RegisterXactCallback(end_of_xact, NULL);
			callback_registered = true;
		}
		session = MemoryContextAllocZero(cxt, sizeof(Session));
		session->cxt = cxt;
	}
	if (session == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s() needs a sharded training begun in this transaction", fn),
				 errhint("These functions are called by wals_train() on a coordinator; they are not meant to be called by hand.")));
	return session;
}

static void *
session_alloc(Size bytes)
{
	return MemoryContextAllocHuge(session->cxt, Max(bytes, 1));
}

/*
 * What the solves read, laid out as a training's workspace lays it out
 * (workspace.c): on cache lines, in transparent huge pages, since they
 * read the other side's factors at random and a row that straddles a
 * line costs a line more.  Freed with the session only.
 */
static void *
session_alloc_rows(Size bytes)
{
	char	   *p = wals_alloc_huge(session->cxt, bytes + WALS_SHARD_ALIGN);

	return (void *) TYPEALIGN(WALS_SHARD_ALIGN, p);
}

/* Where v is in a (n, increasing), or -1. */
static int64
find_int32(const int32 *a, int64 n, int32 v)
{
	int64		lo = 0;
	int64		hi = n;

	while (lo < hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && a[lo] == v ? lo : -1;
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

static void
note_peak(Session *s)
{
	s->peak = Max(s->peak, MemoryContextMemAllocated(s->cxt, true));
}

/* Room for c->cap cells, counted beforehand. */
static void
cells_reserve(Cells *c)
{
	c->row = session_alloc(sizeof(int32) * Max(c->cap, 1));
	c->col = session_alloc(sizeof(int32) * Max(c->cap, 1));
	c->val = session_alloc(sizeof(float) * Max(c->cap, 1));
}

static void
cells_free(Cells *c)
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

static void
cells_add(Cells *c, int32 row, int32 col, float val)
{
	if (c->n == c->cap)
	{
		int64		cap = c->cap > 0 ? c->cap * 2 : 1024;

		c->row = c->row ? repalloc_huge(c->row, sizeof(int32) * cap) :
			session_alloc(sizeof(int32) * cap);
		c->col = c->col ? repalloc_huge(c->col, sizeof(int32) * cap) :
			session_alloc(sizeof(int32) * cap);
		c->val = c->val ? repalloc_huge(c->val, sizeof(float) * cap) :
			session_alloc(sizeof(float) * cap);
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
	s = session_get(true, "wals_shard_load");
	if (s->planned)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_load() after wals_shard_plan()")));
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
	all = palloc_extended(sizeof(int64) * (total > 0 ? total : 1), MCXT_ALLOC_HUGE);
	for (Loaded *l = s->loaded; l != NULL; l = l->next)
	{
		int64		m = users ? l->raw.nusers : l->raw.nitems;

		memcpy(all + n, users ? l->raw.user_ids : l->raw.item_ids, sizeof(int64) * m);
		n += m;
	}
	if (s->loaded != NULL && s->loaded->next != NULL)
	{
		int64		kept = 0;

		qsort(all, n, sizeof(int64), cmp_int64);
		for (int64 k = 0; k < n; k++)
			if (kept == 0 || all[kept - 1] != all[k])
				all[kept++] = all[k];
		n = kept;
	}
	*out = all;
	return n;
}

static bytea *
finish_bytea(StringInfo buf)
{
	bytea	   *result = palloc_extended(VARHDRSZ + buf->len, MCXT_ALLOC_HUGE);

	SET_VARSIZE(result, VARHDRSZ + buf->len);
	memcpy(VARDATA(result), buf->data, buf->len);
	return result;
}

/*
 * wals_shard_ids() RETURNS bytea
 *
 * rows read, rows with a NULL id, then the distinct user ids and the
 * distinct item ids, each a count and the ids, increasing.
 */
Datum
wals_shard_ids(PG_FUNCTION_ARGS)
{
	Session    *s = session_get(false, "wals_shard_ids");
	StringInfoData buf;
	int64	   *ids;
	int64		n;

	initStringInfo(&buf);
	wals_put_int64(&buf, s->rows);
	wals_put_int64(&buf, s->null_ids);
	n = merge_ids(s, true, &ids);
	wals_put_int64(&buf, n);
	wals_put_int64s(&buf, ids, n);
	n = merge_ids(s, false, &ids);
	wals_put_int64(&buf, n);
	wals_put_int64s(&buf, ids, n);
	PG_RETURN_BYTEA_P(finish_bytea(&buf));
}

/*
 * Read a side's ids and owners (*owner, into the plan) from the plan,
 * keeping the ones s owns.
 */
static int64
read_side(WalsWire *w, Session *s, int64 **ids, const uint8 **owner_out, int32 **own,
		  int64 *nown)
{
	int64		n = wals_wire_count_of(w, sizeof(int64) + 1, INT32_MAX);
	const uint8 *owner;
	int64		k = 0;

	*ids = session_alloc(sizeof(int64) * n);
	wals_wire_int64s(w, *ids, n);
	for (int64 j = 1; j < n; j++)
		if ((*ids)[j - 1] >= (*ids)[j])
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals: the ids of a sharded training's plan are not increasing")));
	owner = wals_wire_bytes(w, n);
	*owner_out = owner;
	*nown = 0;
	for (int64 j = 0; j < n; j++)
	{
		if (owner[j] >= s->nshards)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals: a sharded training's plan names shard %d of %d",
							owner[j], s->nshards)));
		*nown += owner[j] == s->shard;
	}
	*own = session_alloc(sizeof(int32) * *nown);
	for (int64 j = 0; j < n; j++)
		if (owner[j] == s->shard)
			(*own)[k++] = (int32) j;
	return n;
}

/* Whether dense row j is among the own rows. */
static bool
owns(const int32 *own, int64 nown, int32 j)
{
	return find_int32(own, nown, j) >= 0;
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
 * wals_shard_plan(params bytea, shard int, nshards int, plan bytea)
 * RETURNS void
 *
 * params: the WalsParams fields, in wire order; plan: every user id with
 * the shard that owns it (a byte each), then every item id alike.  Each
 * cell read goes to the owner of its user (by user) and of its item (by
 * item); those this shard owns stay, the others wait in its outboxes.
 */
Datum
wals_shard_plan(PG_FUNCTION_ARGS)
{
	Session    *s = session_get(false, "wals_shard_plan");
	bytea	   *pb = PG_GETARG_BYTEA_PP(0);
	bytea	   *plan = PG_GETARG_BYTEA_PP(3);
	WalsWire	w;
	MemoryContext old;
	const uint8 *owner;
	const uint8 *item_owner;

	if (s->planned)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_plan() called twice")));
	s->shard = PG_GETARG_INT32(1);
	s->nshards = PG_GETARG_INT32(2);
	if (s->nshards < 1 || s->nshards > 255 || s->shard < 0 || s->shard >= s->nshards)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_plan(): shard %d of %d is out of range", s->shard,
						s->nshards)));

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
	wals_wire_done(&w);
	check_params(&s->params);

	old = MemoryContextSwitchTo(s->cxt);
	wals_wire_start(&w, VARDATA_ANY(plan), VARSIZE_ANY_EXHDR(plan), "plan");
	s->nusers = read_side(&w, s, &s->user_ids, &owner, &s->own_users, &s->own_nusers);
	s->nitems = read_side(&w, s, &s->item_ids, &item_owner, &s->own_items, &s->own_nitems);
	wals_wire_done(&w);
	s->out_users = palloc0(sizeof(Cells) * s->nshards);
	s->out_items = palloc0(sizeof(Cells) * s->nshards);
	s->out_sent = palloc0(sizeof(int64) * s->nshards);

	/* every box sized exactly first, so that none grows by copies */
	for (Loaded *l = s->loaded; l != NULL; l = l->next)
	{
		l->umap = dense_of(l->raw.user_ids, l->raw.nusers, s->user_ids, s->nusers);
		l->imap = dense_of(l->raw.item_ids, l->raw.nitems, s->item_ids, s->nitems);
		for (int64 k = 0; k < l->raw.n; k++)
		{
			s->out_users[owner[l->umap[l->raw.users[k]]]].cap++;
			s->out_items[item_owner[l->imap[l->raw.items[k]]]].cap++;
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

			cells_add(&s->out_users[owner[u]], u, i, v);
			cells_add(&s->out_items[item_owner[i]], u, i, v);
			if ((k & 0xffff) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		s->loaded = l->next;
		loaded_free(l);
	}
	note_peak(s);
	s->planned = true;
	MemoryContextSwitchTo(old);
	PG_RETURN_VOID();
}

/*
 * wals_shard_outbox(target int) RETURNS bytea
 *
 * The next chunk of the cells shard target owns (users' cells, then
 * items'), NULL when all are sent: a count and (user, item, value) each,
 * the users' chunks first, a flag telling which.
 */
Datum
wals_shard_outbox(PG_FUNCTION_ARGS)
{
	Session    *s = session_get(false, "wals_shard_outbox");
	int			t = PG_GETARG_INT32(0);
	Cells	   *c;
	int64		from;
	int64		n;
	bool		users;
	StringInfoData buf;

	if (!s->planned || t < 0 || t >= s->nshards || t == s->shard)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_outbox(): no outbox for shard %d", t)));
	users = s->out_sent[t] < s->out_users[t].n;
	c = users ? &s->out_users[t] : &s->out_items[t];
	from = users ? s->out_sent[t] : s->out_sent[t] - s->out_users[t].n;
	n = Min(c->n - from, SHARD_CHUNK_CELLS);
	if (n <= 0)
	{
		cells_free(&s->out_users[t]);
		cells_free(&s->out_items[t]);
		PG_RETURN_NULL();
	}
	initStringInfo(&buf);
	wals_put_int64(&buf, users ? 1 : 0);
	wals_put_int64(&buf, n);
	enlargeStringInfo(&buf, (int) (12 * n));
	for (int64 k = from; k < from + n; k++)
	{
		wals_put_int32(&buf, c->row[k]);
		wals_put_int32(&buf, c->col[k]);
		wals_put_floats(&buf, &c->val[k], 1);
	}
	s->out_sent[t] += n;
	PG_RETURN_BYTEA_P(finish_bytea(&buf));
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
	Session    *s = session_get(false, "wals_shard_inbox");
	bytea	   *cells = PG_GETARG_BYTEA_PP(0);
	WalsWire	w;
	bool		users;
	int64		n;
	Cells	   *into;

	if (!s->planned || s->started)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_inbox() outside of a sharded training's exchange")));
	wals_wire_start(&w, VARDATA_ANY(cells), VARSIZE_ANY_EXHDR(cells), "cells");
	users = wals_wire_int64(&w) != 0;
	n = wals_wire_count(&w, SHARD_CHUNK_CELLS);
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
	note_peak(s);
	PG_RETURN_VOID();
}

/*
 * The matrix of the owned rows own (nown, increasing) of one side from
 * cells (row, col dense in the whole training), duplicates merged as
 * src/core merges them; the columns are the other side's ncols rows.
 */
static void
build_matrix(const Session *s, Cells *c, bool by_user, const int32 *own, int64 nown,
			 int64 ncols, WalsCsr *out)
{
	int32	   *rows = palloc_extended(sizeof(int32) * (c->n > 0 ? c->n : 1), MCXT_ALLOC_HUGE);
	int64	   *tmp_indptr = palloc_extended(sizeof(int64) * (ncols + 1), MCXT_ALLOC_HUGE);
	int32	   *tmp_idx = palloc_extended(sizeof(int32) * (c->n > 0 ? c->n : 1), MCXT_ALLOC_HUGE);
	float	   *tmp_val = palloc_extended(sizeof(float) * (c->n > 0 ? c->n : 1), MCXT_ALLOC_HUGE);
	const int32 *key = by_user ? c->row : c->col;
	const int32 *col = by_user ? c->col : c->row;
	WalsStatus	st;

	note_peak(session);

	for (int64 k = 0; k < c->n; k++)
		rows[k] = (int32) find_int32(own, nown, key[k]);
	out->indptr = session_alloc_rows(sizeof(int64) * (nown + 1));
	out->indices = session_alloc_rows(sizeof(int32) * c->n);
	out->values = session_alloc_rows(sizeof(float) * c->n);
	st = wals_csr_from_coo(s->params.feedback, nown, ncols, c->n, rows, col, c->val, out,
						   tmp_indptr, tmp_idx, tmp_val, NULL);
	if (st != WALS_OK)
		wals_report_core_status(st, "building a shard's matrices");
	pfree(rows);
	pfree(tmp_indptr);
	pfree(tmp_idx);
	pfree(tmp_val);
	cells_free(c);
	c->n = 0;
}

/*
 * wals_shard_start(x bytea, y bytea) RETURNS bigint
 *
 * Once every inbox has arrived: both matrices of the owned rows, and their
 * starting factors (own users' then own items', f floats each); the owned
 * users' cells once merged, which the coordinator adds up.
 */
Datum
wals_shard_start(PG_FUNCTION_ARGS)
{
	Session    *s = session_get(false, "wals_shard_start");
	bytea	   *xb = PG_GETARG_BYTEA_PP(0);
	bytea	   *yb = PG_GETARG_BYTEA_PP(1);
	int			f = s->params.factors;
	WalsWire	w;
	MemoryContext old;
	int64		longest = 0;

	if (!s->planned || s->started)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_start() outside of a sharded training")));
	old = MemoryContextSwitchTo(s->cxt);
	build_matrix(s, &s->out_users[s->shard], true, s->own_users, s->own_nusers, s->nitems,
				 &s->by_user);
	build_matrix(s, &s->out_items[s->shard], false, s->own_items, s->own_nitems, s->nusers,
				 &s->by_item);
	s->by_user.nrows = s->own_nusers;
	s->by_user.ncols = s->nitems;
	s->by_item.nrows = s->own_nitems;
	s->by_item.ncols = s->nusers;
	s->X = session_alloc_rows(sizeof(float) * s->own_nusers * f);
	s->Y = session_alloc_rows(sizeof(float) * s->own_nitems * f);
	wals_wire_start(&w, VARDATA_ANY(xb), VARSIZE_ANY_EXHDR(xb), "starting user factors");
	wals_wire_floats(&w, s->X, s->own_nusers * f);
	wals_wire_done(&w);
	wals_wire_start(&w, VARDATA_ANY(yb), VARSIZE_ANY_EXHDR(yb), "starting item factors");
	wals_wire_floats(&w, s->Y, s->own_nitems * f);
	wals_wire_done(&w);
	for (int64 r = 0; r < s->own_nusers; r++)
		longest = Max(longest, s->by_user.indptr[r + 1] - s->by_user.indptr[r]);
	for (int64 r = 0; r < s->own_nitems; r++)
		longest = Max(longest, s->by_item.indptr[r + 1] - s->by_item.indptr[r]);
	s->scratch = session_alloc_rows(sizeof(float) * wals_solve_scratch(&s->params, longest));
	s->other = session_alloc_rows(sizeof(float) * Max(s->nusers, s->nitems) * f);
	s->started = true;
	note_peak(s);
	MemoryContextSwitchTo(old);
	PG_RETURN_INT64(s->by_user.indptr[s->own_nusers]);
}

/*
 * wals_shard_solve(side int, doing text, other bytea, gram bytea)
 * RETURNS bytea
 *
 * A half-sweep over this shard's rows of side (0 users, 1 items) given
 * every row of the other side (an empty other for the users: the items'
 * that wals_shard_loss kept) and its Gram: the items' regularisation (0
 * for the users, whose loss wals_shard_loss gives), the Gram of the rows
 * solved, and the rows.  A row that cannot be solved is the error
 * wals_train raises on one server, naming the row's id and doing (what the
 * coordinator was doing).
 */
Datum
wals_shard_solve(PG_FUNCTION_ARGS)
{
	Session    *s = session_get(false, "wals_shard_solve");
	int			side = PG_GETARG_INT32(0);
	char	   *doing = text_to_cstring(PG_GETARG_TEXT_PP(1));
	bytea	   *ob = PG_GETARG_BYTEA_PP(2);
	bytea	   *gb = PG_GETARG_BYTEA_PP(3);
	int			f = s->params.factors;
	bool		users = side == 0;
	const WalsCsr *R = users ? &s->by_user : &s->by_item;
	float	   *mine = users ? s->X : s->Y;
	int64		nmine = users ? s->own_nusers : s->own_nitems;
	int64		nother = users ? s->nitems : s->nusers;
	float	   *other = s->other;
	float	   *G = palloc(sizeof(float) * f * f);
	WalsFailure failure = {0};
	int64		bad = -1;
	double		loss;
	WalsWire	w;
	StringInfoData buf;

	if (!s->started || (side != 0 && side != 1))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_solve() outside of a sharded training")));
	if (!(users && VARSIZE_ANY_EXHDR(ob) == 0 && s->other_items))
	{
		wals_wire_start(&w, VARDATA_ANY(ob), VARSIZE_ANY_EXHDR(ob), "factors");
		wals_wire_floats(&w, other, nother * f);
		wals_wire_done(&w);
	}
	s->other_items = false;
	wals_wire_start(&w, VARDATA_ANY(gb), VARSIZE_ANY_EXHDR(gb), "Gram matrix");
	wals_wire_floats(&w, G, (int64) f * f);
	wals_wire_done(&w);

	failure.status = wals_solve_rows(&s->params, R, other, G, mine, 0, nmine, s->scratch, &bad);
	if (failure.status != WALS_OK)
	{
		failure.side = users ? WALS_SIDE_USERS : WALS_SIDE_ITEMS;
		failure.row = bad >= 0 ? (users ? s->own_users : s->own_items)[bad] : -1;
		wals_report_failure(&failure, doing, s->user_ids, s->item_ids);
	}
	CHECK_FOR_INTERRUPTS();
	loss = users ? 0 : wals_reg_rows(&s->params, R, mine, 0, nmine);
	memset(G, 0, sizeof(float) * f * f);
	wals_gram_rows(mine, 0, nmine, f, G);

	initStringInfo(&buf);
	enlargeStringInfo(&buf, (int) (VARHDRSZ + sizeof(double) + sizeof(float) * (f * f + nmine * f)));
	appendStringInfoSpaces(&buf, VARHDRSZ);
	wals_put_double(&buf, loss);
	wals_put_floats(&buf, G, (int64) f * f);
	wals_put_floats(&buf, mine, nmine * f);
	SET_VARSIZE(buf.data, buf.len);
	PG_RETURN_BYTEA_P((bytea *) buf.data);
}

/*
 * wals_shard_loss(y bytea) RETURNS float8
 *
 * Once both half-sweeps are done, with every item's factors: this shard's
 * users' part of the loss, their cells and their regularisation, over
 * their rows as src/core sums them on one server.  The items' factors are
 * kept for the next half-sweep of the users, which then needs none sent.
 */
Datum
wals_shard_loss(PG_FUNCTION_ARGS)
{
	Session    *s = session_get(false, "wals_shard_loss");
	bytea	   *yb = PG_GETARG_BYTEA_PP(0);
	WalsWire	w;

	if (!s->started)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_loss() outside of a sharded training")));
	wals_wire_start(&w, VARDATA_ANY(yb), VARSIZE_ANY_EXHDR(yb), "item factors");
	wals_wire_floats(&w, s->other, s->nitems * s->params.factors);
	wals_wire_done(&w);
	s->other_items = true;
	PG_RETURN_FLOAT8(wals_loss_rows(&s->params, &s->by_user, s->X, s->other, 0,
									s->own_nusers));
}

/*
 * wals_shard_rated() RETURNS bytea
 *
 * Each owned user's rated items as the user factor table stores them
 * (wals_rated_bytea), in order: a length, then the value.
 */
Datum
wals_shard_rated(PG_FUNCTION_ARGS)
{
	Session    *s = session_get(false, "wals_shard_rated");
	StringInfoData buf;

	if (!s->started)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wals_shard_rated() outside of a sharded training")));
	initStringInfo(&buf);
	for (int64 r = 0; r < s->own_nusers; r++)
	{
		int64		lo = s->by_user.indptr[r];
		bytea	   *b = wals_rated_bytea(s->item_ids, s->by_user.indices + lo,
										 s->by_user.values + lo,
										 s->by_user.indptr[r + 1] - lo);

		wals_put_int64(&buf, VARSIZE(b) - VARHDRSZ);
		appendBinaryStringInfo(&buf, VARDATA(b), VARSIZE(b) - VARHDRSZ);
		pfree(b);
	}
	PG_RETURN_BYTEA_P(finish_bytea(&buf));
}

/*
 * wals_shard_end() RETURNS bigint: free this backend's training at once;
 * the most memory it held, in bytes.
 */
Datum
wals_shard_end(PG_FUNCTION_ARGS)
{
	Size		peak = session_get(false, "wals_shard_end")->peak;

	session_free();
	PG_RETURN_INT64((int64) peak);
}
