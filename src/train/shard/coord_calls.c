/*
 * coord_calls.c
 *	  The calls the coordinator of a sharded training makes on a shard:
 *	  one SELECT of a wals function there, sent, and its one value
 *	  awaited apart.
 *
 * Calls are sent with binary parameters and results, and a query goes to
 * every shard before any is waited for, so that the shards work at once.
 * A shard's error is raised here as it was raised there, with its
 * SQLSTATE, naming the server.
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "lib/stringinfo.h"

#include "shard_coord.h"

/* Names the shard of an error raised while it is being waited for. */
void
wals_shard_error_context(void *arg)
{
	errcontext("shard on server \"%s\"", ((WalsShard *) arg)->name);
}

/*
 * Send call (a SELECT of one wals function of the shard's schema, $1 to
 * $n for args) to shard s without waiting; wals_shard_wait takes its
 * result.
 */
void
wals_shard_send(WalsShard *s, const char *fn, int nargs, const WalsShardArg *args)
{
	StringInfoData sql;
	Oid			types[WALS_SHARD_MAX_ARGS];
	const char *values[WALS_SHARD_MAX_ARGS];
	int			lengths[WALS_SHARD_MAX_ARGS];
	int			formats[WALS_SHARD_MAX_ARGS];

	Assert(nargs <= WALS_SHARD_MAX_ARGS);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.%s(", s->schema, fn);
	for (int k = 0; k < nargs; k++)
	{
		appendStringInfo(&sql, "%s$%d", k > 0 ? ", " : "", k + 1);
		types[k] = args[k].type;
		values[k] = args[k].data;
		lengths[k] = args[k].len;
		formats[k] = 1;
	}
	appendStringInfoChar(&sql, ')');
	s->sql = sql.data;
	for (int k = 0; k < nargs; k++)
		s->bytes += args[k].len;
	if (!PQsendQueryParams(s->conn, sql.data, nargs, types, values, lengths, formats, 1))
	{
		ErrorContextCallback context = {error_context_stack, wals_shard_error_context, s};

		error_context_stack = &context;
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not send %s() to the shard on server \"%s\"", fn, s->name),
				 errdetail_internal("%s", pchomp(PQerrorMessage(s->conn)))));
	}
}

/*
 * The result of the call sent to shard s, as libpq holds it: its one
 * value (*len bytes), NULL for SQL's NULL, valid until the next call on
 * s; the shard's error is raised as it was raised there, with its
 * SQLSTATE, naming the server.
 */
const char *
wals_shard_wait_raw(WalsShard *s, int *len)
{
	ErrorContextCallback context = {error_context_stack, wals_shard_error_context, s};
	PGresult   *res;

	wals_shard_clear(s);
	error_context_stack = &context;
	res = wals_shard_conn_result(s->conn);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		wals_shard_conn_error(res, s->conn);
	if (PQntuples(res) != 1 || PQnfields(res) != 1)
	{
		int			n = PQntuples(res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a shard answered with %d rows", n)));
	}
	error_context_stack = context.previous;
	s->result = res;
	*len = PQgetlength(res, 0, 0);
	s->bytes += *len;
	return PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0);
}

/* Free the result libpq holds for s, if any. */
void
wals_shard_clear(WalsShard *s)
{
	if (s->result != NULL)
		PQclear(s->result);
	s->result = NULL;
}

/*
 * Keep the result libpq holds for s past the next calls on s, until
 * wals_shard_forget: its value stays where wals_shard_wait_raw gave it.
 */
void
wals_shard_keep(WalsShard *s)
{
	wals_shard_forget(s);
	s->kept = s->result;
	s->result = NULL;
}

/* Free the result kept for s, if any. */
void
wals_shard_forget(WalsShard *s)
{
	if (s->kept != NULL)
		PQclear(s->kept);
	s->kept = NULL;
}

/* wals_shard_wait_raw's value, copied: a bytea, or NULL. */
bytea *
wals_shard_wait(WalsShard *s)
{
	int			len;
	const char *data = wals_shard_wait_raw(s, &len);
	bytea	   *out = NULL;

	if (data != NULL)
	{
		out = palloc_extended(VARHDRSZ + len, MCXT_ALLOC_HUGE);
		SET_VARSIZE(out, VARHDRSZ + len);
		memcpy(VARDATA(out), data, len);
	}
	wals_shard_clear(s);
	return out;
}

/* Wait for a shard's answer to a call that gives nothing. */
void
wals_shard_wait_none(WalsShard *shard)
{
	int			len;

	wals_shard_wait_raw(shard, &len);
	wals_shard_clear(shard);
}

/* Wait for every shard's answer to the same call, which gives nothing. */
void
wals_shards_wait_none(WalsShards *sh)
{
	for (int s = 0; s < sh->n; s++)
		wals_shard_wait_none(sh->shard[s]);
}

/*
 * Wait for shard's answer and start reading it (SQL's NULL reads as no
 * bytes); wals_shard_clear frees it once read.
 */
void
wals_shard_wait_wire(WalsShard *shard, WalsWire *w, const char *what)
{
	int			len;
	const char *data = wals_shard_wait_raw(shard, &len);

	wals_wire_start(w, data != NULL ? data : "", data != NULL ? len : 0, what);
}

/* The int8 a shard answered. */
int64
wals_shard_wait_int64(WalsShard *shard, const char *what)
{
	WalsWire	w;
	int64		v;

	wals_shard_wait_wire(shard, &w, what);
	v = wals_wire_int64(&w);
	wals_wire_done(&w);
	wals_shard_clear(shard);
	return v;
}
