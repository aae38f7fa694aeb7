/*
 * peer_route.c
 *	  A shard's side of a sharded training, from its plan to its
 *	  matrices: every cell read goes to the shards that own its user and
 *	  its item (coord_plan.c carries them between the shards).
 *
 *	  wals_shard_route		each cell read to its owners' boxes
 *	  wals_shard_outbox		cells another shard owns, a chunk at a time
 *	  wals_shard_inbox		cells this shard owns, from another
 *
 * Every user and every item has one owner shard, which keeps all of its
 * cells (those read elsewhere come through the coordinator once, at the
 * start) and solves it: a shard holds its own users' rows by user and its
 * own items' rows by item, its share of both matrices, never all of them.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "shard_peer.h"

PG_FUNCTION_INFO_V1(wals_shard_route);
PG_FUNCTION_INFO_V1(wals_shard_outbox);
PG_FUNCTION_INFO_V1(wals_shard_inbox);

/* Room for more cells than c holds; c is unchanged by an error. */
static void
cells_grow(Cells *c, int64 more)
{
	int64		cap = c->n + more;

	if (cap <= c->cap)
		return;
	if (c->row == NULL)
	{
		c->row = wals_shard_alloc(sizeof(int32) * cap);
		c->col = wals_shard_alloc(sizeof(int32) * cap);
		c->val = wals_shard_alloc(sizeof(float) * cap);
	}
	else
	{
		c->row = repalloc_huge(c->row, sizeof(int32) * cap);
		c->col = repalloc_huge(c->col, sizeof(int32) * cap);
		c->val = repalloc_huge(c->val, sizeof(float) * cap);
	}
	c->cap = cap;
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
	c->n = 0;
	c->cap = 0;
}

/* A cell, in room made by cells_grow. */
static inline void
cells_add(Cells *c, int32 row, int32 col, float val)
{
	Assert(c->n < c->cap);
	c->row[c->n] = row;
	c->col[c->n] = col;
	c->val[c->n] = val;
	c->n++;
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

/* A partition's rows, once routed. */
static void
loaded_free(Loaded *l)
{
	pfree(l->umap);
	pfree(l->imap);
	pfree(l->raw.users);
	pfree(l->raw.items);
	pfree(l->raw.ratings);
	pfree(l->raw.user_ids);
	pfree(l->raw.item_ids);
	pfree(l);
}

/*
 * What routing adds to what the session holds: the rows each shard owns,
 * the dense index of every id read, and each cell twice, by user and by
 * item, 12 bytes each time.
 */
static double
route_bytes(const Session *s)
{
	double		ids = 0;

	for (Loaded *l = s->loaded; l != NULL; l = l->next)
		ids += (double) l->raw.nusers + (double) l->raw.nitems;
	return sizeof(int32) * ((double) s->nusers + (double) s->nitems + ids) +
		2 * 12 * (double) s->rows;
}

/*
 * Each partition's ids as the plan's dense numbers; every id read must be
 * in the plan (dense_of checks it).
 */
static void
map_loaded_ids(Session *s)
{
	for (Loaded *l = s->loaded; l != NULL; l = l->next)
	{
		if (l->umap != NULL)
			pfree(l->umap);
		l->umap = NULL;
		if (l->imap != NULL)
			pfree(l->imap);
		l->imap = NULL;
		l->umap = dense_of(l->raw.user_ids, l->raw.nusers, s->user_ids, s->nusers);
		l->imap = dense_of(l->raw.item_ids, l->raw.nitems, s->item_ids, s->nitems);
	}
}

/* The rows each shard owns, on both sides, and this shard's own. */
static void
split_by_owner(Session *s)
{
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
}

/* Every outbox sized for the cells it will take, so that none grows. */
static void
size_outboxes(Session *s)
{
	int64	   *by_user = palloc0(sizeof(int64) * s->nshards);
	int64	   *by_item = palloc0(sizeof(int64) * s->nshards);

	s->other_in = palloc0(sizeof(int64) * s->nshards);
	s->out_users = palloc0(sizeof(Cells) * s->nshards);
	s->out_items = palloc0(sizeof(Cells) * s->nshards);
	s->out_sent = palloc0(sizeof(int64) * s->nshards);
	for (Loaded *l = s->loaded; l != NULL; l = l->next)
		for (int64 k = 0; k < l->raw.n; k++)
		{
			by_user[s->user_owner[l->umap[l->raw.users[k]]]]++;
			by_item[s->item_owner[l->imap[l->raw.items[k]]]]++;
		}
	for (int t = 0; t < s->nshards; t++)
	{
		cells_grow(&s->out_users[t], by_user[t]);
		cells_grow(&s->out_items[t], by_item[t]);
	}
	pfree(by_user);
	pfree(by_item);
}

/*
 * wals_shard_route() RETURNS void
 *
 * Once the whole plan has come: each cell read goes to the owner of its
 * user (by user) and of its item (by item); those this shard owns stay,
 * the others wait in its outboxes.  Every id read must be in the plan,
 * which is checked before anything moves; every box is sized first, so
 * that none grows by copies, and each partition's rows are freed once
 * routed.
 */
Datum
wals_shard_route(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_ROUTE);
	MemoryContext old;

	if (s->user_ids_in != s->nusers || s->item_ids_in != s->nitems)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot call wals_shard_route() before the whole plan has come"),
				 errdetail(INT64_FORMAT " of " INT64_FORMAT " users and " INT64_FORMAT " of "
						   INT64_FORMAT " items have come.", s->user_ids_in, s->nusers,
						   s->item_ids_in, s->nitems)));
	wals_shard_reserve(s, route_bytes(s), "routing the cells of a sharded training");
	old = MemoryContextSwitchTo(s->cxt);
	map_loaded_ids(s);
	wals_shard_changing(s);
	split_by_owner(s);
	size_outboxes(s);
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
	s->local_users = s->local_items = NULL;
	s->nlocal_users = s->nlocal_items = 0;
	s->user_owner = s->item_owner = NULL;
	wals_shard_note_peak(s);
	MemoryContextSwitchTo(old);
	wals_shard_leave(SHARD_ROUTE);
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
	Session    *s = wals_shard_enter(SHARD_OUTBOX);
	int			t = PG_GETARG_INT32(0);
	int64		most = PG_GETARG_INT64(1);
	Cells	   *c;
	int64		from;
	int64		n;
	bool		users;
	StringInfoData buf;

	if (t < 0 || t >= s->nshards || t == s->shard || most < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_outbox(): no outbox for shard %d, or fewer than one cell asked for", t),
				 errdetail("This is shard %d of %d.", s->shard, s->nshards)));
	users = s->out_sent[t] < s->out_users[t].n;
	c = users ? &s->out_users[t] : &s->out_items[t];
	from = users ? s->out_sent[t] : s->out_sent[t] - s->out_users[t].n;
	n = Min(c->n - from, most);
	if (n <= 0)
	{
		wals_shard_cells_free(&s->out_users[t]);
		wals_shard_cells_free(&s->out_items[t]);
		s->out_sent[t] = 0;
		wals_shard_leave(SHARD_OUTBOX);
		PG_RETURN_NULL();
	}
	wals_shard_buffer(s, &buf, 2 * sizeof(int64) + 12 * (double) n, SHARD_OUTBOX);
	wals_put_int64(&buf, users ? 1 : 0);
	wals_put_int64(&buf, n);
	for (int64 k = from; k < from + n; k++)
	{
		wals_put_int32(&buf, c->row[k]);
		wals_put_int32(&buf, c->col[k]);
		wals_put_floats(&buf, &c->val[k], 1);
	}
	s->out_sent[t] += n;
	wals_shard_leave(SHARD_OUTBOX);
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/* A cell of an inbox: refused unless this shard owns its user (or item). */
static void
inbox_cell(const Session *s, WalsWire *w, bool users, int32 *u, int32 *i, float *v)
{
	wals_wire_int32s(w, u, 1);
	wals_wire_int32s(w, i, 1);
	wals_wire_floats(w, v, 1);
	if (*u < 0 || *u >= s->nusers || *i < 0 || *i >= s->nitems ||
		!(users ? owns(s->own_users, s->own_nusers, *u) :
		  owns(s->own_items, s->own_nitems, *i)))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a cell sent to shard %d is not one it owns", s->shard)));
}

/*
 * wals_shard_inbox(cells bytea) RETURNS void
 *
 * A chunk of another shard's outbox for this one: every cell's user (or
 * item, for an items' chunk) must be one this shard owns.  The chunk is
 * read whole before any of it is kept, so that one it refuses leaves none.
 */
Datum
wals_shard_inbox(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_INBOX);
	bytea	   *cells = PG_GETARG_BYTEA_PP(0);
	WalsWire	w;
	bool		users;
	int64		n;
	size_t		at;
	Cells	   *into;
	int32		u;
	int32		i;
	float		v;

	wals_wire_start(&w, VARDATA_ANY(cells), VARSIZE_ANY_EXHDR(cells), "cells");
	users = wals_wire_int64(&w) != 0;
	n = wals_wire_count_of(&w, 12, PG_INT64_MAX);
	at = w.at;
	for (int64 k = 0; k < n; k++)
		inbox_cell(s, &w, users, &u, &i, &v);
	wals_wire_done(&w);

	into = users ? &s->out_users[s->shard] : &s->out_items[s->shard];
	wals_shard_reserve(s, 12 * (double) n, "the cells of a sharded training");
	cells_grow(into, n);
	w.at = at;
	for (int64 k = 0; k < n; k++)
	{
		inbox_cell(s, &w, users, &u, &i, &v);
		cells_add(into, u, i, v);
	}
	wals_shard_note_peak(s);
	wals_shard_leave(SHARD_INBOX);
	PG_RETURN_VOID();
}
