/*
 * explain.c
 *	  Why an item is recommended: its score split into one share per rated
 *	  item of the user, through the system that folds the user in
 *	  (src/core/explain.c), so that the shares add up to that score.
 */
#include "postgres.h"

#include "funcapi.h"

#include "wals_serve.h"

PG_FUNCTION_INFO_V1(wals_explain);

/*
 * wals_explain(user_id bigint, item_id bigint, model text, k int)
 *	 RETURNS TABLE(rated_item_id bigint, contribution real)
 *
 * The k rated items of the user (as the model keeps them: from the last
 * training, or wals_refresh_users) that add most to the item's score,
 * largest first; no rows for an unknown user or item.  The contributions of all rated
 * items add up to the score of the user folded in from those ratings.
 */
static Datum
explain_call(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	int			k = wals_arg_k(fcinfo, 3);
	WalsServeModel *m;
	WalsRated	rated;
	float	   *x;
	int64		item;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	m = wals_serve_model(model);
	item = PG_ARGISNULL(1) ? -1 : wals_serve_item(m, PG_GETARG_INT64(1));
	x = palloc(sizeof(float) * m->factors);
	if (!PG_ARGISNULL(0) && item >= 0 && wals_serve_user(m, PG_GETARG_INT64(0), x, &rated))
	{
		WalsCsr		row;
		int64		n;
		float	   *contrib;
		int32	   *idx;
		float	   *best;
		int			found;
		WalsStatus	st;

		wals_one_row(m, rated.items, rated.ratings, rated.n, &row);
		n = row.indptr[1];
		contrib = palloc(sizeof(float) * Max(n, 1));
		st = wals_explain_row(&m->info.params, m->G, m->Y, m->nitems, row.indices, row.values, n,
							  m->Y + item * m->factors, contrib,
							  palloc(sizeof(double) * wals_explain_scratch(m->factors)));
		if (st != WALS_OK)
			wals_report_core_status(st, "explaining the user's ratings");
		k = (int) Min((int64) k, Max(n, 1));
		idx = palloc(sizeof(int32) * k);
		best = palloc(sizeof(float) * k);
		found = wals_topk_select(contrib, n, NULL, 0, k, idx, best);
		for (int r = 0; r < found; r++)
		{
			Datum		values[2];
			bool		nulls[2] = {false, false};

			values[0] = Int64GetDatum(m->ids[row.indices[idx[r]]]);
			values[1] = Float4GetDatum(best[r]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_explain(PG_FUNCTION_ARGS)
{
	return wals_call(explain_call, fcinfo, "wals_explain", false);
}
