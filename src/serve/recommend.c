/*
 * recommend.c
 *	  Top-k recommendations for known users, one or many, and predictions.
 *
 * A call resolves the model and its cached item side (cache.c), reads
 * the user's factors through a kept plan, and hands them to the exact
 * scoring engine of src/core with the items to leave out (rated, excluded)
 * or the only ones allowed.  Scores are those of wals_score_dot, the same
 * for every path, so a batch, a single call and wals_predict agree to the
 * bit.
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "wals_serve.h"

PG_FUNCTION_INFO_V1(wals_recommend);
PG_FUNCTION_INFO_V1(wals_recommend_batch);
PG_FUNCTION_INFO_V1(wals_predict);
PG_FUNCTION_INFO_V1(wals_rated_items);

/* Users per block of wals_recommend_batch: one query for their rows. */
#define WALS_BATCH_USERS 8192

/*
 * wals_recommend(user_id bigint, k int, model text, exclude_rated bool,
 *				  exclude_items bigint[], only_items bigint[])
 *	 RETURNS TABLE(item_id bigint, score real)
 *
 * The k items of highest predicted score for a user, best first, ties to the
 * lower item id.  A user the model does not know gets no rows.
 */
static Datum
recommend_call(PG_FUNCTION_ARGS)
{
	int			k = wals_arg_k(fcinfo, 1);
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	bool		exclude_rated = wals_arg_bool(fcinfo, 3, "exclude_rated");
	WalsServeModel *m;
	WalsScoreFilter filter;
	WalsRated	rated;
	float	   *x;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	m = wals_serve_model(model);
	wals_filter_args(fcinfo, 4, 5, m, &filter);
	x = palloc(sizeof(float) * m->factors);
	if (!PG_ARGISNULL(0) &&
		wals_serve_user(m, PG_GETARG_INT64(0), x, exclude_rated ? &rated : NULL))
	{
		if (exclude_rated)
			filter.skip = wals_merge_items(filter.skip, filter.nskip, rated.items, rated.n,
										   &filter.nskip);
		wals_put_topk(fcinfo, m, &m->index, x, &filter, k);
	}
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_recommend(PG_FUNCTION_ARGS)
{
	return wals_call(recommend_call, fcinfo, "wals_recommend", false);
}

/* Sort ids[0..n) and keep one of each; returns how many are left. */
static int
sort_distinct(int64 *ids, int n)
{
	int			d = 0;

	qsort(ids, n, sizeof(int64), wals_compare_int64);
	for (int i = 0; i < n; i++)
		if (i == 0 || ids[i] != ids[d - 1])
			ids[d++] = ids[i];
	return d;
}

/*
 * Score one block of the input, users[lo, hi), and return its rows in input
 * order.  known[0..nknown), when not NULL, are the users the model knows
 * (sorted): the others are not even looked up.
 */
static void
batch_block(FunctionCallInfo fcinfo, WalsServeModel *m, const int64 *users, int lo, int hi,
			const int64 *known, int nknown, int k, bool exclude_rated,
			const WalsScoreFilter *base)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "wals batch block",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int64	   *ids = palloc(sizeof(int64) * (hi - lo));
	WalsRated  *rated;
	WalsScoreFilter *filters;
	float	   *X;
	int32	   *idx;
	float	   *score;
	int		   *count;
	int			n = 0;
	int			f = m->factors;

	memcpy(ids, users + lo, sizeof(int64) * (hi - lo));
	n = sort_distinct(ids, hi - lo);
	if (known != NULL)
	{
		int			kept = 0;

		for (int u = 0; u < n; u++)
			if (wals_ids_find(known, nknown, ids[u]) >= 0)
				ids[kept++] = ids[u];
		n = kept;
	}
	X = palloc(sizeof(float) * f * Max(n, 1));
	rated = exclude_rated ? palloc0(sizeof(WalsRated) * Max(n, 1)) : NULL;
	if (n > 0)
		n = wals_serve_users(m, ids, n, X, rated);

	filters = palloc(sizeof(WalsScoreFilter) * Max(n, 1));
	for (int u = 0; u < n; u++)
	{
		filters[u] = *base;
		if (rated != NULL && rated[u].n > 0)
			filters[u].skip = wals_merge_items(base->skip, base->nskip, rated[u].items,
											   rated[u].n, &filters[u].nskip);
	}
	idx = palloc(sizeof(int32) * (size_t) Max(n, 1) * k);
	score = palloc(sizeof(float) * (size_t) Max(n, 1) * k);
	count = palloc0(sizeof(int) * Max(n, 1));
	if (m->nitems > 0 && n > 0)
		wals_score_topk_batch(&m->index, X, 0, n, filters, k, idx, score, count,
							  palloc(wals_score_batch_scratch_size(&m->index, k)));

	MemoryContextSwitchTo(old);
	for (int i = lo; i < hi && n > 0; i++)
	{
		int			u = (int) wals_ids_find(ids, n, users[i]);

		if (u < 0)
			continue;
		for (int r = 0; r < count[u]; r++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			values[0] = Int64GetDatum(users[i]);
			values[1] = Int64GetDatum(m->ids[idx[(size_t) u * k + r]]);
			values[2] = Float4GetDatum(score[(size_t) u * k + r]);
			values[3] = Int32GetDatum(r + 1);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	MemoryContextDelete(cxt);
}

/*
 * wals_recommend_batch(user_ids bigint[], k int, model text,
 *						exclude_rated bool, exclude_items bigint[],
 *						only_items bigint[])
 *	 RETURNS TABLE(user_id bigint, item_id bigint, score real, rank int)
 *
 * wals_recommend for many users at once, in the order given: the same rows,
 * from one query per block of users, and one matrix product per block of
 * users and items.  A long list is first cut down to the users the model
 * knows by one pass over its user table.
 */
static Datum
recommend_batch_call(PG_FUNCTION_ARGS)
{
	int			n;
	int64	   *users = wals_arg_ids(fcinfo, 0, "user_ids", &n);
	int			k = wals_arg_k(fcinfo, 1);
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	bool		exclude_rated = wals_arg_bool(fcinfo, 3, "exclude_rated");
	WalsServeModel *m;
	WalsScoreFilter base;
	int64	   *known;
	int			nknown;

	if (users == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"user_ids\" must not be null")));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	m = wals_serve_model(model);
	wals_filter_args(fcinfo, 4, 5, m, &base);
	k = (int) Min((int64) k, Max(m->nitems, 1));

	known = palloc(sizeof(int64) * Max(n, 1));
	memcpy(known, users, sizeof(int64) * n);
	nknown = sort_distinct(known, n);
	if (!wals_serve_known_users(m, known, &nknown))
		known = NULL;
	for (int lo = 0; lo < n && (known == NULL || nknown > 0); lo += WALS_BATCH_USERS)
	{
		CHECK_FOR_INTERRUPTS();
		batch_block(fcinfo, m, users, lo, Min(n, lo + WALS_BATCH_USERS), known, nknown, k,
					exclude_rated, &base);
	}
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_recommend_batch(PG_FUNCTION_ARGS)
{
	return wals_call(recommend_batch_call, fcinfo, "wals_recommend_batch", false);
}

/*
 * wals_predict(user_id bigint, item_id bigint, model text) RETURNS real
 *
 * The model's score x_u . y_i, as wals_recommend scores it; null when the
 * user or the item is unknown.
 */
static Datum
predict_call(PG_FUNCTION_ARGS)
{
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	WalsServeModel *m;
	float	   *x;
	int64		item = -1;
	float		score = 0.0f;

	wals_spi_connect();
	m = wals_serve_model(model);
	x = palloc(sizeof(float) * m->factors);
	if (!PG_ARGISNULL(0) && !PG_ARGISNULL(1) && wals_serve_user(m, PG_GETARG_INT64(0), x, NULL))
	{
		item = wals_serve_item(m, PG_GETARG_INT64(1));
		if (item >= 0)
			score = wals_score_dot(x, m->Y + item * m->factors, m->factors);
	}
	SPI_finish();
	if (item < 0)
		PG_RETURN_NULL();
	PG_RETURN_FLOAT4(score);
}

Datum
wals_predict(PG_FUNCTION_ARGS)
{
	return wals_call(predict_call, fcinfo, "wals_predict", false);
}

/*
 * wals_rated_items(user_id bigint, model text)
 *	 RETURNS TABLE(item_id bigint, rating real)
 *
 * The items the model keeps as rated by the user, with their merged
 * ratings, in item order: what exclude_rated leaves out and wals_explain
 * explains with.  No rows for a user the model does not know.
 */
static Datum
rated_items_call(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *model = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	WalsServeModel *m;
	WalsRated	rated;
	float	   *x;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	m = wals_serve_model(model);
	x = palloc(sizeof(float) * m->factors);
	if (!PG_ARGISNULL(0) && wals_serve_user(m, PG_GETARG_INT64(0), x, &rated))
		for (int64 i = 0; i < rated.n; i++)
		{
			Datum		values[2];
			bool		nulls[2] = {false, false};

			values[0] = Int64GetDatum(m->ids[rated.items[i]]);
			values[1] = Float4GetDatum(rated.ratings[i]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_rated_items(PG_FUNCTION_ARGS)
{
	return wals_call(rated_items_call, fcinfo, "wals_rated_items", false);
}
