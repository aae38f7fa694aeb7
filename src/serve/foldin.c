/*
 * foldin.c
 *	  Serving beyond the trained users: fold-in of a new user's ratings.
 *
 * Fold-in solves the one row a training would solve for a user with these
 * ratings, against the cached item factors and their Gram, with the model's
 * own weights and regularization, exactly (Cholesky), then scores it like
 * any user (wals_recommend_items) or stores it (wals_refresh_users).
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/lsyscache.h"

#include "wals_serve.h"

PG_FUNCTION_INFO_V1(wals_recommend_items);

/*
 * The ratings argument: one real per item, none null; NULL for the whole
 * array means 1 for every item.
 */
static float *
arg_ratings(FunctionCallInfo fcinfo, int arg, int nitems)
{
	ArrayType  *array;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	float	   *ratings = palloc(sizeof(float) * Max(nitems, 1));

	if (PG_ARGISNULL(arg))
	{
		for (int i = 0; i < nitems; i++)
			ratings[i] = 1.0f;
		return ratings;
	}
	array = PG_GETARG_ARRAYTYPE_P(arg);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("\"ratings\" must be a one-dimensional array")));
	deconstruct_array(array, FLOAT4OID, 4, true, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != nitems)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("\"ratings\" has %d elements and \"item_ids\" has %d", n, nitems),
				 errhint("Pass one rating per item, or ratings => NULL to count each item 1.")));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("\"ratings\" must not contain nulls")));
		ratings[i] = DatumGetFloat4(elems[i]);
	}
	return ratings;
}

/*
 * Merge the cells of one user as training merges them (summed for implicit
 * feedback, averaged for explicit) into a one-row CSR, refusing ratings a
 * training would refuse.
 */
void
wals_one_row(const WalsServeModel *m, const int32 *items, const float *ratings, int64 n,
		WalsCsr *row)
{
	int32	   *zeros = palloc0(sizeof(int32) * Max(n, 1));
	WalsStatus	st;

	for (int64 i = 0; i < n; i++)
		if (!wals_rating_ok(ratings[i]))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("\"ratings\" contains a value that is not finite: %g", ratings[i])));
	row->indptr = palloc(sizeof(int64) * 2);
	row->indices = palloc(sizeof(int32) * Max(n, 1));
	row->values = palloc(sizeof(float) * Max(n, 1));
	st = wals_csr_from_coo(m->info.params.feedback, 1, m->nitems, (size_t) n, zeros, items, ratings,
						   row, palloc(sizeof(int64) * (m->nitems + 1)),
						   palloc(sizeof(int32) * Max(n, 1)), palloc(sizeof(float) * Max(n, 1)), NULL);
	if (st != WALS_OK)
		wals_report_core_status(st, "merging the ratings given");
}

/* The factors of a user with the ratings of row, by the exact solver. */
void
wals_fold_in(const WalsServeModel *m, const WalsCsr *row, float *x)
{
	WalsParams	params = m->info.params;
	int64		bad = -1;
	WalsStatus	st;
	float	   *scratch;

	params.solver = WALS_CHOLESKY;
	scratch = palloc(sizeof(float) * (wals_solve_scratch(&params, row->indptr[1]) + 16));
	memset(x, 0, sizeof(float) * m->factors);
	st = wals_solve_rows(&params, row, m->Y, m->G, x, 0, 1, scratch, &bad);
	if (st != WALS_OK)
		wals_report_core_status(st, "folding in the ratings given");
}

/*
 * wals_recommend_items(item_ids bigint[], ratings real[], k int, model text,
 *						exclude_rated bool, exclude_items bigint[],
 *						only_items bigint[])
 *	 RETURNS TABLE(item_id bigint, score real)
 *
 * Recommendations for a user the model has never seen, from their ratings.
 * Items the model does not know are ignored, with a NOTICE; with no known
 * item there are no rows.
 */
static Datum
recommend_items_call(PG_FUNCTION_ARGS)
{
	int			n;
	int64	   *ids = wals_arg_ids(fcinfo, 0, "item_ids", &n);
	float	   *given;
	int			k = wals_arg_k(fcinfo, 2);
	text	   *model = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	bool		exclude_rated = wals_arg_bool(fcinfo, 4, "exclude_rated");
	WalsServeModel *m;
	WalsScoreFilter filter;
	int32	   *items;
	float	   *ratings;
	int64		known = 0;
	WalsCsr		row;
	float	   *x;

	if (ids == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"item_ids\" must not be null"),
				 errhint("Pass the items the user rated, '{}' for none.")));
	given = arg_ratings(fcinfo, 1, n);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	m = wals_serve_model(model);
	wals_filter_args(fcinfo, 5, 6, m, &filter);

	items = palloc(sizeof(int32) * Max(n, 1));
	ratings = palloc(sizeof(float) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		int64		index = wals_serve_item(m, ids[i]);

		if (index < 0)
			continue;
		items[known] = (int32) index;
		ratings[known++] = given[i];
	}
	if (known < n)
		ereport(NOTICE,
				(errmsg_plural("%lld of the %d items given is unknown to model \"%s\" and was ignored",
							   "%lld of the %d items given are unknown to model \"%s\" and were ignored",
							   n - known, (long long) (n - known), n, m->info.display)));

	/* Without a known item there is nothing to fold in: no rows, not noise. */
	if (known > 0)
	{
		wals_one_row(m, items, ratings, known, &row);
		x = palloc(sizeof(float) * m->factors);
		wals_fold_in(m, &row, x);
		if (exclude_rated)
			filter.skip = wals_merge_items(filter.skip, filter.nskip, row.indices, row.indptr[1],
										   &filter.nskip);
		wals_put_topk(fcinfo, m, &m->index, x, &filter, k);
	}
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_recommend_items(PG_FUNCTION_ARGS)
{
	return wals_call(recommend_items_call, fcinfo, "wals_recommend_items", false);
}
