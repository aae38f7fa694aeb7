/*
 * work_progress.c
 *	  wals_progress: one row for each training, tuning or refresh under way,
 *	  read from the backends' progress slots as pg_stat_progress_* are.
 *
 * PostgreSQL keeps, in each backend's status entry, a command code and
 * PGSTAT_NUM_PROGRESS_PARAM 64-bit counters that other backends read
 * without a lock (a change count makes each read whole), and it clears
 * them when a transaction or subtransaction aborts.  That needs no shared
 * memory of wals' own, so it works without shared_preload_libraries.  The
 * core's views read only the command codes they know; wals writes its own
 * code, WALS_PROGRESS_COMMAND, above theirs, and reads those entries back
 * in wals_progress_rows.
 *
 * The model's name travels in the counters too, its bytes packed eight to
 * a counter.  Work nests: wals_tune's trials are trainings, and a training
 * can run inside a call that began the slot; only the outermost begins and
 * ends it, and the inner ones update its phase, iteration and rows.  A
 * statement that wals runs may start a progress command of the core (an
 * index build) and end it, clearing wals' code: every update checks the
 * code and writes the slot whole again when it is not wals'.  A backend
 * has one slot, so only its outermost wals work shows.
 *
 * As pg_stat_progress_* do, the view shows every row's pid and database to
 * everyone, and the rest only to members of the role that runs the work
 * and of pg_read_all_stats.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "wals.h"

/* Above the core's codes; the core's views never read it. */
#define WALS_PROGRESS_COMMAND	((ProgressCommandType) 87)

/* What each counter of the slot holds. */
enum
{
	P_WORK,						/* WalsWork */
	P_PHASE,					/* WalsPhase */
	P_ITERATION,				/* from 1; 0 before the first */
	P_ITERATIONS,
	P_ROWS_DONE,
	P_ROWS_TOTAL,				/* 0: not counted in this phase; -1: total unknown */
	P_TRIAL,					/* wals_tune's, from 1 */
	P_TRIALS,
	P_BUDGET_MS,
	P_STARTED,					/* TimestampTz */
	P_SCHEMA,					/* the model's namespace */
	P_NAME,						/* the model's name, P_NAME_PARAMS counters */
	P_NAME_PARAMS = 8,
	P_COUNT = P_NAME + P_NAME_PARAMS
};

StaticAssertDecl(P_COUNT <= PGSTAT_NUM_PROGRESS_PARAM, "wals' progress needs more counters than a slot has");
StaticAssertDecl(P_NAME_PARAMS * 8 >= NAMEDATALEN, "a model's name must fit its counters");

static const char *const work_names[] = {
	[WALS_WORK_TRAIN] = "train",
	[WALS_WORK_TUNE] = "tune",
	[WALS_WORK_REFRESH] = "refresh",
};

static const char *const phase_names[] = {
	[WALS_PHASE_STARTING] = "starting",
	[WALS_PHASE_READING] = "reading the source",
	[WALS_PHASE_BUILDING] = "building the matrices",
	[WALS_PHASE_SOLVING_USERS] = "solving user factors",
	[WALS_PHASE_SOLVING_ITEMS] = "solving item factors",
	[WALS_PHASE_LOSS] = "computing the loss",
	[WALS_PHASE_VALIDATION] = "measuring the validation metric",
	[WALS_PHASE_LINE_SEARCH] = "searching along the direction",
	[WALS_PHASE_GPU_UPLOAD] = "uploading to the GPU",
	[WALS_PHASE_GPU_SWEEP] = "sweeping on the GPU",
	[WALS_PHASE_STORING] = "storing the factors",
	[WALS_PHASE_READING_CHANGES] = "reading the changed ratings",
	[WALS_PHASE_READING_USERS] = "reading the stored users",
};

/* This backend's slot as written, to write it again whole. */
static int64 slot[P_COUNT];
static int	depth;
static SubTransactionId began;	/* of the outermost level */
static bool registered;

/* The core cleared the slot with the (sub)transaction that began it. */
static void
xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		depth = 0;
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && depth > 0 && began >= mySubid)
		depth = 0;
}

/* Write every counter, under wals' code, when the slot is not wals'. */
static bool
slot_ours(void)
{
	int			index[P_COUNT];

	if (depth == 0 || IsParallelWorker() || MyBEEntry == NULL)
		return false;
	if (MyBEEntry->st_progress_command != WALS_PROGRESS_COMMAND)
	{
		for (int i = 0; i < P_COUNT; i++)
			index[i] = i;
		pgstat_progress_start_command(WALS_PROGRESS_COMMAND, InvalidOid);
		pgstat_progress_update_multi_param(P_COUNT, index, slot);
	}
	return true;
}

/* Set counters index[0..n) to value[0..n), in one write of the slot. */
static void
set(int n, const int *index, const int64 *value)
{
	for (int i = 0; i < n; i++)
		slot[index[i]] = value[i];
	if (slot_ours())
		pgstat_progress_update_multi_param(n, index, value);
}

void
wals_work_begin(WalsWork work, Oid schema, const char *model)
{
	if (!registered)
	{
		RegisterXactCallback(xact_callback, NULL);
		RegisterSubXactCallback(subxact_callback, NULL);
		registered = true;
	}
	if (depth++ > 0)
		return;
	began = GetCurrentSubTransactionId();
	memset(slot, 0, sizeof(slot));
	slot[P_WORK] = work;
	slot[P_PHASE] = WALS_PHASE_STARTING;
	slot[P_STARTED] = GetCurrentTimestamp();
	slot[P_SCHEMA] = schema;
	strncpy((char *) &slot[P_NAME], model, P_NAME_PARAMS * sizeof(int64) - 1);
	slot_ours();
}

void
wals_work_end(void)
{
	if (depth == 0)
		return;
	if (--depth == 0 && !IsParallelWorker() && MyBEEntry != NULL &&
		MyBEEntry->st_progress_command == WALS_PROGRESS_COMMAND)
		pgstat_progress_end_command();
}

/*
 * A new phase, with rows_total rows to go through (0: rows not counted;
 * -1: counted, their total unknown).
 */
void
wals_work_phase(WalsPhase phase, int64 rows_total)
{
	const int	index[] = {P_PHASE, P_ROWS_DONE, P_ROWS_TOTAL};
	const int64 value[] = {phase, 0, rows_total};

	set(lengthof(index), index, value);
}

void
wals_work_rows(int64 done)
{
	const int	index[] = {P_ROWS_DONE};

	set(1, index, &done);
}

/* Iteration it, from 1, of iterations; 0 before the first. */
void
wals_work_iteration(int it, int iterations)
{
	const int	index[] = {P_ITERATION, P_ITERATIONS};
	const int64 value[] = {it, iterations};

	set(lengthof(index), index, value);
}

void
wals_work_trial(int trial, int trials, double budget_s)
{
	const int	index[] = {P_TRIAL, P_TRIALS, P_BUDGET_MS};
	const int64 value[] = {trial, trials, (int64) (budget_s * 1000)};

	set(lengthof(index), index, value);
}

/* The model's name, qualified as wals_models shows it. */
static Datum
model_name(const int64 *p)
{
	char		name[P_NAME_PARAMS * sizeof(int64) + 1];
	char	   *schema = get_namespace_name((Oid) p[P_SCHEMA]);

	memcpy(name, &p[P_NAME], P_NAME_PARAMS * sizeof(int64));
	name[sizeof(name) - 1] = '\0';
	return CStringGetTextDatum(schema != NULL ?
							   quote_qualified_identifier(schema, name) :
							   quote_identifier(name));
}

/*
 * wals_progress_rows() RETURNS SETOF (pid int, datid oid, command text,
 *	 model text, phase text, iteration int, iterations int, rows_done bigint,
 *	 rows_total bigint, trial int, trials int, budget_s float8,
 *	 budget_used float8, elapsed_s float8)
 */
PG_FUNCTION_INFO_V1(wals_progress_rows);

Datum
wals_progress_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n = pgstat_fetch_stat_numbackends();
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = pgstat_fetch_stat_local_beentry(i);
		PgBackendStatus *be;
		const int64 *p;
		Datum		values[14];
		bool		nulls[14] = {0};
		double		elapsed;

		if (local == NULL)
			continue;
		be = &local->backendStatus;
		if (be->st_progress_command != WALS_PROGRESS_COMMAND)
			continue;
		p = be->st_progress_param;
		values[0] = Int32GetDatum(be->st_procpid);
		values[1] = ObjectIdGetDatum(be->st_databaseid);
		if (!has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS) &&
			!has_privs_of_role(GetUserId(), be->st_userid))
		{
			for (int c = 2; c < lengthof(values); c++)
				nulls[c] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}
		elapsed = (double) (now - p[P_STARTED]) / USECS_PER_SEC;
		values[2] = p[P_WORK] > 0 && p[P_WORK] < lengthof(work_names) ?
			CStringGetTextDatum(work_names[p[P_WORK]]) : (Datum) 0;
		nulls[2] = values[2] == (Datum) 0;
		values[3] = model_name(p);
		values[4] = p[P_PHASE] > 0 && p[P_PHASE] < lengthof(phase_names) ?
			CStringGetTextDatum(phase_names[p[P_PHASE]]) : (Datum) 0;
		nulls[4] = values[4] == (Datum) 0;
		values[5] = Int32GetDatum((int32) p[P_ITERATION]);
		nulls[5] = p[P_ITERATIONS] == 0;
		values[6] = Int32GetDatum((int32) p[P_ITERATIONS]);
		nulls[6] = p[P_ITERATIONS] == 0;
		values[7] = Int64GetDatum(p[P_ROWS_DONE]);
		nulls[7] = p[P_ROWS_TOTAL] == 0;
		values[8] = Int64GetDatum(p[P_ROWS_TOTAL]);
		nulls[8] = p[P_ROWS_TOTAL] <= 0;
		values[9] = Int32GetDatum((int32) p[P_TRIAL]);
		nulls[9] = p[P_TRIALS] == 0;
		values[10] = Int32GetDatum((int32) p[P_TRIALS]);
		nulls[10] = p[P_TRIALS] == 0;
		values[11] = wals_seconds_datum((double) p[P_BUDGET_MS] / 1000);
		nulls[11] = p[P_BUDGET_MS] == 0;
		values[12] = Float8GetDatum(p[P_BUDGET_MS] > 0 ?
									rint(elapsed * 1000 / p[P_BUDGET_MS] * 1e4) / 1e4 : 0);
		nulls[12] = p[P_BUDGET_MS] == 0;
		values[13] = wals_seconds_datum(elapsed);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
