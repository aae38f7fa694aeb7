/*
 * coord_plan.c
 *	  The opening of a training on the servers of a sharded source, on the
 *	  coordinator: each shard reads, the ids are numbered, every user and
 *	  item gets its owner, and the cells go to their owners
 *	  (coord_engine.c then trains).
 *
 * Each shard reads its partitions as the caller's user mapping lets it,
 * and returns its distinct ids.  The coordinator numbers every id as a
 * training on one server would (id order), and gives each user and each
 * item one owner: a user the lowest shard that holds its ratings (the
 * only one when the source is partitioned by user), an item the shard of
 * its dense index modulo the shards.  A shard keeps the cells of the
 * users and of the items it owns, and the others go to their owners once,
 * through the coordinator, a chunk at a time: a source partitioned by
 * user sends none of its cells by user, and (S - 1)/S of them by item, 12
 * bytes each.  This is Spark ALS's second, item-partitioned copy made at
 * the start; the alternative, every item's system summed from partial
 * sums of every shard at each step, would send an f-vector per item and
 * shard at every CG step instead of once.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#include "shard_coord.h"

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

/*
 * The results libpq holds for each shard, freed with the training's
 * memory however it ends: libpq's memory is not a memory context's.
 */
static void
clear_results(void *arg)
{
	WalsShards *sh = arg;

	for (int s = 0; s < sh->n; s++)
	{
		wals_shard_clear(sh->shard[s]);
		wals_shard_forget(sh->shard[s]);
	}
}

/* Read every shard's partitions, a partition of each shard at a time. */
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
				wals_shard_wait_none(sh->shard[s]);
	}
}

/*
 * Append the distinct ids of side that shard s read to ids, a page at a
 * time; n of them.
 */
static void
fetch_ids(WalsShards *sh, int s, int side, int64 n, int64 *ids)
{
	int64		page = Max(message_bytes() / (int64) sizeof(int64), 1);

	for (int64 first = 0; first < n; first += page)
	{
		uint32		side_storage;
		WalsShardArg a[3];
		int64		at = pg_hton64((uint64) first);
		int64		count = pg_hton64((uint64) page);
		WalsWire	w;

		a[0] = arg_int4(side, &side_storage);
		a[1] = (WalsShardArg) {INT8OID, (const char *) &at, sizeof(at)};
		a[2] = (WalsShardArg) {INT8OID, (const char *) &count, sizeof(count)};
		wals_shard_send(sh->shard[s], "wals_shard_id_page", 3, a);
		wals_shard_wait_wire(sh->shard[s], &w, "ids");
		wals_wire_int64s(&w, ids + first, Min(page, n - first));
		wals_wire_done(&w);
		wals_shard_clear(sh->shard[s]);
	}
}

/*
 * Every shard's counts of rows, rows without an id, users and items (nu[s]
 * and ni[s], their sums in *total_u and *total_i); returns the rows.
 */
static int64
count_ids(WalsShards *sh, WalsData *data, int64 *nu, int64 *ni, int64 *total_u,
		  int64 *total_i)
{
	int64		rows = 0;

	*total_u = *total_i = 0;
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_ids", 0, NULL);
	for (int s = 0; s < sh->n; s++)
	{
		WalsWire	w;

		wals_shard_wait_wire(sh->shard[s], &w, "ids");
		sh->shard[s]->rows = wals_wire_count(&w, PG_INT64_MAX);
		rows += sh->shard[s]->rows;
		data->null_ids += wals_wire_count(&w, PG_INT64_MAX);
		nu[s] = wals_wire_count(&w, INT32_MAX);
		ni[s] = wals_wire_count(&w, INT32_MAX);
		wals_wire_done(&w);
		wals_shard_clear(sh->shard[s]);
		*total_u += nu[s];
		*total_i += ni[s];
	}
	return rows;
}

/*
 * A user belongs to the first shard that read it (fetched holds every
 * shard's user ids in shard order, nu[s] of shard s); an item to shard
 * j mod n.
 */
static void
assign_owners(WalsShards *sh, const int64 *users, const int64 *fetched, const int64 *nu)
{
	int64		at = 0;

	sh->user_owner = palloc_extended(Max(sh->nusers, 1), MCXT_ALLOC_HUGE);
	memset(sh->user_owner, 0xff, sh->nusers);
	for (int s = 0; s < sh->n; s++)
		for (int64 k = 0; k < nu[s]; k++)
		{
			int64		j = wals_ids_find(users, sh->nusers, fetched[at++]);

			if (sh->user_owner[j] == 0xff)
				sh->user_owner[j] = (uint8) s;
		}
}

/*
 * The ids every shard read, numbered in id order into data, and their
 * owners: a user's the lowest shard that read it, an item's its index
 * modulo the shards.  The shards' rows and NULL ids are counted into data.
 */
static void
number_ids(WalsShards *sh, WalsData *data)
{
	int64	   *nu = palloc(sizeof(int64) * sh->n);
	int64	   *ni = palloc(sizeof(int64) * sh->n);
	int64		total_u;
	int64		total_i;
	int64		rows;
	int64	   *fetched;		/* every shard's user ids, in shard order */
	int64	   *users;
	int64	   *items;
	int64		at;

	rows = count_ids(sh, data, nu, ni, &total_u, &total_i);
	if (rows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" given as \"source\" has no ratings",
						sh->args->source_display),
				 errhint("Training needs at least one row with a user and an item id.")));
	if (data->null_ids > 0)
		ereport(NOTICE,
				(errmsg("skipped %lld rows of \"%s\" with a null user or item id",
						(long long) data->null_ids, sh->args->source_display)));
	wals_memory_check(sizeof(int64) * (double) (2 * total_u + total_i),
					  "the ids of a sharded training");
	fetched = palloc_extended(sizeof(int64) * Max(total_u, 1), MCXT_ALLOC_HUGE);
	items = palloc_extended(sizeof(int64) * Max(total_i, 1), MCXT_ALLOC_HUGE);
	at = 0;
	for (int s = 0; s < sh->n; s++)
	{
		fetch_ids(sh, s, 0, nu[s], fetched + at);
		at += nu[s];
	}
	users = palloc_extended(sizeof(int64) * Max(total_u, 1), MCXT_ALLOC_HUGE);
	memcpy(users, fetched, sizeof(int64) * total_u);
	at = 0;
	for (int s = 0; s < sh->n; s++)
	{
		fetch_ids(sh, s, 1, ni[s], items + at);
		at += ni[s];
	}
	data->nusers = wals_ids_sort_unique(users, total_u);
	data->nitems = wals_ids_sort_unique(items, total_i);
	if (data->nusers > INT32_MAX || data->nitems > INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a training takes at most %d users and %d items", INT32_MAX, INT32_MAX)));
	data->user_ids = users;
	data->item_ids = items;
	sh->nusers = data->nusers;
	sh->nitems = data->nitems;

	assign_owners(sh, users, fetched, nu);
	pfree(fetched);
	sh->item_owner = palloc_extended(Max(sh->nitems, 1), MCXT_ALLOC_HUGE);
	for (int64 j = 0; j < sh->nitems; j++)
		sh->item_owner[j] = (uint8) (j % sh->n);
}

/* Every id of side with its owner to every shard, a page at a time. */
static void
plan_pages(WalsShards *sh, int side, const int64 *ids, const uint8 *owner, int64 n)
{
	int64		page = Max(message_bytes() / (int64) (sizeof(int64) + 1), 1);

	for (int64 first = 0; first < n; first += page)
	{
		int64		count = Min(page, n - first);
		StringInfoData buf;
		uint32		side_storage;
		WalsShardArg a[2];

		initStringInfo(&buf);
		enlargeStringInfo(&buf, (int) ((sizeof(int64) + 1) * count + sizeof(int64)));
		wals_put_int64(&buf, count);
		wals_put_int64s(&buf, ids + first, count);
		appendBinaryStringInfo(&buf, (const char *) owner + first, (int) count);
		a[0] = arg_int4(side, &side_storage);
		a[1] = arg_bytes(BYTEAOID, &buf);
		for (int s = 0; s < sh->n; s++)
			wals_shard_send(sh->shard[s], "wals_shard_plan_page", 2, a);
		wals_shards_wait_none(sh);
		pfree(buf.data);
	}
}

/* The parameters and the plan to every shard, which then route their cells. */
static void
plan_all(WalsShards *sh, const WalsData *data)
{
	const WalsParams *p = &sh->args->params;
	StringInfoData params;
	uint32		n_storage;
	int64		nusers = pg_hton64((uint64) sh->nusers);
	int64		nitems = pg_hton64((uint64) sh->nitems);

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
	wals_put_int64(&params, sh->args->workers_given ? sh->args->workers : -1);

	for (int s = 0; s < sh->n; s++)
	{
		uint32		shard_storage;
		WalsShardArg a[5];

		a[0] = arg_bytes(BYTEAOID, &params);
		a[1] = arg_int4(s, &shard_storage);
		a[2] = arg_int4(sh->n, &n_storage);
		a[3] = (WalsShardArg) {INT8OID, (const char *) &nusers, sizeof(nusers)};
		a[4] = (WalsShardArg) {INT8OID, (const char *) &nitems, sizeof(nitems)};
		wals_shard_send(sh->shard[s], "wals_shard_plan", 5, a);
		sh->shard[s]->own_users = wals_shard_owned(sh->user_owner, sh->nusers, s,
												   &sh->shard[s]->nown_users);
		sh->shard[s]->own_items = wals_shard_owned(sh->item_owner, sh->nitems, s,
												   &sh->shard[s]->nown_items);
	}
	wals_shards_wait_none(sh);
	plan_pages(sh, 0, data->user_ids, sh->user_owner, sh->nusers);
	plan_pages(sh, 1, data->item_ids, sh->item_owner, sh->nitems);
	for (int s = 0; s < sh->n; s++)
		wals_shard_send(sh->shard[s], "wals_shard_route", 0, NULL);
	wals_shards_wait_none(sh);
}

/* Every shard's cells of another's rows to that one, a chunk at a time. */
static void
exchange(WalsShards *sh)
{
	int64		most = pg_hton64((uint64) Max(message_bytes() / 12 - 2, 1));

	for (int from = 0; from < sh->n; from++)
		for (int to = 0; to < sh->n; to++)
		{
			uint32		storage;
			WalsShardArg a[2];

			if (from == to)
				continue;
			a[0] = arg_int4(to, &storage);
			a[1] = (WalsShardArg) {INT8OID, (const char *) &most, sizeof(most)};
			for (;;)
			{
				int			len;
				const char *chunk;
				WalsShardArg cells;

				CHECK_FOR_INTERRUPTS();
				wals_shard_send(sh->shard[from], "wals_shard_outbox", 2, a);
				chunk = wals_shard_wait_raw(sh->shard[from], &len);
				if (chunk == NULL)
				{
					wals_shard_clear(sh->shard[from]);
					break;
				}
				cells = (WalsShardArg) {BYTEAOID, chunk, len};
				wals_shard_send(sh->shard[to], "wals_shard_inbox", 1, &cells);
				wals_shard_clear(sh->shard[from]);
				wals_shard_wait_none(sh->shard[to]);
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
	sh->solved = palloc0(sizeof(char *) * sh->n);
	sh->solved_len = palloc0(sizeof(int) * sh->n);
	sh->paged = palloc0(sizeof(bool) * sh->n);
	sh->cxt = CurrentMemoryContext;
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
	ereport(wals_call_notice_level(),
			(errmsg("training model \"%s\" on %d shards: servers %s",
					args->model_display, sh->n, names.data),
			 errdetail("%lld users and %lld items; each shard solves its own.",
					   (long long) data->nusers, (long long) data->nitems)));
	return sh;
}
