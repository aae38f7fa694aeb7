/*
 * factor_rows.c
 *	  Factor rows written one at a time, in place: what the refreshes store.
 *
 * A refresh rewrites the rows of the users and items it solved, a few
 * thousand to a few hundred thousand of them, each looked up by its id.
 * As statements, one UPDATE a row, the executor's start and end and the
 * plan's checks cost more than the row's own work (a row of 64 factors
 * and a few hundred rated items took about 50 us).  Where the table is
 * as wals made it, the rows are found through its primary key and written
 * with the executor's routines for one row, as logical replication applies
 * a change: the same heap, index and WAL work without a statement around
 * it.
 *
 * That holds only where a statement would do nothing more: the table has
 * exactly the columns wals made (an added column would get its default
 * from an INSERT), its primary key on the id alone, no trigger (statement
 * triggers would not fire) and no row security that applies to the role
 * writing (the model's owner, where it forces them).  Any other table is
 * written by statements, as before; both run as the model's owner, who
 * must hold the privileges the statements need.
 *
 * The rows are found with a snapshot taken when the writer opens, after
 * the command counter is advanced: it sees every row written before, by
 * statements or by an earlier writer, and a writer writes each id once.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "pg_compat.h"
#include "wals_serve.h"

struct WalsRowWriter
{
	Oid			relid;
	bool		user_side;
	bool		direct;
	/* statements, for a table the direct path does not fit */
	SPIPlanPtr	update;
	SPIPlanPtr	insert;
	SPIPlanPtr	remove;
	/* the direct path */
	Relation	rel;
	Relation	index;
	Snapshot	snapshot;
	IndexScanDesc scan;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *found;
	TupleTableSlot *row;
	AttrNumber	id_att;
	AttrNumber	factors_att;
	AttrNumber	rated_att;
	MemoryContext row_cxt;		/* reset after each row; not the scan's */
	MemoryContext cxt;			/* the writer's, where its scan keeps what it finds */
};

/* Whether a statement on relid would do no more than the direct path. */
static bool
direct_fits(Oid relid, bool user_side)
{
	Relation	rel;
	bool		fits;

	if (!wals_factor_table_in_form(relid, user_side) || !wals_factor_table_keyed(relid, user_side) ||
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;
	rel = table_open(relid, RowExclusiveLock);
	fits = rel->trigdesc == NULL;
	table_close(rel, NoLock);
	return fits;
}

static void
open_statements(WalsRowWriter *w, const char *table)
{
	Oid			types[3] = {INT8OID, FLOAT4ARRAYOID, BYTEAOID};
	const char *id = w->user_side ? "user_id" : "item_id";

	/* an update that finds no row tells a new one, which the catalog counts */
	w->update = wals_sql_prepare(w->user_side ?
								 psprintf("UPDATE %s SET factors = $2, rated = $3"
										  " WHERE user_id OPERATOR(pg_catalog.=) $1", table) :
								 psprintf("UPDATE %s SET factors = $2"
										  " WHERE item_id OPERATOR(pg_catalog.=) $1", table),
								 w->user_side ? 3 : 2, types);
	w->insert = wals_sql_prepare(w->user_side ?
								 psprintf("INSERT INTO %s (user_id, factors, rated)"
										  " VALUES ($1, $2, $3)", table) :
								 psprintf("INSERT INTO %s (item_id, factors) VALUES ($1, $2)",
										  table),
								 w->user_side ? 3 : 2, types);
	w->remove = wals_sql_prepare(psprintf("DELETE FROM %s WHERE %s OPERATOR(pg_catalog.=) $1",
										  table, id),
								 1, types);
}

static void
open_direct(WalsRowWriter *w)
{
	AclResult	acl = pg_class_aclcheck(w->relid, GetUserId(),
										ACL_SELECT | ACL_INSERT | ACL_UPDATE | ACL_DELETE);

	/* what the statements would check */
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, get_rel_name(w->relid));
	w->rel = table_open(w->relid, RowExclusiveLock);
	w->index = index_open(RelationGetPrimaryKeyIndex(w->rel), RowExclusiveLock);
	w->id_att = get_attnum(w->relid, w->user_side ? "user_id" : "item_id");
	w->factors_att = get_attnum(w->relid, "factors");
	w->rated_att = w->user_side ? get_attnum(w->relid, "rated") : InvalidAttrNumber;

	CommandCounterIncrement();
	w->snapshot = RegisterSnapshot(GetTransactionSnapshot());
	w->scan = wals_index_beginscan(w->rel, w->index, w->snapshot, 1, 0);

	w->estate = wals_write_estate(w->rel, GetCurrentCommandId(true), &w->rri);
	w->found = table_slot_create(w->rel, NULL);
	w->row = MakeSingleTupleTableSlot(RelationGetDescr(w->rel), &TTSOpsVirtual);
	w->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "wals factor row",
									   ALLOCSET_SMALL_SIZES);
}

/* A writer of the factor rows of one side of a model, as its owner has become. */
WalsRowWriter *
wals_row_writer_open(const WalsModelInfo *info, bool user_side)
{
	WalsRowWriter *w = palloc0(sizeof(WalsRowWriter));

	w->cxt = CurrentMemoryContext;
	w->relid = user_side ? info->user_rel : info->item_rel;
	w->user_side = user_side;
	w->direct = direct_fits(w->relid, user_side);
	if (w->direct)
		open_direct(w);
	else
		open_statements(w, wals_relation_name(w->relid));
	return w;
}

void
wals_row_writer_close(WalsRowWriter *w)
{
	if (w->direct)
	{
		ExecDropSingleTupleTableSlot(w->found);
		ExecDropSingleTupleTableSlot(w->row);
		wals_write_estate_end(w->estate, w->rri);
		index_endscan(w->scan);
		UnregisterSnapshot(w->snapshot);
		index_close(w->index, NoLock);
		table_close(w->rel, NoLock);
		MemoryContextDelete(w->row_cxt);
	}
	pfree(w);
}

/*
 * The row of id into w->found; false where there is none.  In the writer's
 * memory: what the scan allocates as it goes (the dead entries it will
 * mark) is kept to its end, past the memory of the caller's batch.
 */
static bool
find(WalsRowWriter *w, int64 id)
{
	ScanKeyData key;
	MemoryContext old = MemoryContextSwitchTo(w->cxt);
	bool		found;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(id));
	index_rescan(w->scan, &key, 1, NULL, 0);
	found = index_getnext_slot(w->scan, ForwardScanDirection, w->found);
	MemoryContextSwitchTo(old);
	return found;
}

/* Write the row of id; true when it is new. */
bool
wals_row_write(WalsRowWriter *w, int64 id, const float *x, int f, bytea *rated)
{
	MemoryContext old;
	bool		added;
	TupleTableSlot *row = w->row;

	if (!w->direct)
	{
		Datum		values[3];

		values[0] = Int64GetDatum(id);
		values[1] = PointerGetDatum(wals_real_array(x, f));
		values[2] = PointerGetDatum(rated);
		wals_sql_expect(wals_sql_plan(w->update, values, NULL, false, 0), SPI_OK_UPDATE, w->relid);
		if (SPI_processed > 0)
			return false;
		wals_sql_expect(wals_sql_plan(w->insert, values, NULL, false, 0), SPI_OK_INSERT, w->relid);
		return true;
	}

	added = !find(w, id);
	old = MemoryContextSwitchTo(w->row_cxt);
	ExecClearTuple(row);
	for (int a = 0; a < row->tts_tupleDescriptor->natts; a++)
		row->tts_isnull[a] = true;
	row->tts_values[w->id_att - 1] = Int64GetDatum(id);
	row->tts_isnull[w->id_att - 1] = false;
	row->tts_values[w->factors_att - 1] = PointerGetDatum(wals_real_array(x, f));
	row->tts_isnull[w->factors_att - 1] = false;
	if (w->user_side)
	{
		row->tts_values[w->rated_att - 1] = PointerGetDatum(rated);
		row->tts_isnull[w->rated_att - 1] = rated == NULL;
	}
	ExecStoreVirtualTuple(row);
	if (added)
		ExecSimpleRelationInsert(w->rri, w->estate, row);
	else
		ExecSimpleRelationUpdate(w->rri, w->estate, NULL, w->found, row);
	ExecClearTuple(w->found);
	ExecClearTuple(row);
	MemoryContextSwitchTo(old);
	MemoryContextReset(w->row_cxt);
	return added;
}

/* Remove the row of id; how many rows went (0 or 1). */
int64
wals_row_remove(WalsRowWriter *w, int64 id)
{
	Datum		value = Int64GetDatum(id);

	if (!w->direct)
	{
		wals_sql_expect(wals_sql_plan(w->remove, &value, NULL, false, 0), SPI_OK_DELETE, w->relid);
		return (int64) SPI_processed;
	}
	if (!find(w, id))
		return 0;
	ExecSimpleRelationDelete(w->rri, w->estate, NULL, w->found);
	ExecClearTuple(w->found);
	return 1;
}
