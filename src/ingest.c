/*
 * ingest.c
 *	  Reading the ratings of a training and building both sparse matrices.
 *
 * The source is read through SPI, so the caller's privileges, row-level
 * security and snapshot apply exactly as to a SELECT they would write
 * themselves.  Rows arrive in batches from a cursor and are kept as three
 * flat arrays; ids then become dense indices numbered in id order (so the
 * model does not depend on the order of the scan), duplicate cells are
 * merged and the two CSR matrices built, all by src/core in O(rows).
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/htup_details.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "wals.h"

#define WALS_FETCH_ROWS		50000

/* The raw coordinates, grown as batches arrive. */
typedef struct RawRatings
{
	int64	   *users;
	int64	   *items;
	float	   *ratings;
	size_t		n;
	size_t		capacity;
} RawRatings;

static void *
alloc_array(size_t count, size_t size)
{
	return MemoryContextAllocHuge(CurrentMemoryContext, Max(count, 1) * size);
}

static void
raw_reserve(RawRatings *raw, size_t more)
{
	size_t		want = raw->n + more;

	if (want <= raw->capacity)
		return;
	raw->capacity = Max(want, raw->capacity * 2);
	if (raw->users == NULL)
	{
		raw->users = alloc_array(raw->capacity, sizeof(int64));
		raw->items = alloc_array(raw->capacity, sizeof(int64));
		raw->ratings = alloc_array(raw->capacity, sizeof(float));
	}
	else
	{
		raw->users = repalloc_huge(raw->users, raw->capacity * sizeof(int64));
		raw->items = repalloc_huge(raw->items, raw->capacity * sizeof(int64));
		raw->ratings = repalloc_huge(raw->ratings, raw->capacity * sizeof(float));
	}
}

static void
bad_rating(const WalsTrainArgs *args, double value, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("column \"%s\" given as \"rating_col\" contains %s rating %g",
					args->rating_col, why, value),
			 errhint("%s", args->params.feedback == WALS_IMPLICIT ?
					 "Implicit feedback needs finite ratings greater than or equal to zero; filter the others out with a view." :
					 "Ratings must be finite; filter the others out with a view.")));
}

/* Check one rating and return it as the float the model uses. */
static float
check_rating(const WalsTrainArgs *args, Datum value, bool isnull)
{
	double		r;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("column \"%s\" given as \"rating_col\" contains a null rating",
						args->rating_col),
				 errhint("Filter null ratings out with a view, or pass rating_col => NULL to count every pair as 1.")));
	r = DatumGetFloat8(value);
	if (!isfinite(r))
		bad_rating(args, r, "the non-finite");
	if (fabs(r) > FLT_MAX)
		bad_rating(args, r, "the out-of-range");
	if (r < 0 && args->params.feedback == WALS_IMPLICIT)
		bad_rating(args, r, "the negative");
	return (float) r;
}

static void
read_batch(const WalsTrainArgs *args, RawRatings *raw, int64 *null_ids)
{
	TupleDesc	tupdesc = SPI_tuptable->tupdesc;
	Datum		values[3];
	bool		nulls[3];

	raw_reserve(raw, SPI_processed);
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		heap_deform_tuple(SPI_tuptable->vals[row], tupdesc, values, nulls);
		if (nulls[0] || nulls[1])
		{
			(*null_ids)++;
			continue;
		}
		raw->users[raw->n] = DatumGetInt64(values[0]);
		raw->items[raw->n] = DatumGetInt64(values[1]);
		raw->ratings[raw->n] = args->rating_col == NULL ? 1.0f :
			check_rating(args, values[2], nulls[2]);
		raw->n++;
	}
}

/* Fetch every row of the source into raw. */
static void
read_source(const WalsTrainArgs *args, RawRatings *raw, int64 *null_ids)
{
	StringInfoData query;
	SPIPlanPtr	plan;
	Portal		portal;

	initStringInfo(&query);
	appendStringInfo(&query, "SELECT (%s)::pg_catalog.int8, (%s)::pg_catalog.int8",
					 quote_identifier(args->user_col), quote_identifier(args->item_col));
	if (args->rating_col != NULL)
		appendStringInfo(&query, ", (%s)::pg_catalog.float8", quote_identifier(args->rating_col));
	appendStringInfo(&query, " FROM %s", args->source_name);

	plan = SPI_prepare(query.data, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "wals: could not prepare \"%s\": %s", query.data,
			 SPI_result_code_string(SPI_result));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, WALS_FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		read_batch(args, raw, null_ids);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
}

/* Dense indices for ids[0..n); returns the distinct ids in increasing order. */
static int64 *
map_ids(const int64 *ids, size_t n, int32 *index, int64 *count, const char *what)
{
	size_t		nslots = wals_idmap_slots(n);
	WalsIdMap	map;
	int64	   *uniq = alloc_array(n, sizeof(int64));
	size_t		nuniq = 0;
	int64	   *keys = alloc_array(nslots, sizeof(int64));
	int32	   *vals = alloc_array(nslots, sizeof(int32));

	wals_idmap_init(&map, keys, vals, nslots);
	wals_report_core_status(wals_idmap_build(&map, ids, n, index, uniq, &nuniq),
							what, -1);
	pfree(keys);
	pfree(vals);
	*count = nuniq;
	return repalloc_huge(uniq, Max(nuniq, 1) * sizeof(int64));
}

static void
build_matrices(const WalsTrainArgs *args, RawRatings *raw, WalsData *data)
{
	size_t		n = raw->n;
	int32	   *rows = alloc_array(n, sizeof(int32));
	int32	   *cols = alloc_array(n, sizeof(int32));
	int64	   *tmp_indptr;
	int32	   *tmp_idx;
	float	   *tmp_val;
	int32	   *counts;
	WalsCsr    *R = &data->by_user;
	WalsCsr    *Rt = &data->by_item;

	data->user_ids = map_ids(raw->users, n, rows, &data->nusers, "mapping user ids");
	pfree(raw->users);
	CHECK_FOR_INTERRUPTS();
	data->item_ids = map_ids(raw->items, n, cols, &data->nitems, "mapping item ids");
	pfree(raw->items);
	CHECK_FOR_INTERRUPTS();

	R->indptr = alloc_array(data->nusers + 1, sizeof(int64));
	R->indices = alloc_array(n, sizeof(int32));
	R->values = alloc_array(n, sizeof(float));
	tmp_indptr = alloc_array(data->nitems + 1, sizeof(int64));
	tmp_idx = alloc_array(n, sizeof(int32));
	tmp_val = alloc_array(n, sizeof(float));
	counts = alloc_array(n, sizeof(int32));
	wals_report_core_status(wals_csr_from_coo(args->params.feedback,
											  data->nusers, data->nitems, n,
											  rows, cols, raw->ratings, R,
											  tmp_indptr, tmp_idx, tmp_val, counts),
							"building the rating matrix", -1);
	pfree(tmp_indptr);
	pfree(tmp_idx);
	pfree(tmp_val);
	pfree(counts);
	pfree(rows);
	pfree(cols);
	pfree(raw->ratings);
	CHECK_FOR_INTERRUPTS();

	data->nratings = R->indptr[R->nrows];
	Rt->indptr = alloc_array(data->nitems + 1, sizeof(int64));
	Rt->indices = alloc_array(data->nratings, sizeof(int32));
	Rt->values = alloc_array(data->nratings, sizeof(float));
	wals_csr_transpose(R, Rt);
}

/*
 * Read the ratings the arguments describe into data.  Must run inside an SPI
 * connection.  Errors on a null or non-finite rating, a negative implicit
 * rating and a source with no usable rows; rows with a null id are skipped
 * and counted in a NOTICE.
 */
void
wals_ingest(const WalsTrainArgs *args, WalsData *data)
{
	RawRatings	raw = {0};

	memset(data, 0, sizeof(*data));
	read_source(args, &raw, &data->null_ids);

	if (data->null_ids > 0)
		ereport(NOTICE,
				(errmsg("skipped %lld rows of \"%s\" with a null user or item id",
						(long long) data->null_ids, args->source_display)));
	if (raw.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" given as \"source\" has no ratings", args->source_display),
				 errhint("Training needs at least one row with a user and an item id.")));

	build_matrices(args, &raw, data);
}
