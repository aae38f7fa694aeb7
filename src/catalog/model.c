/*
 * model.c
 *	  A model's relations: locking them for a call, its owner, dropping its
 *	  tables, and wals_drop_model.
 *
 * A model's owner is the owner of its factor tables, which PostgreSQL
 * itself tracks: ALTER TABLE ... OWNER TO, REASSIGN OWNED and pg_dump move a
 * model with its tables.  Retraining, refreshing and dropping a model need
 * the privileges of its owner, as ALTER and DROP TABLE would.
 *
 * wals drops a relation only when it is the factor table it created for
 * that model: the OID the catalog holds, still an ordinary table of the
 * model's owner, in the model's schema, under the name wals gave it.
 * Anything else is left in place, with a NOTICE.
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
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "wals_catalog.h"

PG_FUNCTION_INFO_V1(wals_drop_model);

/*
 * Serialize trainings, refreshes and drops of one model until the
 * transaction ends.  The lock is an object lock whose class is the catalog
 * table's OID: no SQL command takes such a lock, so no role can hold it to
 * block another's training (as it could an advisory lock).
 */
void
wals_lock_model(const char *schema, const char *name)
{
	char	   *key = psprintf("%s%c%s", schema, '\0', name);
	uint32		hash = hash_bytes((const unsigned char *) key, strlen(schema) + 1 + strlen(name));
	Oid			catalog = get_relname_relid("wals_models", wals_extension_schema());

	LockDatabaseObject(catalog, hash, 0, ExclusiveLock);
}

/* The schema-qualified, quoted name of a relation, looked up now. */
char *
wals_relation_name(Oid relid)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name);
}

static bool
relation_exists(Oid relid)
{
	return SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid));
}

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
 * Resolve and read the catalog row of the model a call names, and lock its
 * factor tables for reading until the transaction ends.  A retraining drops
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
	check_snapshot_sees(info, info->user_rel);
	check_snapshot_sees(info, info->item_rel);
	return info;
}

/*
 * The owner of a model: the owner of its user factor table, else of its
 * item factor table, else (both dropped by hand) of its schema.
 */
Oid
wals_model_owner(const WalsModelInfo *info)
{
	Oid			rels[2] = {info->user_rel, info->item_rel};
	Oid			nsp;
	HeapTuple	tuple;
	Oid			owner;

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
				 errdetail("The owner of a model is the owner of its factor tables, role \"%s\".",
						   GetUserNameFromId(wals_model_owner(info), false)),
				 errhint("Train a model of your own, in a schema where you may create tables.")));
}

/*
 * Drop one factor table of a model if, locked, it is still the table wals
 * created for it (see the head of the file); otherwise leave it and say so.
 */
static void
drop_factor_table(const WalsModelInfo *info, Oid relid, const char *suffix, Oid owner)
{
	HeapTuple	tuple;
	Form_pg_class rel;
	bool		ours;
	char	   *expected = psprintf("%s%s", info->name, suffix);
	ObjectAddress object;

	if (!OidIsValid(relid))
		return;
	LockRelationOid(relid, AccessExclusiveLock);
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		return;
	rel = (Form_pg_class) GETSTRUCT(tuple);
	ours = rel->relkind == RELKIND_RELATION && rel->relowner == owner &&
		rel->relnamespace == get_namespace_oid(info->schema, true) &&
		strcmp(NameStr(rel->relname), expected) == 0;
	ReleaseSysCache(tuple);
	if (!ours)
	{
		ereport(NOTICE,
				(errmsg("relation %s was left in place: it is no longer the table wals created for model \"%s\"",
						wals_relation_name(relid), info->display),
				 errdetail("It was moved, renamed, replaced or given to another owner since.")));
		return;
	}
	object.classId = RelationRelationId;
	object.objectId = relid;
	object.objectSubId = 0;
	performDeletion(&object, DROP_RESTRICT, 0);
}

/*
 * Drop the factor tables of a model, those that are still its own.  The
 * caller has checked that it may (wals_model_check_owner).
 */
void
wals_drop_factor_tables(const WalsModelInfo *info)
{
	Oid			owner = wals_model_owner(info);

	drop_factor_table(info, info->user_rel, WALS_USER_SUFFIX, owner);
	drop_factor_table(info, info->item_rel, WALS_ITEM_SUFFIX, owner);
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

	SPI_connect();
	wals_model_resolve(PG_GETARG_TEXT_PP(0), &found);
	wals_lock_model(found.schema, found.name);
	if (!wals_catalog_lookup(found.schema, found.name, &info))
		wals_no_such_model(found.schema, found.name);
	wals_model_check_owner(&info);
	wals_drop_factor_tables(&info);
	wals_catalog_delete(&info);
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
wals_drop_model(PG_FUNCTION_ARGS)
{
	Datum		result;

	wals_call_begin("wals_drop_model", true);
	result = drop_model_call(fcinfo);
	wals_call_end();
	return result;
}
