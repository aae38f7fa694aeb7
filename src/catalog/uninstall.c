/*
 * uninstall.c
 *	  What dropping extension wals does with the models.
 *
 * A model's factor tables are ordinary tables of its owner, which nothing
 * in pg_depend ties to the extension: left to PostgreSQL, DROP EXTENSION
 * wals would leave every model's tables behind with the catalog that
 * describes them gone.  The extension's event trigger wals_uninstall runs
 * this file's function at the start of each command that may drop wals,
 * and acts only when the command would:
 *
 * - DROP EXTENSION wals (RESTRICT) is refused while a model holds a factor
 *   table, with 2BP01, as PostgreSQL refuses a drop that other objects
 *   depend on;
 * - DROP EXTENSION wals CASCADE first drops each model's factor tables,
 *   those still its own as wals_drop_model() drops them (a table moved,
 *   renamed or given to another role stays, with a NOTICE), and what
 *   depends on them, as CASCADE drops what depends on an extension;
 * - DROP SCHEMA ... CASCADE of wals's schema, and DROP OWNED BY the
 *   extension's owner, drop wals without naming it: they are refused while
 *   a model holds a table, with the advice to drop the models or the
 *   extension first, rather than dropping tables of other schemas that the
 *   command never named.
 *
 * A model whose tables are gone (its owner dropped them, or pg_restore
 * --clean did, which drops a database's tables before its extensions) holds
 * nothing, and its catalog row goes with the extension.
 *
 * The trigger fires before PostgreSQL checks that the role may run the
 * command, so it checks first: for a role that may not, it does nothing,
 * reads no catalog and locks nothing, and PostgreSQL refuses the command.
 * Otherwise it runs as that role, the extension's owner or a superuser,
 * whom PostgreSQL lets drop whatever depends on the extension.
 *
 * It locks wals_models before reading it, as the drop would lock it next
 * anyway, so that no training commits a model after it was read.  This
 * waits for the trainings, refreshes and drops under way, and for no
 * deadlock: each of them read wals_models before it locked a factor
 * table, and holds that lock to its end.
 *
 * It is in C because only C sees the statement (which objects, RESTRICT or
 * CASCADE), and runs at ddl_command_start because by sql_drop the catalog
 * is gone.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "wals_catalog.h"

PG_FUNCTION_INFO_V1(wals_uninstall);

/* How a command drops wals, when the role running it may run it. */
typedef enum WalsDrop
{
	WALS_DROP_NONE,				/* it does not, or the role may not */
	WALS_DROP_RESTRICT,			/* DROP EXTENSION wals */
	WALS_DROP_CASCADE,			/* DROP EXTENSION wals CASCADE */
	WALS_DROP_UNNAMED			/* DROP SCHEMA ... CASCADE, DROP OWNED */
} WalsDrop;

/* The models an error names; PostgreSQL's own list of dependents is longer. */
#define WALS_MODELS_LISTED 10

static bool
names_include(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
	{
		if (strcmp(strVal(lfirst(lc)), name) == 0)
			return true;
	}
	return false;
}

/*
 * How the command tree drops wals, installed in schema and owned by owner.
 * Each check is the one PostgreSQL makes later in the command: the
 * extension's owner (or a superuser) for DROP EXTENSION, the schema's for
 * DROP SCHEMA, the privileges of each role for DROP OWNED, whose bootstrap
 * superuser's objects PostgreSQL refuses to drop at all.
 */
static WalsDrop
how_dropped(Node *tree, Oid schema, Oid owner)
{
	if (IsA(tree, DropStmt))
	{
		DropStmt   *stmt = (DropStmt *) tree;
		char	   *nspname;

		if (stmt->removeType == OBJECT_EXTENSION && names_include(stmt->objects, "wals"))
		{
			if (!has_privs_of_role(GetUserId(), owner))
				return WALS_DROP_NONE;
			return stmt->behavior == DROP_CASCADE ? WALS_DROP_CASCADE : WALS_DROP_RESTRICT;
		}
		nspname = get_namespace_name(schema);
		if (stmt->removeType == OBJECT_SCHEMA && stmt->behavior == DROP_CASCADE &&
			nspname != NULL && names_include(stmt->objects, nspname) &&
			pg_namespace_ownercheck(schema, GetUserId()))
			return WALS_DROP_UNNAMED;
	}
	else if (IsA(tree, DropOwnedStmt))
	{
		DropOwnedStmt *stmt = (DropOwnedStmt *) tree;
		ListCell   *lc;

		if (owner == BOOTSTRAP_SUPERUSERID)
			return WALS_DROP_NONE;
		foreach(lc, stmt->roles)
		{
			RoleSpec   *role = lfirst_node(RoleSpec, lc);

			if (role->roletype == ROLESPEC_PUBLIC)
				return WALS_DROP_NONE;
			if (get_rolespec_oid(role, true) == owner)
				return has_privs_of_role(GetUserId(), owner) ? WALS_DROP_UNNAMED : WALS_DROP_NONE;
		}
	}
	return WALS_DROP_NONE;
}

static Oid
oid_column(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);

	return isnull ? InvalidOid : DatumGetObjectId(d);
}

/*
 * The models of the catalog table wals_models of schema that hold a factor
 * table, whatever it is now (models[0 .. n-1]), read with the call's
 * snapshot.  Only the columns every version since 0.4.0 has are read, and
 * nothing asks for the version: wals is dropped as it is.
 */
static int
models_holding_tables(Oid schema, WalsModelInfo **models)
{
	char	   *table = quote_qualified_identifier(get_namespace_name(schema), "wals_models");
	int			n = 0;

	wals_sql(psprintf("SELECT schema, model, user_factors::pg_catalog.oid,"
					  " item_factors::pg_catalog.oid, owner::pg_catalog.oid FROM %s"
					  " ORDER BY schema, model", table),
			 0, NULL, NULL, NULL, true, 0);
	*models = palloc0(sizeof(WalsModelInfo) * Max(SPI_processed, 1));
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		WalsModelInfo *m = &(*models)[n];

		m->user_rel = oid_column(row, 3);
		m->item_rel = oid_column(row, 4);
		if (!wals_model_has_tables(m))
			continue;
		m->schema = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1);
		m->name = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 2);
		m->display = wals_model_display(m->schema, m->name);
		m->owner = oid_column(row, 5);
		n++;
	}
	return n;
}

/* The error for a command that would drop wals while n models hold tables. */
static void
refuse(const WalsModelInfo *models, int n, WalsDrop how)
{
	StringInfoData detail;

	initStringInfo(&detail);
	for (int i = 0; i < n && i < WALS_MODELS_LISTED; i++)
		appendStringInfo(&detail, "%smodel \"%s\" depends on extension wals",
						 i > 0 ? "\n" : "", models[i].display);
	if (n > WALS_MODELS_LISTED)
		appendStringInfo(&detail, "\nand %d other models", n - WALS_MODELS_LISTED);
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg_plural("cannot drop extension wals because %d model depends on it",
						   "cannot drop extension wals because %d models depend on it",
						   n, n),
			 errdetail("%s", detail.data),
			 how == WALS_DROP_RESTRICT ?
			 errhint("Drop the models with wals_drop_model(), or use DROP EXTENSION wals CASCADE to drop their factor tables too.") :
			 errhint("This command would drop extension wals but not the models' factor tables: first drop the models with wals_drop_model(), or the extension with DROP EXTENSION wals CASCADE.")));
}

/*
 * wals_uninstall() RETURNS event_trigger, once the command is known to
 * drop wals (see the head of the file).
 */
static Datum
uninstall_call(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigger = (EventTriggerData *) fcinfo->context;
	Oid			schema;
	Oid			owner;
	Oid			catalog;
	WalsDrop	how;
	WalsModelInfo *models;
	int			n;

	if (!wals_extension_installed(&schema, &owner) ||
		(how = how_dropped(trigger->parsetree, schema, owner)) == WALS_DROP_NONE ||
		!OidIsValid(catalog = get_relname_relid("wals_models", schema)))
		PG_RETURN_NULL();

	wals_spi_connect();
	LockRelationOid(catalog, AccessExclusiveLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(catalog)))
	{
		/* another session dropped wals meanwhile: PostgreSQL says so next */
		SPI_finish();
		PG_RETURN_NULL();
	}
	wals_call_new_snapshot();
	n = models_holding_tables(schema, &models);
	if (n > 0 && how != WALS_DROP_CASCADE)
		refuse(models, n, how);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		ereport(NOTICE,
				(errmsg("drop cascades to model \"%s\"", models[i].display)));
		wals_drop_factor_tables(&models[i], DROP_CASCADE);
	}
	SPI_finish();
	PG_RETURN_NULL();
}

Datum
wals_uninstall(PG_FUNCTION_ARGS)
{
	Oid			schema;
	Oid			owner;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("wals_uninstall() can only be called by its event trigger"),
				 errhint("Run DROP EXTENSION wals to uninstall wals.")));

	/*
	 * A command that does not drop wals is let through before it counts as
	 * a call of wals: a DROP SCHEMA that a view's function runs while wals
	 * reads the view is none of wals's business.
	 */
	if (!wals_extension_installed(&schema, &owner) ||
		how_dropped(((EventTriggerData *) fcinfo->context)->parsetree, schema,
					owner) == WALS_DROP_NONE)
		PG_RETURN_NULL();
	return wals_call(uninstall_call, fcinfo, "wals_uninstall", true);
}
