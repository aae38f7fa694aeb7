/*
 * args.c
 *	  The arguments the serving functions share, checked in one way, and
 *	  the output of a top-k list.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "port/pg_bitutils.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "wals_serve.h"

int
wals_arg_k(FunctionCallInfo fcinfo, int arg)
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

bool
wals_arg_bool(FunctionCallInfo fcinfo, int arg, const char *name)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"%s\" must not be null", name)));
	return PG_GETARG_BOOL(arg);
}

/*
 * The elements of a bigint[] argument, or NULL when the argument is NULL
 * or absent (an older SQL definition of the function).  A null element is
 * an error: an id list with holes is almost always a bug in the caller.
 */
int64 *
wals_arg_ids(FunctionCallInfo fcinfo, int arg, const char *name, int *n)
{
	ArrayType  *array;
	Datum	   *elems;
	bool	   *nulls;
	int64	   *ids;

	*n = 0;
	if (PG_NARGS() <= arg || PG_ARGISNULL(arg))
		return NULL;
	array = PG_GETARG_ARRAYTYPE_P(arg);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("\"%s\" must be a one-dimensional array", name)));
	if (ARR_ELEMTYPE(array) == INT8OID && !ARR_HASNULL(array))
	{
		/* the elements as they lie: no Datum and null flag each */
		*n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
		ids = palloc(sizeof(int64) * Max(*n, 1));
		memcpy(ids, ARR_DATA_PTR(array), sizeof(int64) * *n);
		return ids;
	}
	deconstruct_array(array, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, n);
	ids = palloc(sizeof(int64) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("\"%s\" must not contain nulls", name)));
		ids[i] = DatumGetInt64(elems[i]);
	}
	return ids;
}

/* qsort comparators of the id and index lists of the serving functions. */
int
wals_compare_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

int
wals_compare_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/* One rated cell, for sorting a user's items with their ratings. */
typedef struct Cell
{
	int32		item;
	float		rating;
} Cell;

static int
compare_cells(const void *a, const void *b)
{
	const Cell *x = a;
	const Cell *y = b;

	if (x->item != y->item)
		return (x->item > y->item) - (x->item < y->item);
	return (x->rating > y->rating) - (x->rating < y->rating);
}

/* Sort n cells by item in place, each rating following its item. */
void
wals_sort_cells(int32 *items, float *ratings, int64 n)
{
	Cell	   *cells = palloc(sizeof(Cell) * Max(n, 1));

	for (int64 i = 0; i < n; i++)
	{
		cells[i].item = items[i];
		cells[i].rating = ratings[i];
	}
	qsort(cells, n, sizeof(Cell), compare_cells);
	for (int64 i = 0; i < n; i++)
	{
		items[i] = cells[i].item;
		ratings[i] = cells[i].rating;
	}
	pfree(cells);
}

/*
 * The indices in m of the items ids[0..n) names, sorted, in *count; ids m
 * does not know are counted in *unknown.  Repeats may be dropped: filters
 * ignore them.  A long list goes through a bitmap of m's items rather than
 * a sort: 20,000 ids cost 4 ms a call through qsort at 41,000 items.
 */
int32 *
wals_ids_to_items(const WalsServeModel *m, const int64 *ids, int n, int64 *count, int *unknown)
{
	int32	   *items = palloc(sizeof(int32) * Max(n, 1));
	int64		words = (m->nitems + 63) / 64;
	int64		c = 0;

	*unknown = 0;
	for (int i = 0; i < n; i++)
	{
		int64		index = wals_serve_item(m, ids[i]);

		if (index >= 0)
			items[c++] = (int32) index;
		else
			(*unknown)++;
	}
	if ((int64) c * 16 < words)
		qsort(items, c, sizeof(int32), wals_compare_int32);
	else
	{
		uint64	   *bits = palloc0(sizeof(uint64) * Max(words, 1));

		for (int64 i = 0; i < c; i++)
			bits[items[i] / 64] |= UINT64CONST(1) << (items[i] % 64);
		c = 0;
		for (int64 w = 0; w < words; w++)
			for (uint64 b = bits[w]; b != 0; b &= b - 1)
				items[c++] = (int32) (w * 64 + pg_rightmost_one_pos64(b));
		pfree(bits);
	}
	*count = c;
	return items;
}

/* The sorted union of two sorted lists (repeats kept: filters ignore them). */
int32 *
wals_merge_items(const int32 *a, int64 na, const int32 *b, int64 nb, int64 *n)
{
	int32	   *out = palloc(sizeof(int32) * Max(na + nb, 1));
	int64		i = 0;
	int64		j = 0;
	int64		c = 0;

	while (i < na || j < nb)
	{
		if (j >= nb || (i < na && a[i] <= b[j]))
			out[c++] = a[i++];
		else
			out[c++] = b[j++];
	}
	*n = c;
	return out;
}

/*
 * The exclude_items and only_items arguments of a call as a filter: ids the
 * model does not know simply match nothing.  An empty only_items admits no
 * item; a NULL one admits all.
 */
void
wals_filter_args(FunctionCallInfo fcinfo, int exclude_arg, int only_arg,
				 const WalsServeModel *m, WalsScoreFilter *filter)
{
	int			n;
	int			unknown;
	int64	   *ids;

	memset(filter, 0, sizeof(*filter));
	ids = wals_arg_ids(fcinfo, exclude_arg, "exclude_items", &n);
	if (ids != NULL)
		filter->skip = wals_ids_to_items(m, ids, n, &filter->nskip, &unknown);
	ids = wals_arg_ids(fcinfo, only_arg, "only_items", &n);
	if (ids != NULL)
		filter->allow = wals_ids_to_items(m, ids, n, &filter->nallow, &unknown);
}

/*
 * The query scratch of m's indexes for k results, kept with the model so
 * that a call allocates nothing of the size of the item set.
 */
void *
wals_serve_scratch(WalsServeModel *m, const WalsScoreIndex *ix, int k)
{
	size_t		size = wals_score_scratch_size(ix, k);

	if (size > m->scratch_size)
	{
		m->scratch = MemoryContextAllocHuge(m->cxt, size);
		m->scratch_size = size;
	}
	return m->scratch;
}

/* Return the k best eligible items of ix for x as rows (item_id, score). */
void
wals_put_topk(FunctionCallInfo fcinfo, WalsServeModel *m, const WalsScoreIndex *ix,
			  const float *x, const WalsScoreFilter *filter, int k)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			kk = (int) Min((int64) k, Max(m->nitems, 1));
	int32	   *idx = palloc(sizeof(int32) * kk);
	float	   *score = palloc(sizeof(float) * kk);
	int			found = m->nitems == 0 ? 0 :
		wals_score_topk(ix, x, filter, kk, idx, score, wals_serve_scratch(m, ix, kk));

	for (int r = 0; r < found; r++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = Int64GetDatum(m->ids[idx[r]]);
		values[1] = Float4GetDatum(score[r]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}
