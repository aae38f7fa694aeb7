/*
 * recommend.c
 *	  Serving: top-k recommendations and predictions from a stored model.
 *
 * The item factors of the model last used are kept in this backend as one
 * contiguous matrix with their ids, so a call costs one catalog lookup, one
 * primary-key lookup of the user's factors, a matrix-vector product and a
 * bounded heap.  The cache is keyed by the model's version, which every
 * training draws afresh from a sequence: a retraining or a drop committed by
 * any session changes what the catalog lookup returns, and the next call
 * reloads.
 */
#include "postgres.h"

#include <cblas.h>

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "wals.h"

PG_FUNCTION_INFO_V1(wals_recommend);
PG_FUNCTION_INFO_V1(wals_predict);

/* The item side of one model, in TopMemoryContext. */
typedef struct ItemCache
{
	MemoryContext cxt;
	char	   *model;
	int64		version;
	int			factors;
	int64		nitems;
	int64	   *ids;			/* increasing */
	float	   *Y;				/* nitems x factors */
} ItemCache;

static ItemCache cache;

static int64
find_item(int64 id)
{
	return wals_ids_find(cache.ids, cache.nitems, id);
}

/* Make the cache hold the item factors of this version of the model. */
static void
load_items(const WalsModelInfo *info)
{
	MemoryContext old;
	int			f = info->factors;

	if (cache.model != NULL && strcmp(cache.model, info->name) == 0 &&
		cache.version == info->version)
		return;

	if (cache.cxt == NULL)
		cache.cxt = AllocSetContextCreate(TopMemoryContext, "wals model cache",
										  ALLOCSET_DEFAULT_SIZES);
	MemoryContextReset(cache.cxt);
	cache.model = NULL;

	wals_spi_exec(psprintf("SELECT item_id, factors FROM %s ORDER BY item_id", info->item_table),
				  0, NULL, NULL, SPI_OK_SELECT);

	old = MemoryContextSwitchTo(cache.cxt);
	cache.nitems = SPI_processed;
	cache.factors = f;
	cache.ids = MemoryContextAllocHuge(cache.cxt, sizeof(int64) * Max(cache.nitems, 1));
	cache.Y = MemoryContextAllocHuge(cache.cxt, sizeof(float) * f * Max(cache.nitems, 1));
	MemoryContextSwitchTo(old);
	for (int64 i = 0; i < cache.nitems; i++)
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[i];

		cache.ids[i] = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull));
		wals_read_factors(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull), f,
					 cache.Y + i * f, info->item_table);
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	SPI_freetuptable(SPI_tuptable);
	cache.version = info->version;
	cache.model = MemoryContextStrdup(cache.cxt, info->name);
}

/* The factors of user_id into x; false for a user the model does not know. */
static bool
user_factors(const WalsModelInfo *info, int64 user_id, float *x)
{
	Oid			type = INT8OID;
	Datum		arg = Int64GetDatum(user_id);
	bool		isnull;

	wals_spi_exec(psprintf("SELECT factors FROM %s WHERE user_id OPERATOR(pg_catalog.=) $1",
						   info->user_table),
				  1, &type, &arg, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	wals_read_factors(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull),
				 info->factors, x, info->user_table);
	return true;
}

static int
compare_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/*
 * The cache indices of the items user_id has in the model's source now,
 * sorted; they are what "exclude_rated" leaves out.
 */
static int32 *
rated_items(const WalsModelInfo *info, int64 user_id, int64 *count)
{
	List	   *names = stringToQualifiedNameList(info->source);
	Oid			type = INT8OID;
	Datum		arg = Int64GetDatum(user_id);
	int32	   *rated;
	int64		n = 0;

	if (!OidIsValid(RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("source relation %s of model \"%s\" does not exist", info->source, info->name),
				 errhint("Pass exclude_rated => false, or train the model again.")));

	wals_spi_exec(psprintf("SELECT (%s)::pg_catalog.int8 FROM %s WHERE %s OPERATOR(pg_catalog.=) $1",
						   quote_identifier(info->item_col), info->source,
						   quote_identifier(info->user_col)),
				  1, &type, &arg, SPI_OK_SELECT);
	rated = palloc(sizeof(int32) * Max(SPI_processed, 1));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		Datum		item = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);
		int64		index = isnull ? -1 : find_item(DatumGetInt64(item));

		if (index >= 0)
			rated[n++] = (int32) index;
	}
	qsort(rated, n, sizeof(int32), compare_int32);
	*count = n;
	return rated;
}

static int
k_arg(FunctionCallInfo fcinfo, int arg)
{
	int			k;

	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"k\" must not be null")));
	k = PG_GETARG_INT32(arg);
	if (k <= 0 || k > WALS_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"k\": %d", k),
				 errhint("\"k\" must be between 1 and %d.", WALS_MAX_K)));
	return k;
}

/*
 * wals_recommend(user_id bigint, k int, model text, exclude_rated bool)
 *	 RETURNS TABLE(item_id bigint, score real)
 *
 * The k items of highest predicted score for a user, best first, ties to the
 * lower item id.  A user the model does not know gets no rows.
 */
Datum
wals_recommend(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			k = k_arg(fcinfo, 1);
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	bool		exclude_rated;
	WalsModelInfo *info;
	float	   *x;

	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"exclude_rated\" must not be null")));
	exclude_rated = PG_GETARG_BOOL(3);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	SPI_connect();
	info = wals_model_get(model);
	x = palloc(sizeof(float) * info->factors);
	if (!PG_ARGISNULL(0) && user_factors(info, PG_GETARG_INT64(0), x))
	{
		int64		nskip = 0;
		int32	   *skip;
		float	   *scores;
		int32	   *idx;
		float	   *best;
		int			found;

		load_items(info);
		skip = exclude_rated ? rated_items(info, PG_GETARG_INT64(0), &nskip) : NULL;
		scores = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * Max(cache.nitems, 1));
		if (cache.nitems > 0)
			cblas_sgemv(CblasRowMajor, CblasNoTrans, (int) cache.nitems, cache.factors,
						1.0f, cache.Y, cache.factors, x, 1, 0.0f, scores, 1);
		k = (int) Min((int64) k, cache.nitems);
		idx = palloc(sizeof(int32) * Max(k, 1));
		best = palloc(sizeof(float) * Max(k, 1));
		found = wals_topk_select(scores, cache.nitems, skip, nskip, k, idx, best);
		for (int r = 0; r < found; r++)
		{
			Datum		values[2];
			bool		nulls[2] = {false, false};

			values[0] = Int64GetDatum(cache.ids[idx[r]]);
			values[1] = Float4GetDatum(best[r]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * wals_predict(user_id bigint, item_id bigint, model text) RETURNS real
 *
 * The model's score x_u . y_i; null when the user or the item is unknown.
 */
Datum
wals_predict(PG_FUNCTION_ARGS)
{
	text	   *model = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	WalsModelInfo *info;
	float	   *x;
	int64		item = -1;
	float		score = 0.0f;

	SPI_connect();
	info = wals_model_get(model);
	x = palloc(sizeof(float) * info->factors);
	if (!PG_ARGISNULL(0) && !PG_ARGISNULL(1) && user_factors(info, PG_GETARG_INT64(0), x))
	{
		load_items(info);
		item = find_item(PG_GETARG_INT64(1));
		if (item >= 0)
			score = cblas_sdot(cache.factors, x, 1, cache.Y + item * cache.factors, 1);
	}
	SPI_finish();
	if (item < 0)
		PG_RETURN_NULL();
	PG_RETURN_FLOAT4(score);
}
