/*
 * model.c
 *	  The model catalog: finding, resolving, locking and dropping models.
 *
 * The catalog is two ordinary tables of the extension, read and written
 * through SPI with the caller's privileges, so that pg_dump, row-level
 * security and transactions treat models like any other data.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "wals.h"

PG_FUNCTION_INFO_V1(wals_drop_model);

/* First key of the advisory locks that serialize trainings of one model. */
#define WALS_LOCK_CLASS		0x57414c53

/* Run a query with parameters, none null; expected is an SPI result or -1. */
void
wals_spi_exec(const char *query, int nargs, const Oid *types,
			  const Datum *values, int expected)
{
	int			rc = SPI_execute_with_args(query, nargs, (Oid *) types,
										   (Datum *) values, NULL, false, 0);

	if (rc < 0 || (expected >= 0 && rc != expected))
		elog(ERROR, "wals: query \"%s\" failed: %s", query, SPI_result_code_string(rc));
}

/* The schema wals is installed in (PostgreSQL 15 exports no lookup for it). */
static Oid
extension_schema(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			schema = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("wals"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!OidIsValid(schema))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"wals\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION wals.")));
	return schema;
}

/* The schema-qualified, quoted name of one of the extension's own tables. */
char *
wals_catalog_table(const char *table)
{
	return quote_qualified_identifier(get_namespace_name(extension_schema()), table);
}

/* Serialize trainings and drops of one model until the transaction ends. */
void
wals_lock_model(const char *name)
{
	Datum		arg = CStringGetTextDatum(name);
	Oid			type = TEXTOID;

	wals_spi_exec(psprintf("SELECT pg_catalog.pg_advisory_xact_lock(%d, pg_catalog.hashtext($1))",
						   WALS_LOCK_CLASS),
				  1, &type, &arg, SPI_OK_SELECT);
}

static char *
column_text(int col)
{
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col);
}

static float
column_float4(int col)
{
	bool		isnull;

	return DatumGetFloat4(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull));
}

#define MODEL_COLUMNS "version, factors, feedback, source, user_col, item_col, factor_schema," \
	" user_factors, item_factors, rating_col, regularization, alpha, unobserved_weight," \
	" solver, cg_steps, name"

/*
 * Serving reads the catalog on every call, so the two queries it needs are
 * planned once per backend and per schema of the extension.
 */
static Oid	plans_schema = InvalidOid;
static SPIPlanPtr by_name_plan = NULL;
static SPIPlanPtr any_two_plan = NULL;

/* A plan prepared and kept for the life of the backend. */
SPIPlanPtr
wals_keep_plan(const char *query, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(query, nargs, types);

	if (plan == NULL)
		elog(ERROR, "wals: could not prepare \"%s\": %s", query, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "wals: could not keep the plan of \"%s\"", query);
	return plan;
}

static void
prepare_catalog_plans(void)
{
	Oid			schema = extension_schema();
	char	   *table;
	Oid			type = TEXTOID;

	if (schema == plans_schema && by_name_plan != NULL)
		return;
	if (by_name_plan != NULL)
		SPI_freeplan(by_name_plan);
	if (any_two_plan != NULL)
		SPI_freeplan(any_two_plan);
	by_name_plan = any_two_plan = NULL;
	table = quote_qualified_identifier(get_namespace_name(schema), "wals_models");
	by_name_plan = wals_keep_plan(psprintf("SELECT " MODEL_COLUMNS " FROM %s WHERE name OPERATOR(pg_catalog.=) $1",
									  table), 1, &type);
	any_two_plan = wals_keep_plan(psprintf("SELECT " MODEL_COLUMNS " FROM %s LIMIT 2", table), 0, NULL);
	plans_schema = schema;
}

static void
run_plan(SPIPlanPtr plan, Datum *values)
{
	int			rc = SPI_execute_plan(plan, values, NULL, false, 0);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "wals: reading the model catalog failed: %s", SPI_result_code_string(rc));
}

/* Fill info from the first row of the last query, a MODEL_COLUMNS list. */
static void
fill_info(WalsModelInfo *info)
{
	bool		isnull;
	char	   *solver;

	info->name = column_text(16);
	info->version = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	info->factors = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	info->feedback = column_text(3);
	info->source = column_text(4);
	info->user_col = column_text(5);
	info->item_col = column_text(6);
	info->factor_schema = column_text(7);
	info->user_factors = column_text(8);
	info->item_factors = column_text(9);
	info->rating_col = column_text(10);
	info->user_table = quote_qualified_identifier(info->factor_schema, info->user_factors);
	info->item_table = quote_qualified_identifier(info->factor_schema, info->item_factors);

	solver = column_text(14);
	info->params.feedback = strcmp(info->feedback, "explicit") == 0 ? WALS_EXPLICIT : WALS_IMPLICIT;
	info->params.solver = strcmp(solver, "cholesky") == 0 ? WALS_CHOLESKY : WALS_CG;
	info->params.factors = info->factors;
	info->params.cg_steps = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 15, &isnull));
	info->params.regularization = column_float4(11);
	info->params.alpha = column_float4(12);
	info->params.w0 = column_float4(13);
}

/* Fill info from the catalog row of model name; false if there is none. */
bool
wals_model_lookup(const char *name, WalsModelInfo *info)
{
	Datum		arg = CStringGetTextDatum(name);

	prepare_catalog_plans();
	run_plan(by_name_plan, &arg);
	if (SPI_processed == 0)
		return false;
	fill_info(info);
	return true;
}

/* The names of all models, comma-separated, for hints. */
static char *
model_list(void)
{
	StringInfoData list;

	wals_spi_exec(psprintf("SELECT pg_catalog.string_agg(pg_catalog.quote_literal(name), ', ' ORDER BY name) FROM %s",
						   wals_catalog_table("wals_models")),
				  0, NULL, NULL, SPI_OK_SELECT);
	initStringInfo(&list);
	appendStringInfoString(&list, column_text(1) ? column_text(1) : "");
	return list.data;
}

static void
no_such_model(const char *name)
{
	char	   *models = model_list();

	if (models[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name),
				 errhint("No model exists yet: train one with wals_train().")));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("model \"%s\" does not exist", name),
			 errhint("Existing models: %s.", models)));
}

/*
 * The catalog row of the model a serving call means: the one given; else
 * the only model; else the wals.default_model setting; else an error
 * listing the models.
 */
static void
resolve_model(text *model, WalsModelInfo *info)
{
	char	   *name;
	char	   *models;

	if (model != NULL)
		name = text_to_cstring(model);
	else
	{
		prepare_catalog_plans();
		run_plan(any_two_plan, NULL);
		if (SPI_processed == 1)
		{
			fill_info(info);
			return;
		}
		if (wals_default_model == NULL || wals_default_model[0] == '\0')
		{
			models = model_list();
			if (models[0] == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("no model exists"),
						 errhint("Train one with wals_train().")));
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("no model was given and more than one exists"),
					 errhint("Pass model => one of %s, or set wals.default_model.", models)));
		}
		name = wals_default_model;
	}
	if (!wals_model_lookup(name, info))
		no_such_model(name);
}

/*
 * Lock one factor table of the model for reading, until the transaction
 * ends, and return its OID.  Waiting here for a retraining that replaces the
 * table ends with the new table: the name is looked up again after the wait.
 */
static Oid
lock_table(const WalsModelInfo *info, const char *table)
{
	Oid			relid = RangeVarGetRelid(makeRangeVar(info->factor_schema, (char *) table, -1),
										 AccessShareLock, true);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("factor table \"%s\" of model \"%s\" does not exist",
						quote_qualified_identifier(info->factor_schema, table), info->name),
				 errhint("Train the model again with wals_train(), or remove it with wals_drop_model().")));
	return relid;
}

/*
 * A transaction-level snapshot taken before a retraining committed still
 * sees the previous catalog row, but the factor tables under the model's
 * names are the new ones, and their rows are invisible to it: it would serve
 * an empty model.  Refuse, as PostgreSQL refuses other concurrent updates
 * under REPEATABLE READ.
 */
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
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access to model \"%s\" due to a concurrent retraining",
						info->name),
				 errhint("Retry the transaction.")));
}

/*
 * The name of the model a call means, resolved as serving resolves it, with
 * nothing locked: for callers that must take the model's training lock
 * before its tables' locks.
 */
char *
wals_model_name(text *model)
{
	WalsModelInfo info;

	resolve_model(model, &info);
	return info.name;
}

/*
 * The factor tables a catalog row was seen to name while they were locked,
 * per model: while the row's version and the tables under its names are
 * still these, the row is current.  A retraining draws a new version and
 * creates new tables, so a match cannot be stale.
 */
typedef struct ConfirmedModel
{
	char		name[NAMEDATALEN];
	int64		version;
	Oid			user_rel;
	Oid			item_rel;
} ConfirmedModel;

#define WALS_CONFIRMED_MODELS 16
static ConfirmedModel confirmed[WALS_CONFIRMED_MODELS];
static int	next_confirmed;

static bool
is_confirmed(const WalsModelInfo *info)
{
	for (int i = 0; i < WALS_CONFIRMED_MODELS; i++)
		if (confirmed[i].version == info->version && confirmed[i].user_rel == info->user_rel &&
			confirmed[i].item_rel == info->item_rel && strcmp(confirmed[i].name, info->name) == 0)
			return true;
	return false;
}

static void
confirm(const WalsModelInfo *info)
{
	ConfirmedModel *c = &confirmed[next_confirmed];

	strlcpy(c->name, info->name, sizeof(c->name));
	c->version = info->version;
	c->user_rel = info->user_rel;
	c->item_rel = info->item_rel;
	next_confirmed = (next_confirmed + 1) % WALS_CONFIRMED_MODELS;
}

/*
 * Resolve and look up the model a serving call names, and lock its factor
 * tables for reading.  A reader that had to wait for a retraining to commit
 * must take that retraining's version, not the one it read before waiting,
 * or it would score new user factors against cached item factors of the
 * previous version: unless the tables it locked are those this backend
 * already saw under the row's version, the catalog row is read again once
 * the locks are held.  Must run inside an SPI connection.
 */
WalsModelInfo *
wals_model_get(text *model)
{
	WalsModelInfo *info = palloc0(sizeof(WalsModelInfo));

	resolve_model(model, info);
	for (;;)
	{
		WalsModelInfo *locked = palloc0(sizeof(WalsModelInfo));

		info->user_rel = lock_table(info, info->user_factors);
		info->item_rel = lock_table(info, info->item_factors);
		if (is_confirmed(info))
			locked = info;
		else if (!wals_model_lookup(info->name, locked))
			no_such_model(info->name);
		else
		{
			locked->user_rel = info->user_rel;
			locked->item_rel = info->item_rel;
		}
		if (strcmp(locked->factor_schema, info->factor_schema) == 0 &&
			strcmp(locked->user_factors, info->user_factors) == 0 &&
			strcmp(locked->item_factors, info->item_factors) == 0)
		{
			check_snapshot_sees(locked, locked->user_rel);
			check_snapshot_sees(locked, locked->item_rel);
			if (locked != info)
				confirm(locked);
			return locked;
		}
		info = locked;
	}
}

/*
 * Copy one stored factor vector into out, refusing a value that is not a
 * real[] of f elements without nulls: the tables are ordinary tables, and
 * a hand edit must not become a crash or a silently wrong score.
 */
void
wals_read_factors(Datum value, int f, float *out, const char *table)
{
	ArrayType  *array = DatumGetArrayTypeP(value);

	if (ARR_NDIM(array) != 1 || ARR_DIMS(array)[0] != f || ARR_HASNULL(array) ||
		ARR_ELEMTYPE(array) != FLOAT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("factor table %s holds a row that is not a real[] of %d elements", table, f),
				 errhint("Train the model again with wals_train() and warm_start => false.")));
	memcpy(out, ARR_DATA_PTR(array), sizeof(float) * f);
}

/* Drop the factor tables of a model, those that still exist. */
void
wals_drop_factor_tables(const WalsModelInfo *info)
{
	wals_spi_exec(psprintf("DROP TABLE IF EXISTS %s, %s", info->user_table, info->item_table),
				  0, NULL, NULL, -1);
}

/*
 * wals_drop_model(model text) RETURNS void
 *
 * Remove a model: its factor tables, its catalog row and its training log.
 */
Datum
wals_drop_model(PG_FUNCTION_ARGS)
{
	char	   *name;
	WalsModelInfo info;
	Datum		arg;
	Oid			type = TEXTOID;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"model\" must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	arg = CStringGetTextDatum(name);

	SPI_connect();
	wals_lock_model(name);
	if (!wals_model_lookup(name, &info))
		no_such_model(name);
	wals_drop_factor_tables(&info);
	wals_spi_exec(psprintf("DELETE FROM %s WHERE model OPERATOR(pg_catalog.=) $1",
						   wals_catalog_table("wals_training_log")),
				  1, &type, &arg, SPI_OK_DELETE);
	wals_spi_exec(psprintf("DELETE FROM %s WHERE name OPERATOR(pg_catalog.=) $1",
						   wals_catalog_table("wals_models")),
				  1, &type, &arg, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_VOID();
}
