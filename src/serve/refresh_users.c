/*
 * refresh_users.c
 *	  The user side of wals_refresh: the users' stored rows read, and the
 *	  users solved from them with the changed pairs in place and written.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "refresh_internal.h"

/*
 * The columns of a pass over users: each item they rated that has
 * factors, numbered as met, its row copied into Yc once.  An item's number
 * across the refresh (its "key") is its index in the model, or nitems plus
 * its index among the items solved when the model does not know it;
 * col_of maps a key to its column, -1 until met.  Kept across the pass's
 * batches, so that no batch maps, copies or faults in memory anew.
 */
typedef struct Columns
{
	WalsIdMap	model_items;	/* item id -> index in the model */
	int32	   *col_of;			/* nitems + nsolved */
	int32	   *solved_of;		/* model index -> index among the solved, or -1 */
	int64	   *keys;			/* of the columns, each copied once a pass */
	float	   *Yc;				/* room for every key: no copy as it grows */
	int64		n;
	int32	   *indices;		/* R's, grown as a batch needs */
	float	   *values;
	int64		cells;			/* their room */
} Columns;

/* The columns of a pass, in the current memory context. */
static Columns *
columns_make(const Refresh *r)
{
	Columns    *c = palloc(sizeof(Columns));
	int64		nitems = r->m->nitems;
	size_t		bytes;
	int32	   *index = palloc(sizeof(int32) * Max(nitems, 1));

	/* the model's ids increase: each one's index in the map is its own */
	wals_idmap_init(&c->model_items);
	bytes = wals_idmap_need(&c->model_items, r->m->ids, nitems);
	if (bytes > 0)
		wals_report_core_status(wals_idmap_move(&c->model_items,
												palloc_extended(bytes, MCXT_ALLOC_HUGE),
												bytes, r->m->ids, nitems),
								"mapping the model's items");
	wals_report_core_status(wals_idmap_insert_many(&c->model_items, r->m->ids, nitems, index),
							"mapping the model's items");
	pfree(index);
	c->col_of = palloc(sizeof(int32) * (nitems + r->nsolved + 1));
	memset(c->col_of, -1, sizeof(int32) * (nitems + r->nsolved + 1));
	c->solved_of = palloc(sizeof(int32) * Max(nitems, 1));
	memset(c->solved_of, -1, sizeof(int32) * Max(nitems, 1));
	for (int64 k = 0; k < r->nsolved; k++)
		if (!r->is_new[k])
			c->solved_of[wals_idmap_find(&c->model_items, r->solved[k])] = (int32) k;
	c->keys = palloc(sizeof(int64) * (nitems + r->nsolved + 1));
	c->Yc = palloc_extended(sizeof(float) * r->f * (nitems + r->nsolved + 1), MCXT_ALLOC_HUGE);
	/* most rows are copied in, from most of the model's rows */
	wals_prefault(c->Yc, sizeof(float) * r->f * (nitems + r->nsolved + 1));
	wals_prefault_read(r->m->Y, sizeof(float) * r->f * nitems);
	c->n = 0;
	c->cells = 0;
	c->indices = NULL;
	c->values = NULL;
	return c;
}

/* The factors of the item of key, or NULL where it has none. */
static const float *
key_row(const Refresh *r, const Columns *c, int64 key)
{
	int64		k = key >= r->m->nitems ? key - r->m->nitems : c->solved_of[key];

	if (k >= 0)
		return r->known[k] ? r->Ys + (size_t) k * r->f : NULL;
	return r->m->Y + (size_t) key * r->f;
}

/* The key of item id, or -1 for an item neither the model nor the refresh knows. */
static int64
item_key(const Refresh *r, const Columns *c, int64 id)
{
	int64		k = wals_idmap_find(&c->model_items, id);

	if (k >= 0)
		return k;
	k = wals_ids_find(r->solved, r->nsolved, id);
	return k >= 0 ? r->m->nitems + k : -1;
}

/* The column of key in this pass, made when new; -1 for no factors. */
static int32
column_of(const Refresh *r, Columns *c, int64 key)
{
	const float *y;

	if (c->col_of[key] >= 0)
		return c->col_of[key];
	y = key_row(r, c, key);
	if (y == NULL)
		return -1;
	memcpy(c->Yc + (size_t) c->n * r->f, y, sizeof(float) * r->f);
	c->keys[c->n] = key;
	c->col_of[key] = (int32) c->n;
	return (int32) c->n++;
}

/* The items with factors as the users are solved: the model's, as solved. */
static int64
items_now(const Refresh *r)
{
	int64		n = r->m->nitems;

	for (int64 k = 0; k < r->nsolved; k++)
		n += (r->known[k] ? 1 : 0) - (r->is_new[k] ? 0 : 1);
	return n;
}

/* The id of the item of key. */
static int64
key_id(const Refresh *r, int64 key)
{
	return key >= r->m->nitems ? r->solved[key - r->m->nitems] : r->m->ids[key];
}

/* The pairs of user: r->pairs[*p0, *p1). */
static void
pair_range(const Refresh *r, int64 user, int64 *p0, int64 *p1)
{
	int64		lo = 0;
	int64		hi = r->npairs;

	while (lo < hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (r->pairs[mid].user < user)
			lo = mid + 1;
		else
			hi = mid;
	}
	*p0 = lo;
	while (hi < r->npairs && r->pairs[hi].user == user)
		hi++;
	*p1 = Max(hi, lo);
}

/*
 * The row of user id into R (row u, from R's current end): their stored
 * ratings (packed, or NULL) with the pairs read in place, the items
 * without factors left out, in increasing order of item.
 */
static void
user_row(const Refresh *r, Columns *c, int64 id, bytea *stored, WalsCsr *R, int64 u)
{
	int64		ns = 0;
	int64	   *sid = NULL;
	float	   *sval = NULL;
	int64		p0;
	int64		p1;
	int64		a = 0;
	int64		nnz = R->indptr[u];

	pair_range(r, id, &p0, &p1);
	if (stored != NULL)
	{
		const uint8 *in = (const uint8 *) VARDATA_ANY(stored);
		size_t		len = VARSIZE_ANY_EXHDR(stored);

		if (wals_rated_count(in, len, &ns) != WALS_OK ||
			(sid = palloc(sizeof(int64) * Max(ns, 1)),
			 sval = palloc(sizeof(float) * Max(ns, 1)),
			 wals_rated_unpack(in, len, ns, sid, sval) != WALS_OK))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the rated items of user " INT64_FORMAT " of model \"%s\" are not packed as wals packs them",
							id, r->info->display),
					 errhint("Train the model again.")));
	}
	/* both by item: a pair read replaces the stored rating of its item */
	for (int64 p = p0; p < p1 || a < ns;)
	{
		int64		item;
		float		rating;
		int64		key;
		int32		col;

		if (p < p1 && (a >= ns || r->pairs[p].item <= sid[a]))
		{
			if (a < ns && r->pairs[p].item == sid[a])
			{
				r->pair_rated[p] = true;
				a++;
			}
			item = r->pairs[p].item;
			rating = r->pairs[p++].rating;
		}
		else
		{
			item = sid[a];
			rating = sval[a++];
		}
		key = item_key(r, c, item);
		col = key >= 0 ? column_of(r, c, key) : -1;
		if (col < 0)
			continue;
		R->indices[nnz] = col;
		R->values[nnz++] = rating;
	}
	R->indptr[u + 1] = nnz;
	if (sid != NULL)
	{
		pfree(sid);
		pfree(sval);
	}
}

/*
 * The stored rows of users [lo, lo + n) of r: their factors into r->Xold
 * and r->has_old, their rated items copied into r->stored, in the current
 * memory context.
 */
static void
read_range(Refresh *r, SPIPlanPtr read, int64 lo, int64 n)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum		arg = wals_int8_array(r->users + lo, n);

	wals_sql_expect(wals_sql_plan(read, &arg, NULL, true, 0), SPI_OK_SELECT, r->info->user_rel);
	MemoryContextSwitchTo(cxt);
	for (uint64 t = 0; t < SPI_processed; t++)
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[t];
		int64		id = wals_read_id(tuple, SPI_tuptable->tupdesc, 1, r->info, &isnull);
		int64		at = isnull ? -1 : wals_ids_find(r->users + lo, n, id);
		Datum		d = SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull);

		if (at < 0 || isnull || r->stored[lo + at] != NULL)
			continue;
		wals_read_factors(tuple, SPI_tuptable->tupdesc, 3, r->f,
						  r->Xold + (size_t) (lo + at) * r->f, r->info);
		r->stored[lo + at] = DatumGetByteaPCopy(d);
		r->has_old[lo + at] = true;
	}
	SPI_freetuptable(SPI_tuptable);
	pfree(DatumGetPointer(arg));
}

/*
 * The stored rows of r's users, their rated items and factors, read once,
 * a batch at a time: the new items are solved against those factors (each
 * of their raters is one of these users), and each pass over the users
 * starts from those rated items.
 */
void
wals_refresh_read_stored(Refresh *r)
{
	Oid			type = INT8ARRAYOID;
	SPIPlanPtr	read = wals_sql_prepare(psprintf("SELECT user_id, rated, factors FROM %s"
												 " WHERE user_id OPERATOR(pg_catalog.=) ANY ($1)",
												 wals_relation_name(r->info->user_rel)),
										1, &type);

	wals_work_phase(WALS_PHASE_READING_USERS, r->nusers);
	for (int64 lo = 0; lo < r->nusers; lo += REFRESH_BATCH)
	{
		CHECK_FOR_INTERRUPTS();
		read_range(r, read, lo, Min(r->nusers - lo, REFRESH_BATCH));
		wals_work_rows(Min(r->nusers, lo + REFRESH_BATCH));
	}
}

/*
 * Solve and write users which[lo, hi) (of r->users): their stored ratings
 * with the pairs in place, against the items, from the factors of their
 * last pass (the stored ones at the first, count); a user without those,
 * exactly.  Their factors are kept in r->X; a user left with no rated item
 * loses their row.  count: the first pass over these users, which the
 * result and the catalog count.
 */
static void
solve_users(Refresh *r, Columns *c, WalsRowWriter *w, const int64 *which, int64 lo, int64 hi,
			bool count)
{
	int			f = r->f;
	int64		n = hi - lo;
	float	   *x = palloc0(sizeof(float) * f * Max(n, 1));
	int64	   *at = palloc(sizeof(int64) * Max(n, 1));
	bool	   *start = palloc(sizeof(bool) * Max(n, 1));
	int64		cells = 0;
	WalsParams	params = r->info->params;
	WalsParams	exact = r->info->params;
	WalsCsr		R;
	int64		max_nnz = 0;
	float	   *scratch;
	int64		bad = -1;
	WalsStatus	st;

	for (int64 u = 0; u < n; u++)
	{
		int64		i = wals_ids_find(r->users, r->nusers, which[lo + u]);
		bytea	   *stored = r->stored[i];
		int64		k;
		int64		p0;
		int64		p1;

		at[u] = i;
		start[u] = count ? r->has_old[i] : r->has_x[i];
		if (start[u])
			memcpy(x + (size_t) u * f, (count ? r->Xold : r->X) + (size_t) i * f, sizeof(float) * f);
		if (stored != NULL &&
			wals_rated_count((const uint8 *) VARDATA_ANY(stored), VARSIZE_ANY_EXHDR(stored),
							 &k) == WALS_OK)
			cells += k;
		pair_range(r, which[lo + u], &p0, &p1);
		cells += p1 - p0;
	}

	if (cells > c->cells)
	{
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(c->keys));

		c->cells = Max(cells, 2 * c->cells);
		c->indices = c->indices ? repalloc_huge(c->indices, sizeof(int32) * c->cells) :
			palloc_extended(sizeof(int32) * c->cells, MCXT_ALLOC_HUGE);
		c->values = c->values ? repalloc_huge(c->values, sizeof(float) * c->cells) :
			palloc_extended(sizeof(float) * c->cells, MCXT_ALLOC_HUGE);
		MemoryContextSwitchTo(old);
	}
	R.nrows = n;
	R.indptr = palloc(sizeof(int64) * (n + 1));
	R.indices = c->indices;
	R.values = c->values;
	R.indptr[0] = 0;
	for (int64 u = 0; u < n; u++)
	{
		CHECK_FOR_INTERRUPTS();
		user_row(r, c, which[lo + u], r->stored[at[u]], &R, u);
		max_nnz = Max(max_nnz, R.indptr[u + 1] - R.indptr[u]);
	}
	/* a frequency-scaled row's scale counts every item with factors */
	R.ncols = items_now(r);

	/*
	 * As a training's half-sweep solves them, from their stored factors,
	 * which conjugate gradient steps move toward the solution (a subspace
	 * model's too: the same solution, without the block size, which the
	 * catalog row read for serving does not carry); a user without stored
	 * factors exactly, as fold-in would.
	 */
	if (params.solver == WALS_SUBSPACE)
		params.solver = WALS_CG;
	exact.solver = WALS_CHOLESKY;
	wals_solve_all_rows(&params, &R, c->Yc, c->n, r->G, x, f, "solving the users again");
	scratch = palloc(sizeof(float) * (wals_solve_scratch(&exact, max_nnz) + 16));
	for (int64 u = 0; u < n && params.solver != WALS_CHOLESKY; u++)
		if (!start[u])
		{
			st = wals_solve_rows(&exact, &R, c->Yc, r->G, x, u, u + 1, scratch, &bad);
			if (st != WALS_OK)
				wals_report_core_status(st, "solving the new users");
		}

	/* written with the items that have factors, as a training writes them */
	for (int64 u = 0; u < n; u++)
	{
		int64		id = which[lo + u];
		int64		k = R.indptr[u + 1] - R.indptr[u];
		int64	   *rid;
		bytea	   *packed;

		CHECK_FOR_INTERRUPTS();
		r->has_x[at[u]] = k > 0;
		memcpy(r->X + (size_t) at[u] * f, x + (size_t) u * f, sizeof(float) * f);
		if (k == 0)
		{
			int64		removed = wals_row_remove(w, id);

			if (count)
				r->done.users_added -= removed;
			continue;
		}
		rid = palloc(sizeof(int64) * k);
		for (int64 j = 0; j < k; j++)
			rid[j] = key_id(r, c->keys[R.indices[R.indptr[u] + j]]);
		packed = wals_rated_pack_bytea(rid, R.values + R.indptr[u], k);
		if (wals_row_write(w, id, x + (size_t) u * f, f, packed) && count)
			r->done.users_added++;
		r->done.users += count;
		pfree(rid);
		pfree(packed);
	}
}

/* Solve and write users which[0..n) (increasing, of r->users), a batch at a time. */
void
wals_refresh_pass(Refresh *r, const int64 *which, int64 n, bool count)
{
	WalsRowWriter *w;
	Columns    *c;
	MemoryContext batch = AllocSetContextCreate(CurrentMemoryContext, "wals refresh batch",
												ALLOCSET_DEFAULT_SIZES);
	MemoryContext outer;

	w = wals_row_writer_open(r->info, true);
	c = columns_make(r);
	wals_work_phase(WALS_PHASE_SOLVING_USERS, n);
	for (int64 lo = 0; lo < n; lo += REFRESH_BATCH)
	{
		int64		hi = Min(n, lo + REFRESH_BATCH);

		outer = MemoryContextSwitchTo(batch);
		solve_users(r, c, w, which, lo, hi, count);
		MemoryContextSwitchTo(outer);
		MemoryContextReset(batch);
		wals_work_rows(hi);
	}
	wals_row_writer_close(w);
	MemoryContextDelete(batch);
}
