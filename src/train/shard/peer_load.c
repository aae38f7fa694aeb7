/*
 * peer_load.c
 *	  A shard's side of a sharded training, up to its plan: the functions
 *	  the coordinator (coord_plan.c) calls first on each server that holds
 *	  part of the ratings, in this order, inside one remote transaction;
 *	  peer_route.c and peer_solve.c have the rest.
 *
 *	  wals_shard_load		read a partition's rows, as the calling role
 *	  wals_shard_ids		what was read: rows, NULL ids, distinct ids
 *	  wals_shard_id_page	the distinct ids of a side, a page at a time
 *	  wals_shard_plan		the training's parameters and its size
 *	  wals_shard_plan_page	every id with its owner shard, a page at a time
 *
 * Every message is at most wals.shard_message_size, so that no side's ids
 * or factors are bounded by the 1 GB of one value: the coordinator pages
 * through what is larger.  Each call enters and leaves the session of
 * peer_session.c, which checks it against the protocol.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "shard_peer.h"

PG_FUNCTION_INFO_V1(wals_shard_load);
PG_FUNCTION_INFO_V1(wals_shard_ids);
PG_FUNCTION_INFO_V1(wals_shard_id_page);
PG_FUNCTION_INFO_V1(wals_shard_plan);
PG_FUNCTION_INFO_V1(wals_shard_plan_page);

/*
 * wals_shard_load(source text, user_col text, item_col text,
 *				   rating_col text, feedback text) RETURNS bigint
 *
 * Read one partition's ratings as the calling role (its privileges and row
 * security, as wals_train reads a source); the rows read.  source is a
 * qualified name, quoted where it needs to be, as regclass reads one.  An
 * empty partition is one whose shard holds no rows of the training: the
 * other shards hold them.
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
	s = wals_shard_enter(SHARD_LOAD);
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
	args.params.feedback = (WalsFeedback) wals_word_arg(wals_feedback_words,
														text_to_cstring(PG_GETARG_TEXT_PP(4)),
														"feedback");
	wals_shard_reserve(s, 0, "the rows read by a sharded training");

	old = MemoryContextSwitchTo(s->cxt);
	l = palloc0(sizeof(Loaded));
	wals_spi_connect();
	MemoryContextSwitchTo(s->cxt);
	wals_ingest(&args, &l->raw, true);
	SPI_finish();
	MemoryContextSwitchTo(old);
	wals_shard_reserve(s, 0, "the rows read by a sharded training");
	l->next = s->loaded;
	s->loaded = l;
	s->rows += l->raw.n;
	s->null_ids += l->raw.null_ids;
	wals_shard_leave(SHARD_LOAD);
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
	Session    *s = wals_shard_enter(SHARD_IDS);
	StringInfoData buf;

	if (s->state == SHARD_LOADING)
	{
		double		ids = 0;
		int64	   *users;
		int64	   *items;
		int64		nusers;
		int64		nitems;

		for (Loaded *l = s->loaded; l != NULL; l = l->next)
			ids += (double) l->raw.nusers + (double) l->raw.nitems;
		wals_shard_reserve(s, sizeof(int64) * ids, "the ids read by a sharded training");
		nusers = merge_ids(s, true, &users);
		nitems = merge_ids(s, false, &items);
		s->local_users = users;
		s->nlocal_users = nusers;
		s->local_items = items;
		s->nlocal_items = nitems;
	}
	wals_shard_buffer(s, &buf, 4 * sizeof(int64), SHARD_IDS);
	wals_put_int64(&buf, s->rows);
	wals_put_int64(&buf, s->null_ids);
	wals_put_int64(&buf, s->nlocal_users);
	wals_put_int64(&buf, s->nlocal_items);
	wals_shard_leave(SHARD_IDS);
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/* A side argument of call: 0 the users, 1 the items. */
static bool
side_arg(int32 side, ShardCall call)
{
	if (side != 0 && side != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid side %d for %s()", side, wals_shard_call_name(call)),
				 errhint("A side is 0 for the users, 1 for the items.")));
	return side == 0;
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
	Session    *s = wals_shard_enter(SHARD_ID_PAGE);
	bool		users = side_arg(PG_GETARG_INT32(0), SHARD_ID_PAGE);
	int64		first = PG_GETARG_INT64(1);
	int64		count = PG_GETARG_INT64(2);
	int64		n = users ? s->nlocal_users : s->nlocal_items;
	StringInfoData buf;

	if (first < 0 || first > n || count < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_id_page(): no page of " INT64_FORMAT " ids from " INT64_FORMAT,
						count, first),
				 errdetail("This shard read " INT64_FORMAT " distinct ids of that side.", n)));
	count = Min(count, n - first);
	wals_shard_buffer(s, &buf, sizeof(int64) * (double) count, SHARD_ID_PAGE);
	wals_put_int64s(&buf, (users ? s->local_users : s->local_items) + first, count);
	wals_shard_leave(SHARD_ID_PAGE);
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
		(p->solver == WALS_SUBSPACE && (p->block_size < 1 || p->block_size > p->factors)) ||
		!(p->regularization >= 0 && p->regularization <= WALS_MAX_REAL_PARAM) ||
		!(p->alpha >= 0 && p->alpha <= WALS_MAX_REAL_PARAM) ||
		!(p->w0 >= 0 && p->w0 <= WALS_MAX_REAL_PARAM) ||
		!(p->reg_exponent >= 0 && p->reg_exponent <= WALS_MAX_REG_EXPONENT))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a sharded training's parameters are out of range")));
}

/*
 * What a plan of nusers users and nitems items makes this shard hold, at
 * the least: every id with its owner, and every row of factors of one side,
 * which its half-sweeps read.
 */
static double
plan_bytes(int factors, int64 nusers, int64 nitems)
{
	return (sizeof(int64) + 1) * ((double) nusers + (double) nitems) +
		sizeof(float) * (double) factors * (double) Max(nusers, nitems);
}

/*
 * wals_shard_plan(params bytea, shard int, nshards int, nusers bigint,
 *				   nitems bigint) RETURNS void
 *
 * params: the WalsParams fields in wire order, then the parallel workers a
 * half-sweep may use (negative: max_parallel_maintenance_workers of this
 * server, whose cores they are); this shard's number, the
 * shards, and every user and item of the training, whose ids and owners
 * wals_shard_plan_page then gives, in order.  Nothing is sized by the
 * counts until their pages come.
 */
Datum
wals_shard_plan(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_PLAN);
	bytea	   *pb = PG_GETARG_BYTEA_PP(0);
	int			shard = PG_GETARG_INT32(1);
	int			nshards = PG_GETARG_INT32(2);
	int64		nusers = PG_GETARG_INT64(3);
	int64		nitems = PG_GETARG_INT64(4);
	WalsParams	params = {0};
	int64		workers;
	WalsWire	w;

	if (nshards < 1 || nshards > WALS_MAX_SHARDS || shard < 0 || shard >= nshards)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_plan(): shard %d of %d is out of range", shard, nshards)));
	if (nusers < s->nlocal_users || nusers > INT32_MAX ||
		nitems < s->nlocal_items || nitems > INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals_shard_plan(): " INT64_FORMAT " users and " INT64_FORMAT
						" items cannot hold the ids read here", nusers, nitems)));

	wals_wire_start(&w, VARDATA_ANY(pb), VARSIZE_ANY_EXHDR(pb), "parameters");
	params.feedback = wals_wire_int64(&w) == WALS_EXPLICIT ? WALS_EXPLICIT : WALS_IMPLICIT;
	params.solver = (WalsSolver) wals_wire_count(&w, WALS_SUBSPACE);
	params.factors = (int) wals_wire_count(&w, WALS_MAX_FACTORS);
	params.cg_steps = (int) wals_wire_count(&w, WALS_MAX_CG_STEPS);
	params.regularization = (float) wals_wire_double(&w);
	params.alpha = (float) wals_wire_double(&w);
	params.w0 = (float) wals_wire_double(&w);
	params.block_size = (int) wals_wire_count(&w, WALS_MAX_FACTORS);
	params.frequency_scaled = wals_wire_int64(&w) != 0;
	params.reg_exponent = (float) wals_wire_double(&w);
	workers = wals_wire_int64(&w);
	wals_wire_done(&w);
	check_params(&params);
	wals_shard_reserve(s, plan_bytes(params.factors, nusers, nitems),
					   "the plan of a sharded training");

	s->user_ids = wals_shard_alloc(0);
	s->item_ids = wals_shard_alloc(0);
	s->user_owner = wals_shard_alloc(0);
	s->item_owner = wals_shard_alloc(0);
	s->params = params;
	s->workers = workers >= 0 && workers <= WALS_MAX_WORKERS ?
		(int) workers : max_parallel_maintenance_workers;
	s->shard = shard;
	s->nshards = nshards;
	s->nusers = nusers;
	s->nitems = nitems;
	wals_shard_leave(SHARD_PLAN);
	PG_RETURN_VOID();
}

/*
 * wals_shard_plan_page(side int, page bytea) RETURNS void
 *
 * The next ids of side (0 users, 1 items) with their owners: a count, the
 * ids (increasing across pages), then a byte each, the owner's number.
 * The ids are kept as they come, so that what they take is what was sent.
 */
Datum
wals_shard_plan_page(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_PLAN_PAGE);
	bool		users = side_arg(PG_GETARG_INT32(0), SHARD_PLAN_PAGE);
	bytea	   *page = PG_GETARG_BYTEA_PP(1);
	int64	  **ids = users ? &s->user_ids : &s->item_ids;
	uint8	  **owner = users ? &s->user_owner : &s->item_owner;
	int64	   *in = users ? &s->user_ids_in : &s->item_ids_in;
	int64		total = users ? s->nusers : s->nitems;
	WalsWire	w;
	int64		n;
	const uint8 *o;

	wals_wire_start(&w, VARDATA_ANY(page), VARSIZE_ANY_EXHDR(page), "plan");
	n = wals_wire_count_of(&w, sizeof(int64) + 1, total - *in);
	wals_shard_reserve(s, (sizeof(int64) + 1) * (double) n, "the plan of a sharded training");
	*ids = repalloc_huge(*ids, sizeof(int64) * Max(*in + n, 1));
	*owner = repalloc_huge(*owner, Max(*in + n, 1));
	wals_wire_int64s(&w, *ids + *in, n);
	o = wals_wire_bytes(&w, n);
	wals_wire_done(&w);
	for (int64 k = 0; k < n; k++)
	{
		int64		j = *in + k;

		if (o[k] >= s->nshards || (j > 0 && (*ids)[j - 1] >= (*ids)[j]))
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals: a sharded training's plan has an owner out of range or ids out of order")));
		(*owner)[j] = o[k];
	}
	*in += n;
	wals_shard_leave(SHARD_PLAN_PAGE);
	PG_RETURN_VOID();
}
