/*
 * peer_session.c
 *	  What a shard keeps of a sharded training between the coordinator's
 *	  calls: the session, the protocol its calls follow, and the memory it
 *	  may take.
 *
 * The calls are the protocol of shard_peer.h: the table below says, for
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
#include "miscadmin.h"
#include "utils/memutils.h"

#include "shard_peer.h"

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
