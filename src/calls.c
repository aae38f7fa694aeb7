/*
 * calls.c
 *	  The wals calls in progress in this backend, so that a call made from
 *	  inside another never frees or changes what the outer one is using.
 *
 * wals runs code of other roles while it works: a view's or a policy's
 * functions when it reads a source or a test table, a row-security policy
 * when it reads a model's factor tables, a trigger when it writes them.
 * That code may call wals again.  Serving from there is allowed: the cache
 * frees no entry that a call running outside may hold (cache.c retires it
 * until no call is running).  What writes models or their catalog (a training,
 * a tuning, a refresh, a drop) is refused there with 55006, since the
 * outer call holds the model's rows, tables and state half-way through;
 * the trainings and drops that wals_tune makes itself are the exception,
 * let in by wals_call_allow_write.  What such a training says of its
 * progress goes to the server's log at DEBUG1 rather than to the client
 * (wals_call_notice_level): wals_tune reports each trial once, and the
 * iterations of its trainings stay in wals_training_log and
 * pg_stat_activity.
 *
 * An error ends the calls begun inside the (sub)transaction that it
 * aborts, so that a call caught in a PL/pgSQL EXCEPTION block leaves the
 * count as it was when the block began.  Each call notes the subtransaction
 * it began in, since the block's subtransaction may have begun before this
 * library was loaded.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "wals.h"

/*
 * A running call: the subtransaction it began in, whether wals made it,
 * and the snapshot it reads with.
 */
typedef struct WalsCall
{
	SubTransactionId began;
	bool		inner;			/* let in by wals_call_allow_write */
	Snapshot	snapshot;
} WalsCall;

/* The running calls, outermost first. */
static WalsCall *calls;
static int	depth;
static int	capacity;
static bool write_allowed;
static bool registered;

static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			depth = 0;
			write_allowed = false;
			break;
		default:
			break;
	}
}

/* The calls begun inside an aborted subtransaction ended with it. */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while (depth > 0 && calls[depth - 1].began >= mySubid)
		depth--;
	write_allowed = false;
}

/*
 * Enter call fn; writes: it trains, tunes, refreshes or drops, and is
 * refused inside another call.
 */
static void
call_begin(const char *fn, bool writes)
{
	bool		allowed = write_allowed;

	if (!registered)
	{
		RegisterXactCallback(xact_callback, NULL);
		RegisterSubXactCallback(subxact_callback, NULL);
		registered = true;
	}
	write_allowed = false;
	if (writes && depth > 0 && !allowed)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("%s() cannot be called while another wals function is running", fn),
				 errdetail("It was called from code that wals runs: a view, a function or a row-security policy of a relation wals reads, or a trigger of a table it writes."),
				 errhint("Call %s() in a statement of its own.", fn)));
	if (depth == capacity)
	{
		capacity = Max(16, capacity * 2);
		calls = calls == NULL ?
			MemoryContextAlloc(TopMemoryContext, sizeof(WalsCall) * capacity) :
			repalloc(calls, sizeof(WalsCall) * capacity);
	}
	calls[depth].began = GetCurrentSubTransactionId();
	calls[depth].inner = writes && allowed;

	/*
	 * The statement's snapshot, so that every call of one statement sees the
	 * same models whatever commits meanwhile, but with what this transaction
	 * wrote before the call, a training earlier in the statement included.
	 * A parallel operation writes nothing, and may not move its command
	 * counter.
	 */
	if (ActiveSnapshotSet() && !IsInParallelMode())
	{
		CommandCounterIncrement();
		PushCopiedSnapshot(GetActiveSnapshot());
		UpdateActiveSnapshotCommandId();
	}
	else if (ActiveSnapshotSet())
		PushCopiedSnapshot(GetActiveSnapshot());
	else
		PushActiveSnapshot(GetTransactionSnapshot());
	calls[depth++].snapshot = GetActiveSnapshot();
}

/*
 * Run impl, the body of SQL function fn, counted as running while it does
 * (writes: it trains, tunes, refreshes or drops).
 */
Datum
wals_call(PGFunction impl, FunctionCallInfo fcinfo, const char *fn, bool writes)
{
	Datum		result;

	call_begin(fn, writes);
	result = impl(fcinfo);
	Assert(depth > 0 && GetActiveSnapshot() == calls[depth - 1].snapshot);
	PopActiveSnapshot();
	depth--;
	return result;
}

/*
 * Run impl(arg), a call of fn that wals's own C code makes (wals_tune's
 * trainings) rather than SQL, counted as running as wals_call counts its
 * calls, so that what is refused or let in, the snapshot and the level of
 * its notices are a SQL call's.
 */
void
wals_call_from_c(void (*impl) (void *arg), void *arg, const char *fn, bool writes)
{
	call_begin(fn, writes);
	impl(arg);
	Assert(depth > 0 && GetActiveSnapshot() == calls[depth - 1].snapshot);
	PopActiveSnapshot();
	depth--;
}

/*
 * Read from now on with a new snapshot: after waiting for a model's lock,
 * what the training waited for committed, and after writing, what this
 * call wrote (or a call it made).
 */
void
wals_call_new_snapshot(void)
{
	if (depth == 0 || GetActiveSnapshot() != calls[depth - 1].snapshot)
		elog(ERROR, "wals: no snapshot of a call to take again");
	PopActiveSnapshot();
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	calls[depth - 1].snapshot = GetActiveSnapshot();
}

/* Whether a call is running: the cache frees nothing then. */
int
wals_call_depth(void)
{
	return depth;
}

/* Let the next call that writes, made from this one, in: wals_tune's own. */
void
wals_call_allow_write(void)
{
	write_allowed = true;
}

/*
 * The level of what a training says of its progress: NOTICE, or DEBUG1
 * inside a call that wals made itself (a training of wals_tune), whose
 * caller hears from wals_tune instead.  Derived from the running calls, so
 * that an error, which ends them, leaves nothing to reset.
 */
int
wals_call_notice_level(void)
{
	for (int d = 0; d < depth; d++)
		if (calls[d].inner)
			return DEBUG1;
	return NOTICE;
}
