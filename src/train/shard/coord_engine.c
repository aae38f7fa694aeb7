/*
 * coord_engine.c
 *	  A training whose ratings stay on the servers of a sharded source:
 *	  the coordinator holds the ids and both factor matrices, each shard
 *	  its share of the ratings, and every half-sweep is solved where the
 *	  rows live (coord_plan.c opens it).
 *
 * Each iteration: every shard solves the users it owns, as
 * src/core solves them on one server, from all item factors and their
 * Gram, and returns them with their Gram; the coordinator passes each
 * shard's rows on to every other, which then hold all user factors, and
 * sends their Gram with the call to solve the items, each shard its own,
 * which come back with their Gram and regularisation and are passed on
 * the same way; then each sums its users' cells and regularisation, by
 * user as on one server, from all item factors, which it keeps for the
 * next iteration's users.  The loss is those sums plus w0 trace(GX GY):
 * the same as on one server, but for the order of the sums.  A shard
 * never receives its own rows, and the coordinator passes on the bytes a
 * shard answered with as they came, without reading them.  Bytes an
 * iteration, with S shards, U users, I items and f factors: each row once
 * from its shard and S - 1 times to the others, 4 f S (U + I) (about
 * 127 MB for the 20M set, f = 64, S = 3), against nothing on one server;
 * one shard's rows go nowhere.  The shards compute at once.
 *
 * What comes back at the end are the factors, once, and each user's rated
 * items, which the user factor table keeps for serving.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "shard_coord.h"

/*
 * Send to a wals_shard_put of len bytes of shard t's rows of side (0
 * users, 1 items), from its first-th.
 */
static void
send_put(WalsShard *to, int side, int t, int64 first, const char *data, int len)
{
	uint32		side_storage;
	uint32		t_storage;
	int64		at = pg_hton64((uint64) first);
	WalsShardArg a[4];

	a[0] = arg_int4(side, &side_storage);
	a[1] = arg_int4(t, &t_storage);
	a[2] = (WalsShardArg) {INT8OID, (const char *) &at, sizeof(at)};
	a[3] = (WalsShardArg) {BYTEAOID, data, len};
	wals_shard_send(to, "wals_shard_put", 4, a);
}

/*
 * A page of shard t's rows of side, from its first-th, to wals_shard_put:
 * on shard only, or on every shard but t (only NULL).
 */
static void
send_rows(WalsShards *sh, int side, int t, int64 first, const char *data, int len,
		  WalsShard *only)
{
	if (only != NULL)
	{
		send_put(only, side, t, first, data, len);
		wals_shard_wait_none(only);
		return;
	}
	for (int s = 0; s < sh->n; s++)
		if (s != t)
			send_put(sh->shard[s], side, t, first, data, len);
	for (int s = 0; s < sh->n; s++)
		if (s != t)
			wals_shard_wait_none(sh->shard[s]);
}

/* The dense rows shard t owns of side, increasing, and how many (*n). */
static const int32 *
rows_of(WalsShards *sh, int side, int t, int64 *n)
{
	WalsShard  *shard = sh->shard[t];

	*n = side == 0 ? shard->nown_users : shard->nown_items;
	return side == 0 ? shard->own_users : shard->own_items;
}

/*
 * Shard t's rows of F, side's factors, in pages to wals_shard_put: on t
 * only (their starting factors) or on every other shard (only NULL).
 */
static void
put_rows(WalsShards *sh, int side, int t, const float *F, WalsShard *only)
{
	int			f = sh->args->params.factors;
	int64		page = Max(message_bytes() / (int64) (sizeof(float) * f), 1);
	int64		n;
	const int32 *rows = rows_of(sh, side, t, &n);
	StringInfoData buf;
	int64		first = 0;

	initStringInfo(&buf);
	do
	{
		int64		count = Min(page, n - first);

		resetStringInfo(&buf);
		enlargeStringInfo(&buf, (int) (sizeof(float) * count * f));
		for (int64 k = first; k < first + count; k++)
			wals_put_floats(&buf, F + (size_t) rows[k] * f, f);
		send_rows(sh, side, t, first, buf.data, buf.len, only);
		first += count;
	} while (first < n);
	pfree(buf.data);
}

/*
 * Every shard's matrices and starting factors (its rows of X and Y, and
 * every other shard's of Y for the first half-sweep), and the cells of
 * the training, merged, into data.
 */
void
wals_shards_start(WalsShards *sh, float *X, float *Y, WalsData *data)
{
	sh->X = X;
	sh->Y = Y;
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_start", 0, NULL);
	data->nratings = 0;
	for (int s = 0; s < sh->n; s++)
		data->nratings += wals_shard_wait_int64(sh->shard[s], "cells");
	for (int s = 0; s < sh->n; s++)
	{
		put_rows(sh, 0, s, X, sh->shard[s]);
		put_rows(sh, 1, s, Y, sh->shard[s]);
	}
	for (int t = 0; t < sh->n; t++)
		put_rows(sh, 1, t, Y, NULL);
}

/*
 * A half-sweep on every shard: side 0 solves the users from all item
 * factors (which every shard holds) and GY, side 1 the items from all
 * user factors and GX.
 */
static void
send_solve(WalsShards *sh, int side)
{
	int			f = sh->args->params.factors;
	bool		users = side == 0;
	StringInfoData gb;
	uint32		side_storage;
	WalsShardArg a[4];
	/* one shard's rows go nowhere until the end */
	int64		most = pg_hton64((uint64) (sh->n > 1 ? message_bytes() : 0));

	sh->problem->phase(sh->problem->phase_arg,
					   users ? WALS_PHASE_SOLVING_USERS : WALS_PHASE_SOLVING_ITEMS, 0,
					   psprintf("solving %s on servers %s", users ? "users" : "items",
								sh->names));
	initStringInfo(&gb);
	wals_put_floats(&gb, users ? sh->GY : sh->GX, (int64) f * f);
	a[0] = arg_int4(side, &side_storage);
	a[1] = arg_text(psprintf("training model \"%s\", iteration %d",
							 sh->args->model_display, sh->it + 1));
	a[2] = arg_bytes(BYTEAOID, &gb);
	a[3] = (WalsShardArg) {INT8OID, (const char *) &most, sizeof(most)};
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_solve", 4, a);
	pfree(gb.data);
}

/*
 * Every shard's answer to its half-sweep of side: the Grams add up into
 * the side's Gram, in shard order, and the losses onto *loss; the rows,
 * when they came with it, are kept for relay.
 */
static void
collect(WalsShards *sh, int side, double *loss)
{
	int			f = sh->args->params.factors;
	float	   *G = side == 0 ? sh->GX : sh->GY;
	float	   *part = palloc(sizeof(float) * f * f);

	memset(G, 0, sizeof(float) * f * f);
	for (int s = 0; s < sh->n; s++)
	{
		WalsShard  *shard = sh->shard[s];
		int64		n;
		WalsWire	w;
		int			launched;

		rows_of(sh, side, s, &n);
		wals_shard_wait_wire(shard, &w, "solved rows");
		*loss += wals_wire_double(&w);
		launched = (int) wals_wire_count(&w, WALS_MAX_WORKERS);
		shard->workers = Max(shard->workers, launched);
		wals_wire_floats(&w, part, (int64) f * f);
		for (int k = 0; k < f * f; k++)
			G[k] += part[k];
		sh->paged[s] = w.len - w.at != sizeof(float) * f * n;
		if (!sh->paged[s])
		{
			sh->solved_len[s] = (int) (w.len - w.at);
			sh->solved[s] = wals_wire_take(&w, sh->solved_len[s]);
		}
		wals_wire_done(&w);
		if (sh->paged[s])
			wals_shard_clear(shard);
		else
			wals_shard_keep(shard);
	}
	pfree(part);
}

/*
 * Shard t's rows of side from wals_shard_take, a page at a time: passed
 * on to every other shard, or, F not NULL, read into F, side's factors.
 */
static void
take_pages(WalsShards *sh, int side, int t, float *F)
{
	int			f = sh->args->params.factors;
	int64		page = Max(message_bytes() / (int64) (sizeof(float) * f), 1);
	WalsShard  *shard = sh->shard[t];
	int64		n;
	const int32 *rows = rows_of(sh, side, t, &n);

	for (int64 first = 0; first < n; first += page)
	{
		uint32		side_storage;
		int64		at = pg_hton64((uint64) first);
		int64		count = pg_hton64((uint64) page);
		WalsShardArg a[3];
		WalsWire	w;

		a[0] = arg_int4(side, &side_storage);
		a[1] = (WalsShardArg) {INT8OID, (const char *) &at, sizeof(at)};
		a[2] = (WalsShardArg) {INT8OID, (const char *) &count, sizeof(count)};
		wals_shard_send(shard, "wals_shard_take", 3, a);
		wals_shard_wait_wire(shard, &w, "solved rows");
		if (F == NULL)
			send_rows(sh, side, t, first, w.data, (int) w.len, NULL);
		else
		{
			for (int64 k = first; k < Min(first + page, n); k++)
				wals_wire_floats(&w, F + (size_t) rows[k] * f, f);
			wals_wire_done(&w);
		}
		wals_shard_clear(shard);
	}
}

/*
 * The rows of side that each shard solved, to every other shard: those
 * that came with the answers in S - 1 rounds, in each of which every shard
 * receives one shard's rows, so that they all read at once; then those to
 * come in pages, taken from their shard and passed on a page at a time.
 * This server reads none of them: it takes the factors at the end.
 */
static void
relay(WalsShards *sh, int side)
{
	for (int r = 1; r < sh->n; r++)
	{
		for (int s = 0; s < sh->n; s++)
		{
			int			t = (s + r) % sh->n;

			if (!sh->paged[t])
				send_put(sh->shard[s], side, t, 0, sh->solved[t], sh->solved_len[t]);
		}
		for (int s = 0; s < sh->n; s++)
			if (!sh->paged[(s + r) % sh->n])
				wals_shard_wait_none(sh->shard[s]);
	}
	for (int t = 0; t < sh->n; t++)
	{
		if (sh->paged[t] && sh->n > 1)
			take_pages(sh, side, t, NULL);
		wals_shard_forget(sh->shard[t]);
		sh->solved[t] = NULL;
	}
}

static bool
shard_begin(WalsProblem *problem, void **state, WalsFailure *failure)
{
	WalsShards *sh = problem->data->shards;
	int			f = problem->args->params.factors;

	sh->problem = problem;
	for (int s = 0; s < sh->n; s++)
		sh->start_bytes += sh->shard[s]->bytes;
	sh->GX = palloc0(sizeof(float) * f * f);
	sh->GY = palloc0(sizeof(float) * f * f);
	wals_gram_rows(sh->Y, 0, sh->nitems, f, sh->GY);
	problem->workers = 0;
	*state = sh;
	return true;
}

/*
 * The users' part of the loss on every shard, which keep the item factors
 * for the next half-sweep of the users: their cells are read by user, the
 * items' factors at random, as on one server (by item, the users' factors
 * would be, which are several times larger).
 */
static void
send_loss(WalsShards *sh)
{
	sh->problem->phase(sh->problem->phase_arg, WALS_PHASE_LOSS, 0,
					   psprintf("computing the loss on servers %s", sh->names));
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_loss", 0, NULL);
}

static void
collect_loss(WalsShards *sh, double *loss)
{
	for (int s = 0; s < sh->n; s++)
	{
		WalsWire	w;

		wals_shard_wait_wire(sh->shard[s], &w, "loss");
		*loss += wals_wire_double(&w);
		wals_wire_done(&w);
		wals_shard_clear(sh->shard[s]);
	}
}

/* An iteration: each half-sweep's rows go from every shard to every other. */
static bool
shard_iterate(void *state, double *loss, WalsFailure *failure)
{
	WalsShards *sh = state;
	double		total = 0;

	send_solve(sh, 0);
	collect(sh, 0, &total);
	relay(sh, 0);
	send_solve(sh, 1);
	collect(sh, 1, &total);
	relay(sh, 1);
	send_loss(sh);
	collect_loss(sh, &total);
	total += wals_loss_unobserved(&sh->args->params, sh->GX, sh->GY);
	sh->it++;
	if (loss != NULL)
		*loss = total;
	return true;
}

/*
 * The factors from every shard; what the training moved, for the last
 * NOTICE, which ending the shards gives with their memory.
 */
static bool
shard_end(void *state, float *X, float *Y, WalsFailure *failure)
{
	WalsShards *sh = state;
	double		bytes = 0;
	double		per_it;
	StringInfoData held;

	if (X == NULL)
		return true;
	for (int s = 0; s < sh->n; s++)
		bytes += sh->shard[s]->bytes;
	for (int s = 0; s < sh->n; s++)
	{
		take_pages(sh, 0, s, X);
		take_pages(sh, 1, s, Y);
	}
	per_it = sh->it > 0 ? (bytes - sh->start_bytes) / sh->it : 0;
	sh->rated_next = palloc0(sizeof(int64) * sh->n);
	sh->rated_page = palloc0(sizeof(bytea *) * sh->n);
	sh->rated_at = palloc0(sizeof(WalsWire) * sh->n);
	initStringInfo(&held);
	appendStringInfo(&held, "%s sent to them and received from them, %s an iteration",
					 wals_pretty_bytes(bytes), wals_pretty_bytes(per_it));
	sh->summary = held.data;
	return true;
}

/*
 * End the training on every shard, and say what it moved and the most
 * memory each held.
 */
static void
end_shards(WalsShards *sh)
{
	StringInfoData held;
	StringInfoData workers;

	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_end", 0, NULL);
	initStringInfo(&held);
	initStringInfo(&workers);
	for (int s = 0; s < sh->n; s++)
	{
		appendStringInfo(&held, "%s%s", s > 0 ? ", " : "",
						 wals_pretty_bytes((double) wals_shard_wait_int64(sh->shard[s], "memory")));
		appendStringInfo(&workers, "%s%d", s > 0 ? ", " : "", sh->shard[s]->workers);
	}
	ereport(wals_call_notice_level(),
			(errmsg("model \"%s\" trained on %d shards", sh->args->model_display, sh->n),
			 errdetail("%s; each held at most %s and solved with %s parallel workers.",
					   sh->summary, held.data, workers.data)));
}

/*
 * User r's rated items, as the user factor table stores them; users are
 * asked for in increasing order, so each shard's come in turn, a page at a
 * time.  After the last user, the shards are ended.
 */
bytea *
wals_shards_rated(WalsShards *sh, int64 r)
{
	int			s = sh->user_owner[r];
	WalsWire   *w = &sh->rated_at[s];
	int64		len;
	bytea	   *b;

	if (sh->rated_page[s] == NULL || w->at == w->len)
	{
		int64		first = pg_hton64((uint64) sh->rated_next[s]);
		int64		most = pg_hton64((uint64) message_bytes());
		WalsShardArg a[2];
		MemoryContext old;

		if (sh->rated_page[s] != NULL)
			pfree(sh->rated_page[s]);
		a[0] = (WalsShardArg) {INT8OID, (const char *) &first, sizeof(first)};
		a[1] = (WalsShardArg) {INT8OID, (const char *) &most, sizeof(most)};
		wals_shard_send(sh->shard[s], "wals_shard_rated", 2, a);
		/* the caller's context is reset between its batches of users */
		old = MemoryContextSwitchTo(sh->cxt);
		sh->rated_page[s] = wals_shard_wait(sh->shard[s]);
		MemoryContextSwitchTo(old);
		if (sh->rated_page[s] == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals: shard on server \"%s\" gave no rated items",
							sh->shard[s]->name)));
		wals_wire_start(w, VARDATA(sh->rated_page[s]), VARSIZE(sh->rated_page[s]) - VARHDRSZ,
						"rated items");
	}
	len = wals_wire_count_of(w, 1, MaxAllocSize - VARHDRSZ);
	b = palloc(VARHDRSZ + len);
	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), wals_wire_bytes(w, len), len);
	sh->rated_next[s]++;
	if (r == sh->nusers - 1)
		end_shards(sh);
	return b;
}

const WalsEngine wals_shard_engine = {
	.name = "shards",
	.begin = shard_begin,
	.iterate = shard_iterate,
	.end = shard_end,
};
