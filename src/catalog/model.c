/*
 * model.c
 *	  A model's relations: locking them for a call, its owner, dropping its
 *	  tables, and wals_drop_model.
 *
 * A model's owner is the role recorded in its catalog row when it was
 * trained (the caller for a new model, the previous owner for a retraining).
 * Retraining, refreshing and dropping a model need the privileges of its
 * owner, as ALTER and DROP TABLE would.
 *
 * A model's factor tables are used only while each is still the table wals
 * created for it: the OID the catalog holds, an ordinary table of the
 * model's owner, in the model's schema, under the name wals gave it.  A
 * relation that is not (moved, renamed, given to another role, or another
 * relation altogether behind an OID that a dump and restore left dangling)
 * is never read, written or trusted for its owner: serving and refreshing
 * refuse the model, and dropping it leaves that relation in place with a
 * NOTICE.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "wals_catalog.h"

PG_FUNCTION_INFO_V1(wals_drop_model);

/*
 * The number of model schema.name in wals_model_locks, drawn the first time
 * the name is locked.  Two sessions drawing one for the same new name wait
 * on each other in the primary key, as two CREATE TABLE of one name do.
 */
static int32
lock_key(const char *schema, const char *name)
{
	char	   *table = wals_catalog_table("wals_model_locks");
	Oid			types[2] = {NAMEOID, TEXTOID};
	Datum		values[2];
	bool		isnull;
	int32		key;
	WalsRoleSave save;

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(schema));
	values[1] = CStringGetTextDatum(name);
	wals_become_catalog_writer(&save);
	wals_spi_exec(psprintf("INSERT INTO %s (schema, model) VALUES ($1, $2) ON CONFLICT DO NOTHING",
						   table),
				  2, types, values, SPI_OK_INSERT);
	wals_spi_exec(psprintf("SELECT lock_key FROM %s WHERE schema OPERATOR(pg_catalog.=) $1"
						   " AND model OPERATOR(pg_catalog.=) $2", table),
				  2, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "wals: no lock key for model \"%s\"", wals_model_display(schema, name));
	key = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	wals_unbecome(&save);
	return key;
}

/*
 * Error unless role may create the tables of model name in schema nsp:
 * the caller for a new model, the owner of one retrained.  For a new
 * model the hint says where the caller may train it instead: beside its
 * source (when given) if the caller may create tables there, else in a
 * schema it names.  An unqualified model goes to the first schema of
 * search_path, often public, where since PostgreSQL 15 an ordinary role
 * may not create tables: a role's first training fails there.
 */
void
wals_check_create(Oid nsp, Oid role, const char *name, Oid source)
{
	char	   *schema;
	Oid			source_nsp = OidIsValid(source) ? get_rel_namespace(source) : InvalidOid;
	char	   *hint;

	if (pg_namespace_aclcheck(nsp, role, ACL_CREATE) == ACLCHECK_OK)
		return;
	schema = get_namespace_name(nsp);
	if (role != GetUserId())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for schema %s", schema),
				 errdetail("A retraining creates the tables of model \"%s\" as its owner, role %s.",
						   wals_model_display(schema, name), wals_role_display(role)),
				 errhint("GRANT CREATE ON SCHEMA %s TO %s, or train a model of your own under another name.",
						 quote_identifier(schema),
						 quote_identifier(GetUserNameFromId(role, false)))));
	if (OidIsValid(source_nsp) && source_nsp != nsp &&
		pg_namespace_aclcheck(source_nsp, role, ACL_CREATE) == ACLCHECK_OK)
		hint = psprintf("Pass model => %s to train it beside its source, or name another schema where you may create tables.",
						quote_literal_cstr(psprintf("%s.%s",
													quote_identifier(get_namespace_name(source_nsp)),
													quote_identifier(name))));
	else
		hint = pstrdup("Pass model => 'schema.name', naming a schema where you may create tables.");
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for schema %s", schema),
			 errdetail("The factor tables of model \"%s\" would be created in schema \"%s\"; a model given without a schema goes to the first schema of search_path.",
					   wals_model_display(schema, name), schema),
			 errhint("%s", hint)));
}

/*
 * Whether model schema.name exists (info filled), erring unless the caller
 * may write it: the privileges of its owner, or CREATE on schema nsp for a
 * new one when creating.
 */
static bool
may_write(Oid nsp, const char *schema, const char *name, WalsModelInfo *info, bool creating)
{
	if (wals_catalog_lookup(schema, name, info))
	{
		wals_model_check_owner(info);
		return true;
	}
	if (creating)
		wals_check_create(nsp, GetUserId(), name, InvalidOid);
	return false;
}

/*
 * Check that the caller may train, refresh or drop model schema.name, then
 * serialize those calls of that model until the transaction ends, and
 * check again under the lock, since the model may have been retrained,
 * dropped or created meanwhile.  An existing model needs the privileges of
 * its owner; a new one (creating) CREATE on its schema.  Returns whether
 * the model exists, with info filled; a model that does not exist, unless
 * creating, is not locked.
 *
 * The lock is an object lock whose class is wals_model_locks and whose key
 * is the model's number there: no SQL command takes such a lock, so no
 * role can hold it to block another's training (as it could an advisory
 * lock), no two models share a key (as two names could share a hash), and
 * no role takes it before its rights on the model were checked.
 */
bool
wals_lock_model(const char *schema, const char *name, WalsModelInfo *info, bool creating)
{
	Oid			nsp = get_namespace_oid(schema, !creating);

	if (!may_write(nsp, schema, name, info, creating) && !creating)
		return false;
	LockDatabaseObject(get_relname_relid("wals_model_locks", wals_extension_schema()),
					   (Oid) lock_key(schema, name), 0, ExclusiveLock);
	wals_call_new_snapshot();
	return may_write(nsp, schema, name, info, creating);
}

static bool
relation_exists(Oid relid)
{
	return SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid));
}

static const char *not_ours(const WalsModelInfo *info, Oid relid, const char *suffix);

/*
 * A transaction-level snapshot taken before a retraining committed still
 * sees the previous catalog row, or sees the new factor tables without
 * their rows: it would serve a model that is gone, or an empty one.
 * Refuse, as PostgreSQL refuses other concurrent updates under REPEATABLE
 * READ.
 */
static void
serialization_failure(const WalsModelInfo *info)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access to model \"%s\" due to a concurrent retraining",
					info->display),
			 errhint("Retry the transaction.")));
}

static void
check_snapshot_sees(const WalsModelInfo *info, Oid relid)
{
	HeapTuple	tuple;
	TransactionId xmin;

	if (!IsolationUsesXactSnapshot())
		return;
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "wals: cache lookup failed for relation %u", relid);
	xmin = HeapTupleHeaderGetXmin(tuple->t_data);
	ReleaseSysCache(tuple);
	if (TransactionIdIsNormal(xmin) && !TransactionIdIsCurrentTransactionId(xmin) &&
		XidInMVCCSnapshot(xmin, GetTransactionSnapshot()))
		serialization_failure(info);
}

/*
 * Serving reads the factor tables as the model's owner (roles.c), so a
 * caller whom row-level security would filter on relid would be served
 * the rows its policies hide: refused instead.  The owner, and the roles
 * row security does not apply to (superusers, BYPASSRLS, members of the
 * owner role on a table that does not force it), are served what the
 * owner sees.
 */
static void
check_row_security(const WalsModelInfo *info, Oid relid)
{
	Oid			owner = wals_model_owner(info);
	char	   *rel;

	if (GetUserId() == owner || check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED)
		return;
	rel = wals_relation_name(relid);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("row-level security of %s applies to role %s, which serves model \"%s\"",
					rel, wals_role_display(GetUserId()), info->display),
			 errdetail("wals reads the factor tables of a model as its owner, role %s, and cannot serve a role only the rows its policies allow.",
					   wals_role_display(owner)),
			 errhint("Serve this role a model trained on what it may see, or exempt it from the policies (ALTER TABLE %s DISABLE ROW LEVEL SECURITY, or BYPASSRLS).",
					 rel)));
}

/*
 * Error unless relid, a factor table of the model as its catalog row names
 * it, is still the one wals created and the caller may read it (USAGE on
 * its schema, SELECT on its columns, and no row security that would filter
 * it), before it is locked.  A table gone meanwhile is left to the caller,
 * which reads the row again.
 */
static void
may_read(const WalsModelInfo *info, Oid relid, const char *suffix)
{
	static const char *const user_cols[3] = {"user_id", "factors", "rated"};
	static const char *const item_cols[2] = {"item_id", "factors"};
	bool		user_side = strcmp(suffix, WALS_USER_SUFFIX) == 0;

	if (!relation_exists(relid))
		return;
	if (not_ours(info, relid, suffix) != NULL)
		wals_model_check_tables(info);
	wals_check_readable_hint(relid, user_side ? user_cols : item_cols, user_side ? 3 : 2,
							 wals_model_grant_hint(info));
	check_row_security(info, relid);
}

/*
 * Resolve and read the catalog row of the model a call names, check that
 * the caller may read its factor tables, and lock them for reading until
 * the transaction ends.  A retraining drops
 * the tables the row named, so when a table is gone once its lock is held
 * (the call waited for a retraining to commit), the row is read again and
 * the new tables locked.  Must run inside an SPI connection.
 */
WalsModelInfo *
wals_model_get(text *model)
{
	WalsModelInfo *info = palloc0(sizeof(WalsModelInfo));

	wals_model_resolve(model, info);
	for (;;)
	{
		WalsModelInfo *again;

		wals_model_check(info);
		may_read(info, info->user_rel, WALS_USER_SUFFIX);
		may_read(info, info->item_rel, WALS_ITEM_SUFFIX);
		LockRelationOid(info->user_rel, AccessShareLock);
		LockRelationOid(info->item_rel, AccessShareLock);
		if (relation_exists(info->user_rel) && relation_exists(info->item_rel))
			break;
		again = palloc0(sizeof(WalsModelInfo));
		if (!wals_catalog_lookup(info->schema, info->name, again))
			wals_no_such_model(info->schema, info->name);
		if (again->user_rel == info->user_rel && again->item_rel == info->item_rel)
		{
			if (IsolationUsesXactSnapshot())
				serialization_failure(info);
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("a factor table of model \"%s\" does not exist", info->display),
					 errhint("Train the model again with wals_train(), or remove it with wals_drop_model().")));
		}
		info = again;
	}
	wals_model_check_tables(info);
	check_snapshot_sees(info, info->user_rel);
	check_snapshot_sees(info, info->item_rel);
	return info;
}

/*
 * The owner of a model: the role its catalog row records.  While an update
 * of wals reads the rows of a version that did not record it, the owner of
 * its user factor table, else of its item factor table, else of its schema.
 */
Oid
wals_model_owner(const WalsModelInfo *info)
{
	Oid			rels[2] = {info->user_rel, info->item_rel};
	Oid			nsp;
	HeapTuple	tuple;
	Oid			owner;

	if (OidIsValid(info->owner))
		return info->owner;
	for (int i = 0; i < 2; i++)
	{
		tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(rels[i]));
		if (HeapTupleIsValid(tuple))
		{
			owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
			ReleaseSysCache(tuple);
			return owner;
		}
	}
	nsp = get_namespace_oid(info->schema, true);
	tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tuple))
		return BOOTSTRAP_SUPERUSERID;
	owner = ((Form_pg_namespace) GETSTRUCT(tuple))->nspowner;
	ReleaseSysCache(tuple);
	return owner;
}

/* Error unless the caller has the privileges of the model's owner. */
void
wals_model_check_owner(const WalsModelInfo *info)
{
	if (!has_privs_of_role(GetUserId(), wals_model_owner(info)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of model \"%s\"", info->display),
				 errdetail("Model \"%s\" is owned by role %s.", info->display,
						   wals_role_display(wals_model_owner(info))),
				 errhint("Train a model of your own, in a schema where you may create tables.")));
}

/*
 * Why relid is not the factor table wals created for the model (see the
 * head of the file), or NULL when it is.
 */
static const char *
not_ours(const WalsModelInfo *info, Oid relid, const char *suffix)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Form_pg_class rel;
	const char *why = NULL;

	if (!HeapTupleIsValid(tuple))
		return "It no longer exists.";
	rel = (Form_pg_class) GETSTRUCT(tuple);
	if (rel->relkind != RELKIND_RELATION)
		why = "It is no longer an ordinary table.";
	else if (rel->relnamespace != get_namespace_oid(info->schema, true) ||
			 strcmp(NameStr(rel->relname), psprintf("%s%s", info->name, suffix)) != 0)
		why = psprintf("It is now %s: it was moved or renamed, or the model's catalog row outlived its table (a dump and restore keeps such a row's number, which then names another relation).",
					   wals_relation_name(relid));
	else if (rel->relowner != wals_model_owner(info))
		why = psprintf("It belongs to role %s, and the model to role %s.",
					   wals_role_display(rel->relowner),
					   wals_role_display(wals_model_owner(info)));
	ReleaseSysCache(tuple);
	return why;
}

/*
 * Error unless both factor tables of the model are still the tables wals
 * created for it.
 */
void
wals_model_check_tables(const WalsModelInfo *info)
{
	const char *why = not_ours(info, info->user_rel, WALS_USER_SUFFIX);
	const char *which = "user";

	if (why == NULL)
	{
		why = not_ours(info, info->item_rel, WALS_ITEM_SUFFIX);
		which = "item";
	}
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the %s factor table of model \"%s\" is no longer the table wals created for it",
						which, info->display),
				 errdetail("%s", why),
				 errhint("Train the model again with wals_train(), or remove it with wals_drop_model().")));
}

/*
 * Drop one factor table of a model if it is still the table wals created
 * for it (see the head of the file), checked before it is locked and again
 * under the lock; otherwise leave it and say so.  behavior: what depends
 * on the table (a view of the factors) stops the drop, or goes with it
 * (DROP EXTENSION wals CASCADE).
 */
static void
drop_factor_table(const WalsModelInfo *info, Oid relid, const char *suffix,
				  DropBehavior behavior)
{
	const char *why;
	ObjectAddress object;

	if (!OidIsValid(relid) || !relation_exists(relid))
		return;
	why = not_ours(info, relid, suffix);
	if (why == NULL)
	{
		LockRelationOid(relid, AccessExclusiveLock);
		if (!relation_exists(relid))
			return;
		why = not_ours(info, relid, suffix);
	}
	if (why != NULL)
	{
		ereport(NOTICE,
				(errmsg("relation %s was left in place: it is no longer the table wals created for model \"%s\"",
						wals_relation_name(relid), info->display),
				 errdetail("%s", why)));
		return;
	}
	object.classId = RelationRelationId;
	object.objectId = relid;
	object.objectSubId = 0;
	performDeletion(&object, behavior, 0);
}

/* Drop one factor table of the model, if it is still its own (as above). */
void
wals_drop_factor_table(const WalsModelInfo *info, Oid relid, bool user_side)
{
	drop_factor_table(info, relid, user_side ? WALS_USER_SUFFIX : WALS_ITEM_SUFFIX,
					  DROP_RESTRICT);
}

/*
 * Whether a factor table the model's catalog row names still exists,
 * whatever it is now: a model whose tables are both gone holds nothing.
 */
bool
wals_model_has_tables(const WalsModelInfo *info)
{
	return relation_exists(info->user_rel) || relation_exists(info->item_rel);
}

/*
 * Whether relid, a factor table of the model, may be written again in
 * place by a retraining: still the model's own, and in the form wals made.
 */
bool
wals_factor_table_reusable(const WalsModelInfo *info, Oid relid, bool user_side)
{
	if (!relation_exists(relid) ||
		not_ours(info, relid, user_side ? WALS_USER_SUFFIX : WALS_ITEM_SUFFIX) != NULL ||
		!wals_factor_table_in_form(relid, user_side))
		return false;
	wals_check_no_rules(info, relid);
	return true;
}

/*
 * Error when a factor table that is still the model's carries a rule
 * (factors.c): checked before a training reads anything, rather than
 * after it has run.
 */
void
wals_model_check_rules(const WalsModelInfo *info)
{
	if (relation_exists(info->user_rel) && not_ours(info, info->user_rel, WALS_USER_SUFFIX) == NULL)
		wals_check_no_rules(info, info->user_rel);
	if (relation_exists(info->item_rel) && not_ours(info, info->item_rel, WALS_ITEM_SUFFIX) == NULL)
		wals_check_no_rules(info, info->item_rel);
}

/*
 * Drop the factor tables of a model, those that are still its own, and
 * with them what depends on them when behavior is DROP_CASCADE.  The
 * caller has checked that it may (wals_model_check_owner, or it drops
 * extension wals).
 */
void
wals_drop_factor_tables(const WalsModelInfo *info, DropBehavior behavior)
{
	drop_factor_table(info, info->user_rel, WALS_USER_SUFFIX, behavior);
	drop_factor_table(info, info->item_rel, WALS_ITEM_SUFFIX, behavior);
	CommandCounterIncrement();
}

/*
 * wals_drop_model(model text) RETURNS void
 *
 * Remove a model: its factor tables, its catalog row and its training log.
 * An unqualified name is looked up along search_path, as DROP TABLE does.
 */
static Datum
drop_model_call(PG_FUNCTION_ARGS)
{
	WalsModelInfo found;
	WalsModelInfo info;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"model\" must not be null")));
	PreventCommandIfReadOnly("wals_drop_model()");

	wals_spi_connect();
	wals_model_resolve(PG_GETARG_TEXT_PP(0), &found);
	if (!wals_lock_model(found.schema, found.name, &info, false))
		wals_no_such_model(found.schema, found.name);
	wals_drop_factor_tables(&info, DROP_RESTRICT);
	wals_catalog_delete(&info);
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
wals_drop_model(PG_FUNCTION_ARGS)
{
	return wals_call(drop_model_call, fcinfo, "wals_drop_model", true);
}
