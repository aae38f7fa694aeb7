/*
 * coord_conn.c
 *	  The connections a sharded training reaches its shards on, whatever
 *	  found them (a postgres_fdw foreign server, coord_fdw.c, or a Citus node,
 *	  coord_citus.c): opening one, waiting for what it answers, raising
 *	  the error it answers with, and closing it.
 *
 * The connections are wals's own, never another module's: from
 * PostgreSQL 16 on a module exports only its SQL-callable functions, so
 * that postgres_fdw's connection cache is out of reach, and the same code
 * serves every major.  Each connection opens a REPEATABLE READ transaction
 * that the shard's state lives in, and belongs to the (sub)transaction
 * that opened it: it is closed when the training ends, and when that
 * (sub)transaction aborts, after cancelling what runs there, so that a
 * failure, a cancel or a timeout here stops the shards at once and
 * leaves nothing there.  Every wait, the connection's own included,
 * sleeps on the latch as well as the socket, so that a cancel, a
 * termination or the postmaster's death is seen at once.
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"

#include "shard_coord.h"

/* A connection opened here, and the transaction level that owns it. */
typedef struct OpenConn
{
	PGconn	   *conn;
	int			level;
	struct OpenConn *next;
} OpenConn;

static OpenConn *open_conns;
static bool callbacks_registered;

/*
 * Close conn, cancelling first what runs there when aborting, so that the
 * shard stops at once rather than when it next writes to the socket.
 */
static void
close_conn(PGconn *conn, bool cancel)
{
	if (cancel && PQtransactionStatus(conn) == PQTRANS_ACTIVE)
	{
		PGcancel   *c = PQgetCancel(conn);
		char		errbuf[256];

		if (c != NULL)
		{
			PQcancel(c, errbuf, sizeof(errbuf));
			PQfreeCancel(c);
		}
	}
	PQfinish(conn);
	ReleaseExternalFD();
}

/* Close the connections opened at level or deeper. */
static void
close_from(int level, bool cancel)
{
	OpenConn  **p = &open_conns;

	while (*p != NULL)
	{
		OpenConn   *o = *p;

		if (o->level >= level)
		{
			*p = o->next;
			close_conn(o->conn, cancel);
			pfree(o);
		}
		else
			p = &o->next;
	}
}

static void
xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		close_from(0, event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT);
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		close_from(GetCurrentTransactionNestLevel(), true);
}

/*
 * Connect with libpq's keywords keys and their values vals (NULL-ended),
 * waiting on the latch too.  NULL when the connection fails, with *failure
 * saying why; the caller names the shard in its error.  The connection is
 * this (sub)transaction's from the start, so that an interrupt while it
 * is made closes it.
 */
PGconn *
wals_shard_conn_open(const char *const *keys, const char *const *vals, char **failure)
{
	PostgresPollingStatusType status = PGRES_POLLING_WRITING;
	OpenConn   *o;
	PGconn	   *conn;

	if (!callbacks_registered)
	{
		RegisterXactCallback(xact_callback, NULL);
		RegisterSubXactCallback(subxact_callback, NULL);
		callbacks_registered = true;
	}
	if (!AcquireExternalFD())
	{
		*failure = psprintf("this server has no file descriptor left for another connection");
		return NULL;
	}
	o = MemoryContextAlloc(TopMemoryContext, sizeof(OpenConn));
	conn = PQconnectStartParams(keys, vals, false);
	if (conn == NULL)
	{
		ReleaseExternalFD();
		pfree(o);
		*failure = pstrdup("out of memory");
		return NULL;
	}
	o->conn = conn;
	o->level = GetCurrentTransactionNestLevel();
	o->next = open_conns;
	open_conns = o;

	while (PQstatus(conn) != CONNECTION_BAD && status != PGRES_POLLING_OK &&
		   status != PGRES_POLLING_FAILED)
	{
		int			io = status == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		int			rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | io,
										   PQsocket(conn), -1L, PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if (rc & io)
			status = PQconnectPoll(conn);
	}
	if (PQstatus(conn) != CONNECTION_OK)
	{
		*failure = pchomp(PQerrorMessage(conn));
		wals_shard_conn_close(conn);
		return NULL;
	}
	return conn;
}

/* Close conn, opened by wals_shard_conn_open, its training over. */
void
wals_shard_conn_close(PGconn *conn)
{
	OpenConn  **p = &open_conns;

	for (; *p != NULL; p = &(*p)->next)
		if ((*p)->conn == conn)
		{
			OpenConn   *o = *p;

			*p = o->next;
			close_conn(o->conn, false);
			pfree(o);
			return;
		}
}

/*
 * The last result of the query sent on conn, once the shard has answered
 * it whole; NULL if there was none.  An interrupt while waiting is raised
 * here, and aborting then closes conn, cancelling the query there.
 */
PGresult *
wals_shard_conn_result(PGconn *conn)
{
	PGresult   *volatile last = NULL;

	PG_TRY();
	{
		for (;;)
		{
			PGresult   *res;

			while (PQisBusy(conn))
			{
				int			rc = WaitLatchOrSocket(MyLatch,
												   WL_LATCH_SET | WL_SOCKET_READABLE | WL_EXIT_ON_PM_DEATH,
												   PQsocket(conn), -1L, PG_WAIT_EXTENSION);

				if (rc & WL_LATCH_SET)
				{
					ResetLatch(MyLatch);
					CHECK_FOR_INTERRUPTS();
				}
				if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(conn))
					break;
			}
			res = PQgetResult(conn);
			if (res == NULL)
				break;
			PQclear(last);
			last = res;
		}
	}
	PG_CATCH();
	{
		PQclear(last);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return last;
}

/* A field of an error result, copied, or NULL. */
static char *
error_field(PGresult *res, int field)
{
	char	   *value = res != NULL ? PQresultErrorField(res, field) : NULL;

	return value != NULL ? pstrdup(value) : NULL;
}

/*
 * Raise the error that res (NULL when the connection answered nothing)
 * holds, as the shard raised it: its SQLSTATE, message, detail, hint and
 * context; a connection lost is a connection failure.  res is freed.
 */
void
wals_shard_conn_error(PGresult *res, PGconn *conn)
{
	char	   *sqlstate = error_field(res, PG_DIAG_SQLSTATE);
	char	   *message = error_field(res, PG_DIAG_MESSAGE_PRIMARY);
	char	   *detail = error_field(res, PG_DIAG_MESSAGE_DETAIL);
	char	   *hint = error_field(res, PG_DIAG_MESSAGE_HINT);
	char	   *context = error_field(res, PG_DIAG_CONTEXT);
	int			code = ERRCODE_CONNECTION_FAILURE;

	if (sqlstate != NULL && strlen(sqlstate) == 5)
		code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]);
	if (message == NULL)
		message = pchomp(PQerrorMessage(conn));
	PQclear(res);
	ereport(ERROR,
			(errcode(code),
			 errmsg_internal("%s", message[0] != '\0' ? message : "the shard's connection failed"),
			 detail != NULL ? errdetail_internal("%s", detail) : 0,
			 hint != NULL ? errhint("%s", hint) : 0,
			 context != NULL ? errcontext("%s", context) : 0));
}

/*
 * Open the transaction the shard's training lives in, on a connection
 * just made: wals's own calls there name their schema, and nothing they
 * run resolves a name through the role's search_path.
 */
void
wals_shard_conn_begin(PGconn *conn)
{
	const char *sql = "SET search_path = pg_catalog; "
		"START TRANSACTION ISOLATION LEVEL REPEATABLE READ";
	PGresult   *res;

	if (!PQsendQuery(conn, sql))
		wals_shard_conn_error(NULL, conn);
	res = wals_shard_conn_result(conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		wals_shard_conn_error(res, conn);
	PQclear(res);
}
