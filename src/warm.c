/*
 * warm.c
 *	  Starting a training from the stored factors of the same model.
 *
 * A nightly retraining sees mostly the same users and items as the night
 * before; starting from yesterday's factors instead of random ones saves
 * most of the iterations.  Rows whose id the stored model has keep their
 * stored factors; new users and items keep their fresh random start, and
 * ids that vanished from the source are simply not carried over.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"

#include "wals.h"

/* Copy the stored rows of table into F where their id is known; count them. */
static int64
load_side(const char *table, const char *id_col, const int64 *ids, int64 n,
		  int f, float *F)
{
	int64		reused = 0;
	Portal		portal;
	SPIPlanPtr	plan = SPI_prepare(psprintf("SELECT %s, factors FROM %s", id_col, table), 0, NULL);

	if (plan == NULL)
		elog(ERROR, "wals: could not read factor table %s: %s", table,
			 SPI_result_code_string(SPI_result));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, 10000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			HeapTuple	tuple = SPI_tuptable->vals[r];
			int64		row = wals_ids_find(ids, n, DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull)));

			if (row < 0)
				continue;
			wals_read_factors(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull),
							  f, F + row * f, table);
			reused++;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
	return reused;
}

/*
 * Overwrite the fresh factors X and Y with those of the stored model of the
 * same name, where there is one, for every user and item it knows.
 */
void
wals_warm_start(const WalsTrainArgs *args, const WalsData *data, float *X, float *Y)
{
	WalsModelInfo old;
	int			f = args->params.factors;
	int64		users;
	int64		items;

	if (!wals_model_lookup(args->model, &old))
	{
		ereport(NOTICE,
				(errmsg("model \"%s\" does not exist yet, so it starts from fresh factors", args->model)));
		return;
	}
	if (old.factors != f)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot warm start %d factors from model \"%s\", which has %d",
						f, args->model, old.factors),
				 errhint("Pass factors => %d, or warm_start => false.", old.factors)));

	users = load_side(old.user_table, "user_id", data->user_ids, data->nusers, f, X);
	items = load_side(old.item_table, "item_id", data->item_ids, data->nitems, f, Y);
	ereport(DEBUG1,
			(errmsg("wals: warm start of \"%s\" reused %lld of %lld users and %lld of %lld items",
					args->model, (long long) users, (long long) data->nusers,
					(long long) items, (long long) data->nitems)));
}
