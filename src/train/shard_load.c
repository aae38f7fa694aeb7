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
 * The calls are the protocol of shard_session.h: the table below says, for
 * each, the states of the session it may be called in and the state it
 * leaves it in, and wals_shard_enter checks it at the top of every call,
 * so that a call out of order is an error naming the call and the state,
 * never a read of what an earlier call freed.  No call may be made while
 * another runs in the same backend: wals_shard_load reads the source as
 * the calling role, whose views, policies and functions it runs, and any
 * of them calling a wals_shard_* function is refused, so that nothing the
 * load is using is freed under it.  Every size a caller's numbers give is
 * checked against wals.max_memory, with what the session holds, before it
 * is allocated, and bounded by what the session holds or has been sent:
 * the ids of the plan are kept as their pages come.
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

#define STATE(st)	(1u << (st))

/*
 * The protocol: each call, the states it may be called in, and the state
 * it leaves the session in when it returns.  A call that fails leaves the
 * state as it was, or, once it has begun to change the session in ways an
 * error would leave half done (wals_shard_changing), failed, where only
 * wals_shard_end remains.
 */
static const struct
{
	const char *name;
	uint32		from;
	ShardState	to;
}			shard_protocol[SHARD_NCALLS] = {
	[SHARD_LOAD] = {"wals_shard_load", STATE(SHARD_NONE) | STATE(SHARD_LOADING), SHARD_LOADING},
	[SHARD_IDS] = {"wals_shard_ids", STATE(SHARD_LOADING) | STATE(SHARD_LISTED), SHARD_LISTED},
	[SHARD_ID_PAGE] = {"wals_shard_id_page", STATE(SHARD_LISTED), SHARD_LISTED},
	[SHARD_PLAN] = {"wals_shard_plan", STATE(SHARD_LISTED), SHARD_PLANNED},
	[SHARD_PLAN_PAGE] = {"wals_shard_plan_page", STATE(SHARD_PLANNED), SHARD_PLANNED},
	[SHARD_ROUTE] = {"wals_shard_route", STATE(SHARD_PLANNED), SHARD_ROUTED},
	[SHARD_OUTBOX] = {"wals_shard_outbox", STATE(SHARD_ROUTED), SHARD_ROUTED},
	[SHARD_INBOX] = {"wals_shard_inbox", STATE(SHARD_ROUTED), SHARD_ROUTED},
	[SHARD_START] = {"wals_shard_start", STATE(SHARD_ROUTED), SHARD_STARTED},
	[SHARD_PUT] = {"wals_shard_put", STATE(SHARD_STARTED), SHARD_STARTED},
	[SHARD_SOLVE] = {"wals_shard_solve", STATE(SHARD_STARTED), SHARD_STARTED},
	[SHARD_TAKE] = {"wals_shard_take", STATE(SHARD_STARTED), SHARD_STARTED},
	[SHARD_LOSS] = {"wals_shard_loss", STATE(SHARD_STARTED), SHARD_STARTED},
	[SHARD_RATED] = {"wals_shard_rated", STATE(SHARD_STARTED), SHARD_STARTED},
	[SHARD_END] = {"wals_shard_end", ~STATE(SHARD_NONE), SHARD_NONE},
};

static const char *const shard_state_names[SHARD_NSTATES] = {
	[SHARD_NONE] = "none",
	[SHARD_LOADING] = "loading",
	[SHARD_LISTED] = "listed",
	[SHARD_PLANNED] = "planned",
	[SHARD_ROUTED] = "routed",
	[SHARD_STARTED] = "started",
	[SHARD_FAILED] = "failed",
};

static Session *session;
static bool callback_registered;

/*
 * The call running in this backend, from its wals_shard_enter until its
 * wals_shard_leave or the abort of the subtransaction it was entered in
 * (SHARD_NCALLS: none).
 */
static ShardCall running = SHARD_NCALLS;
static SubTransactionId running_subid;

const char *
wals_shard_call_name(ShardCall call)
{
	return shard_protocol[call].name;
}

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
			running = SHARD_NCALLS;
			break;
		default:
			break;
	}
}

/*
 * A training begun in the subtransaction that aborts ends with it; one
 * begun in a subtransaction that commits now belongs to its parent.  A call
 * entered in the subtransaction that aborts, or in a later one (which can
 * only be its child), is over: its error is on its way out.
 */
static void
end_of_subxact(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
			   void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && running != SHARD_NCALLS &&
		running_subid >= mySubid)
		running = SHARD_NCALLS;
	if (session == NULL || session->subid != mySubid)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		wals_shard_session_free();
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		session->subid = parentSubid;
}

/* A training begun in this backend, in the current subtransaction. */
static void
session_begin(void)
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
	session->state = SHARD_NONE;
}

/* The calls state allows, for the error of a call it does not. */
static char *
calls_allowed(ShardState state)
{
	StringInfoData buf;
	int			n = 0;
	int			seen = 0;

	for (int c = 0; c < SHARD_NCALLS; c++)
		n += (shard_protocol[c].from & STATE(state)) != 0;
	initStringInfo(&buf);
	for (int c = 0; c < SHARD_NCALLS; c++)
	{
		if ((shard_protocol[c].from & STATE(state)) == 0)
			continue;
		if (seen > 0)
			appendStringInfoString(&buf, seen == n - 1 ? " or " : ", ");
		appendStringInfo(&buf, "%s()", shard_protocol[c].name);
		seen++;
	}
	return buf.data;
}

/*
 * The session of a call beginning, once the checks every call passes
 * first have passed: no other call running in this backend (this one
 * would come from a role's code that the other runs, and could free or
 * change what the other is using), no parallel operation (whose workers
 * have no session), and a state of the session that allows the call.  A
 * training begins with its first load.
 */
Session *
wals_shard_enter(ShardCall call)
{
	const char *name = shard_protocol[call].name;
	ShardState	state = session != NULL ? session->state : SHARD_NONE;

	if (running != SHARD_NCALLS)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot call %s() while %s() is running", name,
						shard_protocol[running].name),
				 errdetail("A view, row security policy or function that a call of a sharded training runs cannot call another."),
				 errhint("Train from relations whose code calls no wals_shard_* function.")));
	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot call %s() during a parallel operation", name)));
	if ((shard_protocol[call].from & STATE(state)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot call %s() in state \"%s\" of a sharded training", name,
						shard_state_names[state]),
				 errdetail("Only %s may be called in state \"%s\".", calls_allowed(state),
						   shard_state_names[state]),
				 state == SHARD_FAILED ?
				 errhint("A call failed while it changed the training: end it with wals_shard_end(), or roll back.") :
				 errhint("These functions are called by wals_train() on a coordinator, in the order of its protocol.")));
	if (session == NULL)
		session_begin();
	running = call;
	running_subid = GetCurrentSubTransactionId();
	return session;
}

/*
 * From here until it returns, the running call changes the session in
 * ways that an error would leave half done: an error leaves it failed.
 */
void
wals_shard_changing(Session *s)
{
	s->state = SHARD_FAILED;
}

/* The running call returns: the session is in the state the protocol says. */
void
wals_shard_leave(ShardCall call)
{
	Assert(running == call);
	running = SHARD_NCALLS;
	if (session != NULL)
		session->state = shard_protocol[call].to;
}

/* What the session holds: its memory and its shared segment. */
static double
session_bytes(const Session *s)
{
	return (double) MemoryContextMemAllocated(s->cxt, true) +
		(s->seg != NULL ? (double) dsm_segment_map_length(s->seg) : 0);
}

/*
 * Refuse what would take the session past wals.max_memory, bytes more than
 * it holds, before they are allocated: every size that a caller's numbers
 * give is checked here first.
 */
void
wals_shard_reserve(Session *s, double bytes, const char *what)
{
	wals_memory_check(session_bytes(s) + bytes, what);
}

/*
 * A buffer for the answer of call, a bytea of bytes, its header reserved;
 * refused past what one value holds or past wals.max_memory.
 */
void
wals_shard_buffer(Session *s, StringInfo buf, double bytes, ShardCall call)
{
	const char *name = shard_protocol[call].name;

	if (bytes > (double) (MaxAllocSize - VARHDRSZ - 1))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the answer of %s() would take %s, more than one value holds", name,
						wals_pretty_bytes(bytes)),
				 errhint("Ask for fewer at a time.")));
	wals_shard_reserve(s, bytes, psprintf("the answer of %s()", name));
	initStringInfo(buf);
	enlargeStringInfo(buf, (int) (VARHDRSZ + bytes));
	appendStringInfoSpaces(buf, VARHDRSZ);
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
	s->peak = Max(s->peak, (Size) session_bytes(s));
}


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
	if (strcmp(text_to_cstring(PG_GETARG_TEXT_PP(4)), "explicit") == 0)
		args.params.feedback = WALS_EXPLICIT;
	wals_shard_reserve(s, 0, "the rows read by a sharded training");

	old = MemoryContextSwitchTo(s->cxt);
	l = palloc0(sizeof(Loaded));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "wals: SPI_connect failed");
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
