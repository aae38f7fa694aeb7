/*
 * source.c
 *	  The relations ratings are read from, and their columns: checked when
 *	  a training, an evaluation or a refresh is asked for, by OID and by the
 *	  names the system catalog holds, never by stored text.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "wals_catalog.h"

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

/* The owner of a relation, looked up now; InvalidOid when it is gone. */
Oid
wals_relation_owner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * Check a relation given as a source of ratings, or of test ratings: it must
 * exist and be something that can be selected from, and outlive the
 * session, as a model does.  Returns its name.
 */
char *
wals_check_source(Oid relid, const char *argname)
{
	char	   *relname = get_rel_name(relid);
	char		relkind;

	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u given as \"%s\" does not exist", relid, argname)));
	relkind = get_rel_relkind(relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_VIEW &&
		relkind != RELKIND_MATVIEW && relkind != RELKIND_FOREIGN_TABLE &&
		relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" given as \"%s\" is not a table or view", relname, argname),
				 errhint("\"%s\" must be a table, view, materialized view or foreign table.", argname)));
	return relname;
}

/*
 * Error unless the caller may read columns cols[0..ncols) of relation
 * relid (all of them for ncols = 0: SELECT on the relation or on some
 * column), with USAGE on its schema, as a SELECT naming it would need.
 * Checked before anything locks the relation or its partitions, since a
 * relation is named by OID as easily as by name and a lock on another
 * role's table makes its owner's DROP or TRUNCATE wait.
 */
void
wals_check_readable(Oid relid, const char *const *cols, int ncols)
{
	wals_check_readable_hint(relid, cols, ncols, NULL);
}

/*
 * wals_check_readable, with hint (NULL for none) saying who may grant what
 * is missing: the errors are PostgreSQL's own for a SELECT refused.
 */
void
wals_check_readable_hint(Oid relid, const char *const *cols, int ncols, const char *hint)
{
	Oid			nsp = get_rel_namespace(relid);
	Oid			role = GetUserId();

	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (pg_namespace_aclcheck(nsp, role, ACL_USAGE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for schema %s", get_namespace_name(nsp)),
				 hint != NULL ? errhint("%s", hint) : 0));
	if (pg_class_aclcheck(relid, role, ACL_SELECT) == ACLCHECK_OK)
		return;
	if (pg_attribute_aclcheck_all(relid, role, ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg(get_rel_relkind(relid) == RELKIND_VIEW ?
						"permission denied for view %s" : "permission denied for table %s",
						get_rel_name(relid)),
				 hint != NULL ? errhint("%s", hint) : 0));
	for (int k = 0; k < ncols; k++)
	{
		AttrNumber	attnum = get_attnum(relid, cols[k]);

		if (attnum <= 0 ||
			pg_attribute_aclcheck(relid, attnum, role, ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for column \"%s\" of relation \"%s\"",
							cols[k], get_rel_name(relid)),
					 hint != NULL ? errhint("%s", hint) : 0));
	}
}

/*
 * How a column of type type is read, through any domain over it; false for
 * the types wals does not read.  The one list of the types of ids and
 * ratings, for the checks of arguments and for the readers.
 */
bool
wals_value_kind(Oid type, WalsValueKind *kind)
{
	switch (getBaseType(type))
	{
		case INT2OID:
			*kind = WALS_VALUE_INT2;
			return true;
		case INT4OID:
			*kind = WALS_VALUE_INT4;
			return true;
		case INT8OID:
			*kind = WALS_VALUE_INT8;
			return true;
		case FLOAT4OID:
			*kind = WALS_VALUE_FLOAT4;
			return true;
		case FLOAT8OID:
			*kind = WALS_VALUE_FLOAT8;
			return true;
		case NUMERICOID:
			*kind = WALS_VALUE_NUMERIC;
			return true;
		default:
			return false;
	}
}

/*
 * Check that column name, given as argument argname, exists in relation
 * relid (shown as reldisplay) with a type wals reads there: an integer type
 * for ids, any numeric type for ratings, through domains.  Returns the
 * column's name as the system catalog holds it, for SQL text.
 */
char *
wals_check_column(Oid relid, const char *reldisplay, const char *name, const char *argname,
				  bool id)
{
	AttrNumber	attnum = get_attnum(relid, name);
	Oid			type;
	WalsValueKind kind;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" given as \"%s\" does not exist in relation \"%s\"",
						name, argname, reldisplay)));
	type = get_atttype(relid, attnum);
	if (wals_value_kind(type, &kind) && (!id || WALS_VALUE_IS_ID(kind)))
		return get_attname(relid, attnum, false);
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("column \"%s\" given as \"%s\" has type %s",
					name, argname, format_type_be(getBaseType(type))),
			 errhint("\"%s\" must name a column of type %s.", argname,
					 id ? "smallint, integer or bigint" :
					 "smallint, integer, bigint, real, double precision or numeric")));
	return NULL;				/* keep compiler quiet */
}

/*
 * The source of a trained model, which must still exist, checked as a
 * training checks its source, with its names for SQL text.
 */
void
wals_model_source(const WalsModelInfo *info, WalsSourceNames *src)
{
	char	   *relname;

	if (!OidIsValid(info->source))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("model \"%s\" has no source", info->display),
				 errdetail("It was attached by wals_attach_model() where its source was not, or its source was gone when wals was updated to 0.3.0."),
				 errhint("Train the model again from its source with wals_train().")));
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(info->source)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the source relation of model \"%s\" no longer exists", info->display),
				 errhint("Train the model again from its new source with wals_train().")));
	relname = wals_check_source(info->source, "source");
	src->relation = wals_relation_name(info->source);
	src->user_col = quote_identifier(wals_check_column(info->source, relname, info->user_col,
													   "user_col", true));
	src->item_col = quote_identifier(wals_check_column(info->source, relname, info->item_col,
													   "item_col", true));
	src->rating_col = info->rating_col == NULL ? NULL :
		quote_identifier(wals_check_column(info->source, relname, info->rating_col,
										   "rating_col", false));
}
