/*
 * refresh.c
 *	  wals_refresh_users: bring some users up to date without retraining.
 *
 * Users who rated something since the last training are solved again from
 * their ratings in the model's source now, against the current item
 * factors, exactly as a training's last user half-sweep would solve them
 * (and as fold-in does), and their rows of the user factor table, factors
 * and rated items, are replaced in place.  The item side does not change,
 * so the model keeps its version and every backend's cache stays valid.
 *
 * Refreshing needs the privileges of the model's owner, and everything it
 * reads and writes, the item factors, the source and the user table, is
 * read and written as that owner, in a security-restricted operation
 * (roles.c): a superuser refreshing a tenant's model, or a member of the
 * group role that owns it, never runs the owner's view, policy or trigger
 * code with their own rights.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "wals_serve.h"

PG_FUNCTION_INFO_V1(wals_refresh_users);

/*
 * The items user rates in the source now that the model knows, and their
 * ratings, checked as a training checks them.
 */
static void
read_ratings(WalsServeModel *m, SPIPlanPtr plan, int64 user, WalsRated *rated)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum		arg = Int64GetDatum(user);
	int			rc = wals_sql_plan(plan, &arg, NULL, true, 0);

	MemoryContextSwitchTo(cxt);
	wals_sql_expect(rc, SPI_OK_SELECT, m->info.source);
	rated->items = palloc(sizeof(int32) * Max(SPI_processed, 1));
	rated->ratings = palloc(sizeof(float) * Max(SPI_processed, 1));
	rated->n = 0;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		WalsCell	cell;
		int64		index;

		if (!wals_cell_read(&m->info, SPI_tuptable->vals[r], SPI_tuptable->tupdesc, &cell) ||
			(index = wals_serve_item(m, cell.item)) < 0)
			continue;
		rated->items[rated->n] = (int32) index;
		rated->ratings[rated->n++] = cell.rating;
	}
	SPI_freetuptable(SPI_tuptable);
	wals_sort_cells(rated->items, rated->ratings, rated->n);
}

/*
 * Solve and store the users, as the model's owner; returns how many were
 * stored, with how many of them were new to the model in *added and how
 * many users lost their row in *removed.
 */
static int64
refresh(WalsServeModel *m, const WalsSourceNames *src, const int64 *users, int n, int64 *added,
		int64 *removed)
{
	Oid			int8type = INT8OID;
	SPIPlanPtr	select;
	WalsRowWriter *w;
	float	   *x = palloc(sizeof(float) * m->factors);
	int64		stored = 0;
	MemoryContext user_cxt = AllocSetContextCreate(CurrentMemoryContext, "wals refresh user",
												   ALLOCSET_DEFAULT_SIZES);

	select = wals_sql_prepare(wals_cells_query(src, "",
											   psprintf("s.%s OPERATOR(pg_catalog.=) $1", src->user_col)),
							  1, &int8type);
	w = wals_row_writer_open(&m->info, true);
	for (int i = 0; i < n; i++)
	{
		WalsRated	rated;
		WalsCsr		row;
		MemoryContext outer;

		if (i > 0 && users[i] == users[i - 1])
			continue;
		CHECK_FOR_INTERRUPTS();
		wals_work_rows(i);
		/* a user's ratings, row and packed list go with the user */
		outer = MemoryContextSwitchTo(user_cxt);
		read_ratings(m, select, users[i], &rated);
		if (rated.n == 0)
			*removed += wals_row_remove(w, users[i]);
		else
		{
			wals_one_row(m, rated.items, rated.ratings, rated.n, &row);
			wals_fold_in(m, &row, x);
			if (wals_row_write(w, users[i], x, m->factors,
							   wals_rated_row_bytea(m->ids, &row, 0)))
				(*added)++;
			stored++;
		}
		MemoryContextSwitchTo(outer);
		MemoryContextReset(user_cxt);
	}
	wals_row_writer_close(w);
	MemoryContextDelete(user_cxt);
	return stored;
}

/*
 * wals_refresh_users(user_ids bigint[], model text) RETURNS bigint
 *
 * Solve the users given again from their current ratings and store their
 * factors and rated items; returns how many were stored.  A user left
 * without a rated item the model knows has no factors, as after a training:
 * their row is removed.
 */
static Datum
refresh_users_call(PG_FUNCTION_ARGS)
{
	int			n;
	int64	   *users = wals_arg_ids(fcinfo, 0, "user_ids", &n);
	text	   *model = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	WalsModelInfo found;
	WalsServeModel *m;
	WalsSourceNames source;
	int64		stored;
	int64		added = 0;
	int64		removed = 0;
	WalsRoleSave save;

	if (users == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"user_ids\" must not be null")));
	PreventCommandIfReadOnly("wals_refresh_users()");
	qsort(users, n, sizeof(int64), wals_compare_int64);

	wals_spi_connect();
	/*
	 * A training of the model would replace the table under us: wait for
	 * it.  The lock is taken once the caller's rights as an owner were
	 * checked (wals_lock_model); from there on the work is the owner's.
	 */
	wals_model_resolve(model, &found);
	if (!wals_lock_model(found.schema, found.name, &found, false))
		wals_no_such_model(found.schema, found.name);
	wals_work_begin(WALS_WORK_REFRESH, get_namespace_oid(found.schema, false), found.name);
	wals_become_model_owner(&found, &save);
	m = wals_serve_model(cstring_to_text(wals_model_quoted(found.schema, found.name)));
	wals_check_factor_table(&m->info, m->info.user_rel, true);
	wals_model_source(&m->info, &source);
	wals_work_phase(WALS_PHASE_SOLVING_USERS, n);
	stored = refresh(m, &source, users, n, &added, &removed);
	wals_unbecome(&save);
	wals_work_end();
	/* the users' Gram the catalog keeps is no longer theirs */
	if (stored > 0 || removed > 0)
		wals_catalog_add_users(&m->info, added - removed);

	if (removed > 0)
		ereport(NOTICE,
				(errmsg_plural("%lld user of model \"%s\" has no rated item the model knows: its factors were removed",
							   "%lld users of model \"%s\" have no rated item the model knows: their factors were removed",
							   removed, (long long) removed, m->info.display)));
	SPI_finish();
	PG_RETURN_INT64(stored);
}

Datum
wals_refresh_users(PG_FUNCTION_ARGS)
{
	return wals_call(refresh_users_call, fcinfo, "wals_refresh_users", true);
}
