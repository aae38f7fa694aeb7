/*
 * roles.c
 *	  Acting as another role for a bounded piece of work.
 *
 * wals's functions run as their caller, with two exceptions, both entered
 * only after the caller's own rights were checked:
 *
 * - the catalog (wals_models, wals_training_log, the version sequence) is
 *   written as the extension's owner: no other role has any write privilege
 *   on it, so no role can make it name another role's tables;
 * - every read or write of a model's own relations, whoever calls and
 *   whatever for (serving, a refresh, a warm start, a retraining, creating
 *   and filling its factor tables), runs as the model's owner through
 *   wals_become_model_owner, planning included, so that no role's code
 *   ever runs with another's rights: the planner evaluates an index
 *   expression, a partial index's predicate or an IMMUTABLE function of a
 *   table as the role that plans, and a row-security policy or a trigger
 *   runs as the role that reads or writes.  A superuser who serves,
 *   retrains or refreshes a tenant's model, or a member of a group role
 *   that owns one, runs the owner's code only as the owner.
 *
 * Both run as a security-restricted operation with search_path pinned to
 * pg_catalog, as PostgreSQL runs VACUUM, ANALYZE, REINDEX and REFRESH
 * MATERIALIZED VIEW since CVE-2022-1552: code reached from there cannot
 * change the role back, nor find objects through the caller's
 * search_path.  The other way to close the class, checking that a table
 * carries nothing wals did not make, would refuse what owners rightly add
 * (an index of pgvector on the factors, a policy, a trigger); only rules,
 * which change what wals's own statements do, are refused (factors.c).
 * This was chosen over
 * SECURITY DEFINER helper functions because the checks and the statements
 * stay in one place in C, and no function that writes the catalog is
 * callable from SQL at all.  An error inside unwinds the role and the
 * settings with the (sub)transaction.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#include "wals_catalog.h"

/* Become role until wals_unbecome(save), as described above. */
void
wals_become(Oid role, WalsRoleSave *save)
{
	GetUserIdAndSecContext(&save->userid, &save->sec_context);
	SetUserIdAndSecContext(role, save->sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save->guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
wals_unbecome(const WalsRoleSave *save)
{
	AtEOXact_GUC(false, save->guc_level);
	SetUserIdAndSecContext(save->userid, save->sec_context);
}

/*
 * Become the owner of a model to work on its relations, as described
 * above: the one switch every path that reads or writes a model's tables
 * or source goes through.  The caller's own rights (SELECT to serve, the
 * owner's privileges to write) were checked before.  A model whose owner
 * was dropped has no table of that owner left to read, and only a
 * superuser passes the owner's check to retrain it, which then makes it
 * the superuser's (train.c): that work runs as the caller, restricted all
 * the same.
 */
void
wals_become_model_owner(const WalsModelInfo *info, WalsRoleSave *save)
{
	Oid			owner = wals_model_owner(info);

	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner)))
		owner = GetUserId();
	wals_become(owner, save);
}

/*
 * The row of extension wals in pg_extension, whatever its version: its
 * schema, owner and version (NULL when null).  False when wals is not
 * installed in this database.
 */
static bool
scan_extension(Oid *schema, Oid *owner, char **version, bool *updating)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("wals"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_extension ext = (Form_pg_extension) GETSTRUCT(tuple);

		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		*schema = ext->extnamespace;
		*owner = ext->extowner;
		*updating = creating_extension && CurrentExtensionObject == ext->oid;
		*version = isnull ? NULL : TextDatumGetCString(d);
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The row of extension wals: its schema and owner.  The
 * catalog this library reads and writes is that of its own version: an
 * installation not yet updated to it is refused with what to do, rather
 * than met with errors about missing columns.  The one exception is wals's
 * own update script, which may call this library at each step of a chain
 * of updates (0.2.0 to 0.3.0 fills rated items through it, on the way to a
 * later version): what it calls reads only the columns of that step.
 */
static void
extension_row(Oid *schema, Oid *owner)
{
	bool		updating = false;
	char	   *version = NULL;

	if (!scan_extension(schema, owner, &version, &updating))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"wals\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION wals.")));
	if (!updating && (version == NULL || strcmp(version, WALS_VERSION) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"wals\" is at version %s in this database, but its library is version %s",
						version != NULL ? version : "(none)", WALS_VERSION),
				 errhint("Run ALTER EXTENSION wals UPDATE.")));
}

/*
 * The schema and owner of wals at any version, false when it is not
 * installed: dropping it must not ask for an update first.
 */
bool
wals_extension_installed(Oid *schema, Oid *owner)
{
	char	   *version;
	bool		updating;

	return scan_extension(schema, owner, &version, &updating);
}

/* The schema wals is installed in (PostgreSQL 15 exports no lookup for it). */
Oid
wals_extension_schema(void)
{
	Oid			schema;
	Oid			owner;

	extension_row(&schema, &owner);
	return schema;
}

/*
 * Refuse a call of fn through a declaration of another version of wals,
 * before any argument is read: between installing a library and running
 * ALTER EXTENSION wals UPDATE, the SQL declarations are the older ones,
 * and an argument the library reads past those declared is not there.
 * The version's own message says what to do; a declaration changed by
 * hand gets this one.
 */
void
wals_require_nargs(FunctionCallInfo fcinfo, int nargs, const char *fn)
{
	if (PG_NARGS() == nargs)
		return;
	(void) wals_extension_schema();
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s() is declared with %d arguments, but the library of wals %s takes %d",
					fn, PG_NARGS(), WALS_VERSION, nargs),
			 errhint("Run ALTER EXTENSION wals UPDATE, or drop and create the extension again.")));
}

/* A role as messages name it: quoted, or by its OID once it is dropped. */
char *
wals_role_display(Oid role)
{
	char	   *name = GetUserNameFromId(role, true);

	return name != NULL ? psprintf("\"%s\"", name) : psprintf("with OID %u (dropped)", role);
}

/* Become the extension's owner, to write the catalog. */
void
wals_become_catalog_writer(WalsRoleSave *save)
{
	Oid			schema;
	Oid			owner;

	extension_row(&schema, &owner);
	wals_become(owner, save);
}
