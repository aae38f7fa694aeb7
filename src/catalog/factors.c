/*
 * factors.c
 *	  Reading a model's factor tables back, trusting nothing.
 *
 * The factor tables are ordinary tables of the model's owner, who may
 * change their columns' types, drop their constraints or write any value
 * into them, and a superuser or an application role may then serve the
 * model.  So every value is checked where it is read: the column's type,
 * then the array's shape, nulls, and finite numbers.  Each failure is an
 * error that names the table and says to retrain, never a crash or a
 * silently wrong score.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "wals_catalog.h"

static void
bad_table(const WalsModelInfo *info, Oid relid, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("factor table %s of model \"%s\" is not in the form wals wrote",
					wals_relation_name(relid), info->display),
			 errdetail("%s", detail),
			 errhint("Train the model again with wals_train().")));
}

static void
bad_value(const WalsModelInfo *info, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("a factor table of model \"%s\" holds a value wals did not write", info->display),
			 errdetail("%s", detail),
			 errhint("Train the model again with wals_train().")));
}

/* Column name of relid must exist with type type. */
static void
check_column(const WalsModelInfo *info, Oid relid, const char *name, Oid type)
{
	AttrNumber	attnum = get_attnum(relid, name);
	Oid			actual;

	if (attnum <= 0)
		bad_table(info, relid, psprintf("It has no column \"%s\".", name));
	actual = get_atttype(relid, attnum);
	if (actual != type)
		bad_table(info, relid, psprintf("Column \"%s\" has type %s instead of %s.", name,
										format_type_be(actual), format_type_be(type)));
}

/*
 * Error when relid has a rule.  wals's statements on a factor table are
 * written to do one thing (replace the rows, read them); a rule makes them
 * do another, or nothing, behind wals's back: refused, naming it, where
 * every other addition of the owner's (an index, a policy, a trigger) runs
 * as the owner and is kept (roles.c).
 */
void
wals_check_no_rules(const WalsModelInfo *info, Oid relid)
{
	Relation	rewrite = table_open(RewriteRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *rule = NULL;

	ScanKeyInit(&key, Anum_pg_rewrite_ev_class, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rewrite, RewriteRelRulenameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		rule = pstrdup(NameStr(((Form_pg_rewrite) GETSTRUCT(tuple))->rulename));
	systable_endscan(scan);
	table_close(rewrite, AccessShareLock);
	if (rule != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("factor table %s of model \"%s\" has rule \"%s\"",
						wals_relation_name(relid), info->display, rule),
				 errdetail("wals reads and writes the factor tables of a model itself; a rule would change what its statements do."),
				 errhint("Drop the rule: DROP RULE %s ON %s.", quote_identifier(rule),
						 wals_relation_name(relid))));
}

/*
 * Check the columns of a factor table before any statement reads it:
 * user_id or item_id bigint, factors real[], and on the user side the
 * packed rated items, bytea; and that no rule rewrites what wals runs.
 */
void
wals_check_factor_table(const WalsModelInfo *info, Oid relid, bool user_side)
{
	char		relkind = get_rel_relkind(relid);

	if (relkind != RELKIND_RELATION)
		bad_table(info, relid, "It is not an ordinary table.");
	check_column(info, relid, user_side ? "user_id" : "item_id", INT8OID);
	check_column(info, relid, "factors", FLOAT4ARRAYOID);
	if (user_side)
	{
		check_column(info, relid, "rated", BYTEAOID);
	}
	wals_check_no_rules(info, relid);
}

/*
 * Whether relid, a factor table of the model that may be written again in
 * place, holds exactly the columns wals made, of their types: a column
 * added since could not be filled, and one whose type changed not written.
 */
bool
wals_factor_table_in_form(Oid relid, bool user_side)
{
	static const char *const names[3] = {"user_id", "factors", "rated"};
	const Oid	types[3] = {INT8OID, FLOAT4ARRAYOID, BYTEAOID};
	int			ncols = user_side ? 3 : 2;
	int			live = 0;
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	AttrNumber	natts;

	if (!HeapTupleIsValid(tuple))
		return false;
	natts = ((Form_pg_class) GETSTRUCT(tuple))->relnatts;
	ReleaseSysCache(tuple);
	for (AttrNumber a = 1; a <= natts; a++)
	{
		char	   *name = get_attname(relid, a, true);

		if (name != NULL)
			live++;
	}
	if (live != ncols)
		return false;
	for (int k = 0; k < ncols; k++)
	{
		const char *name = k == 0 && !user_side ? "item_id" : names[k];
		AttrNumber	attnum = get_attnum(relid, name);

		if (attnum <= 0 || get_atttype(relid, attnum) != types[k])
			return false;
	}
	return true;
}

/*
 * Whether relid, a factor table the caller has locked, has the primary key
 * wals gives it: its id column alone, a bigint, in B-tree's integer order,
 * so that a scan key of int8 equality finds a row through it.
 */
bool
wals_factor_table_keyed(Oid relid, bool user_side)
{
	Relation	rel = relation_open(relid, NoLock);
	Oid			pk = RelationGetPrimaryKeyIndex(rel);
	AttrNumber	id = get_attnum(relid, user_side ? "user_id" : "item_id");
	bool		keyed = false;

	if (OidIsValid(pk) && id > 0)
	{
		HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pk));

		if (HeapTupleIsValid(tuple))
		{
			Form_pg_index index = (Form_pg_index) GETSTRUCT(tuple);
			bool		isnull;
			oidvector  *opclasses = (oidvector *)
				DatumGetPointer(SysCacheGetAttr(INDEXRELID, tuple, Anum_pg_index_indclass,
												&isnull));

			keyed = index->indisvalid && index->indnatts == 1 && index->indnkeyatts == 1 &&
				index->indkey.values[0] == id && get_atttype(relid, id) == INT8OID &&
				!isnull && get_opclass_family(opclasses->values[0]) == INTEGER_BTREE_FAM_OID;
			ReleaseSysCache(tuple);
		}
	}
	relation_close(rel, NoLock);
	return keyed;
}

/* Column col of a query's result must have type type. */
static void
check_result_type(const WalsModelInfo *info, TupleDesc desc, int col, Oid type)
{
	if (SPI_gettypeid(desc, col) != type)
		bad_value(info, psprintf("Column \"%s\" has type %s instead of %s.",
								 SPI_fname(desc, col), format_type_be(SPI_gettypeid(desc, col)),
								 format_type_be(type)));
}

/* An id column (bigint), not null unless *isnull may report it. */
int64
wals_read_id(HeapTuple tuple, TupleDesc desc, int col, const WalsModelInfo *info, bool *isnull)
{
	bool		null;
	Datum		d;

	check_result_type(info, desc, col, INT8OID);
	d = SPI_getbinval(tuple, desc, col, &null);
	if (null && isnull == NULL)
		bad_value(info, psprintf("Column \"%s\" holds a null.", SPI_fname(desc, col)));
	if (isnull != NULL)
		*isnull = null;
	return null ? 0 : DatumGetInt64(d);
}

/* Column col of tuple, of type type and not null; what names it in errors. */
static Datum
column_value(HeapTuple tuple, TupleDesc desc, int col, Oid type, const WalsModelInfo *info,
			 const char *what)
{
	bool		isnull;
	Datum		d;

	check_result_type(info, desc, col, type);
	d = SPI_getbinval(tuple, desc, col, &isnull);
	if (isnull)
		bad_value(info, psprintf("A row's %s are null.", what));
	return d;
}

/*
 * Copy the real[] of f finite elements in column col of tuple to out.
 */
void
wals_read_factors(HeapTuple tuple, TupleDesc desc, int col, int f, float *out,
				  const WalsModelInfo *info)
{
	ArrayType  *array = DatumGetArrayTypeP(column_value(tuple, desc, col, FLOAT4ARRAYOID, info,
														 "factors"));

	if (ARR_NDIM(array) != 1 || ARR_DIMS(array)[0] != f || ARR_HASNULL(array))
		bad_value(info, psprintf("A row's factors are not a real[] of %d elements without nulls.", f));
	memcpy(out, ARR_DATA_PTR(array), sizeof(float) * f);
	for (int a = 0; a < f; a++)
		if (!isfinite(out[a]))
			bad_value(info, "A row's factors are not all finite.");
}

/*
 * The rated items of a user row (column col, packed by src/core/rated.c),
 * as indices of the model's items, sorted, with their ratings.  Items the
 * model does not know are left out.
 */
void
wals_read_rated(HeapTuple tuple, TupleDesc desc, int col, const WalsModelInfo *info,
				const WalsIdDirectory *items, WalsRated *rated)
{
	bytea	   *packed = DatumGetByteaPP(column_value(tuple, desc, col, BYTEAOID, info,
													  "rated items"));
	int64		n;
	int64	   *ids;
	float	   *values;

	if (wals_rated_count((const uint8 *) VARDATA_ANY(packed), VARSIZE_ANY_EXHDR(packed), &n) != WALS_OK)
		bad_value(info, "A row's rated items are not packed as wals packs them.");
	ids = palloc(sizeof(int64) * Max(n, 1));
	values = palloc(sizeof(float) * Max(n, 1));
	if (wals_rated_unpack((const uint8 *) VARDATA_ANY(packed), VARSIZE_ANY_EXHDR(packed), n,
						  ids, values) != WALS_OK)
		bad_value(info, "A row's rated items are not packed as wals packs them.");

	rated->items = palloc(sizeof(int32) * Max(n, 1));
	rated->ratings = palloc(sizeof(float) * Max(n, 1));
	rated->n = 0;
	for (int64 i = 0; i < n; i++)
	{
		int64		index = wals_id_directory_find(items, ids[i]);

		if (!wals_rating_ok(values[i]))
			bad_value(info, psprintf("A row's ratings hold %g.", values[i]));
		if (index < 0)
			continue;
		/* ids increase, and so do the indices of the items, which follow id order */
		rated->items[rated->n] = (int32) index;
		rated->ratings[rated->n++] = values[i];
	}
	pfree(ids);
	pfree(values);
}

/* A one-dimensional real[] holding v[0..n), built without a Datum per element. */
ArrayType *
wals_real_array(const float *v, int64 n)
{
	Size		nbytes = ARR_OVERHEAD_NONULLS(1) + sizeof(float4) * n;
	ArrayType  *array = palloc(nbytes);

	SET_VARSIZE(array, nbytes);
	array->ndim = 1;
	array->dataoffset = 0;
	array->elemtype = FLOAT4OID;
	ARR_DIMS(array)[0] = (int) n;
	ARR_LBOUND(array)[0] = 1;
	memcpy(ARR_DATA_PTR(array), v, sizeof(float4) * n);
	return array;
}

/*
 * The rated items column of a user's row: the items ids[0..n)
 * (increasing) with their ratings, packed.
 */
bytea *
wals_rated_pack_bytea(const int64 *ids, const float *values, int64 n)
{
	bytea	   *out = palloc(VARHDRSZ + wals_rated_pack_bound(n));

	SET_VARSIZE(out, VARHDRSZ + wals_rated_pack(ids, values, n, (uint8 *) VARDATA(out)));
	return out;
}

/* The same of the items indices[0..n) (increasing), by their ids. */
bytea *
wals_rated_bytea(const int64 *item_ids, const int32 *indices, const float *values, int64 n)
{
	int64	   *ids = palloc(sizeof(int64) * Max(n, 1));
	bytea	   *out;

	for (int64 i = 0; i < n; i++)
		ids[i] = item_ids[indices[i]];
	out = wals_rated_pack_bytea(ids, values, n);
	pfree(ids);
	return out;
}

/* Bytes wals_rated_row_into may write for row r of R, header included. */
Size
wals_rated_row_bound(const WalsCsr *R, int64 r)
{
	return VARHDRSZ + wals_rated_pack_bound(R->indptr[r + 1] - R->indptr[r]);
}

/*
 * Row r of R, whose columns are the items item_ids names, packed as the
 * rated items column into out (room for wals_rated_row_bound), through ids
 * and vals (room for the row's cells each): its ratings as floats, or
 * decoded where R keeps codes.
 */
void
wals_rated_row_into(const int64 *item_ids, const WalsCsr *R, int64 r, bytea *out, int64 *ids,
					float *vals)
{
	int64		lo = R->indptr[r];
	int64		n = R->indptr[r + 1] - lo;
	const float *values = wals_csr_values(R, lo, n, vals);

	for (int64 i = 0; i < n; i++)
		ids[i] = item_ids[R->indices[lo + i]];
	SET_VARSIZE(out, VARHDRSZ + wals_rated_pack(ids, values, n, (uint8 *) VARDATA(out)));
}

/* The same, allocated. */
bytea *
wals_rated_row_bytea(const int64 *item_ids, const WalsCsr *R, int64 r)
{
	int64		n = R->indptr[r + 1] - R->indptr[r];
	bytea	   *out = palloc(wals_rated_row_bound(R, r));
	int64	   *ids = palloc(sizeof(int64) * Max(n, 1));
	float	   *vals = palloc(sizeof(float) * Max(n, 1));

	wals_rated_row_into(item_ids, R, r, out, ids, vals);
	pfree(ids);
	pfree(vals);
	return out;
}

/*
 * An executor state that writes rel (locked RowExclusiveLock), with its
 * indexes open, as a statement of command cid would, and the result
 * relation in *rri: for the factor rows written without SQL (a training's
 * store, a refresh's rows in place).  wals_write_estate_end closes both.
 */
EState *
wals_write_estate(Relation rel, CommandId cid, ResultRelInfo **rri)
{
	EState	   *estate = CreateExecutorState();
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
	wals_init_range_table(estate, rte);
	*rri = makeNode(ResultRelInfo);
	InitResultRelInfo(*rri, rel, 1, NULL, 0);

	/*
	 * The executor looks a trigger's function up at its first call, in the
	 * memory context current then, and the function keeps there what it
	 * reuses from call to call (the settings it runs with, its compiled
	 * body): a writer's context reset after each row would free them under
	 * the next call.  Look them up now, for as long as the executor state.
	 */
	for (int i = 0; (*rri)->ri_TrigDesc != NULL && i < (*rri)->ri_TrigDesc->numtriggers; i++)
		fmgr_info_cxt((*rri)->ri_TrigDesc->triggers[i].tgfoid, &(*rri)->ri_TrigFunctions[i],
					  estate->es_query_cxt);
	estate->es_opened_result_relations = list_make1(*rri);
	estate->es_output_cid = cid;
	ExecOpenIndices(*rri, false);
	return estate;
}

void
wals_write_estate_end(EState *estate, ResultRelInfo *rri)
{
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
}
