/*
 * coord_citus.c
 *	  The shards of a Citus distributed table: its worker nodes, and the
 *	  connections that reach them.
 *
 * Where Citus is installed and the source is a distributed table (hash,
 * range or append; a reference table is a single copy and trains here),
 * each node holding a placement of one of its shards is a shard of the
 * training, which reads the shard tables it holds there.  Each Citus
 * shard is read once, from its placement on the lowest active primary
 * node.  Citus's metadata is read as the caller, and the shard tables are
 * named by Citus's own shard_name().
 *
 * A node is reached as Citus reaches it for the caller's queries: the
 * caller's role, this database, the node's host and port from
 * pg_dist_node, the settings of citus.node_conninfo, and the credentials
 * Citus keeps for that role and node (pg_dist_authinfo, through Citus's
 * GetAuthinfo).  So a training reaches nothing the caller's distributed
 * queries could not, on a connection of wals's own (coord_conn.c).
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"

#include "shard_coord.h"

/* Citus's own, found at run time. */
typedef char *(*GetAuthinfoFn) (char *hostname, int32 port, char *user);
typedef bool (*InCoordinatedTransactionFn) (void);

/*
 * The shards of source when it is a Citus distributed table the caller
 * has no row security on, or NIL.
 */
List *
wals_citus_shards_find(Oid source, const char *user_col, const char *item_col,
					   const char *rating_col)
{
	const char *sql =
		"SELECT DISTINCT ON (s.shardid) n.nodename, n.nodeport,"
		" pg_catalog.shard_name(s.logicalrelid, s.shardid, false)"
		" FROM pg_catalog.pg_dist_partition d"
		" JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid OPERATOR(pg_catalog.=) d.logicalrelid"
		" JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid"
		" JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) p.groupid"
		" WHERE d.logicalrelid OPERATOR(pg_catalog.=) $1"
		" AND d.partmethod OPERATOR(pg_catalog.=) ANY ('{h,r,a}'::pg_catalog.\"char\"[])"
		" AND n.isactive AND n.noderole OPERATOR(pg_catalog.=) 'primary'"
		" AND p.shardstate OPERATOR(pg_catalog.=) 1"
		" ORDER BY s.shardid, n.nodeid";
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(source)};
	MemoryContext cxt = CurrentMemoryContext;
	List	   *shards = NIL;

	if (!OidIsValid(get_extension_oid("citus", true)) ||
		check_enable_rls(source, InvalidOid, true) == RLS_ENABLED)
		return NIL;
	wals_spi_connect();
	if (wals_sql(sql, 1, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "wals: could not read Citus's shards of \"%s\"", get_rel_name(source));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(cxt);
		char	   *host = SPI_getvalue(tup, desc, 1);
		int			port = atoi(SPI_getvalue(tup, desc, 2));
		char	   *name = psprintf("%s:%d", host, port);
		WalsShard  *s = NULL;
		WalsShardPart *part = palloc0(sizeof(WalsShardPart));
		ListCell   *lc;

		foreach(lc, shards)
			if (strcmp(((WalsShard *) lfirst(lc))->name, name) == 0)
				s = lfirst(lc);
		if (s == NULL)
		{
			s = palloc0(sizeof(WalsShard));
			s->name = name;
			s->host = host;
			s->port = port;
			s->index = list_length(shards);
			shards = lappend(shards, s);
		}
		part->relid = source;
		part->remote = SPI_getvalue(tup, desc, 3);
		part->user_col = user_col != NULL ? pstrdup(user_col) : NULL;
		part->item_col = item_col != NULL ? pstrdup(item_col) : NULL;
		part->rating_col = rating_col != NULL ? pstrdup(rating_col) : NULL;
		s->parts = lappend(s->parts, part);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return shards;
}

/*
 * Whether this transaction has run distributed commands already: their
 * changes on the nodes are seen only through Citus's own connections, so
 * a training must then read through Citus, here.  Where Citus does not
 * say, any transaction block counts.
 */
bool
wals_citus_in_transaction(void)
{
	InCoordinatedTransactionFn in_coordinated = (InCoordinatedTransactionFn)
		load_external_function("$libdir/citus", "InCoordinatedTransaction", false, NULL);

	return in_coordinated != NULL ? in_coordinated() : IsTransactionBlock();
}

/* Add keyword = value, unless set already. */
static void
set_param(const char **keys, const char **vals, int *n, const char *key, const char *val)
{
	for (int k = 0; k < *n; k++)
		if (strcmp(keys[k], key) == 0)
			return;
	keys[*n] = key;
	vals[*n] = val;
	(*n)++;
}

/* The settings of a connection string, added unless set already. */
static void
add_conninfo(const char **keys, const char **vals, int *n, int most, const char *conninfo,
			 const char *what)
{
	char	   *err = NULL;
	PQconninfoOption *opts;

	if (conninfo == NULL || conninfo[0] == '\0')
		return;
	opts = PQconninfoParse(conninfo, &err);
	if (opts == NULL)
	{
		char	   *detail = err != NULL ? pstrdup(err) : "out of memory";

		if (err != NULL)
			PQfreemem(err);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not parse %s", what),
				 errdetail_internal("%s", pchomp(detail))));
	}
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (o->val != NULL && o->val[0] != '\0' && *n < most)
			set_param(keys, vals, n, pstrdup(o->keyword), pstrdup(o->val));
	PQconninfoFree(opts);
}

/* Connect to the node of shard s as Citus would for the caller. */
PGconn *
wals_citus_connect(WalsShard *s)
{
	GetAuthinfoFn authinfo = (GetAuthinfoFn)
		load_external_function("$libdir/citus", "GetAuthinfo", false, NULL);
	char	   *user = GetUserNameFromId(GetUserId(), false);
	const char *keys[64];
	const char *vals[64];
	int			n = 0;
	PGconn	   *conn;
	char	   *failure;

	set_param(keys, vals, &n, "host", s->host);
	set_param(keys, vals, &n, "port", psprintf("%d", s->port));
	set_param(keys, vals, &n, "dbname", get_database_name(MyDatabaseId));
	set_param(keys, vals, &n, "user", user);
	set_param(keys, vals, &n, "client_encoding", GetDatabaseEncodingName());
	set_param(keys, vals, &n, "application_name", "wals");
	if (authinfo != NULL)
		add_conninfo(keys, vals, &n, lengthof(keys) - 1,
					 authinfo(s->host, s->port, user), "Citus's credentials of the node");
	add_conninfo(keys, vals, &n, lengthof(keys) - 1,
				 GetConfigOption("citus.node_conninfo", true, false), "citus.node_conninfo");
	keys[n] = vals[n] = NULL;

	conn = wals_shard_conn_open(keys, vals, &failure);
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to the Citus node \"%s\" as role \"%s\"",
						s->name, user),
				 errdetail_internal("%s", failure),
				 errhint("wals reaches a node as Citus does: check pg_dist_authinfo, citus.node_conninfo, and the node's pg_hba.conf.")));
	return conn;
}
