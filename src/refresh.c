/*
 * refresh.c
 *	  wals_refresh_users: bring some users up to date without retraining.
 *
 * Users who rated something since the last training are solved again from
 * their ratings in the model's source now, against the current item
 * factors, exactly as a training's last user half-sweep would solve them
 * (and as fold-in does), and their rows of the user factor table are
 * replaced in place.  The item side does not change, so the model keeps its
 * version and every backend's cache stays valid.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "serve.h"

PG_FUNCTION_INFO_V1(wals_refresh_users);

static Datum
factors_array(const float *x, int f)
{
	Datum	   *elems = palloc(sizeof(Datum) * f);

	for (int a = 0; a < f; a++)
		elems[a] = Float4GetDatum(x[a]);
	return PointerGetDatum(construct_array(elems, f, FLOAT4OID, 4, true, TYPALIGN_INT));
}

static void
exec_plan(SPIPlanPtr plan, Datum *values, int expected)
{
	int			rc = SPI_execute_plan(plan, values, NULL, false, 0);

	if (rc != expected)
		elog(ERROR, "wals: updating user factors failed: %s", SPI_result_code_string(rc));
}

/*
 * wals_refresh_users(user_ids bigint[], model text) RETURNS bigint
 *
 * Solve the users given again from their current ratings and store their
 * factors; returns how many were stored.  A user left without a rated item
 * the model knows has no factors, as after a training: their row is
 * removed.
 */
Datum
wals_refresh_users(PG_FUNCTION_ARGS)
{
	int			n;
	int64	   *users = wals_arg_ids(fcinfo, 0, "user_ids", &n);
	text	   *model = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	WalsServeModel *m;
	SPIPlanPtr	upsert;
	SPIPlanPtr	remove;
	Oid			types[2] = {INT8OID, FLOAT4ARRAYOID};
	float	   *x;
	int64		stored = 0;
	int64		removed = 0;
	char	   *name;

	if (users == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"user_ids\" must not be null")));
	qsort(users, n, sizeof(int64), wals_compare_int64);

	SPI_connect();
	/* A training of the model would replace the table under us: wait for it. */
	name = wals_model_name(model);
	wals_lock_model(name);
	m = wals_serve_model(cstring_to_text(name));
	upsert = SPI_prepare(psprintf("INSERT INTO %s (user_id, factors) VALUES ($1, $2)"
								  " ON CONFLICT (user_id) DO UPDATE SET factors = EXCLUDED.factors",
								  m->info.user_table), 2, types);
	remove = SPI_prepare(psprintf("DELETE FROM %s WHERE user_id OPERATOR(pg_catalog.=) $1",
								  m->info.user_table), 1, types);
	if (upsert == NULL || remove == NULL)
		elog(ERROR, "wals: could not prepare the update of %s: %s", m->info.user_table,
			 SPI_result_code_string(SPI_result));

	x = palloc(sizeof(float) * m->factors);
	for (int i = 0; i < n; i++)
	{
		WalsRated	rated;
		Datum		values[2];

		if (i > 0 && users[i] == users[i - 1])
			continue;
		CHECK_FOR_INTERRUPTS();
		values[0] = Int64GetDatum(users[i]);
		wals_serve_rated(m, users[i], &rated);
		if (rated.n == 0)
		{
			exec_plan(remove, values, SPI_OK_DELETE);
			removed += SPI_processed;
			continue;
		}
		{
			WalsCsr		row;

			wals_one_row(m, rated.items, rated.ratings, rated.n, &row);
			wals_fold_in(m, &row, x);
		}
		values[1] = factors_array(x, m->factors);
		exec_plan(upsert, values, SPI_OK_INSERT);
		stored++;
	}
	if (removed > 0)
		ereport(NOTICE,
				(errmsg_plural("%lld user of model \"%s\" has no rated item the model knows: its factors were removed",
							   "%lld users of model \"%s\" have no rated item the model knows: their factors were removed",
							   removed, (long long) removed, m->info.name)));
	SPI_finish();
	PG_RETURN_INT64(stored);
}
