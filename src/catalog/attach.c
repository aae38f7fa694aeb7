/*
 * attach.c
 *	  wals_attach_model: a model's factor tables, there without its catalog
 *	  row, made a model again from the description they carry.
 *
 * pg_dump -n (a schema) or -t (tables) dumps a model's factor tables, with
 * the description of its settings on the user factor table (describe.c),
 * but not its catalog row, which belongs to the extension and is dumped
 * only with the whole database.  After such a restore the tables are there
 * and the model is not; wals_attach_model writes its catalog row again, as
 * a training writes it (wals_catalog_write), once it has checked:
 *
 * - before anything is locked: USAGE on the schema, and the privileges of
 *   the role that owns both tables, which becomes the model's owner, as a
 *   retraining needs the owner's; then wals_lock_model checks CREATE on the
 *   schema, as for any new model, and locks the model's name;
 * - both tables ordinary, of one owner, in the form wals made (exactly its
 *   columns, of its types, the primary key on the id), and not empty;
 * - every value of the description (describe.c), and every row's factors:
 *   an array of the dimension the description gives, finite, without
 *   nulls, read as the tables' owner;
 * - the source, which the description names: it is recorded where it is
 *   there, with the columns the description names, and the caller and the
 *   owner may both read them; otherwise the model is attached without one,
 *   with a NOTICE.  Serving needs no source; wals_refresh_users is refused
 *   until the model is trained again from one.
 * - the validation table, likewise, with the source's user and item
 *   columns: named schema-qualified, it is that relation; named alone, as
 *   0.4.0 and 0.5.0 described it, it is looked for in the model's schema,
 *   then in its source's, and taken only where it belongs to the model's
 *   owner or to its source's owner, whose relations a training of the model
 *   read (a relation of another role of that name may be anyone's).  A
 *   model attached without it keeps its validation metric, and
 *   wals_retrain asks for a validation table or validation => 0.
 *
 * The model gets a new version, as a training does, so that no model
 * cache takes it for one it holds; its training log starts empty.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/comment.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "wals_catalog.h"

PG_FUNCTION_INFO_V1(wals_attach_model);

/* The two factor tables of a model and their owner. */
typedef struct Tables
{
	Oid			user_rel;
	Oid			item_rel;
	Oid			owner;
} Tables;

static Oid
relation_owner(Oid relid)
{
	Oid			owner = wals_relation_owner(relid);

	if (!OidIsValid(owner))
		elog(ERROR, "wals: cache lookup failed for relation %u", relid);
	return owner;
}

/* The factor table of model name on one side, an ordinary table of nsp. */
static Oid
factor_table(Oid nsp, const char *schema, const char *name, const char *suffix,
			 const char *display)
{
	char	   *table = psprintf("%s%s", name, suffix);
	Oid			relid = get_relname_relid(table, nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s\" does not exist", quote_qualified_identifier(schema, table)),
				 errdetail("wals_attach_model() makes a model of its two factor tables, \"<model>%s\" and \"<model>%s\", found in its schema without its catalog row.",
						   WALS_USER_SUFFIX, WALS_ITEM_SUFFIX),
				 errhint("Restore both factor tables of model \"%s\" first.", display)));
	if (get_rel_relkind(relid) != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", quote_qualified_identifier(schema, table)),
				 errhint("The factor tables of a model are ordinary tables.")));
	return relid;
}

/* The name of a role for messages. */
static char *
role_name(Oid role)
{
	char	   *name = GetUserNameFromId(role, true);

	return name != NULL ? name : psprintf("%u", role);
}

/*
 * Find both factor tables of the model and check that the caller may make
 * them a model: they have one owner, whose privileges the caller has.
 * Looks at the system catalog only, and locks nothing.
 */
static void
find_tables(Oid nsp, const char *schema, const char *name, const char *display, Tables *t)
{
	Oid			item_owner;

	t->user_rel = factor_table(nsp, schema, name, WALS_USER_SUFFIX, display);
	t->item_rel = factor_table(nsp, schema, name, WALS_ITEM_SUFFIX, display);
	t->owner = relation_owner(t->user_rel);
	item_owner = relation_owner(t->item_rel);
	if (item_owner != t->owner)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the factor tables of model \"%s\" belong to two roles", display),
				 errdetail("%s belongs to role \"%s\", and %s to role \"%s\".",
						   wals_relation_name(t->user_rel), role_name(t->owner),
						   wals_relation_name(t->item_rel), role_name(item_owner)),
				 errhint("Give both tables to the role that is to own the model (ALTER TABLE ... OWNER TO).")));
	if (!has_privs_of_role(GetUserId(), t->owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of the factor tables of model \"%s\"", display),
				 errdetail("They belong to role \"%s\", which would own the model.",
						   role_name(t->owner)),
				 errhint("Attach the model as that role, or as a member of it.")));
}

static void
not_in_form(Oid relid, bool user_side)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("table %s is not a factor table in the form wals makes",
					wals_relation_name(relid)),
			 errdetail(user_side ?
					   "A user factor table has the columns user_id bigint, factors real[] and rated bytea, and no other, and its primary key is user_id." :
					   "An item factor table has the columns item_id bigint and factors real[], and no other, and its primary key is item_id."),
			 errhint("Restore the table as wals wrote it, or train the model again with wals_train() under another name.")));
}

/* The description on column "factors" of the user factor table. */
static char *
description(Oid user_rel, const char *display)
{
	char	   *comment = GetComment(user_rel, RelationRelationId, get_attnum(user_rel, "factors"));
	size_t		prefix = strlen(WALS_DESCRIPTION_PREFIX);

	if (comment != NULL && strncmp(comment, WALS_DESCRIPTION_PREFIX, prefix) == 0)
		return comment + prefix;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("table %s carries no description of model \"%s\"",
					wals_relation_name(user_rel), display),
			 errdetail(comment == NULL ?
					   "Column \"factors\" has no comment: wals writes a model's settings there at each training, since version 0.4.0." :
					   "The comment on column \"factors\" is not the one wals writes there, which starts \"" WALS_DESCRIPTION_PREFIX "\"."),
			 errhint("Write the description back as a training in the database the tables come from wrote it (COMMENT ON COLUMN %s.factors IS '" WALS_DESCRIPTION_PREFIX "{...}'), or drop the tables and train the model again with wals_train().",
					 wals_relation_name(user_rel))));
	return NULL;				/* keep compiler quiet */
}

/*
 * Check every row of a factor table, as its owner: its factors an array
 * of f finite reals without nulls.  Returns the number of rows, at least 1.
 */
static int64
check_rows(Oid relid, bool user_side, int f, Oid owner, const char *display)
{
	const char *id = user_side ? "user_id" : "item_id";
	char	   *rel = wals_relation_name(relid);
	Oid			type = INT4OID;
	Datum		value = Int32GetDatum(f);
	bool		isnull;
	int64		rows;
	int64		bad_id;
	int64		bad_len = 0;
	bool		bad_len_null = true;
	WalsRoleSave save;

	wals_become(owner, &save);
	wals_spi_exec(psprintf("SELECT pg_catalog.count(*), pg_catalog.min(%s) FILTER (WHERE"
						   " COALESCE(pg_catalog.array_ndims(factors), 0) OPERATOR(pg_catalog.<>) 1"
						   " OR COALESCE(pg_catalog.cardinality(factors), 0) OPERATOR(pg_catalog.<>) $1"
						   " OR pg_catalog.array_position(factors, NULL::pg_catalog.float4) IS NOT NULL"
						   " OR 'NaN'::pg_catalog.float4 OPERATOR(pg_catalog.=) ANY (factors)"
						   " OR 'Infinity'::pg_catalog.float4 OPERATOR(pg_catalog.=) ANY (factors)"
						   " OR '-Infinity'::pg_catalog.float4 OPERATOR(pg_catalog.=) ANY (factors))"
						   " FROM %s", id, rel),
				  1, &type, &value, SPI_OK_SELECT);
	rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	bad_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (!isnull)
	{
		Oid			id_type = INT8OID;
		Datum		id_value = Int64GetDatum(bad_id);

		wals_spi_exec(psprintf("SELECT pg_catalog.cardinality(factors) FROM %s"
							   " WHERE %s OPERATOR(pg_catalog.=) $1", rel, id),
					  1, &id_type, &id_value, SPI_OK_SELECT);
		if (SPI_processed > 0)
			bad_len = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												  1, &bad_len_null));
	}
	wals_unbecome(&save);

	if (!isnull)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the factors of %s " INT64_FORMAT " in table %s do not fit model \"%s\"",
						user_side ? "user" : "item", bad_id, rel, display),
				 bad_len_null ?
				 errdetail("They are null, and the model's description gives %d factors.", f) :
				 errdetail("They are not an array of %d finite reals without nulls, the factors the model's description gives: they hold %lld values.",
						   f, (long long) bad_len),
				 errhint("Restore the table as wals wrote it, or train the model again with wals_train() under another name.")));
	if (rows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s of model \"%s\" holds no rows", rel, display),
				 errhint("Restore its rows first (a dump made with --schema-only holds none).")));
	return rows;
}

/*
 * Whether role may read columns cols of relid, as wals_check_readable
 * checks for the caller: USAGE on its schema, SELECT on it or on each.
 */
static bool
may_read(Oid relid, Oid role, const char *const *cols, int ncols)
{
	if (pg_namespace_aclcheck(get_rel_namespace(relid), role, ACL_USAGE) != ACLCHECK_OK)
		return false;
	if (pg_class_aclcheck(relid, role, ACL_SELECT) == ACLCHECK_OK)
		return true;
	for (int k = 0; k < ncols; k++)
	{
		AttrNumber	attnum = get_attnum(relid, cols[k]);

		if (attnum <= 0 || pg_attribute_aclcheck(relid, attnum, role, ACL_SELECT) != ACLCHECK_OK)
			return false;
	}
	return true;
}

/* Whether relid has column name, of a type wals reads as an id or a rating. */
static bool
has_column(Oid relid, const char *name, bool id)
{
	AttrNumber	attnum = get_attnum(relid, name);
	WalsValueKind kind;

	return attnum > 0 && wals_value_kind(get_atttype(relid, attnum), &kind) &&
		(!id || WALS_VALUE_IS_ID(kind));
}

/*
 * Why relid cannot be read as a model's source or validation table, with
 * the columns cols[0..ncols) (the first two of ids), by the caller and by
 * role owner; NULL when it can.  what names it in the reason.
 */
static const char *
unreadable(Oid relid, const char *const *cols, int ncols, Oid owner, const char *what)
{
	char		relkind = get_rel_relkind(relid);

	if (relkind != RELKIND_RELATION && relkind != RELKIND_VIEW &&
		relkind != RELKIND_MATVIEW && relkind != RELKIND_FOREIGN_TABLE &&
		relkind != RELKIND_PARTITIONED_TABLE)
		return psprintf("Its %s %s is not a table or view.", what, wals_relation_name(relid));
	if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
		return psprintf("Its %s %s is temporary.", what, wals_relation_name(relid));
	for (int k = 0; k < ncols; k++)
		if (!has_column(relid, cols[k], k < 2))
			return psprintf("Its %s %s no longer has the columns the model was trained from.",
							what, wals_relation_name(relid));
	if (!may_read(relid, GetUserId(), cols, ncols))
		return psprintf("You may not read its %s %s.", what, wals_relation_name(relid));
	if (!may_read(relid, owner, cols, ncols))
		return psprintf("Role \"%s\", which owns the model, may not read its %s %s.",
						role_name(owner), what, wals_relation_name(relid));
	return NULL;
}

/* The relation named name in the schema named schema; InvalidOid if none. */
static Oid
relation_in(const char *schema, const char *name)
{
	Oid			nsp = get_namespace_oid(schema, true);

	return OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;
}

/*
 * The source the description names, where it can be the model's (see the
 * head of the file); else InvalidOid, with a NOTICE that says why.  Looks
 * at the system catalog only, and locks nothing.
 */
static Oid
find_source(const WalsDescribedRelation *source, const WalsCatalogRow *row, Oid owner,
			const char *display)
{
	const char *cols[3] = {row->user_col, row->item_col, row->rating_col};
	Oid			relid = InvalidOid;
	const char *why;

	if (source->name == NULL)
		why = "Its description names none.";
	else if (!OidIsValid(relid = relation_in(source->schema, source->name)))
		why = psprintf("Its source %s, which its description names, does not exist here.",
					   quote_qualified_identifier(source->schema, source->name));
	else
		why = unreadable(relid, cols, row->rating_col != NULL ? 3 : 2, owner, "source");
	if (why == NULL)
		return relid;
	ereport(NOTICE,
			(errmsg("model \"%s\" is attached without a source", display),
			 errdetail("%s", why),
			 errhint("It serves as it is. wals_refresh_users() needs a source: train the model again with wals_train() (warm_start => true keeps its factors) to give it one.")));
	return InvalidOid;
}

/*
 * The relation a validation table named alone means (see the head of the
 * file): in the model's schema, then in its source's, of the model's owner
 * or its source's; InvalidOid if none.
 */
static Oid
validation_named_alone(const char *name, const char *schema, Oid source, Oid owner)
{
	Oid			source_owner = OidIsValid(source) ? wals_relation_owner(source) : InvalidOid;
	Oid			schemas[2] = {get_namespace_oid(schema, true),
	OidIsValid(source) ? get_rel_namespace(source) : InvalidOid};

	for (int i = 0; i < 2; i++)
	{
		Oid			relid = OidIsValid(schemas[i]) ? get_relname_relid(name, schemas[i]) :
			InvalidOid;
		Oid			relowner = OidIsValid(relid) ? wals_relation_owner(relid) : InvalidOid;

		if (OidIsValid(relid) && (relowner == owner || relowner == source_owner))
			return relid;
	}
	return InvalidOid;
}

/*
 * The validation table the description names, where it can be the
 * model's (see the head of the file); else InvalidOid, with a NOTICE that
 * says why and how to give it again.  Looks at the system catalog only,
 * and locks nothing.
 */
static Oid
find_validation(const WalsDescribedRelation *table, const WalsCatalogRow *row, Oid owner,
				const char *display)
{
	const char *cols[2] = {row->user_col, row->item_col};
	Oid			relid;
	const char *why;

	if (table->name == NULL)
		return InvalidOid;
	if (table->schema != NULL)
	{
		relid = relation_in(table->schema, table->name);
		why = OidIsValid(relid) ? unreadable(relid, cols, 2, owner, "validation table") :
			psprintf("Its validation table %s, which its description names, does not exist here.",
					 quote_qualified_identifier(table->schema, table->name));
	}
	else
	{
		relid = validation_named_alone(table->name, row->schema, row->source, owner);
		why = OidIsValid(relid) ? unreadable(relid, cols, 2, owner, "validation table") :
			psprintf("Its description names its validation table \"%s\" alone, as wals 0.4.0 and 0.5.0 wrote it, and no relation of that name in schema \"%s\" or its source's schema belongs to the model's owner or to its source's owner.",
					 table->name, row->schema);
	}
	if (why == NULL)
		return relid;
	ereport(NOTICE,
			(errmsg("model \"%s\" is attached without its validation table", display),
			 errdetail("%s", why),
			 errhint("It serves as it is. To retrain it, give the table again with SELECT wals_retrain(%s, validation_table => ...), or pass validation => 0 to train without one.",
					 quote_literal_cstr(wals_model_argument(row->schema, row->model)))));
	return InvalidOid;
}

static void
already_exists(const char *display)
{
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("model \"%s\" already exists", display),
			 errhint("A model whose catalog row is there needs no attaching: serve it, or train it again with wals_train().")));
}

/*
 * wals_attach_model(model text) RETURNS void
 *
 * Make a model again of the factor tables named after it, there without
 * its catalog row (see the head of the file).  The name resolves as a new
 * model's does in wals_train: the schema given, or the first of
 * search_path.
 */
static Datum
attach_model_call(PG_FUNCTION_ARGS)
{
	WalsModelName mn;
	Oid			nsp;
	char	   *schema;
	char	   *display;
	Tables		t;
	Tables		again;
	WalsModelInfo info;
	WalsCatalogRow row;
	WalsDescribedRelation source;
	WalsDescribedRelation validation;
	int64		users;
	int64		items;
	AclResult	acl;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"model\" must not be null")));
	PreventCommandIfReadOnly("wals_attach_model()");
	PreventCommandDuringRecovery("wals_attach_model()");
	wals_model_name_parse(text_to_cstring(PG_GETARG_TEXT_PP(0)), "model", &mn);
	nsp = wals_model_new_schema(&mn);
	schema = get_namespace_name(nsp);
	display = wals_model_display(schema, mn.name);

	wals_spi_connect();
	if (wals_catalog_lookup(schema, mn.name, &info))
		already_exists(display);

	/* the caller's rights, before any lock */
	acl = pg_namespace_aclcheck(nsp, GetUserId(), ACL_USAGE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_SCHEMA, schema);
	find_tables(nsp, schema, mn.name, display, &t);

	/* CREATE on the schema, then the model's lock, then its tables' */
	if (wals_lock_model(schema, mn.name, &info, true))
		already_exists(display);
	LockRelationOid(t.user_rel, AccessShareLock);
	LockRelationOid(t.item_rel, AccessShareLock);
	find_tables(nsp, schema, mn.name, display, &again);
	if (again.user_rel != t.user_rel || again.item_rel != t.item_rel)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the factor tables of model \"%s\" were replaced while it was being attached",
						display),
				 errhint("Call wals_attach_model() again.")));
	/* no owner changes while the tables are locked */
	t = again;
	if (!wals_factor_table_in_form(t.user_rel, true) || !wals_factor_table_keyed(t.user_rel, true))
		not_in_form(t.user_rel, true);
	if (!wals_factor_table_in_form(t.item_rel, false) || !wals_factor_table_keyed(t.item_rel, false))
		not_in_form(t.item_rel, false);

	memset(&row, 0, sizeof(row));
	wals_description_parse(description(t.user_rel, display), display, &row,
						   &source, &validation);
	users = check_rows(t.user_rel, true, row.params.factors, t.owner, display);
	items = check_rows(t.item_rel, false, row.params.factors, t.owner, display);

	row.schema = schema;
	row.model = mn.name;
	row.source = find_source(&source, &row, t.owner, display);
	/* a changed column the source no longer has is forgotten, as a source is */
	if (row.changed_col != NULL &&
		(!OidIsValid(row.source) || get_attnum(row.source, row.changed_col) <= 0))
		row.changed_col = NULL;
	row.validation_table = find_validation(&validation, &row, t.owner, display);
	row.validation_owner = OidIsValid(row.validation_table) ?
		wals_relation_owner(row.validation_table) : InvalidOid;
	row.user_rel = t.user_rel;
	row.item_rel = t.item_rel;
	row.owner = t.owner;
	row.version = wals_next_version();
	wals_catalog_write(&row);
	ereport(NOTICE,
			(errmsg("model \"%s\" is attached: " INT64_FORMAT " users, " INT64_FORMAT " items, %d factors",
					display, users, items, row.params.factors)));
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
wals_attach_model(PG_FUNCTION_ARGS)
{
	return wals_call(attach_model_call, fcinfo, "wals_attach_model", true);
}
