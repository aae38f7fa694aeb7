/*
 * store.c
 *	  Writing a trained model: two factor tables and its catalog rows.
 *
 * A new model's factor tables are created, filled and indexed, and its
 * catalog row written, in the caller's transaction.  Their rows are written
 * with table_multi_insert into the empty new relation and the primary key
 * is built once, after loading, which is far cheaper than row-by-row
 * inserts into an indexed table.
 *
 * A retraining writes into the model's own tables instead: their rows are
 * deleted and the new ones inserted, as an UPDATE of every row would be.
 * Readers keep their locks and their snapshots: until the retraining
 * commits they read the previous factors, after it the new ones, and none
 * of them waits for it, nor it for them, as a DROP or a rename of the
 * tables would make them; and whatever the model's owner gave the tables
 * (grants, indexes, comments, policies, triggers) stays theirs.  The space
 * the previous rows held is reclaimed by VACUUM, as after any UPDATE.
 * Tables that are no longer the model's own (moved, renamed, given away)
 * are left in place and new ones created, as for a new model.
 *
 * The tables are created as the model's owner (the caller, or the owner of
 * the model retrained), so that a retraining by a member of the owner role,
 * or by a superuser, leaves the model with its owner; and the catalog row is
 * written as the extension's owner (roles.c).  The user factor table keeps
 * each user's rated items, the merged cells the training saw, so that
 * serving never reads the source; where the training has workers, they
 * pack those rated items while the leader writes the rows, unless the
 * table runs code of its owner's on insert (store_pack.c).  Last, the
 * items of the new version are built for every backend of the server
 * (serve/items.c).
 */
#include "postgres.h"

#include <math.h>

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "wals_serve.h"
#include "wals_shard.h"
#include "wals_train.h"

/*
 * The arrays and tuples of one batch fit in the context's first block, which
 * a reset keeps: growing blocks would be freed and faulted in again for
 * every batch.
 */
#define WALS_STORE_BATCH_BYTES	(4 * 1024 * 1024)

/* The values of row r of a factor table, in slot, by column number. */
static void
fill_row(TupleTableSlot *slot, const AttrNumber *attnum, int64 r, const int64 *ids,
		 const float *F, int f, const WalsCsr *rated, const int64 *item_ids,
		 WalsShards *shards, WalsRatedPacker *packer)
{
	ExecClearTuple(slot);
	for (int i = 0; i < slot->tts_tupleDescriptor->natts; i++)
		slot->tts_isnull[i] = true;
	slot->tts_values[attnum[0] - 1] = Int64GetDatum(ids[r]);
	slot->tts_isnull[attnum[0] - 1] = false;
	slot->tts_values[attnum[1] - 1] = PointerGetDatum(wals_real_array(F + r * f, f));
	slot->tts_isnull[attnum[1] - 1] = false;
	if (shards != NULL)
	{
		slot->tts_values[attnum[2] - 1] = PointerGetDatum(wals_shards_rated(shards, r));
		slot->tts_isnull[attnum[2] - 1] = false;
	}
	else if (packer != NULL)
	{
		slot->tts_values[attnum[2] - 1] = wals_rated_packer_row(packer, r);
		slot->tts_isnull[attnum[2] - 1] = false;
	}
	else if (rated != NULL)
	{
		slot->tts_values[attnum[2] - 1] =
			PointerGetDatum(wals_rated_row_bytea(item_ids, rated, r));
		slot->tts_isnull[attnum[2] - 1] = false;
	}
	ExecStoreVirtualTuple(slot);
}

/*
 * Where rows go into a factor table.  A fresh relation is new and
 * unindexed, and its free space map has nothing to offer; another is a
 * model's own table, whose indexes and constraints see every row, as
 * COPY's would: written in batches, unless it has row triggers on insert,
 * which see each row one at a time.
 */
typedef struct FactorWriter
{
	Relation	rel;
	bool		fresh;
	bool		per_row;
	int			nbatch;			/* slots a batch fills */
	TupleDesc	desc;			/* of the slots: rel's, unpinned */
	TupleTableSlot *slots[WALS_STORE_BATCH];
	BulkInsertState bistate;
	CommandId	cid;
	MemoryContext batch_cxt;	/* reset after each batch */
	EState	   *estate;			/* not fresh: the executor's, for indexes, */
	ResultRelInfo *rri;			/* constraints and triggers */
} FactorWriter;

static void
writer_open(FactorWriter *w, Oid relid, bool fresh)
{
	TriggerDesc *triggers;

	memset(w, 0, sizeof(*w));
	w->rel = table_open(relid, RowExclusiveLock);
	w->fresh = fresh;
	triggers = w->rel->trigdesc;
	w->per_row = !fresh && triggers != NULL &&
		(triggers->trig_insert_before_row || triggers->trig_insert_after_row ||
		 triggers->trig_insert_instead_row);
	w->nbatch = w->per_row ? 1 : WALS_STORE_BATCH;
	w->bistate = GetBulkInsertState();
	w->cid = GetCurrentCommandId(true);
	w->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "wals store batch",
										 0, WALS_STORE_BATCH_BYTES, WALS_STORE_BATCH_BYTES);

	/*
	 * A slot made from the relation pins its descriptor in the resource
	 * owner, which holds more than a few dozen pins in a hash where the pins
	 * of one descriptor lie in one run.  The B-tree's check of each new key
	 * makes and drops a slot of its own: with the batch's thousand pins it
	 * probed past all of them every time, 9% of a retraining's store of
	 * 100M ratings (perf).  The batch's slots share a copy no owner tracks.
	 */
	w->desc = CreateTupleDescCopy(RelationGetDescr(w->rel));
	for (int i = 0; i < w->nbatch; i++)
		w->slots[i] = MakeSingleTupleTableSlot(w->desc, table_slot_callbacks(w->rel));
	if (!fresh)
	{
		w->estate = wals_write_estate(w->rel, w->cid, &w->rri);
		AfterTriggerBeginQuery();
	}
}

/* Write the first nslots slots, then empty them and the batch's memory. */
static void
writer_flush(FactorWriter *w, int nslots)
{
	if (w->per_row)
		ExecSimpleRelationInsert(w->rri, w->estate, w->slots[0]);
	else
	{
		table_multi_insert(w->rel, w->slots, nslots, w->cid,
						   w->fresh ? TABLE_INSERT_SKIP_FSM : 0, w->bistate);
		for (int i = 0; !w->fresh && i < nslots; i++)
		{
			if (w->rel->rd_att->constr)
				ExecConstraints(w->rri, w->slots[i], w->estate);
			list_free(ExecInsertIndexTuples(w->rri, w->slots[i], w->estate, false, false, NULL,
											NIL));
		}
	}
	for (int i = 0; i < nslots; i++)
		ExecClearTuple(w->slots[i]);
	MemoryContextReset(w->batch_cxt);
}

static void
writer_close(FactorWriter *w)
{
	for (int i = 0; i < w->nbatch; i++)
		ExecDropSingleTupleTableSlot(w->slots[i]);
	FreeTupleDesc(w->desc);
	FreeBulkInsertState(w->bistate);
	table_finish_bulk_insert(w->rel, 0);
	if (!w->fresh)
	{
		AfterTriggerEndQuery(w->estate);
		wals_write_estate_end(w->estate, w->rri);
	}
	table_close(w->rel, NoLock);
	MemoryContextDelete(w->batch_cxt);
}

/*
 * Whether writing w's rows runs no code but the server's own, as in a
 * fresh table, or in a model's own table that has no trigger, no check
 * and no index but the primary key wals gives it: the leader may then
 * write them in parallel mode, where code that wrote anything would fail.
 */
static bool
writes_run_no_code(const FactorWriter *w)
{
	TupleConstr *constr = w->rel->rd_att->constr;

	if (w->fresh)
		return true;
	return w->rel->trigdesc == NULL && (constr == NULL || constr->num_check == 0) &&
		w->rri->ri_NumIndices == 1 &&
		wals_factor_table_keyed(RelationGetRelid(w->rel), true);
}

/*
 * Append rows (ids[r], F[r]) to relation relid, with the rated items of row
 * r on the user side: from rated, or from the shards of a sharded training.
 * Where rated is the matrix by user of the shared blocks of pack_from, the
 * training's workers may pack them (store_pack.c).
 */
static void
insert_factors(const WalsTrainArgs *args, Oid relid, bool fresh, const int64 *ids, const float *F,
			   int64 n, const WalsCsr *rated, const int64 *item_ids, WalsShards *shards,
			   const WalsWorkspace *pack_from, int64 done_before)
{
	FactorWriter w;
	AttrNumber	attnum[3];
	MemoryContext old;
	int			nslots = 0;
	WalsRatedPacker *packer = NULL;

	attnum[0] = get_attnum(relid, "user_id");
	if (attnum[0] == InvalidAttrNumber)
		attnum[0] = get_attnum(relid, "item_id");
	attnum[1] = get_attnum(relid, "factors");
	attnum[2] = get_attnum(relid, "rated");
	writer_open(&w, relid, fresh);
	if (pack_from != NULL && writes_run_no_code(&w))
		packer = wals_rated_packer_begin(args, pack_from, item_ids);
	Assert(packer == NULL || w.nbatch == WALS_STORE_BATCH);
	old = MemoryContextSwitchTo(w.batch_cxt);
	for (int64 r = 0; r <= n; r++)
	{
		if (nslots == w.nbatch || (r == n && nslots > 0))
		{
			writer_flush(&w, nslots);
			nslots = 0;
			if ((r & 1023) == 0 || !w.per_row)
			{
				CHECK_FOR_INTERRUPTS();
				wals_work_rows(done_before + r);
			}
		}
		if (r == n)
			break;
		fill_row(w.slots[nslots++], attnum, r, ids, F, args->params.factors, rated, item_ids,
				 shards, packer);
	}
	MemoryContextSwitchTo(old);
	if (packer != NULL)
		wals_rated_packer_end(packer);
	writer_close(&w);
}

/*
 * Every merged cell of each user: those held out for a validation are rated
 * items too, which serving must leave out like the others.
 */
static const WalsCsr *
rated_cells(const WalsTrainArgs *args, const WalsData *data)
{
	WalsCsr    *all;
	int64		n;

	if (args->validation <= 0)
		return &data->by_user;
	n = data->by_user.indptr[data->nusers] + data->held.indptr[data->nusers];
	all = palloc(sizeof(WalsCsr));
	all->indptr = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * (data->nusers + 1));
	all->indices = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(n, 1));
	all->values = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * Max(n, 1));
	wals_holdout_join(&data->by_user, &data->held, all);
	return all;
}

/*
 * Append the factors of one side of data to relid (see insert_factors);
 * ws, where not NULL, holds data's matrices.
 */
static void
write_rows(const WalsTrainArgs *args, const WalsData *data, const WalsWorkspace *ws,
		   bool user_side, const float *F, Oid relid, bool fresh)
{
	if (user_side && data->shards != NULL)
		insert_factors(args, relid, fresh, data->user_ids, F, data->nusers, NULL, NULL,
					   data->shards, NULL, 0);
	else if (user_side)
		insert_factors(args, relid, fresh, data->user_ids, F, data->nusers,
					   rated_cells(args, data), data->item_ids, NULL,
					   args->validation <= 0 ? ws : NULL, 0);
	else
		insert_factors(args, relid, fresh, data->item_ids, F, data->nitems, NULL, NULL, NULL,
					   NULL, data->nusers);
}

/*
 * Write one factor table of the model, as its owner, and return its OID:
 * the user side, with the rated items of data, or the item side.  The
 * table of the model retrained is written again in place while it is
 * still the model's own and in the form wals wrote (see the head of the
 * file); otherwise a new one is created, filled and indexed, after the old
 * one was dropped where it was still the model's.  ws, where not NULL,
 * holds data's matrices.
 */
static Oid
write_factor_table(const WalsTrainArgs *args, const WalsData *data, const WalsWorkspace *ws,
				   bool user_side, const float *F)
{
	const char *table = psprintf("%s%s", args->model,
								 user_side ? WALS_USER_SUFFIX : WALS_ITEM_SUFFIX);
	char	   *qualified = quote_qualified_identifier(get_namespace_name(args->schema), table);
	Oid			old = args->old == NULL ? InvalidOid :
		user_side ? args->old->user_rel : args->old->item_rel;
	Oid			relid;
	WalsRoleSave save;

	if (OidIsValid(old) && wals_factor_table_reusable(args->old, old, user_side))
	{
		wals_become(args->owner, &save);
		wals_sql_expect(wals_sql(psprintf("DELETE FROM ONLY %s", qualified), 0, NULL, NULL, NULL,
								 false, 0),
						SPI_OK_DELETE, old);
		CommandCounterIncrement();
		write_rows(args, data, ws, user_side, F, old, false);
		CommandCounterIncrement();
		wals_unbecome(&save);
		return old;
	}
	if (OidIsValid(old))
		wals_drop_factor_table(args->old, old, user_side);

	wals_become(args->owner, &save);
	/*
	 * Packed rated items hardly compress: storing them uncompressed spares
	 * the compression attempt on every long list.
	 */
	if (user_side)
		wals_spi_exec(psprintf("CREATE TABLE %s (user_id pg_catalog.int8 NOT NULL,"
							   " factors pg_catalog.float4[] NOT NULL,"
							   " rated pg_catalog.bytea NOT NULL);"
							   " ALTER TABLE %s ALTER rated SET STORAGE EXTERNAL",
							   qualified, qualified),
					  0, NULL, NULL, -1);
	else
		wals_spi_exec(psprintf("CREATE TABLE %s (item_id pg_catalog.int8 NOT NULL,"
							   " factors pg_catalog.float4[] NOT NULL)", qualified),
					  0, NULL, NULL, -1);
	CommandCounterIncrement();
	relid = get_relname_relid(table, args->schema);
	if (!OidIsValid(relid))
		elog(ERROR, "wals: could not find new factor table \"%s\"", table);
	write_rows(args, data, ws, user_side, F, relid, true);
	CommandCounterIncrement();
	wals_spi_exec(psprintf("ALTER TABLE %s ADD PRIMARY KEY (%s)", qualified,
						   user_side ? "user_id" : "item_id"),
				  0, NULL, NULL, -1);
	wals_unbecome(&save);
	return relid;
}

/*
 * Error unless the validation table still belongs to the role whose it was
 * when the training checked it (or, retrained, when the catalog recorded
 * it), the role the catalog records with it.  The training has read the
 * relation, and holds its lock until the end of the transaction: no owner
 * changes from now on, and a change before the lock is caught here.
 */
static void
check_validation_owner(const WalsTrainArgs *args)
{
	Oid			owner;

	if (!OidIsValid(args->validation_table))
		return;
	owner = wals_relation_owner(args->validation_table);
	if (owner != args->validation_owner)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the validation table of model \"%s\" changed owner during the training",
						args->model_display),
				 errdetail("Relation %s belongs to role %s, and belonged to role %s when the training began.",
						   wals_relation_name(args->validation_table), wals_role_display(owner),
						   wals_role_display(args->validation_owner)),
				 errhint("Train the model again.")));
}

/*
 * Replace the catalog row of the model, append its training log, and
 * describe its settings on its user factor table (describe.c), so that a
 * dump of its schema alone carries them.
 */
static void
write_catalog(const WalsTrainArgs *args, const WalsData *data,
			  const WalsTrainResult *result, Oid user_rel, Oid item_rel, const float *X)
{
	bool		validating = wals_validating(args);
	WalsCatalogRow row;
	char	   *query;
	WalsRoleSave save;

	check_validation_owner(args);
	memset(&row, 0, sizeof(row));
	row.schema = get_namespace_name(args->schema);
	row.model = args->model;
	row.source = args->source;
	row.user_col = args->user_col;
	row.item_col = args->item_col;
	row.rating_col = args->rating_col;
	row.changed_col = args->changed_col;
	row.changed_mark = args->changed_mark;
	if (args->params.factors <= WALS_USER_GRAM_MAX_FACTORS)
	{
		float	   *G = palloc0(sizeof(float) * args->params.factors * args->params.factors);

		wals_gram_rows(X, 0, data->nusers, args->params.factors, G);
		row.user_gram = G;
	}
	if (data->shards == NULL && data->by_item.indptr != NULL)
	{
		int32	   *counts = palloc(sizeof(int32) * Max(data->nitems, 1));

		for (int64 i = 0; i < data->nitems; i++)
			counts[i] = (int32) (data->by_item.indptr[i + 1] - data->by_item.indptr[i]);
		row.item_counts = counts;
	}
	row.params = args->params;
	row.iterations = result->iterations;
	row.max_iterations = args->iterations;
	row.seed = args->seed;
	row.tolerance = args->tolerance;
	row.warm_start = args->warm_start;
	row.users = data->nusers;
	row.items = data->nitems;
	row.ratings = data->nratings;
	row.loss = result->loss;
	row.device = result->device;
	row.workers = result->workers;
	row.load_s = result->load_s;
	row.train_s = result->train_s;
	row.store_s = result->store_s;
	row.total_s = result->total_s;
	row.version = result->version;
	row.user_rel = user_rel;
	row.item_rel = item_rel;
	row.accelerate = wals_accelerate_name(args->accelerate);
	row.init_std = args->init_std;
	row.validation = args->validation;
	row.validation_table = args->validation_table;
	row.validation_owner = OidIsValid(args->validation_table) ? args->validation_owner :
		InvalidOid;
	row.validation_metric = validating ? args->validation_metric : NULL;
	row.patience = args->patience;
	row.best_iteration = result->best_iteration;
	row.validation_score = result->validation_score;
	row.owner = args->owner;
	row.trained_at = GetCurrentTransactionStartTimestamp();
	wals_catalog_write(&row);

	query = psprintf("INSERT INTO %s (schema, model, version, iteration, loss, seconds, step,"
					 " validation_score) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
					 wals_catalog_table("wals_training_log"));
	wals_become_catalog_writer(&save);
	for (int it = 0; it < result->iterations; it++)
	{
		Oid			log_types[8] = {NAMEOID, TEXTOID, INT8OID, INT4OID, FLOAT8OID, FLOAT8OID,
		TEXTOID, FLOAT8OID};
		Datum		log_values[8];
		char		log_nulls[8] = "       ";

		log_values[0] = DirectFunctionCall1(namein, CStringGetDatum(row.schema));
		log_values[1] = CStringGetTextDatum(row.model);
		log_values[2] = Int64GetDatum(result->version);
		log_values[3] = Int32GetDatum(it + 1);
		log_values[4] = Float8GetDatum(result->iteration_loss[it]);
		log_values[5] = wals_seconds_datum(result->iteration_seconds[it]);
		log_values[6] = CStringGetTextDatum(result->iteration_ncg[it] ? "ncg" : "als");
		log_values[7] = Float8GetDatum(result->iteration_score[it]);
		log_nulls[7] = isnan(result->iteration_score[it]) ? 'n' : ' ';
		wals_sql_expect(wals_sql(query, 8, log_types, log_values, log_nulls, false, 0),
						SPI_OK_INSERT, InvalidOid);
	}
	wals_unbecome(&save);
	wals_model_describe(&row);
}

/*
 * Refuse, before any work, a model whose factor table names are taken by
 * relations that are not that model's own tables.  Where a new model's
 * both names are taken, they may be its factor tables restored without
 * its catalog row, which the hint says how to attach.
 */
void
wals_check_factor_tables_free(const WalsTrainArgs *args)
{
	const char *suffixes[2] = {WALS_USER_SUFFIX, WALS_ITEM_SUFFIX};

	for (int i = 0; i < 2; i++)
	{
		char	   *table = psprintf("%s%s", args->model, suffixes[i]);
		Oid			relid = get_relname_relid(table, args->schema);
		char	   *attach;

		if (!OidIsValid(relid) ||
			(args->old != NULL && relid == (i == 0 ? args->old->user_rel : args->old->item_rel)))
			continue;
		attach = args->old == NULL ?
			wals_unattached_hint(get_namespace_name(args->schema), args->model) : NULL;
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s\" already exists and does not belong to model \"%s\"",
						quote_qualified_identifier(get_namespace_name(args->schema), table),
						args->model_display),
				 attach != NULL ? errhint("%s", attach) :
				 errhint("Pass another name as \"model\", or drop or rename that relation.")));
	}
}

/*
 * Write the factors of a finished training as the model, replacing the
 * model trained before (args->old), and record the result in the catalog;
 * ws, where not NULL, holds data's matrices.  Sets result->version,
 * store_s and total_s.
 */
void
wals_store_model(const WalsTrainArgs *args, const WalsData *data, const WalsWorkspace *ws,
				 const float *X, const float *Y, WalsTrainResult *result)
{
	instr_time	start;
	instr_time	end;
	Oid			user_rel;
	Oid			item_rel;

	INSTR_TIME_SET_CURRENT(start);
	wals_work_phase(WALS_PHASE_STORING, data->nusers + data->nitems);
	result->version = wals_next_version();
	user_rel = write_factor_table(args, data, ws, true, X);
	item_rel = write_factor_table(args, data, ws, false, Y);

	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	result->store_s = INSTR_TIME_GET_DOUBLE(end);
	result->total_s = result->load_s + result->train_s + result->store_s;
	write_catalog(args, data, result, user_rel, item_rel, X);
	wals_call_new_snapshot();

	/*
	 * The items every backend will serve, built now, in this transaction,
	 * as readers would build them (serve/items.c): so that no reader pays
	 * for the retraining once it commits.
	 */
	wals_serve_preload(get_namespace_name(args->schema), args->model, NULL, args->old);
}
