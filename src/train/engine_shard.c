/*
 * engine_shard.c
 *	  A training whose ratings stay on the servers of a sharded source:
 *	  the coordinator holds the ids and both factor matrices, each shard
 *	  its share of the ratings, and every half-sweep is solved where the
 *	  rows live.
 *
 * Opening (wals_shards_open): each shard reads its partitions as the
 * caller's user mapping lets it, and returns its distinct ids.  The
 * coordinator numbers every id as a training on one server would (id
 * order), and gives each user and each item one owner: a user the lowest
 * shard that holds its ratings (the only one when the source is
 * partitioned by user), an item the shard of its dense index modulo the
 * shards.  A shard keeps the cells of the users and of the items it owns,
 * and the others go to their owners once, through the coordinator, a
 * chunk at a time: a source partitioned by user sends none of its cells
 * by user, and (S - 1)/S of them by item, 12 bytes each.  This is Spark
 * ALS's second, item-partitioned copy made at the start; the alternative,
 * every item's system summed from partial sums of every shard at each
 * step, would send an f-vector per item and shard at every CG step
 * instead of once.
 *
  * Each iteration (the engine): every shard solves the users it owns, as
 * src/core solves them on one server, from all item factors and their
 * Gram, and returns them with their Gram; then the coordinator sends all
 * user factors and their Gram, and each returns its items, their Gram and
 * regularisation; then all item factors again, from which each sums its
 * users' cells and regularisation, by user as on one server, and keeps
 * them for the next iteration's users.  The loss is those sums plus w0
 * trace(GX GY): the same as on one server, but for the order of the sums.  Bytes an iteration, with S shards, U
 * users, I items and f factors: 4 f (S I + U) to solve the users and
 * 4 f (S U + I) to solve the items (about 185 MB for the 20M set, f = 64,
 * S = 3), against nothing on one server; the shards compute at once.
 *
 * What comes back at the end are the factors, already here, and each
 * user's rated items, which the user factor table keeps for serving.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "shard_wire.h"
#include "wals_train.h"

struct WalsShards
{
	const WalsTrainArgs *args;
	WalsProblem *problem;		/* from the engine's begin */
	char	   *names;			/* "s1", "s2", for messages */
	WalsShard **shard;
	int			n;
	int64		nusers;
	int64		nitems;
	uint8	   *user_owner;
	uint8	   *item_owner;
	float	   *X;
	float	   *Y;
	float	   *GX;
	float	   *GY;
	int			it;
	double		start_bytes;	/* moved before the first iteration */
	MemoryContextCallback cleanup;
	/* the rated items of the owned users of each shard, and where each reads */
	bytea	  **rated;
	WalsWire   *rated_at;
};

static WalsShardArg
arg_int4(int32 v, uint32 *storage)
{
	WalsShardArg a = {INT4OID, (const char *) storage, sizeof(uint32)};

	*storage = pg_hton32((uint32) v);
	return a;
}

static WalsShardArg
arg_text(const char *v)
{
	WalsShardArg a = {TEXTOID, v, (int) strlen(v)};

	return a;
}

/* A text argument, SQL's NULL for a NULL v. */
static WalsShardArg
arg_text_or_null(const char *v)
{
	WalsShardArg a = {TEXTOID, v, v != NULL ? (int) strlen(v) : 0};

	return a;
}

static WalsShardArg
arg_bytes(Oid type, StringInfo buf)
{
	WalsShardArg a = {type, buf->data, buf->len};

	return a;
}

/* Send the same call to every shard, then wait for each in turn. */
static void
call_all(WalsShards *sh, const char *fn, int nargs, const WalsShardArg *args, bytea **out)
{
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], fn, nargs, args);
	for (int s = 0; s < sh->n; s++)
	{
		bytea	   *r = wals_shard_wait(sh->shard[s]);

		if (out != NULL)
			out[s] = r;
	}
}

/*
 * The caller's SELECT on the columns a training reads, as the executor
 * would check it for a SELECT of the source.
 */
static void
check_select(const WalsTrainArgs *args)
{
	const char *cols[3] = {args->user_col, args->item_col, args->rating_col};

	if (pg_class_aclcheck(args->source, GetUserId(), ACL_SELECT) == ACLCHECK_OK)
		return;
	for (int k = 0; k < 3; k++)
		if (cols[k] != NULL &&
			pg_attribute_aclcheck(args->source, get_attnum(args->source, cols[k]), GetUserId(),
								  ACL_SELECT) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, args->source_display);
}

/* Read every shard's partitions, a partition of each shard at a time. */
/*
 * The results libpq holds for each shard, freed with the training's
 * memory however it ends: libpq's memory is not a memory context's.
 */
static void
clear_results(void *arg)
{
	WalsShards *sh = arg;

	for (int s = 0; s < sh->n; s++)
		wals_shard_clear(sh->shard[s]);
}

static void
load_all(WalsShards *sh)
{
	const WalsTrainArgs *args = sh->args;
	int			most = 0;

	for (int s = 0; s < sh->n; s++)
		most = Max(most, list_length(sh->shard[s]->parts));
	for (int k = 0; k < most; k++)
	{
		for (int s = 0; s < sh->n; s++)
		{
			WalsShardPart *part;
			WalsShardArg a[5];
			int			na = 0;

			if (k >= list_length(sh->shard[s]->parts))
				continue;
			part = list_nth(sh->shard[s]->parts, k);
			a[na++] = arg_text(part->remote);
			a[na++] = arg_text(part->user_col);
			a[na++] = arg_text(part->item_col);
			a[na++] = arg_text_or_null(part->rating_col);
			a[na++] = arg_text(wals_feedback_name(args->params.feedback));
			wals_shard_send(sh->shard[s], "wals_shard_load", na, a);
		}
		for (int s = 0; s < sh->n; s++)
			if (k < list_length(sh->shard[s]->parts))
				wals_shard_wait(sh->shard[s]);
	}
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

/*
 * The ids every shard read, numbered in id order into data, and their
 * owners; the shards' rows and NULL ids are counted into data.
 */
static void
number_ids(WalsShards *sh, WalsData *data)
{
	bytea	  **ids = palloc(sizeof(bytea *) * sh->n);
	WalsWire   *w = palloc(sizeof(WalsWire) * sh->n);
	int64		nu = 0;
	int64		ni = 0;
	int64	   *users;
	int64	   *items;
	int64		rows = 0;

	call_all(sh, "wals_shard_ids", 0, NULL, ids);
	for (int s = 0; s < sh->n; s++)
	{
		WalsWire	peek;
		int64		n;

		wals_wire_start(&w[s], VARDATA(ids[s]), VARSIZE(ids[s]) - VARHDRSZ, "ids");
		sh->shard[s]->rows = wals_wire_count(&w[s], PG_INT64_MAX);
		rows += sh->shard[s]->rows;
		data->null_ids += wals_wire_count(&w[s], PG_INT64_MAX);
		peek = w[s];
		n = wals_wire_count_of(&peek, sizeof(int64), INT32_MAX);
		nu += n;
		wals_wire_take(&peek, sizeof(int64) * n);
		ni += wals_wire_count_of(&peek, sizeof(int64), INT32_MAX);
	}
	if (rows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" given as \"source\" has no ratings",
						sh->args->source_display),
				 errhint("Training needs at least one row with a user and an item id.")));
	users = palloc_extended(sizeof(int64) * nu, MCXT_ALLOC_HUGE);
	items = palloc_extended(sizeof(int64) * ni, MCXT_ALLOC_HUGE);
	nu = ni = 0;
	for (int s = 0; s < sh->n; s++)
	{
		int64		n = wals_wire_count(&w[s], INT32_MAX);

		wals_wire_int64s(&w[s], users + nu, n);
		nu += n;
		n = wals_wire_count(&w[s], INT32_MAX);
		wals_wire_int64s(&w[s], items + ni, n);
		ni += n;
		wals_wire_done(&w[s]);
	}
	qsort(users, nu, sizeof(int64), cmp_int64);
	qsort(items, ni, sizeof(int64), cmp_int64);
	data->nusers = 0;
	for (int64 k = 0; k < nu; k++)
		if (data->nusers == 0 || users[data->nusers - 1] != users[k])
			users[data->nusers++] = users[k];
	data->nitems = 0;
	for (int64 k = 0; k < ni; k++)
		if (data->nitems == 0 || items[data->nitems - 1] != items[k])
			items[data->nitems++] = items[k];
	if (data->nusers > INT32_MAX || data->nitems > INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a training takes at most %d users and %d items", INT32_MAX, INT32_MAX)));
	data->user_ids = users;
	data->item_ids = items;
	if (data->null_ids > 0)
		ereport(NOTICE,
				(errmsg("skipped %lld rows of \"%s\" with a null user or item id",
						(long long) data->null_ids, sh->args->source_display)));
	sh->nusers = data->nusers;
	sh->nitems = data->nitems;

	/* a user's owner: the lowest shard that read it */
	sh->user_owner = palloc_extended(sh->nusers, MCXT_ALLOC_HUGE);
	memset(sh->user_owner, 0xff, sh->nusers);
	for (int s = 0; s < sh->n; s++)
	{
		WalsWire	r;
		int64		n;

		wals_wire_start(&r, VARDATA(ids[s]), VARSIZE(ids[s]) - VARHDRSZ, "ids");
		wals_wire_take(&r, 2 * sizeof(int64));
		n = wals_wire_count(&r, INT32_MAX);
		for (int64 k = 0; k < n; k++)
		{
			int64		j = wals_ids_find(users, sh->nusers, wals_wire_int64(&r));

			if (sh->user_owner[j] == 0xff)
				sh->user_owner[j] = (uint8) s;
		}
		pfree(ids[s]);
	}
	sh->item_owner = palloc_extended(sh->nitems, MCXT_ALLOC_HUGE);
	for (int64 j = 0; j < sh->nitems; j++)
		sh->item_owner[j] = (uint8) (j % sh->n);
}

/* The owned rows of shard s of one side, from the owners. */
static void
owned_rows(const uint8 *owner, int64 n, int s, int32 **rows, int64 *nrows)
{
	int64		k = 0;

	*nrows = 0;
	for (int64 j = 0; j < n; j++)
		*nrows += owner[j] == s;
	*rows = palloc_extended(sizeof(int32) * Max(*nrows, 1), MCXT_ALLOC_HUGE);
	for (int64 j = 0; j < n; j++)
		if (owner[j] == s)
			(*rows)[k++] = (int32) j;
}

/* The parameters and the plan to every shard. */
static void
plan_all(WalsShards *sh, const WalsData *data)
{
	const WalsParams *p = &sh->args->params;
	StringInfoData params;
	StringInfoData plan;
	uint32		n_storage;

	initStringInfo(&params);
	wals_put_int64(&params, p->feedback);
	wals_put_int64(&params, p->solver);
	wals_put_int64(&params, p->factors);
	wals_put_int64(&params, p->cg_steps);
	wals_put_double(&params, p->regularization);
	wals_put_double(&params, p->alpha);
	wals_put_double(&params, p->w0);
	wals_put_int64(&params, p->block_size);
	wals_put_int64(&params, p->frequency_scaled ? 1 : 0);
	wals_put_double(&params, p->reg_exponent);

	initStringInfo(&plan);
	wals_put_int64(&plan, sh->nusers);
	wals_put_int64s(&plan, data->user_ids, sh->nusers);
	appendBinaryStringInfo(&plan, (const char *) sh->user_owner, (int) sh->nusers);
	wals_put_int64(&plan, sh->nitems);
	wals_put_int64s(&plan, data->item_ids, sh->nitems);
	appendBinaryStringInfo(&plan, (const char *) sh->item_owner, (int) sh->nitems);

	for (int s = 0; s < sh->n; s++)
	{
		uint32		shard_storage;
		WalsShardArg a[4];

		a[0] = arg_bytes(BYTEAOID, &params);
		a[1] = arg_int4(s, &shard_storage);
		a[2] = arg_int4(sh->n, &n_storage);
		a[3] = arg_bytes(BYTEAOID, &plan);
		wals_shard_send(sh->shard[s], "wals_shard_plan", 4, a);
		owned_rows(sh->user_owner, sh->nusers, s, &sh->shard[s]->own_users,
				   &sh->shard[s]->nown_users);
		owned_rows(sh->item_owner, sh->nitems, s, &sh->shard[s]->own_items,
				   &sh->shard[s]->nown_items);
	}
	for (int s = 0; s < sh->n; s++)
		wals_shard_wait(sh->shard[s]);
	pfree(plan.data);
}

/* Every shard's cells of another's rows to that one, a chunk at a time. */
static void
exchange(WalsShards *sh)
{
	for (int from = 0; from < sh->n; from++)
		for (int to = 0; to < sh->n; to++)
		{
			uint32		storage;
			WalsShardArg target;

			if (from == to)
				continue;
			target = arg_int4(to, &storage);
			for (;;)
			{
				bytea	   *chunk;
				WalsShardArg cells;

				CHECK_FOR_INTERRUPTS();
				wals_shard_send(sh->shard[from], "wals_shard_outbox", 1, &target);
				chunk = wals_shard_wait(sh->shard[from]);
				if (chunk == NULL)
					break;
				cells = (WalsShardArg) {BYTEAOID, VARDATA(chunk), VARSIZE(chunk) - VARHDRSZ};
				wals_shard_send(sh->shard[to], "wals_shard_inbox", 1, &cells);
				wals_shard_wait(sh->shard[to]);
				pfree(chunk);
			}
		}
}

/*
 * Open a training on the shards of args's source: read, number the ids
 * into data (no matrices: they stay on the shards), plan and exchange.
 */
WalsShards *
wals_shards_open(const WalsTrainArgs *args, List *shards, WalsData *data)
{
	WalsShards *sh = palloc0(sizeof(WalsShards));
	ListCell   *lc;
	StringInfoData names;

	check_select(args);
	sh->args = args;
	sh->n = list_length(shards);
	sh->shard = palloc(sizeof(WalsShard *) * sh->n);
	sh->cleanup.func = clear_results;
	sh->cleanup.arg = sh;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &sh->cleanup);
	initStringInfo(&names);
	foreach(lc, shards)
	{
		WalsShard  *s = lfirst(lc);

		sh->shard[foreach_current_index(lc)] = s;
		appendStringInfo(&names, "%s\"%s\"", foreach_current_index(lc) > 0 ? ", " : "",
						 s->name);
	}
	wals_shards_connect(shards);
	load_all(sh);
	memset(data, 0, sizeof(*data));
	number_ids(sh, data);
	plan_all(sh, data);
	exchange(sh);
	data->shards = sh;
	sh->names = names.data;
	ereport(NOTICE,
			(errmsg("training model \"%s\" on %d shards: servers %s",
					args->model_display, sh->n, names.data),
			 errdetail("%lld users and %lld items; each shard solves its own.",
					   (long long) data->nusers, (long long) data->nitems)));
	return sh;
}

/* Rows of F (f floats each) listed in rows, on the wire. */
static void
put_rows(StringInfo buf, const float *F, const int32 *rows, int64 n, int f)
{
	enlargeStringInfo(buf, (int) (sizeof(float) * n * f));
	for (int64 k = 0; k < n; k++)
		wals_put_floats(buf, F + (size_t) rows[k] * f, f);
}

/*
 * Every shard's matrices and starting factors (its rows of X and Y), and
 * the cells of the training, merged, into data.
 */
void
wals_shards_start(WalsShards *sh, float *X, float *Y, WalsData *data)
{
	int			f = sh->args->params.factors;
	bytea	  **merged = palloc(sizeof(bytea *) * sh->n);

	sh->X = X;
	sh->Y = Y;
	for (int s = 0; s < sh->n; s++)
	{
		WalsShard  *shard = sh->shard[s];
		StringInfoData xb;
		StringInfoData yb;
		WalsShardArg a[2];

		initStringInfo(&xb);
		initStringInfo(&yb);
		put_rows(&xb, X, shard->own_users, shard->nown_users, f);
		put_rows(&yb, Y, shard->own_items, shard->nown_items, f);
		a[0] = arg_bytes(BYTEAOID, &xb);
		a[1] = arg_bytes(BYTEAOID, &yb);
		wals_shard_send(shard, "wals_shard_start", 2, a);
		pfree(xb.data);
		pfree(yb.data);
	}
	data->nratings = 0;
	for (int s = 0; s < sh->n; s++)
	{
		WalsWire	w;

		merged[s] = wals_shard_wait(sh->shard[s]);
		wals_wire_start(&w, VARDATA(merged[s]), VARSIZE(merged[s]) - VARHDRSZ, "cells");
		data->nratings += wals_wire_count(&w, PG_INT64_MAX);
	}
}

/*
 * A half-sweep on every shard: side 0 solves the users from all of Y and
 * GY, side 1 the items from all of X and GX.  The rows come back into
 * their matrix, the shards' Grams add up into the side's Gram, in shard
 * order, and their losses onto *loss.
 */
static void
half_sweep(WalsShards *sh, int side, double *loss)
{
	int			f = sh->args->params.factors;
	bool		users = side == 0;
	float	   *other = users ? sh->Y : sh->X;
	int64		nother = users ? sh->nitems : sh->nusers;
	float	   *mine = users ? sh->X : sh->Y;
	float	   *G = users ? sh->GX : sh->GY;
	StringInfoData ob;
	StringInfoData gb;
	char	   *doing = psprintf("training model \"%s\", iteration %d",
								 sh->args->model_display, sh->it + 1);
	uint32		side_storage;
	WalsShardArg a[4];
	float	   *part = palloc(sizeof(float) * f * f);

	sh->problem->phase(sh->problem->phase_arg,
					   psprintf("solving %s on servers %s", users ? "users" : "items",
								sh->names));

	initStringInfo(&ob);
	if (!(users && sh->it > 0))
		wals_put_floats(&ob, other, nother * f);
	initStringInfo(&gb);
	wals_put_floats(&gb, users ? sh->GY : sh->GX, (int64) f * f);
	a[0] = arg_int4(side, &side_storage);
	a[1] = arg_text(doing);
	a[2] = arg_bytes(BYTEAOID, &ob);
	a[3] = arg_bytes(BYTEAOID, &gb);
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_solve", 4, a);
	memset(G, 0, sizeof(float) * f * f);
	for (int s = 0; s < sh->n; s++)
	{
		WalsShard  *shard = sh->shard[s];
		const int32 *rows = users ? shard->own_users : shard->own_items;
		int64		n = users ? shard->nown_users : shard->nown_items;
		WalsWire	w;
		int			len;
		const char *data = wals_shard_wait_raw(shard, &len);

		wals_wire_start(&w, data != NULL ? data : "", data != NULL ? len : 0, "solved rows");
		*loss += wals_wire_double(&w);
		wals_wire_floats(&w, part, (int64) f * f);
		for (int k = 0; k < f * f; k++)
			G[k] += part[k];
		for (int64 k = 0; k < n; k++)
			wals_wire_floats(&w, mine + (size_t) rows[k] * f, f);
		wals_wire_done(&w);
		wals_shard_clear(shard);
	}
	pfree(ob.data);
	pfree(part);
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
 * The users' part of the loss from every shard, which keep the item
 * factors sent for the next half-sweep of the users: their cells are read
 * by user, the items' factors at random, as on one server (by item, the
 * users' factors would be, which are several times larger).
 */
static void
users_loss(WalsShards *sh, double *loss)
{
	StringInfoData yb;
	WalsShardArg a;

	sh->problem->phase(sh->problem->phase_arg,
					   psprintf("computing the loss on servers %s", sh->names));
	initStringInfo(&yb);
	wals_put_floats(&yb, sh->Y, sh->nitems * sh->args->params.factors);
	a = arg_bytes(BYTEAOID, &yb);
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_loss", 1, &a);
	for (int s = 0; s < sh->n; s++)
	{
		int			len;
		const char *data = wals_shard_wait_raw(sh->shard[s], &len);
		WalsWire	w;

		wals_wire_start(&w, data != NULL ? data : "", data != NULL ? len : 0, "loss");
		*loss += wals_wire_double(&w);
		wals_wire_done(&w);
		wals_shard_clear(sh->shard[s]);
	}
	pfree(yb.data);
}

static bool
shard_iterate(void *state, double *loss, WalsFailure *failure)
{
	WalsShards *sh = state;
	double		total = 0;

	half_sweep(sh, 0, &total);
	half_sweep(sh, 1, &total);
	users_loss(sh, &total);
	total += wals_loss_unobserved(&sh->args->params, sh->GX, sh->GY);
	sh->it++;
	if (loss != NULL)
		*loss = total;
	return true;
}

/* The factors are here already; the rated items come back from the shards. */
static bool
shard_end(void *state, float *X, float *Y, WalsFailure *failure)
{
	WalsShards *sh = state;
	double		bytes = 0;
	double		per_it;
	bytea	  **peaks;
	StringInfoData held;

	if (X == NULL)
		return true;
	for (int s = 0; s < sh->n; s++)
		bytes += sh->shard[s]->bytes;
	per_it = sh->it > 0 ? (bytes - sh->start_bytes) / sh->it : 0;
	bytes = 0;
	sh->rated = palloc(sizeof(bytea *) * sh->n);
	sh->rated_at = palloc(sizeof(WalsWire) * sh->n);
	call_all(sh, "wals_shard_rated", 0, NULL, sh->rated);
	for (int s = 0; s < sh->n; s++)
		wals_wire_start(&sh->rated_at[s], VARDATA(sh->rated[s]),
						VARSIZE(sh->rated[s]) - VARHDRSZ, "rated items");
	peaks = palloc(sizeof(bytea *) * sh->n);
	call_all(sh, "wals_shard_end", 0, NULL, peaks);
	initStringInfo(&held);
	for (int s = 0; s < sh->n; s++)
	{
		WalsWire	w;

		bytes += sh->shard[s]->bytes;
		wals_wire_start(&w, VARDATA(peaks[s]), VARSIZE(peaks[s]) - VARHDRSZ, "memory");
		appendStringInfo(&held, "%s%s", s > 0 ? ", " : "",
						 wals_pretty_bytes((double) wals_wire_count(&w, PG_INT64_MAX)));
	}
	ereport(NOTICE,
			(errmsg("model \"%s\" trained on %d shards", sh->args->model_display, sh->n),
			 errdetail("%s sent to them and received from them, %s an iteration; each held at most %s.",
					   wals_pretty_bytes(bytes), wals_pretty_bytes(per_it), held.data)));
	return true;
}

/*
 * User r's rated items, as the user factor table stores them; users are
 * asked for in increasing order, so each shard's are read in turn.
 */
bytea *
wals_shards_rated(WalsShards *sh, int64 r)
{
	WalsWire   *w = &sh->rated_at[sh->user_owner[r]];
	int64		len = wals_wire_count(w, MaxAllocSize - VARHDRSZ);
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), wals_wire_bytes(w, len), len);
	return b;
}

const WalsEngine wals_shard_engine = {
	.name = "shards",
	.begin = shard_begin,
	.iterate = shard_iterate,
	.end = shard_end,
};
