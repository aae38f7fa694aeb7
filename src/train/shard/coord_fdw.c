/*
 * coord_fdw.c
 *	  The shards of a source partitioned over postgres_fdw's foreign
 *	  servers, on the coordinator: which servers they are, and a
 *	  connection to one as postgres_fdw would make it.
 *
 * A source is sharded this way when it is a partitioned table every leaf
 * of which is a foreign table of postgres_fdw, and no row security applies
 * to the caller on it (the policies of the parent could not be applied on
 * the servers): each foreign server holding a leaf is then a shard, which
 * reads its own leaves (the remote tables and columns that the foreign
 * table's options name) and trains there.  Anything else, local
 * partitions among them, trains on this server as before.
 *
 * A shard is reached on a connection of wals's own (coord_conn.c) that
 * postgres_fdw would make for the caller's user mapping: the libpq
 * options of the foreign server and of the mapping, and postgres_fdw's
 * rule that a role other than a superuser gives a password, which the
 * shard must ask for, unless a superuser set password_required 'false' on
 * the mapping; otherwise the role would connect with this server's own
 * credentials.
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"

#include "shard_coord.h"

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
 * The foreign servers of source, or NIL when it does not train on them:
 * not a partitioned table, a leaf that is not a foreign table of
 * postgres_fdw, or row security on the source for the caller.  Past 255
 * servers it is an error (a shard is a byte of the plan).
 */
List *
wals_fdw_shards_find(Oid source, const char *user_col, const char *item_col,
					 const char *rating_col)
{
	List	   *leaves;
	List	   *shards = NIL;
	ListCell   *lc;

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
PGconn *
wals_fdw_connect(WalsShard *s)
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

