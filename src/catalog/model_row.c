/*
 * model_row.c
 *	  A model's row of wals_models, found through the catalog's primary key
 *	  and read in place.
 *
 * Every call that serves a model reads its catalog row first.  As a query,
 * that row cost a new connection's first call more than all the rest of it:
 * parsing and planning a statement on wals_models looks up its columns'
 * types, operators, statistics and indexes in the system catalogs, which a
 * new backend has not cached yet.  So the row is read as PostgreSQL reads
 * its own catalogs: an index scan of (schema, model) with the call's
 * snapshot, the caller's right to read the table checked as a query would.
 *
 * Columns are found by name and type, once per backend and again after the
 * table changes, so that the rows of an older version, read by a step of an
 * update of wals, simply lack the columns added since.  Nothing read is
 * trusted: a value wals never writes is noted in info->invalid, for
 * wals_model_check.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "commands/extension.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "wals_catalog.h"

/* The columns read, in the order of fill_info; those from REQUIRED on may be absent. */
enum
{
	COL_SCHEMA, COL_MODEL, COL_VERSION, COL_FACTORS, COL_FEEDBACK, COL_SOURCE, COL_USER_COL,
	COL_ITEM_COL, COL_RATING_COL, COL_REGULARIZATION, COL_ALPHA, COL_UNOBSERVED_WEIGHT,
	COL_SOLVER, COL_CG_STEPS, COL_USER_FACTORS, COL_ITEM_FACTORS,
	REQUIRED,
	COL_REG_EXPONENT = REQUIRED, COL_OWNER, COL_SERVING_VERSION,
	NCOLUMNS
};

static const struct
{
	const char *name;
	Oid			type;
}			columns[NCOLUMNS] = {
	{"schema", NAMEOID}, {"model", TEXTOID}, {"version", INT8OID}, {"factors", INT4OID},
	{"feedback", TEXTOID}, {"source", REGCLASSOID}, {"user_col", NAMEOID},
	{"item_col", NAMEOID}, {"rating_col", NAMEOID}, {"regularization", FLOAT4OID},
	{"alpha", FLOAT4OID}, {"unobserved_weight", FLOAT4OID}, {"solver", TEXTOID},
	{"cg_steps", INT4OID}, {"user_factors", REGCLASSOID}, {"item_factors", REGCLASSOID},
	{"regularization_exponent", FLOAT4OID}, {"owner", REGROLEOID},
	{"serving_version", INT8OID},
};

/* What this backend knows of the table; valid until a change of either relation. */
static struct
{
	bool		valid;
	Oid			relid;
	Oid			index;
	Oid			key_collation[2];
	AttrNumber	attnum[NCOLUMNS];	/* 0: absent */
}			known;
static bool callback_registered = false;

static void
forget_known(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == known.relid || relid == known.index)
		known.valid = false;
}

static void
catalog_broken(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the model catalog wals_models is not as wals made it"),
			 errdetail("%s", detail),
			 errhint("Reinstall the extension: DROP EXTENSION wals and CREATE EXTENSION wals.")));
}

/* Find the columns and the primary key of rel, the open wals_models. */
static void
learn(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			index;
	Relation	irel;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(forget_known, (Datum) 0);
		callback_registered = true;
	}
	known.valid = false;
	for (int c = 0; c < NCOLUMNS; c++)
	{
		known.attnum[c] = 0;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);

			if (att->attisdropped || strcmp(NameStr(att->attname), columns[c].name) != 0)
				continue;
			if (att->atttypid != columns[c].type)
				catalog_broken(psprintf("Column \"%s\" has type %s, not %s.", columns[c].name,
										format_type_be(att->atttypid),
										format_type_be(columns[c].type)));
			known.attnum[c] = att->attnum;
		}
		if (known.attnum[c] == 0 && c < REQUIRED)
			catalog_broken(psprintf("Column \"%s\" is missing.", columns[c].name));
	}
	known.relid = RelationGetRelid(rel);
	index = RelationGetPrimaryKeyIndex(rel);
	if (!OidIsValid(index) && creating_extension)
	{
		/* a step of an update of wals, before the key it adds: read it all */
		known.index = InvalidOid;
		known.key_collation[0] = C_COLLATION_OID;
		known.key_collation[1] = DEFAULT_COLLATION_OID;
		known.valid = true;
		return;
	}
	if (!OidIsValid(index))
		catalog_broken("It has no primary key.");
	irel = index_open(index, AccessShareLock);
	if (irel->rd_index->indnkeyatts != 2 ||
		irel->rd_index->indkey.values[0] != known.attnum[COL_SCHEMA] ||
		irel->rd_index->indkey.values[1] != known.attnum[COL_MODEL] ||
		irel->rd_rel->relam != BTREE_AM_OID)
		catalog_broken("Its primary key is not a B-tree of (schema, model).");
	known.key_collation[0] = irel->rd_indcollation[0];
	known.key_collation[1] = irel->rd_indcollation[1];
	index_close(irel, AccessShareLock);
	known.index = index;
	known.valid = true;
}

/*
 * wals_models, opened for reading as a query of the caller would open it:
 * its right to read checked first, and a table that row security applies
 * to refused, since only a query could apply the policies.
 */
static Relation
open_catalog(void)
{
	Oid			relid = get_relname_relid("wals_models", wals_extension_schema());
	Relation	rel;
	AclResult	acl;

	if (!OidIsValid(relid))
		catalog_broken("The table is missing.");
	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, "wals_models");
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("row security on wals_models is not supported"),
				 errhint("Every role may read the model catalog; keep a model private with the rights on its schema and factor tables.")));
	rel = table_open(relid, AccessShareLock);
	if (!known.valid || known.relid != relid)
		learn(rel);
	return rel;
}

/* Note the first value of the row that is not one wals writes. */
static void
bad_value(WalsModelInfo *info, const char *what)
{
	if (info->invalid == NULL)
		info->invalid = pstrdup(what);
}

/*
 * Error out for a catalog row with a value wals never writes: every use of
 * a model but its drop checks this first, before the values size anything.
 */
void
wals_model_check(const WalsModelInfo *info)
{
	if (info->invalid != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("catalog row of model \"%s\" is invalid: %s", info->display, info->invalid),
				 errhint("Drop the model with wals_drop_model() and train it again.")));
}

/* Column c of the row; isnull also where the column is absent. */
static Datum
get(HeapTuple tuple, TupleDesc desc, int c, bool *isnull)
{
	if (known.attnum[c] == 0)
	{
		*isnull = true;
		return (Datum) 0;
	}
	return heap_getattr(tuple, known.attnum[c], desc, isnull);
}

/* Column c, noted as bad when null. */
static Datum
required(WalsModelInfo *info, HeapTuple tuple, TupleDesc desc, int c, bool *isnull)
{
	Datum		d = get(tuple, desc, c, isnull);

	if (*isnull)
		bad_value(info, psprintf("\"%s\" is null", columns[c].name));
	return d;
}

static int
int_value(WalsModelInfo *info, HeapTuple tuple, TupleDesc desc, int c, int min, int max)
{
	bool		isnull;
	int			v = DatumGetInt32(required(info, tuple, desc, c, &isnull));

	if (!isnull && (v < min || v > max))
		bad_value(info, psprintf("\"%s\" is %d", columns[c].name, v));
	return isnull ? min : v;
}

static float
real_value(WalsModelInfo *info, HeapTuple tuple, TupleDesc desc, int c)
{
	bool		isnull;
	float		v = DatumGetFloat4(required(info, tuple, desc, c, &isnull));

	if (!isnull && (!isfinite(v) || v < 0 || v > WALS_MAX_REAL_PARAM))
		bad_value(info, psprintf("\"%s\" is %g", columns[c].name, v));
	return isnull ? 0.0f : v;
}

static Oid
oid_value(WalsModelInfo *info, HeapTuple tuple, TupleDesc desc, int c)
{
	bool		isnull;
	Datum		d = required(info, tuple, desc, c, &isnull);

	return isnull ? InvalidOid : DatumGetObjectId(d);
}

/* A text or name column as a string: NULL when null. */
static char *
string_value(HeapTuple tuple, TupleDesc desc, int c)
{
	bool		isnull;
	Datum		d = get(tuple, desc, c, &isnull);

	if (isnull)
		return NULL;
	if (columns[c].type == NAMEOID)
		return pstrdup(NameStr(*DatumGetName(d)));
	return TextDatumGetCString(d);
}

/* As string_value, "" when null. */
static char *
text_value(HeapTuple tuple, TupleDesc desc, int c)
{
	char	   *s = string_value(tuple, desc, c);

	return s != NULL ? s : pstrdup("");
}

static void
fill_info(WalsModelInfo *info, HeapTuple tuple, TupleDesc desc)
{
	char	   *feedback;
	char	   *solver;
	int			word;
	bool		isnull;
	float		nu;
	Datum		d;

	memset(info, 0, sizeof(*info));
	info->schema = text_value(tuple, desc, COL_SCHEMA);
	info->name = text_value(tuple, desc, COL_MODEL);
	info->display = wals_model_display(info->schema, info->name);
	info->version = DatumGetInt64(required(info, tuple, desc, COL_VERSION, &isnull));
	info->factors = int_value(info, tuple, desc, COL_FACTORS, WALS_MIN_FACTORS, WALS_MAX_FACTORS);
	feedback = text_value(tuple, desc, COL_FEEDBACK);
	if (wals_word_parse(wals_feedback_words, feedback, &word))
		info->params.feedback = (WalsFeedback) word;
	else
		bad_value(info, psprintf("\"feedback\" is \"%s\"", feedback));
	d = get(tuple, desc, COL_SOURCE, &isnull);
	info->source = isnull ? InvalidOid : DatumGetObjectId(d);
	info->user_col = text_value(tuple, desc, COL_USER_COL);
	info->item_col = text_value(tuple, desc, COL_ITEM_COL);
	info->rating_col = string_value(tuple, desc, COL_RATING_COL);
	info->params.regularization = real_value(info, tuple, desc, COL_REGULARIZATION);
	info->params.alpha = real_value(info, tuple, desc, COL_ALPHA);
	info->params.w0 = real_value(info, tuple, desc, COL_UNOBSERVED_WEIGHT);
	solver = text_value(tuple, desc, COL_SOLVER);
	if (wals_word_parse(wals_solver_words, solver, &word))
		info->params.solver = (WalsSolver) word;
	else
		bad_value(info, psprintf("\"solver\" is \"%s\"", solver));
	info->params.cg_steps = int_value(info, tuple, desc, COL_CG_STEPS, WALS_MIN_CG_STEPS,
									  WALS_MAX_CG_STEPS);
	info->params.factors = info->factors;
	info->user_rel = oid_value(info, tuple, desc, COL_USER_FACTORS);
	info->item_rel = oid_value(info, tuple, desc, COL_ITEM_FACTORS);
	nu = DatumGetFloat4(get(tuple, desc, COL_REG_EXPONENT, &isnull));
	if (!isnull)
	{
		info->params.frequency_scaled = true;
		info->params.reg_exponent = nu;
		if (!isfinite(nu) || nu < 0 || nu > WALS_MAX_REG_EXPONENT)
			bad_value(info, psprintf("\"regularization_exponent\" is %g", nu));
	}
	/* null only while an update of wals reads the rows of an older version */
	d = get(tuple, desc, COL_OWNER, &isnull);
	info->owner = isnull ? InvalidOid : DatumGetObjectId(d);
	/* a refresh that changed the items serves them under a version of its own */
	d = get(tuple, desc, COL_SERVING_VERSION, &isnull);
	if (!isnull)
		info->version = DatumGetInt64(d);
}

/*
 * Fill infos with the rows of schema (and of model name, unless NULL), at
 * most max of them, read with the active snapshot: that of the call
 * (wals_call), so that a call reads the catalog row and the factor tables
 * it names as of one moment.  Returns how many were filled.
 */
static int
scan(const char *schema, const char *name, WalsModelInfo *infos, int max)
{
	Relation	rel = open_catalog();
	NameData	schema_key;
	ScanKeyData keys[2];
	SysScanDesc sscan;
	HeapTuple	tuple;
	int			n = 0;

	namestrcpy(&schema_key, schema);
	ScanKeyEntryInitialize(&keys[0], 0, known.attnum[COL_SCHEMA], BTEqualStrategyNumber,
						   InvalidOid, known.key_collation[0], F_NAMEEQ,
						   NameGetDatum(&schema_key));
	if (name != NULL)
		ScanKeyEntryInitialize(&keys[1], 0, known.attnum[COL_MODEL], BTEqualStrategyNumber,
							   InvalidOid, known.key_collation[1], F_TEXTEQ,
							   CStringGetTextDatum(name));
	sscan = systable_beginscan(rel, known.index, OidIsValid(known.index), GetActiveSnapshot(),
							   name != NULL ? 2 : 1, keys);
	while (n < max && HeapTupleIsValid(tuple = systable_getnext(sscan)))
	{
		CHECK_FOR_INTERRUPTS();
		fill_info(&infos[n++], tuple, RelationGetDescr(rel));
	}
	systable_endscan(sscan);
	table_close(rel, AccessShareLock);
	return n;
}

/* Fill info from the catalog row of schema.name; false if there is none. */
bool
wals_catalog_lookup(const char *schema, const char *name, WalsModelInfo *info)
{
	return scan(schema, name, info, 1) == 1;
}

/* The row of model name in the first of schemas (names) that has one. */
bool
wals_catalog_lookup_along(List *schemas, const char *name, WalsModelInfo *info)
{
	ListCell   *lc;

	foreach(lc, schemas)
	{
		if (scan(lfirst(lc), name, info, 1) == 1)
			return true;
	}
	return false;
}

/* Fill infos with the models of schemas (names), at most max; how many. */
int
wals_catalog_models_along(List *schemas, WalsModelInfo *infos, int max)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, schemas)
	{
		if (n == max)
			break;
		n += scan(lfirst(lc), NULL, infos + n, max - n);
	}
	return n;
}
