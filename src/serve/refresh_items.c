/*
 * refresh_items.c
 *	  The item side of a refresh: items solved again against the current
 *	  user factors, and the rows a refresh writes.
 *
 * An item's factors solve the same system as in a training's last item
 * half-sweep: the Gram of every user's factors, and the factors of the
 * users who rated it.  Both come from the user factor table, read once per
 * refresh (the Gram needs every row; the raters are kept from the same
 * read).  The items' ratings come from the source, read as its rows are
 * when a training reads them.
 *
 * Items are what serving scores against, so a refresh that writes item
 * factors gives the model a serving version of its own (the catalog's
 * serving_version), and builds the shared copy of that version in its own
 * transaction, as a training does: no reader builds anything after it
 * commits, and a reader in flight finishes on the version before.
 *
 * Everything is read and written as the model's owner, in a
 * security-restricted operation (roles.c), as wals_refresh_users does.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "wals_serve.h"

PG_FUNCTION_INFO_V1(wals_refresh_items);

/*
 * Every user's factors, ids increasing, with their Gram: the other side of
 * an item's system.
 */
void
wals_user_side_load(const WalsModelInfo *info, WalsUserSide *us)
{
	int			f = info->factors;
	SPIPlanPtr	plan;
	Portal		portal;
	int64		cap = 1024;
	int64		n = 0;
	int64	   *ids = palloc(sizeof(int64) * cap);
	float	   *X = palloc(sizeof(float) * f * cap);

	wals_check_factor_table(info, info->user_rel, true);
	plan = wals_sql_prepare(psprintf("SELECT user_id, factors FROM %s ORDER BY user_id",
									 wals_relation_name(info->user_rel)), 0, NULL);
	portal = wals_sql_cursor_plan(plan, NULL, NULL, true);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		wals_sql_fetch(portal, 4096);
		if (SPI_processed == 0)
			break;
		if (n + (int64) SPI_processed > cap)
		{
			cap = Max(cap * 2, n + (int64) SPI_processed);
			ids = repalloc_huge(ids, sizeof(int64) * cap);
			X = repalloc_huge(X, sizeof(float) * f * cap);
		}
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			HeapTuple	tuple = SPI_tuptable->vals[r];

			ids[n] = wals_read_id(tuple, SPI_tuptable->tupdesc, 1, info, &isnull);
			if (isnull || (n > 0 && ids[n] <= ids[n - 1]))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("the user factor table of model \"%s\" holds a null or repeated user_id",
								info->display),
						 errhint("Train the model again.")));
			wals_read_factors(tuple, SPI_tuptable->tupdesc, 2, f, X + (size_t) n * f, info);
			n++;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	us->n = n;
	us->total = n;
	us->ids = ids;
	us->X = X;
	us->G = palloc(sizeof(float) * f * f);
	memset(us->G, 0, sizeof(float) * f * f);
	wals_gram_rows(X, 0, n, f, us->G);
}

/*
 * The raters of cells[0..ncells), with their factors, and G, the Gram of
 * every user the catalog keeps: the user side of those items without a
 * read of every user.
 */
void
wals_user_side_raters(const WalsModelInfo *info, float *G, int64 users, const WalsCell *cells,
					  int64 ncells, WalsUserSide *us)
{
	int			f = info->factors;
	int64	   *ids = palloc(sizeof(int64) * Max(ncells, 1));
	int64		n = 0;
	Datum		arg;
	Oid			type = INT8ARRAYOID;

	for (int64 c = 0; c < ncells; c++)
		ids[c] = cells[c].user;
	qsort(ids, ncells, sizeof(int64), wals_compare_int64);
	for (int64 c = 0; c < ncells; c++)
		if (n == 0 || ids[n - 1] != ids[c])
			ids[n++] = ids[c];
	arg = wals_int8_array(ids, n);
	wals_check_factor_table(info, info->user_rel, true);
	wals_sql_expect(wals_sql(psprintf("SELECT user_id, factors FROM %s"
									  " WHERE user_id OPERATOR(pg_catalog.=) ANY ($1) ORDER BY user_id",
									  wals_relation_name(info->user_rel)),
							 1, &type, &arg, NULL, true, 0),
					SPI_OK_SELECT, info->user_rel);
	us->n = 0;
	us->ids = palloc(sizeof(int64) * Max(SPI_processed, 1));
	us->X = palloc(sizeof(float) * f * Max(SPI_processed, 1));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[r];
		int64		id = wals_read_id(tuple, SPI_tuptable->tupdesc, 1, info, &isnull);

		if (isnull || (us->n > 0 && id <= us->ids[us->n - 1]))
			continue;
		us->ids[us->n] = id;
		wals_read_factors(tuple, SPI_tuptable->tupdesc, 2, f, us->X + (size_t) us->n * f, info);
		us->n++;
	}
	SPI_freetuptable(SPI_tuptable);
	us->G = G;
	us->total = users;
}

/*
 * G (f x f) with the rows gone[0..ngone) taken out and come[0..ncome) put
 * in: the Grams of both, by the kernel of a whole one, rather than the
 * Gram of every row again.
 */
void
wals_gram_swap(float *G, const float *gone, int64 ngone, const float *come, int64 ncome, int f)
{
	float	   *Ggone = palloc0(sizeof(float) * f * f);
	float	   *Gcome = palloc0(sizeof(float) * f * f);

	wals_gram_rows(gone, 0, ngone, f, Ggone);
	wals_gram_rows(come, 0, ncome, f, Gcome);
	for (int a = 0; a < f * f; a++)
		G[a] += Gcome[a] - Ggone[a];
	pfree(Ggone);
	pfree(Gcome);
}

/*
 * Replace the factors of user ids[i] (known or not; ids increasing) by
 * X's row i in us, and the Gram with them, after those users were solved
 * again: the items solved next see them.  The Gram is updated by the
 * Grams of the rows that left and came, computed by the same kernel as a
 * whole one, rather than again from every user.
 */
void
wals_user_side_update(WalsUserSide *us, int f, const int64 *ids, const float *X, int64 n)
{
	int64		added = 0;
	float	   *old = palloc(sizeof(float) * f * Max(n, 1));
	int64		nold = 0;

	for (int64 i = 0; i < n; i++)
	{
		int64		at = wals_ids_find(us->ids, us->n, ids[i]);

		if (at < 0)
			added++;
		else
			memcpy(old + (size_t) nold++ * f, us->X + (size_t) at * f, sizeof(float) * f);
	}
	wals_gram_swap(us->G, old, nold, X, n, f);
	if (added > 0)
	{
		int64		total = us->n + added;
		int64	   *nids = palloc(sizeof(int64) * total);
		float	   *nX = palloc(sizeof(float) * f * total);
		int64		a = 0;
		int64		b = 0;
		int64		o = 0;

		/* both sorted: merge the new users in */
		while (a < us->n || b < n)
		{
			bool		take_old = b >= n || (a < us->n && us->ids[a] <= ids[b]);

			if (take_old)
			{
				if (b < n && us->ids[a] == ids[b])
					b++;
				nids[o] = us->ids[a];
				memcpy(nX + (size_t) o * f, us->X + (size_t) a * f, sizeof(float) * f);
				a++;
			}
			else
			{
				nids[o] = ids[b];
				b++;
			}
			o++;
		}
		pfree(us->ids);
		pfree(us->X);
		us->ids = nids;
		us->X = nX;
		us->n = total;
		us->total = Max(us->total, total);
	}
	for (int64 i = 0; i < n; i++)
	{
		int64		at = wals_ids_find(us->ids, us->n, ids[i]);

		memcpy(us->X + (size_t) at * f, X + (size_t) i * f, sizeof(float) * f);
	}
	pfree(old);
}

/*
 * Solve items ids[0..n) (increasing) from the ratings cells[0..ncells) give
 * them, against us, into Y (n x f); *known[i] says whether item i had a
 * rater with factors (an item without one has no factors, as after a
 * training).
 */
void
wals_solve_items(const WalsModelInfo *info, const WalsUserSide *us, const int64 *ids, int64 n,
				 const WalsCell *cells, int64 ncells, float *Y, bool *known)
{
	int			f = info->factors;
	int32	   *row = palloc(sizeof(int32) * Max(ncells, 1));
	int32	   *col = palloc(sizeof(int32) * Max(ncells, 1));
	float	   *val = palloc(sizeof(float) * Max(ncells, 1));
	int64	   *raters = palloc(sizeof(int64) * Max(ncells, 1));
	size_t		m = 0;
	WalsCsr		R;
	WalsParams	params = info->params;
	float	   *Xr;
	WalsStatus	st;
	WalsIdDirectory users;
	WalsIdDirectory items;
	int32	   *col_of;
	int32		nr = 0;

	/*
	 * The raters with factors, each once, as the columns of R, in the order
	 * of us: directories find a rater and an item in a load or two, where
	 * binary searches and sorting the raters took a fifth of a refresh of
	 * the 100 most rated items (2.3M ratings), and a third of a refresh
	 * of 'touched' items (15M).
	 */
	if (wals_id_directory_build(&users, us->ids, us->n,
								palloc(wals_id_directory_size(us->n))) != WALS_OK ||
		wals_id_directory_build(&items, ids, n, palloc(wals_id_directory_size(n))) != WALS_OK)
		elog(ERROR, "wals: the users or items of a refresh are not in increasing order");
	col_of = palloc(sizeof(int32) * Max(us->n, 1));
	memset(col_of, -1, sizeof(int32) * Max(us->n, 1));
	for (int64 c = 0; c < ncells; c++)
	{
		int64		at = wals_id_directory_find(&users, cells[c].user);
		int64		item = wals_id_directory_find(&items, cells[c].item);

		if ((c & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		if (at < 0 || item < 0)
			continue;
		row[m] = (int32) item;
		col_of[at] = 0;
		raters[m] = at;
		val[m] = cells[c].rating;
		m++;
	}
	for (int64 u = 0; u < us->n; u++)
		if (col_of[u] == 0)
			col_of[u] = nr++;
	Xr = palloc(sizeof(float) * f * Max(nr, 1));
	for (int64 u = 0; u < us->n; u++)
	{
		if ((u & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		if (col_of[u] >= 0)
			memcpy(Xr + (size_t) col_of[u] * f, us->X + (size_t) u * f, sizeof(float) * f);
	}
	for (size_t i = 0; i < m; i++)
	{
		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		col[i] = col_of[raters[i]];
	}
	R.ncols = nr;
	R.indptr = palloc(sizeof(int64) * (n + 1));
	R.indices = palloc(sizeof(int32) * Max(m, 1));
	R.values = palloc(sizeof(float) * Max(m, 1));
	st = wals_csr_from_coo(params.feedback, n, R.ncols, m, row, col, val, &R,
						   palloc(sizeof(int64) * (R.ncols + 1)), palloc(sizeof(int32) * Max(m, 1)),
						   palloc(sizeof(float) * Max(m, 1)), NULL);
	if (st != WALS_OK)
		wals_report_core_status(st, "merging the ratings of the items");
	for (int64 i = 0; i < n; i++)
		known[i] = R.indptr[i + 1] > R.indptr[i];
	/* a frequency-scaled row's scale counts every user, not the raters */
	R.ncols = us->total;
	params.solver = WALS_CHOLESKY;
	memset(Y, 0, sizeof(float) * f * n);
	wals_solve_all_rows(&params, &R, Xr, nr, us->G, Y, f, "solving the items again");
}

/* A bigint[] of v[0..n). */
Datum
wals_int8_array(const int64 *v, int64 n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int64 i = 0; i < n; i++)
		elems[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_array(elems, (int) n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

/*
 * The query of the user, item and rating of the rows of src (named s)
 * that pass where, in the columns wals_cell_read reads; from: more of the
 * FROM list, after s.
 */
char *
wals_cells_query(const WalsSourceNames *src, const char *from, const char *where)
{
	return psprintf("SELECT (s.%s)::pg_catalog.int8, (s.%s)::pg_catalog.int8, %s FROM %s s%s WHERE %s",
					src->user_col, src->item_col,
					src->rating_col == NULL ? "NULL::pg_catalog.float8" :
					psprintf("(s.%s)::pg_catalog.float8", src->rating_col),
					src->relation, from, where);
}

/*
 * The cells of the rows of an open cursor, which it closes, appended to
 * cells[0..*n) (room for *cap, grown as needed); returns cells.
 */
static WalsCell *
read_portal(const WalsModelInfo *info, Portal portal, WalsCell *cells, int64 *n, int64 *cap)
{
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		wals_sql_fetch(portal, 10000);
		if (SPI_processed == 0)
			break;
		if (*n + (int64) SPI_processed > *cap)
		{
			*cap = Max(*cap * 2, *n + (int64) SPI_processed);
			cells = repalloc_huge(cells, sizeof(WalsCell) * *cap);
		}
		for (uint64 r = 0; r < SPI_processed; r++)
			if (wals_cell_read(info, SPI_tuptable->vals[r], SPI_tuptable->tupdesc, &cells[*n]))
				(*n)++;
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	return cells;
}

/* The same, of the rows the query of plan (with args) reads. */
WalsCell *
wals_read_cells(const WalsModelInfo *info, SPIPlanPtr plan, Datum *args, WalsCell *cells,
				int64 *n, int64 *cap)
{
	return read_portal(info, wals_sql_cursor_plan(plan, args, NULL, true), cells, n, cap);
}

/*
 * The ids of ids[0..n) that the source's item column can hold, into
 * out[0..*m); returns the name of the column's type, to which the query
 * casts them.  Compared as bigint, an int or smallint column's rows would
 * each be tested against the items one by one (the cross-type operator has
 * no hashing for the array), a quarter of a second a million rows for 100
 * items; as the column's own type, the test is one hash probe.
 */
static const char *
column_ids(const WalsModelInfo *info, const int64 *ids, int64 n, int64 *out, int64 *m)
{
	WalsValueKind kind = WALS_VALUE_INT8;
	int64		lo = PG_INT64_MIN;
	int64		hi = PG_INT64_MAX;

	(void) wals_value_kind(get_atttype(info->source, get_attnum(info->source, info->item_col)),
						   &kind);
	if (kind == WALS_VALUE_INT2)
	{
		lo = PG_INT16_MIN;
		hi = PG_INT16_MAX;
	}
	else if (kind == WALS_VALUE_INT4)
	{
		lo = PG_INT32_MIN;
		hi = PG_INT32_MAX;
	}
	*m = 0;
	for (int64 i = 0; i < n; i++)
		if (ids[i] >= lo && ids[i] <= hi)
			out[(*m)++] = ids[i];
	return kind == WALS_VALUE_INT2 ? "int2" : kind == WALS_VALUE_INT4 ? "int4" : "int8";
}

/*
 * The ratings in the model's catalog of the items of ids[0..n) it knows,
 * from counts (the catalog's item_counts); -1 without counts.
 */
double
wals_items_rated(const WalsServeModel *m, const int32 *counts, const int64 *ids, int64 n)
{
	double		sum = 0;

	if (counts == NULL)
		return -1;
	for (int64 i = 0; i < n; i++)
	{
		int64		at = wals_serve_item(m, ids[i]);

		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		if (at >= 0)
			sum += counts[at];
	}
	return sum;
}

/*
 * The ratings of items ids[0..n) (increasing) in the source, read as the
 * model's owner, checked as a training checks them; *ncells gets their
 * number.  expected: the ratings the catalog counts for them, or -1.
 * Where they hold much of a table, the whole table is read, as a training
 * reads it (refresh_source.c).
 *
 * The planner prices an index scan of the item column as though the pages
 * it fetches stayed cached, but an item's ratings lie on pages all over the
 * table, fetched in the order of the index, again for every item: for the
 * 100 most rated items of the 15.5M set (2.3M ratings), 6.9 s on a 2-core
 * Xeon with 128 MB of shared buffers, where a bitmap heap scan, which
 * reads each page once in the table's order, took 1.1 to 1.6 s.  So this
 * read alone is planned without plain index scans; an index-only scan,
 * which fetches no page of the table, is left to the planner.
 */
WalsCell *
wals_item_ratings(const WalsModelInfo *info, const WalsSourceNames *src, const int64 *ids,
				  int64 n, double expected, int64 *ncells)
{
	Oid			type = INT8ARRAYOID;
	const char *elem;
	int64	   *in_range;
	int64		m = 0;
	Datum		arg;
	int64		cap = 1024;
	SPIPlanPtr	plan;
	int			level;
	Portal		portal;

	if (wals_refresh_reads_whole(info, expected))
		return wals_refresh_read_whole(info, ids, n, ncells);
	in_range = palloc(sizeof(int64) * Max(n, 1));
	elem = column_ids(info, ids, n, in_range, &m);
	arg = wals_int8_array(in_range, m);
	plan = wals_sql_prepare(wals_cells_query(src, "",
											 psprintf("s.%s OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.%s[])",
													  src->item_col, elem)),
							1, &type);
	level = NewGUCNestLevel();
	(void) set_config_option("enable_indexscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	portal = wals_sql_cursor_plan(plan, &arg, NULL, true);
	AtEOXact_GUC(true, level);
	*ncells = 0;
	return read_portal(info, portal, palloc(sizeof(WalsCell) * cap), ncells, &cap);
}

/*
 * A row (user, item, rating) of the source into cell; false for a row
 * without a user or an item, which a training skips too.
 */
bool
wals_cell_read(const WalsModelInfo *info, HeapTuple tuple, TupleDesc desc, WalsCell *cell)
{
	bool		unull;
	bool		inull;
	bool		rnull;
	Datum		user = SPI_getbinval(tuple, desc, 1, &unull);
	Datum		item = SPI_getbinval(tuple, desc, 2, &inull);
	double		rating = 1.0;

	if (unull || inull)
		return false;
	if (info->rating_col != NULL)
	{
		rating = DatumGetFloat8(SPI_getbinval(tuple, desc, 3, &rnull));
		if (rnull || !wals_rating_ok(rating))
			ereport(ERROR,
					(errcode(rnull ? ERRCODE_NULL_VALUE_NOT_ALLOWED : ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("column \"%s\" of the source of model \"%s\" holds the rating %s for user " INT64_FORMAT,
							info->rating_col, info->display,
							rnull ? "null" : psprintf("%g", rating), DatumGetInt64(user)),
					 errhint("Ratings must be finite real numbers; filter the others out with a view.")));
	}
	cell->user = DatumGetInt64(user);
	cell->item = DatumGetInt64(item);
	cell->rating = (float) rating;
	return true;
}

/*
 * Record what a refresh changed: users and items added (or, negative,
 * removed), a serving version of the refresh's own where items changed,
 * and, for wals_refresh, the new mark, the time and the ratings it took
 * in.  The items of the new serving version are built from patch.
 */
void
wals_catalog_refreshed(const WalsModelInfo *info, const WalsRefreshDone *done,
					   const WalsItemsPatch *patch)
{
	Oid			types[8] = {NAMEOID, TEXTOID, INT8OID, INT8OID, INT8OID, TEXTOID, BOOLOID, INT8OID};
	Datum		args[8];
	char		nulls[8] = "        ";
	WalsRoleSave save;

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(info->schema));
	args[1] = CStringGetTextDatum(info->name);
	args[2] = Int64GetDatum(done->users_added);
	args[3] = Int64GetDatum(done->items_added);
	if (done->items_changed)
		args[4] = Int64GetDatum(wals_next_version());
	else
		nulls[4] = 'n';
	if (done->mark != NULL)
		args[5] = CStringGetTextDatum(done->mark);
	else
		nulls[5] = 'n';
	args[6] = BoolGetDatum(done->by_refresh);
	args[7] = Int64GetDatum(done->ratings);
	wals_become_catalog_writer(&save);
	if (wals_sql(psprintf("UPDATE %s SET users = users OPERATOR(pg_catalog.+) $3,"
						  " items = items OPERATOR(pg_catalog.+) $4,"
						  " serving_version = COALESCE($5, serving_version),"
						  " changed_mark = COALESCE($6, changed_mark),"
						  " refreshed_at = CASE WHEN $7 THEN pg_catalog.now() ELSE refreshed_at END,"
						  " refreshed_ratings = refreshed_ratings OPERATOR(pg_catalog.+) $8"
						  " WHERE schema OPERATOR(pg_catalog.=) $1"
						  " AND model OPERATOR(pg_catalog.=) $2",
						  wals_catalog_table("wals_models")),
				 8, types, args, nulls, false, 0) != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "wals: could not record the refresh of model \"%s\"", info->display);
	wals_unbecome(&save);
	wals_catalog_keep_state(info->schema, info->name,
							done->user_gram ? wals_gram_bytea(done->user_gram, info->factors) : NULL,
							done->item_counts ?
							wals_counts_bytea(done->item_counts, done->nitem_counts) : NULL,
							done->items_changed);
	if (done->items_changed)
	{
		/* the items every backend will serve, built now, as a training does */
		wals_call_new_snapshot();
		wals_serve_preload(info->schema, info->name, patch, info);
	}
}

/*
 * The Gram of from's items with the rows of ids[0..n) (increasing)
 * replaced by Y's (see WalsItemsPatch): the Gram from had, updated row by
 * row in double precision rather than computed again from every row.
 */
float *
wals_patched_gram(const WalsServeModel *from, const int64 *ids, int64 n, const float *Y,
				  const bool *known)
{
	int			f = from->factors;
	double	   *acc = palloc(sizeof(double) * f * f);
	float	   *G = palloc(sizeof(float) * f * f);
	float	   *zero = palloc0(sizeof(float) * f);

	for (int a = 0; a < f * f; a++)
		acc[a] = from->G[a];
	for (int64 k = 0; k < n; k++)
	{
		int64		old = wals_serve_item(from, ids[k]);
		const float *y = known[k] ? Y + (size_t) k * f : zero;
		const float *yo = old >= 0 ? from->Y + (size_t) old * f : zero;

		/*
		 * a row of the update is f products: at f = 4096, 2^24 for an item;
		 * without a branch inside, they go by vectors
		 */
		for (int a = 0; a < f; a++)
		{
			double		ya = y[a];
			double		yoa = yo[a];
			double	   *row = acc + (size_t) a * f;

			CHECK_FOR_INTERRUPTS();
			for (int b = 0; b < f; b++)
				row[b] += ya * y[b] - yoa * yo[b];
		}
	}
	for (int a = 0; a < f * f; a++)
		G[a] = (float) acc[a];
	pfree(acc);
	return G;
}

/*
 * Store items ids[0..n) solved into Y (known[i] false: no factors, the row
 * removed); counts what was added and removed into done.
 */
void
wals_store_items(const WalsModelInfo *info, const int64 *ids, int64 n, const float *Y,
				 const bool *known, WalsRefreshDone *done)
{
	WalsRowWriter *w;

	wals_check_factor_table(info, info->item_rel, false);
	w = wals_row_writer_open(info, false);
	for (int64 i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!known[i])
			done->items_added -= wals_row_remove(w, ids[i]);
		else if (wals_row_write(w, ids[i], Y + (size_t) i * info->factors, info->factors, NULL))
			done->items_added++;
		done->items++;
	}
	wals_row_writer_close(w);
	done->items_changed = done->items_changed || n > 0;
}

/*
 * wals_refresh_items(item_ids bigint[], model text) RETURNS bigint
 *
 * Solve the items given again from their current ratings in the source,
 * against the current user factors, and store them; returns how many were
 * stored.  An item left without a rater the model knows has no factors, as
 * after a training: its row is removed.
 */
static Datum
refresh_items_call(PG_FUNCTION_ARGS)
{
	int			n;
	int64	   *ids = wals_arg_ids(fcinfo, 0, "item_ids", &n);
	text	   *model = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	WalsModelInfo found;
	WalsSourceNames source;
	WalsUserSide us;
	WalsRoleSave save;
	WalsCell   *cells;
	int64		ncells;
	float	   *Y;
	bool	   *known;
	int64		distinct = 0;
	int64		removed;
	WalsRefreshDone done = {0};
	WalsServeModel *m;
	float	   *G;
	bytea	   *gram;
	bytea	   *counts;
	int64		users;

	if (ids == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"item_ids\" must not be null")));
	PreventCommandIfReadOnly("wals_refresh_items()");
	qsort(ids, n, sizeof(int64), wals_compare_int64);
	for (int i = 0; i < n; i++)
		if (distinct == 0 || ids[distinct - 1] != ids[i])
			ids[distinct++] = ids[i];

	wals_spi_connect();
	wals_model_resolve(model, &found);
	if (!wals_lock_model(found.schema, found.name, &found, false))
		wals_no_such_model(found.schema, found.name);
	if (!wals_catalog_state(found.schema, found.name, &gram, &counts, &users))
		wals_no_such_model(found.schema, found.name);
	G = wals_gram_from_bytea(gram, found.factors);
	wals_work_begin(WALS_WORK_REFRESH, get_namespace_oid(found.schema, false), found.name);
	wals_become_model_owner(&found, &save);
	m = wals_serve_model(cstring_to_text(wals_model_quoted(found.schema, found.name)));
	wals_model_source(&found, &source);
	cells = wals_item_ratings(&found, &source, ids, distinct,
							  wals_items_rated(m, wals_counts_from_bytea(counts, m->nitems), ids,
											   distinct),
							  &ncells);
	if (G != NULL)
		wals_user_side_raters(&found, G, users, cells, ncells, &us);
	else
		wals_user_side_load(&found, &us);
	Y = palloc(sizeof(float) * found.factors * Max(distinct, 1));
	known = palloc(sizeof(bool) * Max(distinct, 1));
	wals_work_phase(WALS_PHASE_SOLVING_ITEMS, 0);
	wals_solve_items(&found, &us, ids, distinct, cells, ncells, Y, known);
	wals_work_phase(WALS_PHASE_STORING, 0);
	wals_store_items(&found, ids, distinct, Y, known, &done);
	wals_unbecome(&save);
	wals_work_end();
	removed = 0;
	for (int64 i = 0; i < distinct; i++)
		removed += !known[i];
	{
		WalsItemsPatch patch = {m, ids, distinct, Y, known,
		wals_patched_gram(m, ids, distinct, Y, known)};

		wals_catalog_refreshed(&found, &done, &patch);
	}
	if (removed > 0)
		ereport(NOTICE,
				(errmsg_plural("%lld item of model \"%s\" has no rater the model knows: its factors were removed",
							   "%lld items of model \"%s\" have no rater the model knows: their factors were removed",
							   removed, (long long) removed, found.display)));
	SPI_finish();
	PG_RETURN_INT64(distinct - removed);
}

Datum
wals_refresh_items(PG_FUNCTION_ARGS)
{
	return wals_call(refresh_items_call, fcinfo, "wals_refresh_items", true);
}
