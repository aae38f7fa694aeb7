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

#include "wals_train.h"

/*
 * Copy the stored rows of relid into F where their id is known; count them.
 * Read as the model's owner (roles.c), whoever trains: a superuser's or a
 * member's warm start runs no code of the table's as themselves.
 */
static int64
load_side(const WalsModelInfo *old, Oid relid, const char *id_col, const int64 *ids, int64 n,
		  float *F)
{
	int64		reused = 0;
	Portal		portal;
	int			f = old->factors;
	SPIPlanPtr	plan;
	WalsRoleSave save;

	wals_check_factor_table(old, relid, strcmp(id_col, "user_id") == 0);
	wals_become_model_owner(old, &save);
	plan = wals_sql_prepare(psprintf("SELECT %s, factors FROM %s", id_col, wals_relation_name(relid)),
							0, NULL);
	portal = wals_sql_cursor_plan(plan, NULL, NULL, true);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		wals_sql_fetch(portal, 10000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			HeapTuple	tuple = SPI_tuptable->vals[r];
			int64		id = wals_read_id(tuple, SPI_tuptable->tupdesc, 1, old, &isnull);
			int64		row = isnull ? -1 : wals_ids_find(ids, n, id);

			if (row < 0)
				continue;
			wals_read_factors(tuple, SPI_tuptable->tupdesc, 2, f, F + row * f, old);
			reused++;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
	wals_unbecome(&save);
	return reused;
}

/*
 * Overwrite the fresh factors X and Y with those of the model trained
 * before, where there is one, for every user and item it knows.  Its
 * number of factors was checked before the ratings were read.
 */
void
wals_warm_start(const WalsTrainArgs *args, const WalsData *data, float *X, float *Y)
{
	const WalsModelInfo *old = args->old;
	int64		users;
	int64		items;

	if (old == NULL)
	{
		ereport(NOTICE,
				(errmsg("model \"%s\" does not exist yet, so it starts from fresh factors",
						args->model_display)));
		return;
	}
	users = load_side(old, old->user_rel, "user_id", data->user_ids, data->nusers, X);
	items = load_side(old, old->item_rel, "item_id", data->item_ids, data->nitems, Y);
	ereport(DEBUG1,
			(errmsg("wals: warm start of \"%s\" reused %lld of %lld users and %lld of %lld items",
					args->model_display, (long long) users, (long long) data->nusers,
					(long long) items, (long long) data->nitems)));
}
