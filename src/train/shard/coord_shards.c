/*
 * coord_shards.c
 *	  The shards of a sharded source, whichever kind they are: finding
 *	  them (postgres_fdw's foreign servers, coord_fdw.c, or a Citus
 *	  table's nodes, coord_citus.c), connecting to every one, and what
 *	  SQL sees of them (wals_shards).
 *
 * A training in a transaction block reads a sharded source here, through
 * the foreign tables: what the block wrote there is seen only on
 * postgres_fdw's own connection, inside its remote transaction, which no
 * other module can reach.
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "shard_coord.h"

PG_FUNCTION_INFO_V1(wals_shards);

/*
 * The shards of a training's source, or NIL when it is not sharded and
 * trains here.
 */
List *
wals_shards_find(Oid source, const char *user_col, const char *item_col,
				 const char *rating_col)
{
	List	   *shards = wals_citus_shards_find(source, user_col, item_col, rating_col);

	if (shards != NIL)
		return shards;
	return wals_fdw_shards_find(source, user_col, item_col, rating_col);
}

/* Whether the shards found are a Citus table's nodes, not foreign servers. */
bool
wals_shards_citus(List *shards)
{
	return !OidIsValid(((WalsShard *) linitial(shards))->server);
}

/*
 * Connect to every shard as the caller, through its user mapping, and
 * check that wals there is this version: its schema is kept, quoted, for
 * the calls.
 */
void
wals_shards_connect(List *shards)
{
	ListCell   *lc;

	foreach(lc, shards)
	{
		WalsShard  *s = lfirst(lc);
		ErrorContextCallback context = {error_context_stack, wals_shard_error_context, s};

		s->conn = OidIsValid(s->server) ? wals_fdw_connect(s) : wals_citus_connect(s);
		error_context_stack = &context;
		wals_shard_conn_begin(s->conn);
		error_context_stack = context.previous;
	}
	foreach(lc, shards)
	{
		WalsShard  *s = lfirst(lc);
		const char *sql = "SELECT n.nspname, e.extversion FROM pg_catalog.pg_extension e"
			" JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
			" WHERE e.extname OPERATOR(pg_catalog.=) 'wals'";
		ErrorContextCallback context = {error_context_stack, wals_shard_error_context, s};
		PGresult   *res;
		char	   *version;

		error_context_stack = &context;
		if (!PQsendQuery(s->conn, sql))
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not reach the shard on server \"%s\"", s->name),
					 errdetail_internal("%s", pchomp(PQerrorMessage(s->conn)))));
		res = wals_shard_conn_result(s->conn);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			wals_shard_conn_error(res, s->conn);
		if (PQntuples(res) != 1)
		{
			PQclear(res);
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("extension \"wals\" is not installed on server \"%s\"", s->name),
					 errhint("A sharded training runs on the servers of its source: CREATE EXTENSION wals on each, at version %s.",
							 WALS_VERSION)));
		}
		s->schema = pstrdup(quote_identifier(PQgetvalue(res, 0, 0)));
		version = pstrdup(PQgetvalue(res, 0, 1));
		PQclear(res);
		if (strcmp(version, WALS_VERSION) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("extension \"wals\" is at version %s on server \"%s\", and %s here",
							version, s->name, WALS_VERSION),
					 errhint("Update it there: ALTER EXTENSION wals UPDATE TO '%s'.",
							 WALS_VERSION)));
		error_context_stack = context.previous;
	}
}

/* The training is over: close its connections, rolling back there. */
void
wals_shards_disconnect(List *shards)
{
	ListCell   *lc;

	foreach(lc, shards)
	{
		WalsShard  *s = lfirst(lc);

		if (s->conn != NULL)
			wals_shard_conn_close(s->conn);
		s->conn = NULL;
	}
}

/*
 * Whether a training in this transaction must read the shards' rows
 * through this server, where the transaction sees them (the header).
 */
bool
wals_shards_in_transaction(List *shards)
{
	return wals_shards_citus(shards) ? wals_citus_in_transaction() : IsTransactionBlock();
}

/*
 * wals_shards(source regclass) RETURNS TABLE(shard int, server text,
 *	 partition regclass, remote_table text)
 *
 * The servers a training of source would run on, one row per partition
 * each reads; no rows when source trains on this server.
 */
Datum
wals_shards(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			source;
	List	   *shards;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"source\" must not be NULL")));
	source = PG_GETARG_OID(0);
	wals_check_source(source, "source");
	wals_check_readable(source, NULL, 0);
	InitMaterializedSRF(fcinfo, 0);
	shards = wals_shards_find(source, NULL, NULL, NULL);
	foreach(lc, shards)
	{
		WalsShard  *s = lfirst(lc);
		ListCell   *pc;

		foreach(pc, s->parts)
		{
			WalsShardPart *part = lfirst(pc);
			Datum		values[4];
			bool		nulls[4] = {0};

			values[0] = Int32GetDatum(s->index + 1);
			values[1] = CStringGetTextDatum(s->name);
			values[2] = ObjectIdGetDatum(part->relid);
			values[3] = CStringGetTextDatum(part->remote);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_RETURN_VOID();
}
