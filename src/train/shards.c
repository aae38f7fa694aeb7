/*
 * shards.c
 *	  Where a sharded source's rows live, and the calls that reach them.
 *
 * A source is sharded when it is a partitioned table every leaf of which
 * is a foreign table of postgres_fdw, and no row security applies to the
 * caller on it (the policies of the parent could not be applied on the
 * servers): each foreign server holding a leaf is then a shard, which
 * reads its own leaves (the remote tables and columns that the foreign
 * table's options name) and trains there.  A Citus distributed table is
 * sharded too, over its nodes (shards_citus.c).  Anything else, local
 * partitions among them, trains on this server as before.
 *
 * A shard is reached on a connection of wals's own (shard_conn.c) that
 * postgres_fdw would make for the caller's user mapping: the libpq
 * options of the foreign server and of the mapping, and postgres_fdw's
 * rule that a role other than a superuser gives a password, which the
 * shard must ask for, unless a superuser set password_required 'false' on
 * the mapping; otherwise the role would connect with this server's own
 * credentials.  A Citus node is reached as Citus reaches it.  Either way,
 * calls are sent with binary parameters and results, a query on every
 * shard before any is waited for, so that the shards work at once.
 *
 * A training in a transaction block reads a sharded source here, through
 * the foreign tables: what the block wrote there is seen only on
 * postgres_fdw's own connection, inside its remote transaction, which
 * no other module can reach.
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"

#include "wals_train.h"

PG_FUNCTION_INFO_V1(wals_shards);

/* An option of a list of DefElem, or NULL. */
static char *
option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, name) == 0)
			return defGetString(def);
	}
	return NULL;
}

/* The remote name of column col of foreign table relid. */
static char *
remote_column(Oid relid, const char *col)
{
	AttrNumber	att;
	char	   *name;

	if (col == NULL)
		return NULL;
	att = get_attnum(relid, col);
	if (att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("partition \"%s\" has no column \"%s\"", get_rel_name(relid), col)));
	name = option(GetForeignColumnOptions(relid, att), "column_name");
	return name != NULL ? name : pstrdup(col);
}

/* The shard of server in shards, added when it is not there yet. */
static WalsShard *
shard_of(List **shards, Oid server)
{
	ListCell   *lc;
	WalsShard  *s;

	foreach(lc, *shards)
	{
		s = lfirst(lc);
		if (s->server == server)
			return s;
	}
	s = palloc0(sizeof(WalsShard));
	s->server = server;
	s->name = GetForeignServer(server)->servername;
	s->index = list_length(*shards);
	*shards = lappend(*shards, s);
	return s;
}

/*
 * The shards of a training's source, or NIL when it is not sharded and
 * trains here: not a partitioned table, a leaf that is not a foreign
 * table of postgres_fdw, or row security on the source for the caller.
 * Past 255 servers it is an error (a shard is a byte of the plan).
 */
List *
wals_shards_find(Oid source, const char *user_col, const char *item_col,
				 const char *rating_col)
{
	List	   *leaves;
	List	   *shards = wals_citus_shards_find(source, user_col, item_col, rating_col);
	ListCell   *lc;

	if (shards != NIL)
		return shards;
	if (get_rel_relkind(source) != RELKIND_PARTITIONED_TABLE ||
		check_enable_rls(source, InvalidOid, true) == RLS_ENABLED)
		return NIL;
	leaves = find_all_inheritors(source, AccessShareLock, NULL);
	foreach(lc, leaves)
	{
		Oid			relid = lfirst_oid(lc);
		ForeignTable *ft;
		ForeignServer *server;

		if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
			continue;
		if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
			return NIL;
		ft = GetForeignTable(relid);
		server = GetForeignServer(ft->serverid);
		if (strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "postgres_fdw") != 0)
			return NIL;
	}
	foreach(lc, leaves)
	{
		Oid			relid = lfirst_oid(lc);
		ForeignTable *ft;
		WalsShard  *s;
		WalsShardPart *part;
		char	   *schema;
		char	   *table;

		if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
			continue;
		ft = GetForeignTable(relid);
		s = shard_of(&shards, ft->serverid);
		part = palloc0(sizeof(WalsShardPart));
		part->relid = relid;
		schema = option(ft->options, "schema_name");
		table = option(ft->options, "table_name");
		part->remote = quote_qualified_identifier(schema != NULL ? schema :
												  get_namespace_name(get_rel_namespace(relid)),
												  table != NULL ? table : get_rel_name(relid));
		part->user_col = remote_column(relid, user_col);
		part->item_col = remote_column(relid, item_col);
		part->rating_col = remote_column(relid, rating_col);
		s->parts = lappend(s->parts, part);
	}
	if (list_length(shards) > WALS_MAX_SHARDS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a source sharded over %d servers is more than wals trains on (%d)",
						list_length(shards), WALS_MAX_SHARDS)));
	return shards;
}

/* Names the shard of an error raised while it is being waited for. */
static void
shard_context(void *arg)
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
		ErrorContextCallback context = {error_context_stack, shard_context, s};

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
	ErrorContextCallback context = {error_context_stack, shard_context, s};
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

/* Whether libpq takes keyword, and lets a user mapping set it. */
static bool
libpq_option(const char *keyword)
{
	static PQconninfoOption *defaults;

	if (defaults == NULL)
	{
		defaults = PQconndefaults();
		if (defaults == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}
	if (strcmp(keyword, "replication") == 0 || strcmp(keyword, "client_encoding") == 0 ||
		strcmp(keyword, "fallback_application_name") == 0)
		return false;
	for (PQconninfoOption *o = defaults; o->keyword != NULL; o++)
		if (strcmp(o->keyword, keyword) == 0)
			return strchr(o->dispchar, 'D') == NULL;
	return false;
}

/* The options of list that libpq takes, added to keys and vals. */
static void
add_options(List *list, const char **keys, const char **vals, int *n)
{
	ListCell   *lc;

	foreach(lc, list)
	{
		DefElem    *def = lfirst(lc);

		if (libpq_option(def->defname))
		{
			keys[*n] = def->defname;
			vals[*n] = defGetString(def);
			(*n)++;
		}
	}
}

/*
 * Connect to the foreign server of shard s as postgres_fdw would for the
 * caller's user mapping.
 */
static PGconn *
fdw_connect(WalsShard *s)
{
	UserMapping *mapping = GetUserMapping(GetUserId(), s->server);
	ForeignServer *server = GetForeignServer(s->server);
	int			most = list_length(server->options) + list_length(mapping->options) + 3;
	const char **keys = palloc(most * sizeof(char *));
	const char **vals = palloc(most * sizeof(char *));
	char	   *waived = option(mapping->options, "password_required");
	bool		required = true;
	bool		password_required;
	bool		has_password = false;
	int			n = 0;
	char	   *failure;
	PGconn	   *conn;

	/* postgres_fdw lets only a superuser set password_required 'false'. */
	if (waived != NULL && !parse_bool(waived, &required))
		required = true;
	password_required = required && !superuser_arg(mapping->userid);
	add_options(server->options, keys, vals, &n);
	add_options(mapping->options, keys, vals, &n);
	for (int k = 0; k < n; k++)
		if (strcmp(keys[k], "password") == 0 && vals[k][0] != '\0')
			has_password = true;
	keys[n] = "client_encoding";
	vals[n++] = GetDatabaseEncodingName();
	keys[n] = "fallback_application_name";
	vals[n++] = "wals";
	keys[n] = vals[n] = NULL;

	if (password_required && !has_password)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("A role other than a superuser must give a password in its user mapping for server \"%s\".",
						   s->name),
				 errhint("Add the password to the user mapping, or have a superuser set password_required 'false' on it.")));
	conn = wals_shard_conn_open(keys, vals, &failure);
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to server \"%s\"", s->name),
				 errdetail_internal("%s", failure)));
	if (password_required && !PQconnectionUsedPassword(conn))
	{
		wals_shard_conn_close(conn);
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Server \"%s\" did not ask for the password of the user mapping, and a role other than a superuser may not connect with this server's own credentials.",
						   s->name),
				 errhint("Have the shard's server ask for a password, or a superuser set password_required 'false' on the user mapping.")));
	}
	return conn;
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
		ErrorContextCallback context = {error_context_stack, shard_context, s};

		s->conn = OidIsValid(s->server) ? fdw_connect(s) : wals_citus_connect(s);
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
		ErrorContextCallback context = {error_context_stack, shard_context, s};
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
