/*
 * recommend.c
 *	  Top-k recommendations for known users, one or many, and predictions.
 *
 * A call resolves the model and its cached item side (serve_cache.c), reads
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

#include "serve.h"

PG_FUNCTION_INFO_V1(wals_recommend);
PG_FUNCTION_INFO_V1(wals_recommend_batch);
PG_FUNCTION_INFO_V1(wals_predict);

/* Users per block of wals_recommend_batch: one query each for factors and ratings. */
#define WALS_BATCH_USERS 8192

/*
 * wals_recommend(user_id bigint, k int, model text, exclude_rated bool,
 *				  exclude_items bigint[], only_items bigint[])
 *	 RETURNS TABLE(item_id bigint, score real)
 *
 * The k items of highest predicted score for a user, best first, ties to the
 * lower item id.  A user the model does not know gets no rows.
 */
Datum
wals_recommend(PG_FUNCTION_ARGS)
{
	int			k = wals_arg_k(fcinfo, 1);
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	bool		exclude_rated = wals_arg_bool(fcinfo, 3, "exclude_rated");
	WalsServeModel *m;
	WalsScoreFilter filter;
	float	   *x;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	SPI_connect();
	m = wals_serve_model(model);
	wals_filter_args(fcinfo, 4, 5, m, &filter);
	x = palloc(sizeof(float) * m->factors);
	if (!PG_ARGISNULL(0) && wals_serve_user(m, PG_GETARG_INT64(0), x))
	{
		if (exclude_rated)
		{
			WalsRated	rated;

			wals_serve_rated(m, PG_GETARG_INT64(0), &rated);
			filter.skip = wals_merge_items(filter.skip, filter.nskip, rated.items, rated.n,
										   &filter.nskip);
		}
		wals_put_topk(fcinfo, m, &m->index, x, &filter, k);
	}
	SPI_finish();
	return (Datum) 0;
}

/* One block of a batch: its distinct users, their factors and filters. */
typedef struct BatchBlock
{
	int			n;
	int64	   *ids;			/* sorted, distinct */
	bool	   *known;
	float	   *X;
	int64	   *nrated;
	int32	  **rated;
} BatchBlock;

/*
 * Score one block of the input, users[lo, hi), and return its rows in input
 * order.
 */
static void
batch_block(FunctionCallInfo fcinfo, WalsServeModel *m, const int64 *users, int lo, int hi,
			int k, bool exclude_rated, const WalsScoreFilter *base)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "wals batch block",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	BatchBlock	b;
	WalsScoreFilter *filters;
	int32	   *idx;
	float	   *score;
	int		   *count;
	int			n = 0;
	int			f = m->factors;

	b.ids = palloc(sizeof(int64) * (hi - lo));
	memcpy(b.ids, users + lo, sizeof(int64) * (hi - lo));
	qsort(b.ids, hi - lo, sizeof(int64), wals_compare_int64);
	for (int i = 0; i < hi - lo; i++)
		if (i == 0 || b.ids[i] != b.ids[n - 1])
			b.ids[n++] = b.ids[i];
	b.n = n;
	b.known = palloc(sizeof(bool) * n);
	b.X = palloc(sizeof(float) * f * n);
	b.nrated = palloc0(sizeof(int64) * n);
	b.rated = palloc(sizeof(int32 *) * n);

	wals_serve_users(m, b.ids, n, b.X, b.known);
	if (exclude_rated)
		wals_serve_rated_users(m, b.ids, n, b.nrated, b.rated);

	filters = palloc(sizeof(WalsScoreFilter) * n);
	for (int u = 0; u < n; u++)
	{
		filters[u] = *base;
		if (b.nrated[u] > 0)
			filters[u].skip = wals_merge_items(base->skip, base->nskip, b.rated[u], b.nrated[u],
											   &filters[u].nskip);
	}
	idx = palloc(sizeof(int32) * (size_t) n * k);
	score = palloc(sizeof(float) * (size_t) n * k);
	count = palloc0(sizeof(int) * n);
	if (m->nitems > 0)
		wals_score_topk_batch(&m->index, b.X, 0, n, filters, k, idx, score, count,
							  palloc(wals_score_batch_scratch_size(&m->index, k)));

	MemoryContextSwitchTo(old);
	for (int i = lo; i < hi; i++)
	{
		int			u = (int) wals_ids_find(b.ids, n, users[i]);

		if (!b.known[u])
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
 * from one query per block of users for their factors and one for their
 * ratings, and one matrix product per block of users and items.
 */
Datum
wals_recommend_batch(PG_FUNCTION_ARGS)
{
	int			n;
	int64	   *users = wals_arg_ids(fcinfo, 0, "user_ids", &n);
	int			k = wals_arg_k(fcinfo, 1);
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	bool		exclude_rated = wals_arg_bool(fcinfo, 3, "exclude_rated");
	WalsServeModel *m;
	WalsScoreFilter base;

	if (users == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"user_ids\" must not be null")));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	SPI_connect();
	m = wals_serve_model(model);
	wals_filter_args(fcinfo, 4, 5, m, &base);
	k = (int) Min((int64) k, Max(m->nitems, 1));
	for (int lo = 0; lo < n; lo += WALS_BATCH_USERS)
	{
		CHECK_FOR_INTERRUPTS();
		batch_block(fcinfo, m, users, lo, Min(n, lo + WALS_BATCH_USERS), k, exclude_rated, &base);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * wals_predict(user_id bigint, item_id bigint, model text) RETURNS real
 *
 * The model's score x_u . y_i, as wals_recommend scores it; null when the
 * user or the item is unknown.
 */
Datum
wals_predict(PG_FUNCTION_ARGS)
{
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	WalsServeModel *m;
	float	   *x;
	int64		item = -1;
	float		score = 0.0f;

	SPI_connect();
	m = wals_serve_model(model);
	x = palloc(sizeof(float) * m->factors);
	if (!PG_ARGISNULL(0) && !PG_ARGISNULL(1) && wals_serve_user(m, PG_GETARG_INT64(0), x))
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
