/*
 * catalog.c
 *	  The model catalog: model names, and reading and writing catalog rows.
 *
 * Models are schema objects.  A model's key is (schema, model), so two
 * roles working in their own schemas never take each other's names.  A name
 * is given as text, 'model' or 'schema.model', each part taken as written
 * (case kept); a part that holds a dot, or starts with a double quote, is
 * written in double quotes, with its quotes doubled.  A
 * qualified name means that schema; an unqualified one is looked up along
 * search_path when a model is served or dropped, as a table would be, and a
 * new model goes where CREATE TABLE would put it.
 *
 * The catalog is two ordinary tables of the extension, so that pg_dump and
 * transactions treat models like any other data.  Every role may read them;
 * only wals's own code writes them, as the extension's owner (roles.c),
 * after checking the caller's rights.  Even so nothing read from them is
 * trusted: each value is checked (wals_model_check) before it sizes an
 * allocation or chooses a code path, and relations are kept as regclass, their names looked up
 * from the OID when a statement needs them.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "wals_catalog.h"

/* The schema-qualified, quoted name of one of the extension's own tables. */
char *
wals_catalog_table(const char *table)
{
	return quote_qualified_identifier(get_namespace_name(wals_extension_schema()), table);
}

static void
invalid_name(const char *given, const char *what, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_NAME),
			 errmsg("invalid model name \"%s\" given as \"%s\"", given, what),
			 errdetail("%s", detail),
			 errhint("Write a model name as name or schema.name; put a part in double quotes when it contains a dot.")));
}

/*
 * The next part of a model name at *p, up to a dot or the end; *p moves
 * past it and past the dot.
 */
static char *
name_part(const char *given, const char *what, const char **p)
{
	StringInfoData part;
	const char *s = *p;

	initStringInfo(&part);
	if (*s == '"')
	{
		for (s++;; s++)
		{
			if (*s == '\0')
				invalid_name(given, what, "A double quote is not closed.");
			if (*s == '"')
			{
				if (s[1] != '"')
					break;
				s++;
			}
			appendStringInfoChar(&part, *s);
		}
		s++;
		if (*s != '.' && *s != '\0')
			invalid_name(given, what, "A quoted part must be followed by a dot or the end.");
	}
	else
	{
		for (; *s != '.' && *s != '\0'; s++)
			appendStringInfoChar(&part, *s);
	}
	if (part.len == 0)
		invalid_name(given, what, "A part of the name is empty.");
	if (*s == '.')
	{
		s++;
		if (*s == '\0')
			invalid_name(given, what, "The name ends with a dot.");
	}
	*p = s;
	return part.data;
}

/*
 * Split a model name as given into its schema (NULL if unqualified) and
 * name; what names the argument, for errors.
 */
void
wals_model_name_parse(const char *given, const char *what, WalsModelName *out)
{
	const char *p = given;
	char	   *first = name_part(given, what, &p);

	if (*p == '\0')
	{
		out->schema = NULL;
		out->name = first;
	}
	else
	{
		out->schema = first;
		out->name = name_part(given, what, &p);
		if (*p != '\0')
			invalid_name(given, what, "It has more than two parts.");
	}
	if ((int) strlen(out->name) > WALS_MAX_MODEL_NAME)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("model name \"%s\" is too long", out->name),
				 errdetail("Model names are at most %d bytes, so that \"<model>%s\" fits in an identifier.",
						   WALS_MAX_MODEL_NAME, WALS_USER_SUFFIX),
				 errhint("Pass a shorter name as \"%s\".", what)));
	if (out->schema != NULL && strlen(out->schema) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("schema name \"%s\" is too long", out->schema)));
}

/* One part of a model name, quoted so that wals_model_name_parse reads it back. */
static void
append_quoted(StringInfo buf, const char *part)
{
	appendStringInfoChar(buf, '"');
	for (const char *p = part; *p != '\0'; p++)
	{
		if (*p == '"')
			appendStringInfoChar(buf, '"');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '"');
}

/* The name of schema.name as a model argument that names exactly it. */
char *
wals_model_quoted(const char *schema, const char *name)
{
	StringInfoData buf;

	initStringInfo(&buf);
	append_quoted(&buf, schema);
	appendStringInfoChar(&buf, '.');
	append_quoted(&buf, name);
	return buf.data;
}

/* schema.name as messages show a model. */
char *
wals_model_display(const char *schema, const char *name)
{
	return psprintf("%s.%s", schema, name);
}

/*
 * The model name schema.name as an argument that names exactly it, each
 * part quoted only where it must be (see the head of the file), for hints.
 */
char *
wals_model_argument(const char *schema, const char *name)
{
	const char *parts[2] = {schema, name};
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < 2; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, '.');
		if (parts[i][0] == '"' || strchr(parts[i], '.') != NULL)
			append_quoted(&buf, parts[i]);
		else
			appendStringInfoString(&buf, parts[i]);
	}
	return buf.data;
}

/*
 * The schema of a model about to be created under a name as given: the
 * schema named, or where CREATE TABLE would put a table of that name.  A
 * model outlives the session, so a temporary schema is refused.
 */
Oid
wals_model_new_schema(const WalsModelName *mn)
{
	Oid			schema;

	if (mn->schema != NULL && strncmp(mn->schema, "pg_temp", 7) == 0)
		schema = InvalidOid;
	else if (mn->schema != NULL)
		schema = get_namespace_oid(mn->schema, false);
	else
		schema = RangeVarGetCreationNamespace(makeRangeVar(NULL, mn->name, -1));
	if (!OidIsValid(schema) || isAnyTempNamespace(schema))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("model \"%s\" cannot be temporary", mn->name),
				 errhint("Name a permanent schema in \"model\", or put one first in search_path.")));
	return schema;
}

/* The names of the schemas of search_path; temporary schemas hold no model. */
static List *
search_path_list(void)
{
	List	   *names = NIL;
	ListCell   *lc;

	foreach(lc, fetch_search_path(false))
	{
		Oid			nsp = lfirst_oid(lc);
		char	   *name;

		if (!isAnyTempNamespace(nsp) && (name = get_namespace_name(nsp)) != NULL)
			names = lappend(names, name);
	}
	return names;
}

/* The same, as a name[]. */
static Datum
search_path_names(void)
{
	List	   *path = search_path_list();
	Datum	   *names = palloc(sizeof(Datum) * Max(list_length(path), 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, path)
		names[n++] = CStringGetDatum(lfirst(lc));
	return PointerGetDatum(construct_array(names, n, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
}

/* A text or name value of row 0 of the last query, "" when null. */
static char *
text_value(int col)
{
	char	   *s = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col);

	return s != NULL ? s : pstrdup("");
}

/* The models in schema, or in the schemas of search_path (NULL), for hints. */
static char *
models_in(const char *schema)
{
	Oid			type = NAMEARRAYOID;
	Datum		path;
	char	   *list;

	if (schema != NULL)
	{
		Datum		name = DirectFunctionCall1(namein, CStringGetDatum(schema));

		path = PointerGetDatum(construct_array(&name, 1, NAMEOID, NAMEDATALEN, false,
											   TYPALIGN_CHAR));
	}
	else
		path = search_path_names();

	wals_spi_exec(psprintf("SELECT pg_catalog.string_agg(pg_catalog.quote_literal(schema OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) model), ', '"
						   " ORDER BY schema, model) FROM %s WHERE schema OPERATOR(pg_catalog.=) ANY ($1)",
						   wals_catalog_table("wals_models")),
				  1, &type, &path, SPI_OK_SELECT);
	list = text_value(1);
	return list != NULL ? list : "";
}

/* Whether schema nsp holds an ordinary table named name. */
static bool
has_table(Oid nsp, const char *name)
{
	Oid			relid = get_relname_relid(name, nsp);

	return OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_RELATION;
}

/* Whether schema nsp holds both factor tables of a model named name. */
static bool
has_factor_tables(Oid nsp, const char *name)
{
	return has_table(nsp, psprintf("%s%s", name, WALS_USER_SUFFIX)) &&
		has_table(nsp, psprintf("%s%s", name, WALS_ITEM_SUFFIX));
}

/*
 * The hint for a model not in the catalog whose factor tables are there,
 * as a dump of its schema alone (pg_dump -n) restores them: model
 * schema.name, name along search_path (schema NULL), or the first such
 * model along search_path (both NULL).  NULL when there are none.  Only
 * names are looked at: wals_attach_model checks the rest.
 */
char *
wals_unattached_hint(const char *schema, const char *name)
{
	char	   *found_schema = NULL;
	char	   *found_name = NULL;

	if (schema != NULL)
	{
		Oid			nsp = get_namespace_oid(schema, true);

		if (OidIsValid(nsp) && has_factor_tables(nsp, name))
		{
			found_schema = pstrdup(schema);
			found_name = pstrdup(name);
		}
	}
	else if (name != NULL)
	{
		List	   *path = fetch_search_path(false);
		ListCell   *lc;

		foreach(lc, path)
		{
			Oid			nsp = lfirst_oid(lc);

			if (isAnyTempNamespace(nsp) || !has_factor_tables(nsp, name))
				continue;
			found_schema = get_namespace_name(nsp);
			found_name = pstrdup(name);
			break;
		}
	}
	else
	{
		Oid			type = NAMEARRAYOID;
		Datum		path = search_path_names();
		int			suffix = (int) strlen(WALS_USER_SUFFIX);

		wals_spi_exec(psprintf("SELECT n.nspname::pg_catalog.text,"
							   " pg_catalog.left(c.relname::pg_catalog.text, %d)"
							   " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
							   " ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
							   " WHERE n.nspname OPERATOR(pg_catalog.=) ANY ($1)"
							   " AND c.relkind OPERATOR(pg_catalog.=) 'r'"
							   " AND pg_catalog.right(c.relname::pg_catalog.text, %d) OPERATOR(pg_catalog.=) '%s'"
							   " AND EXISTS (SELECT 1 FROM pg_catalog.pg_class i"
							   " WHERE i.relnamespace OPERATOR(pg_catalog.=) c.relnamespace"
							   " AND i.relkind OPERATOR(pg_catalog.=) 'r'"
							   " AND i.relname::pg_catalog.text OPERATOR(pg_catalog.=)"
							   " pg_catalog.concat(pg_catalog.left(c.relname::pg_catalog.text, %d), '%s'))"
							   " AND NOT EXISTS (SELECT 1 FROM %s m"
							   " WHERE m.schema OPERATOR(pg_catalog.=) n.nspname"
							   " AND m.model OPERATOR(pg_catalog.=) pg_catalog.left(c.relname::pg_catalog.text, %d))"
							   " ORDER BY pg_catalog.array_position($1, n.nspname), 2 LIMIT 1",
							   -suffix, suffix, WALS_USER_SUFFIX, -suffix, WALS_ITEM_SUFFIX,
							   wals_catalog_table("wals_models"), -suffix),
					  1, &type, &path, SPI_OK_SELECT);
		if (SPI_processed == 1)
		{
			found_schema = text_value(1);
			found_name = text_value(2);
		}
	}
	if (found_schema == NULL)
		return NULL;
	return psprintf("The factor tables of model \"%s\" are there without its catalog row, as a dump of schema \"%s\" alone restores them: attach them with SELECT wals_attach_model(%s).",
					wals_model_display(found_schema, found_name), found_schema,
					quote_literal_cstr(wals_model_argument(found_schema, found_name)));
}

/*
 * The hint of an error that refuses the caller a model it may not read:
 * what the model's owner grants, for the caller to serve it.  Its factor
 * tables are named as wals names them, which serving checks before it
 * reads them.
 */
char *
wals_model_grant_hint(const WalsModelInfo *info)
{
	const char *schema = quote_identifier(info->schema);
	const char *role = quote_identifier(GetUserNameFromId(GetUserId(), false));

	return psprintf("The model's owner%s grants what serving it needs: GRANT USAGE ON SCHEMA %s TO %s;"
					" GRANT SELECT ON %s, %s TO %s.",
					OidIsValid(info->owner) ?
					psprintf(", role %s,", wals_role_display(info->owner)) : "",
					schema, role,
					quote_qualified_identifier(info->schema,
											   psprintf("%s%s", info->name, WALS_USER_SUFFIX)),
					quote_qualified_identifier(info->schema,
											   psprintf("%s%s", info->name, WALS_ITEM_SUFFIX)),
					role);
}

/*
 * The schemas of search_path that exist, in order, including those the
 * caller may not use, which fetch_search_path leaves out.
 */
static List *
search_path_all(void)
{
	char	   *raw = pstrdup(namespace_search_path);
	List	   *names;
	List	   *schemas = NIL;
	ListCell   *lc;

	if (!SplitIdentifierString(raw, ',', &names))
		return NIL;
	foreach(lc, names)
	{
		char	   *name = lfirst(lc);
		Oid			nsp;

		if (strcmp(name, "$user") == 0)
			name = GetUserNameFromId(GetUserId(), false);
		nsp = get_namespace_oid(name, true);
		if (OidIsValid(nsp) && !isAnyTempNamespace(nsp))
			schemas = lappend(schemas, name);
	}
	return schemas;
}

/*
 * Error when the lookup of model name (NULL: of any model) along
 * search_path would have found one in a schema of search_path that the
 * caller may not use, which the lookup skips as PostgreSQL skips it for a
 * table: the caller is told that it lacks USAGE there, not that no model
 * exists.  The model's name and owner are those wals_models shows every
 * role.
 */
static void
check_unusable_schemas(const char *name)
{
	ListCell   *lc;

	foreach(lc, search_path_all())
	{
		char	   *schema = lfirst(lc);
		WalsModelInfo info;
		bool		found;

		if (pg_namespace_aclcheck(get_namespace_oid(schema, false), GetUserId(),
								  ACL_USAGE) == ACLCHECK_OK)
			continue;
		if (name != NULL)
			found = wals_catalog_lookup(schema, name, &info);
		else
			found = wals_catalog_models_along(list_make1(schema), &info, 1) == 1;
		if (found)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for schema %s", schema),
					 errdetail("Model \"%s\" is in schema \"%s\", which is on search_path, but you may not use that schema.",
							   info.display, schema),
					 errhint("%s", wals_model_grant_hint(&info))));
	}
}

/*
 * The error for a model that does not exist, with a hint that lists the
 * models of its schema, or (schema NULL) of the schemas of search_path;
 * a permission error instead where search_path holds it in a schema the
 * caller may not use; or, where its factor tables are there without a
 * catalog row, an error that says how to attach them.
 */
void
wals_no_such_model(const char *schema, const char *name)
{
	char	   *display = schema != NULL ? wals_model_display(schema, name) : pstrdup(name);
	char	   *models;
	char	   *where = schema != NULL ? psprintf("schema \"%s\"", schema) :
		pstrdup("the schemas of search_path");
	char	   *attach = wals_unattached_hint(schema, name);

	if (schema == NULL)
		check_unusable_schemas(name);
	if (attach != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", display),
				 errhint("%s", attach)));
	models = models_in(schema);
	if (models[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", display),
				 errhint("No model exists in %s: train one with wals_train().", where)));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("model \"%s\" does not exist", display),
			 errhint("Models in %s: %s.", where, models)));
}

/* The catalog row of the model a name given as what means. */
static void
lookup_given(const char *given, const char *what, WalsModelInfo *info)
{
	WalsModelName mn;

	wals_model_name_parse(given, what, &mn);
	if (mn.schema != NULL)
	{
		if (!wals_catalog_lookup(mn.schema, mn.name, info))
			wals_no_such_model(mn.schema, mn.name);
		return;
	}
	if (!wals_catalog_lookup_along(search_path_list(), mn.name, info))
		wals_no_such_model(NULL, mn.name);
}

/*
 * The catalog row of the model a call means: the one given; else the only
 * model in the schemas of search_path; else the wals.default_model setting;
 * else an error listing the models.  Nothing is locked.
 */
void
wals_model_resolve(text *model, WalsModelInfo *info)
{
	WalsModelInfo found[2];
	char	   *models;

	if (model != NULL)
	{
		lookup_given(text_to_cstring(model), "model", info);
		return;
	}
	if (wals_catalog_models_along(search_path_list(), found, 2) == 1)
	{
		*info = found[0];
		return;
	}
	if (wals_default_model != NULL && wals_default_model[0] != '\0')
	{
		lookup_given(wals_default_model, "wals.default_model", info);
		return;
	}
	models = models_in(NULL);
	if (models[0] == '\0')
		check_unusable_schemas(NULL);
	if (models[0] == '\0')
	{
		char	   *attach = wals_unattached_hint(NULL, NULL);

		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no model exists in the schemas of search_path"),
				 attach != NULL ? errhint("%s", attach) :
				 errhint("Train one with wals_train(), or pass model => 'schema.name'.")));
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("no model was given and more than one exists in the schemas of search_path"),
			 errhint("Pass model => one of %s, or set wals.default_model.", models)));
}

#define NCATALOG 47

/* The values of the catalog row's columns, in their order, as SPI takes them. */
typedef struct CatalogParams
{
	Oid			types[NCATALOG];
	Datum		values[NCATALOG];
	char		nulls[NCATALOG];
	int			n;
} CatalogParams;

static void
param(CatalogParams *c, Oid type, Datum value, bool isnull)
{
	Assert(c->n < NCATALOG);
	c->types[c->n] = type;
	c->values[c->n] = isnull ? (Datum) 0 : value;
	c->nulls[c->n] = isnull ? 'n' : ' ';
	c->n++;
}

/* The columns from schema to warm_start: the model and how it trained. */
static void
settings_params(CatalogParams *c, const WalsCatalogRow *row)
{
	const WalsParams *p = &row->params;

	param(c, NAMEOID, DirectFunctionCall1(namein, CStringGetDatum(row->schema)), false);
	param(c, TEXTOID, CStringGetTextDatum(row->model), false);
	param(c, OIDOID, ObjectIdGetDatum(row->source), !OidIsValid(row->source));
	param(c, TEXTOID, CStringGetTextDatum(row->user_col), false);
	param(c, TEXTOID, CStringGetTextDatum(row->item_col), false);
	param(c, TEXTOID, row->rating_col ? CStringGetTextDatum(row->rating_col) : (Datum) 0, row->rating_col == NULL);
	param(c, TEXTOID, CStringGetTextDatum(wals_feedback_name(p->feedback)), false);
	param(c, INT4OID, Int32GetDatum(p->factors), false);
	param(c, INT4OID, Int32GetDatum(row->iterations), false);
	param(c, INT4OID, Int32GetDatum(row->max_iterations), false);
	param(c, FLOAT4OID, Float4GetDatum(p->regularization), false);
	param(c, FLOAT4OID, Float4GetDatum(p->alpha), false);
	param(c, FLOAT4OID, Float4GetDatum(p->w0), false);
	param(c, TEXTOID, CStringGetTextDatum(wals_solver_name(p->solver)), false);
	param(c, INT4OID, Int32GetDatum(p->cg_steps), false);
	param(c, INT4OID, Int32GetDatum(row->seed), false);
	param(c, FLOAT4OID, Float4GetDatum((float) row->tolerance), row->tolerance < 0);
	param(c, BOOLOID, BoolGetDatum(row->warm_start), false);
}

/* The columns from users on: what it did, and the settings added since. */
static void
outcome_params(CatalogParams *c, const WalsCatalogRow *row)
{
	const WalsParams *p = &row->params;
	bool		validating = row->validation_metric != NULL;

	param(c, INT8OID, Int64GetDatum(row->users), false);
	param(c, INT8OID, Int64GetDatum(row->items), false);
	param(c, INT8OID, Int64GetDatum(row->ratings), false);
	param(c, FLOAT8OID, Float8GetDatum(row->loss), false);
	param(c, TEXTOID, CStringGetTextDatum(row->device), false);
	param(c, INT4OID, Int32GetDatum(row->workers), false);
	param(c, FLOAT8OID, wals_seconds_datum(row->load_s), false);
	param(c, FLOAT8OID, wals_seconds_datum(row->train_s), false);
	param(c, FLOAT8OID, wals_seconds_datum(row->store_s), false);
	param(c, FLOAT8OID, wals_seconds_datum(row->total_s), false);
	param(c, INT8OID, Int64GetDatum(row->version), false);
	param(c, OIDOID, ObjectIdGetDatum(row->user_rel), false);
	param(c, OIDOID, ObjectIdGetDatum(row->item_rel), false);
	param(c, TEXTOID, CStringGetTextDatum(GetUserNameFromId(GetUserId(), false)), false);
	param(c, TEXTOID, CStringGetTextDatum(row->accelerate), false);
	param(c, INT4OID, Int32GetDatum(p->block_size), p->solver != WALS_SUBSPACE);
	param(c, FLOAT4OID, Float4GetDatum(p->reg_exponent), !p->frequency_scaled);
	param(c, FLOAT4OID, Float4GetDatum(row->init_std), row->init_std < 0);
	param(c, FLOAT4OID, Float4GetDatum((float) row->validation), row->validation <= 0);
	param(c, OIDOID, ObjectIdGetDatum(row->validation_table), !OidIsValid(row->validation_table));
	param(c, OIDOID, ObjectIdGetDatum(row->validation_owner), !OidIsValid(row->validation_table));
	param(c, TEXTOID, validating ? CStringGetTextDatum(row->validation_metric) : (Datum) 0, !validating);
	param(c, INT4OID, Int32GetDatum(row->patience), !validating);
	param(c, INT4OID, Int32GetDatum(row->best_iteration), !validating);
	param(c, FLOAT8OID, Float8GetDatum(row->validation_score), !validating);
	param(c, OIDOID, ObjectIdGetDatum(row->owner), false);
	param(c, TIMESTAMPTZOID, TimestampTzGetDatum(row->trained_at), false);
	param(c, TEXTOID, row->changed_col ? CStringGetTextDatum(row->changed_col) : (Datum) 0,
		  row->changed_col == NULL);
	param(c, TEXTOID, row->changed_mark ? CStringGetTextDatum(row->changed_mark) : (Datum) 0,
		  row->changed_mark == NULL);
}

/* XᵀX of f factors as the catalog keeps it. */
bytea *
wals_gram_bytea(const float *G, int f)
{
	Size		len = sizeof(float) * f * f;
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), G, len);
	return b;
}

/* The rating counts of n items as the catalog keeps them. */
bytea *
wals_counts_bytea(const int32 *counts, int64 n)
{
	Size		len = sizeof(int32) * n;
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), counts, len);
	return b;
}

/*
 * The rating counts of n items the catalog keeps, or NULL where it keeps
 * none, or not n of them, or a negative one: counted again instead.
 */
int32 *
wals_counts_from_bytea(bytea *b, int64 n)
{
	Size		len = sizeof(int32) * n;
	int32	   *counts;

	if (b == NULL || VARSIZE_ANY_EXHDR(b) != len)
		return NULL;
	counts = palloc(Max(len, 1));
	memcpy(counts, VARDATA_ANY(b), len);
	for (int64 i = 0; i < n; i++)
		if (counts[i] < 0)
			return NULL;
	return counts;
}

/*
 * The Gram the catalog keeps, or NULL where it keeps none or one that is
 * not f x f finite floats (a row written by hand: read again from the
 * users instead).
 */
float *
wals_gram_from_bytea(bytea *b, int f)
{
	Size		len = sizeof(float) * f * f;
	float	   *G;

	if (b == NULL || VARSIZE_ANY_EXHDR(b) != len)
		return NULL;
	G = palloc(len);
	memcpy(G, VARDATA_ANY(b), len);
	for (int a = 0; a < f * f; a++)
		if (!isfinite(G[a]))
			return NULL;
	return G;
}

/*
 * Remove what wals_model_state keeps of the version of the model whose
 * schema and name are args[0..1], and of any version no catalog row names
 * (a row deleted by hand), as the catalog writer.
 */
static void
forget_state(Oid *types, Datum *args)
{
	wals_spi_exec(psprintf("DELETE FROM %s s WHERE s.version OPERATOR(pg_catalog.=) ANY"
						   " (SELECT m.version FROM %s m WHERE m.schema OPERATOR(pg_catalog.=) $1"
						   " AND m.model OPERATOR(pg_catalog.=) $2)"
						   " OR NOT EXISTS (SELECT FROM %s m WHERE m.version OPERATOR(pg_catalog.=) s.version)",
						   wals_catalog_table("wals_model_state"),
						   wals_catalog_table("wals_models"), wals_catalog_table("wals_models")),
				  2, types, args, SPI_OK_DELETE);
}

/*
 * Replace the catalog row of model row->schema.row->model with row, as the
 * extension's owner; the caller has checked that it may (wals_lock_model).
 * trained_by is the caller.  The one writer of wals_models, for a training
 * and for wals_attach_model alike.
 */
void
wals_catalog_write(const WalsCatalogRow *row)
{
	CatalogParams c = {0};
	char	   *query;
	WalsRoleSave save;

	settings_params(&c, row);
	outcome_params(&c, row);
	Assert(c.n == NCATALOG);

	wals_become_catalog_writer(&save);
	forget_state(c.types, c.values);
	wals_spi_exec(psprintf("DELETE FROM %s WHERE schema OPERATOR(pg_catalog.=) $1"
						   " AND model OPERATOR(pg_catalog.=) $2",
						   wals_catalog_table("wals_models")),
				  2, c.types, c.values, -1);
	query = psprintf("INSERT INTO %s (schema, model, source, user_col, item_col, rating_col,"
					 " feedback, factors, iterations, max_iterations, regularization, alpha,"
					 " unobserved_weight, solver, cg_steps, seed, tolerance, warm_start,"
					 " users, items, ratings, loss, device, workers, load_s, train_s,"
					 " store_s, total_s, version, user_factors, item_factors,"
					 " trained_by, accelerate, block_size, regularization_exponent, init_std,"
					 " validation, validation_table, validation_owner, validation_metric,"
					 " patience, best_iteration, validation_score, owner, trained_at,"
					 " changed_col, changed_mark)"
					 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
					 " $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27,"
					 " $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40,"
					 " $41, $42, $43, $44, $45, $46, $47)",
					 wals_catalog_table("wals_models"));
	if (wals_sql(query, c.n, c.types, c.values, c.nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "wals: could not write the catalog row of model \"%s\"",
			 wals_model_display(row->schema, row->model));
	wals_unbecome(&save);
	if (row->user_gram != NULL || row->item_counts != NULL)
		wals_catalog_keep_state(row->schema, row->model,
								row->user_gram ? wals_gram_bytea(row->user_gram, row->params.factors) : NULL,
								row->item_counts ? wals_counts_bytea(row->item_counts, row->items) : NULL,
								false);
}

/*
 * Keep for the current version of model schema.name what its next refresh
 * needs (see the update script of 0.7.0): user_gram and item_counts where
 * not NULL, the version's others otherwise, but with items_changed no
 * counts kept before (they would name other items).  As the catalog
 * writer.
 */
void
wals_catalog_keep_state(const char *schema, const char *name, bytea *user_gram,
						bytea *item_counts, bool items_changed)
{
	Oid			types[5] = {NAMEOID, TEXTOID, BOOLOID, BYTEAOID, BYTEAOID};
	Datum		args[5];
	char		nulls[5] = "     ";
	WalsRoleSave save;

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(schema));
	args[1] = CStringGetTextDatum(name);
	args[2] = BoolGetDatum(items_changed);
	args[3] = PointerGetDatum(user_gram);
	nulls[3] = user_gram == NULL ? 'n' : ' ';
	args[4] = PointerGetDatum(item_counts);
	nulls[4] = item_counts == NULL ? 'n' : ' ';
	wals_become_catalog_writer(&save);
	if (wals_sql(psprintf("UPDATE %s SET user_gram = COALESCE($4, user_gram),"
						  " item_counts = CASE WHEN $5 IS NOT NULL THEN $5 WHEN $3 THEN NULL"
						  " ELSE item_counts END"
						  " WHERE version OPERATOR(pg_catalog.=) ANY (SELECT m.version FROM %s m"
						  " WHERE m.schema OPERATOR(pg_catalog.=) $1 AND m.model OPERATOR(pg_catalog.=) $2)",
						  wals_catalog_table("wals_model_state"), wals_catalog_table("wals_models")),
				 5, types, args, nulls, false, 0) != SPI_OK_UPDATE ||
		(SPI_processed == 0 &&
		 wals_sql(psprintf("INSERT INTO %s (version, user_gram, item_counts)"
						   " SELECT m.version, $4, $5 FROM %s m"
						   " WHERE m.schema OPERATOR(pg_catalog.=) $1 AND m.model OPERATOR(pg_catalog.=) $2",
						   wals_catalog_table("wals_model_state"), wals_catalog_table("wals_models")),
				  5, types, args, nulls, false, 0) != SPI_OK_INSERT))
		elog(ERROR, "wals: could not keep the state of model \"%s\"",
			 wals_model_display(schema, name));
	wals_unbecome(&save);
}

/* Remove the catalog row of a model, its logs and the image of its items. */
void
wals_catalog_delete(const WalsModelInfo *info)
{
	Oid			types[2] = {NAMEOID, TEXTOID};
	Datum		args[2];
	WalsRoleSave save;

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(info->schema));
	args[1] = CStringGetTextDatum(info->name);
	wals_become_catalog_writer(&save);
	forget_state(types, args);
	wals_image_forget(info->item_rel);
	wals_spi_exec(psprintf("DELETE FROM %s WHERE schema OPERATOR(pg_catalog.=) $1"
						   " AND model OPERATOR(pg_catalog.=) $2",
						   wals_catalog_table("wals_training_log")),
				  2, types, args, SPI_OK_DELETE);
	wals_spi_exec(psprintf("DELETE FROM %s WHERE schema OPERATOR(pg_catalog.=) $1"
						   " AND model OPERATOR(pg_catalog.=) $2",
						   wals_catalog_table("wals_tuning_log")),
				  2, types, args, SPI_OK_DELETE);
	wals_spi_exec(psprintf("DELETE FROM %s WHERE schema OPERATOR(pg_catalog.=) $1"
						   " AND model OPERATOR(pg_catalog.=) $2",
						   wals_catalog_table("wals_models")),
				  2, types, args, SPI_OK_DELETE);
	wals_unbecome(&save);
}

/*
 * Add delta to the users of a model whose user factor table
 * wals_refresh_users changed in place, so that wals_models goes on
 * counting the users the model has factors for, and forget the Gram of
 * their factors it kept (the next wals_refresh that needs it reads it
 * again).  The model's version, and with it every cache of the model,
 * stays.
 */
void
wals_catalog_add_users(const WalsModelInfo *info, int64 delta)
{
	Oid			types[3] = {NAMEOID, TEXTOID, INT8OID};
	Datum		args[3];
	WalsRoleSave save;

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(info->schema));
	args[1] = CStringGetTextDatum(info->name);
	args[2] = Int64GetDatum(delta);
	wals_become_catalog_writer(&save);
	wals_spi_exec(psprintf("UPDATE %s SET users = users OPERATOR(pg_catalog.+) $3"
						   " WHERE schema OPERATOR(pg_catalog.=) $1"
						   " AND model OPERATOR(pg_catalog.=) $2",
						   wals_catalog_table("wals_models")),
				  3, types, args, SPI_OK_UPDATE);
	wals_spi_exec(psprintf("UPDATE %s SET user_gram = NULL WHERE version OPERATOR(pg_catalog.=) ANY"
						   " (SELECT m.version FROM %s m WHERE m.schema OPERATOR(pg_catalog.=) $1"
						   " AND m.model OPERATOR(pg_catalog.=) $2)",
						   wals_catalog_table("wals_model_state"),
						   wals_catalog_table("wals_models")),
				  2, types, args, SPI_OK_UPDATE);
	wals_unbecome(&save);
}

/*
 * What wals_model_state keeps of the current version of model
 * schema.name, each NULL where it keeps none (see the update script of
 * 0.7.0), and the model's users from its catalog row; false where there
 * is no such row.  Read as the catalog writer: the table is wals's alone.
 */
bool
wals_catalog_state(const char *schema, const char *name, bytea **user_gram, bytea **item_counts,
				   int64 *users)
{
	Oid			types[2] = {NAMEOID, TEXTOID};
	Datum		key[2];
	bool		isnull;
	Datum		d;
	WalsRoleSave save;
	bool		found;

	key[0] = DirectFunctionCall1(namein, CStringGetDatum(schema));
	key[1] = CStringGetTextDatum(name);
	wals_become_catalog_writer(&save);
	found = wals_sql(psprintf("SELECT s.user_gram, s.item_counts, m.users FROM %s m"
							  " LEFT JOIN %s s ON s.version OPERATOR(pg_catalog.=) m.version"
							  " WHERE m.schema OPERATOR(pg_catalog.=) $1"
							  " AND m.model OPERATOR(pg_catalog.=) $2",
							  wals_catalog_table("wals_models"),
							  wals_catalog_table("wals_model_state")),
					 2, types, key, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1;
	wals_unbecome(&save);
	if (!found)
		return false;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	*user_gram = isnull ? NULL : DatumGetByteaPCopy(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	*item_counts = isnull ? NULL : DatumGetByteaPCopy(d);
	*users = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	return true;
}

/*
 * A new model version: a version is never reused, even after a drop, so
 * serving caches compare versions only.
 */
int64
wals_next_version(void)
{
	bool		isnull;
	int64		version;
	WalsRoleSave save;
	Oid			type = REGCLASSOID;
	Datum		seq = ObjectIdGetDatum(get_relname_relid("wals_model_version_seq",
														 wals_extension_schema()));

	wals_become_catalog_writer(&save);
	wals_spi_exec("SELECT pg_catalog.nextval($1)", 1, &type, &seq, SPI_OK_SELECT);
	version = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 1, &isnull));
	wals_unbecome(&save);
	return version;
}
