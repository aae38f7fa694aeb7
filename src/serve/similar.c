/*
 * similar.c
 *	  Items like an item: the nearest item factors in cosine, scored by the
 *	  same engine as recommendations over the unit rows of the item factors
 *	  (built on demand and cached with the model, cache.c).
 */
#include "postgres.h"

#include "funcapi.h"

#include "wals_serve.h"

PG_FUNCTION_INFO_V1(wals_similar_items);

/*
 * wals_similar_items(item_id bigint, k int, model text)
 *	 RETURNS TABLE(item_id bigint, similarity real)
 *
 * The k items whose factors are closest in cosine to the item's, the item
 * itself left out; no rows for an unknown item or one whose factors are
 * all zero.
 */
static Datum
similar_items_call(PG_FUNCTION_ARGS)
{
	int			k = wals_arg_k(fcinfo, 1);
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	WalsServeModel *m;
	int64		item;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	m = wals_serve_model(model);
	item = PG_ARGISNULL(0) ? -1 : wals_serve_item(m, PG_GETARG_INT64(0));
	if (item >= 0)
	{
		const WalsScoreIndex *cosine = wals_cosine_load(m);
		const float *unit = cosine->Y + item * m->factors;
		int32		self = (int32) item;
		WalsScoreFilter filter = {&self, 1, NULL, 0};
		bool		zero = true;

		for (int a = 0; a < m->factors; a++)
			zero = zero && unit[a] == 0.0f;
		if (!zero)
			wals_put_topk(fcinfo, m, cosine, unit, &filter, k);
	}
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_similar_items(PG_FUNCTION_ARGS)
{
	return wals_call(similar_items_call, fcinfo, "wals_similar_items", false);
}
