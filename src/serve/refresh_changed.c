/*
 * refresh_changed.c
 *	  wals_refresh: take in the ratings of the source that changed since
 *	  the model's mark, without a retraining.
 *
 * The source's changed column (wals_train's changed_col) says when each
 * rating last changed, and the catalog keeps the highest value a training
 * or refresh took in, the mark (marks.c).  A refresh reads the rows above
 * the mark, and reads again every row of the (user, item) pairs they
 * name, so that a pair's rating is its whole value in the source whether
 * a row was updated in place or another row added for it; a unique index
 * on the two columns says that each pair is one row, and spares that.  Then, each side
 * solved exactly against the other held fixed:
 *
 * 1. the items the model does not know yet, from their ratings read,
 *    against the stored factors of their raters, as a training's item
 *    half-sweep would solve them;
 * 2. every user the changed rows name, new ones included, from their
 *    stored ratings (the rated column of the user factor table, which the
 *    training wrote) with the pairs read in their place, against the items
 *    that have factors, the new ones among them;
 * 3. the items the model knows that solve_items chooses, from all of their
 *    ratings in the source, against the users as 2 left them: with
 *    'changed' (the default), those at least a tenth of whose ratings the
 *    changed rows name, as the catalog counts them (item_counts, kept by
 *    the training and each refresh); with 'touched', every one the rows
 *    name (which, on a skewed catalog, is most of the ratings: a few
 *    changes reach every popular item); with 'new', none;
 * 4. a new item that only new users rated, which had no rater with
 *    factors in 1, against those users as 2 left them, and its raters
 *    again.
 *
 * Solving the new items before the users, rather than after, writes each
 * user once: with a few new items in a catalog, most users of a busy
 * hour rated one of them, and solving them after the users would solve
 * and write nearly every user twice.
 *
 * Users are read, solved and written a batch at a time.  The items named
 * but not solved keep their factors until the next training: a few
 * ratings more move a popular item's factors little, and reading all of
 * its ratings costs what a training's read does; with 'changed' the
 * ratings read are at most ten times the changed ones.
 *
 * A deleted rating is not seen: no row is left to carry a changed value.
 * wals_refresh_users, which reads all of a user's ratings again, or the
 * next training takes it in (doc/training.md).
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "refresh_internal.h"

PG_FUNCTION_INFO_V1(wals_refresh);

/*
 * solve_items => 'changed' solves a known item again when at least this
 * part of its ratings (one in so many) changed: in MovieLens 100K replayed
 * in time order, a tenth brings recall@10 within 3% of a retraining, where
 * solving no known item leaves it 10% below (doc/performance.md), and the
 * ratings it reads are at most ten times the changed ones.
 */
#define REFRESH_CHANGED_SHARE	10

static int
compare_cells(const void *a, const void *b)
{
	const WalsCell *x = a;
	const WalsCell *y = b;

	if (x->user != y->user)
		return x->user < y->user ? -1 : 1;
	if (x->item != y->item)
		return x->item < y->item ? -1 : 1;
	return 0;
}

/*
 * Merge the cells of each pair into one, as a training merges them
 * (summed for implicit feedback, averaged for explicit); returns how many
 * are left.
 */
static int64
merge_pairs(WalsCell *cells, int64 n, WalsFeedback feedback)
{
	int64		out = 0;

	qsort(cells, n, sizeof(WalsCell), compare_cells);
	for (int64 i = 0; i < n;)
	{
		int64		j = i;
		double		sum = 0;

		while (j < n && cells[j].user == cells[i].user && cells[j].item == cells[i].item)
			sum += cells[j++].rating;
		cells[out] = cells[i];
		cells[out++].rating = (float) (feedback == WALS_IMPLICIT ? sum : sum / (j - i));
		i = j;
	}
	return out;
}

/*
 * Whether source holds one row per (user, item) pair at most: a unique
 * index on the two columns alone, without a predicate, so that a changed
 * row is its pair's whole rating.  A view's are its tables', not looked
 * into.
 */
static bool
pairs_unique(Oid source, const char *user_col, const char *item_col)
{
	Oid			types[3] = {OIDOID, INT2OID, INT2OID};
	Datum		args[3];
	bool		isnull;

	args[0] = ObjectIdGetDatum(source);
	args[1] = Int16GetDatum(get_attnum(source, user_col));
	args[2] = Int16GetDatum(get_attnum(source, item_col));
	if (wals_sql("SELECT EXISTS (SELECT FROM pg_catalog.pg_index"
				 " WHERE indrelid OPERATOR(pg_catalog.=) $1 AND indisunique AND indisvalid"
				 " AND indnkeyatts OPERATOR(pg_catalog.=) 2 AND indpred IS NULL AND indexprs IS NULL"
				 " AND ((indkey[0] OPERATOR(pg_catalog.=) $2 AND indkey[1] OPERATOR(pg_catalog.=) $3)"
				 " OR (indkey[0] OPERATOR(pg_catalog.=) $3 AND indkey[1] OPERATOR(pg_catalog.=) $2)))",
				 3, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "wals: could not read the indexes of relation %u", source);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * The pairs of the rows above mark (all rows with a value when mark is
 * NULL), each with its whole merged rating in the source; returns the
 * number of rows above the mark.
 */
static int64
read_pairs(Refresh *r, const char *col, Oid type, const char *mark)
{
	const WalsSourceNames *src = &r->src;
	int64		cap = 1024;
	int64		n = 0;
	WalsCell   *changed = palloc(sizeof(WalsCell) * cap);
	Datum		arg = (Datum) 0;
	SPIPlanPtr	plan;
	int64	   *u;
	int64	   *i;
	Datum		args[2];
	Oid			types[2] = {INT8ARRAYOID, INT8ARRAYOID};
	int64		rows;

	if (mark != NULL)
	{
		arg = wals_mark_value(mark, type, r->info->display);
		plan = wals_sql_prepare(wals_cells_query(src, "",
												 psprintf("s.%s OPERATOR(pg_catalog.>) $1",
														  quote_identifier(col))),
								1, &type);
	}
	else
		plan = wals_sql_prepare(wals_cells_query(src, "",
												 psprintf("s.%s IS NOT NULL", quote_identifier(col))),
								0, NULL);
	changed = wals_read_cells(r->info, plan, &arg, changed, &n, &cap);
	rows = n;
	n = merge_pairs(changed, n, r->info->params.feedback);
	if (n == 0 || pairs_unique(r->info->source, r->info->user_col, r->info->item_col))
	{
		r->pairs = changed;
		r->npairs = n;
		return rows;
	}

	/* every row of those pairs: their whole ratings, older rows included */
	u = palloc(sizeof(int64) * n);
	i = palloc(sizeof(int64) * n);
	for (int64 k = 0; k < n; k++)
	{
		u[k] = changed[k].user;
		i[k] = changed[k].item;
	}
	args[0] = wals_int8_array(u, n);
	args[1] = wals_int8_array(i, n);
	plan = wals_sql_prepare(wals_cells_query(src,
											 ", (SELECT pg_catalog.unnest($1) AS u, pg_catalog.unnest($2) AS i) p",
											 psprintf("s.%s OPERATOR(pg_catalog.=) p.u"
													  " AND s.%s OPERATOR(pg_catalog.=) p.i",
													  src->user_col, src->item_col)),
							2, types);
	cap = n;
	r->npairs = 0;
	r->pairs = wals_read_cells(r->info, plan, args, palloc(sizeof(WalsCell) * cap), &r->npairs, &cap);
	r->npairs = merge_pairs(r->pairs, r->npairs, r->info->params.feedback);
	return rows;
}

/*
 * The ratings of each of the model's items in the source, counted there
 * as a training counts them, a (user, item) pair once however many rows
 * it has: for a model whose catalog row keeps no counts (trained by 0.6.0,
 * or sharded), once, then kept.
 */
static int32 *
count_items(const Refresh *r)
{
	int32	   *counts = palloc0(sizeof(int32) * Max(r->m->nitems, 1));
	SPIPlanPtr	plan;
	Portal		portal;

	plan = wals_sql_prepare(psprintf("SELECT (s.%s)::pg_catalog.int8, pg_catalog.count(DISTINCT s.%s)"
									 " FROM %s s GROUP BY 1",
									 r->src.item_col, r->src.user_col, r->src.relation),
							0, NULL);
	portal = wals_sql_cursor_plan(plan, NULL, NULL, true);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		wals_sql_fetch(portal, 10000);
		if (SPI_processed == 0)
			break;
		for (uint64 t = 0; t < SPI_processed; t++)
		{
			bool		isnull;
			int64		id = wals_read_id(SPI_tuptable->vals[t], SPI_tuptable->tupdesc, 1,
										  r->info, &isnull);
			int64		at = isnull ? -1 : wals_serve_item(r->m, id);

			if (at >= 0)
				counts[at] = (int32) Min(DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[t],
																	 SPI_tuptable->tupdesc, 2,
																	 &isnull)), PG_INT32_MAX);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	return counts;
}

/*
 * The items to solve (see the head of the file), into r->solved; *named
 * gets how many pairs name each of the model's items.
 */
static void
choose_items(Refresh *r, int32 **named)
{
	int64	   *items = palloc(sizeof(int64) * Max(r->npairs, 1));
	int64		n = 0;

	*named = palloc0(sizeof(int32) * Max(r->m->nitems, 1));
	for (int64 k = 0; k < r->npairs; k++)
	{
		int64		at = wals_serve_item(r->m, r->pairs[k].item);

		if ((k & 4095) == 0)
			CHECK_FOR_INTERRUPTS();

		if (at >= 0)
			(*named)[at]++;
		else
			items[n++] = r->pairs[k].item;
	}
	for (int64 i = 0; i < r->m->nitems; i++)
		if ((*named)[i] > 0 &&
			(r->items == REFRESH_TOUCHED ||
			 (r->items == REFRESH_CHANGED &&
			  (int64) (*named)[i] * REFRESH_CHANGED_SHARE >= r->counts[i])))
			items[n++] = r->m->ids[i];
	qsort(items, n, sizeof(int64), wals_compare_int64);
	r->nsolved = 0;
	for (int64 k = 0; k < n; k++)
		if (r->nsolved == 0 || items[r->nsolved - 1] != items[k])
			items[r->nsolved++] = items[k];
	r->solved = items;
	r->is_new = palloc(sizeof(bool) * Max(r->nsolved, 1));
	r->Ys = palloc(sizeof(float) * r->f * Max(r->nsolved, 1));
	r->known = palloc0(sizeof(bool) * Max(r->nsolved, 1));
	/* a known item has its factors until it is solved again, after the users */
	for (int64 k = 0; k < r->nsolved; k++)
	{
		int64		at = wals_serve_item(r->m, items[k]);

		r->is_new[k] = at < 0;
		r->known[k] = at >= 0;
		if (at >= 0)
			memcpy(r->Ys + (size_t) k * r->f, r->m->Y + (size_t) at * r->f, sizeof(float) * r->f);
	}
}

/*
 * The cells of the items solved: all their ratings in the source for the
 * items the model knows, the pairs read for the new ones (a new item's
 * ratings are all above the mark).
 */
static WalsCell *
item_cells(Refresh *r, int64 *ncells)
{
	int64	   *known = palloc(sizeof(int64) * Max(r->nsolved, 1));
	int64		nknown = 0;
	WalsCell   *cells;
	int64		nread = 0;

	for (int64 k = 0; k < r->nsolved; k++)
		if (!r->is_new[k])
			known[nknown++] = r->solved[k];
	cells = nknown > 0 ? wals_item_ratings(r->info, &r->src, known, nknown,
										   wals_items_rated(r->m, r->counts, known, nknown),
										   &nread) : NULL;
	cells = cells != NULL ? repalloc_huge(cells, sizeof(WalsCell) * (nread + Max(r->npairs, 1))) :
		palloc(sizeof(WalsCell) * Max(r->npairs, 1));
	*ncells = nread;
	for (int64 k = 0; k < r->npairs; k++)
	{
		int64		at = wals_ids_find(r->solved, r->nsolved, r->pairs[k].item);

		if ((k & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		if (at >= 0 && r->is_new[at])
			cells[(*ncells)++] = r->pairs[k];
	}
	return cells;
}

/*
 * The rating counts of the items of the model as the refresh leaves it,
 * in the order of their ids: the kept ones with the pairs that named them
 * added, but for those among their users' rated items already (an
 * updated rating, which user_row found), so that the counts stay those a
 * training would make, or as counted in the source by this refresh; a new
 * item's its pairs; an item left without factors out.  NULL where the ids do not come out as many as the catalog
 * will count.
 */
static int32 *
counts_after(const Refresh *r, const int32 *named, int64 *n)
{
	int64		nitems = r->m->nitems;
	int32	   *counts = palloc(sizeof(int32) * Max(nitems + r->nsolved, 1));
	int64	   *of_solved = palloc0(sizeof(int64) * Max(r->nsolved, 1));
	int32	   *rated_before = palloc0(sizeof(int32) * Max(nitems, 1));
	int64		i = 0;
	int64		k = 0;

	for (int64 p = 0; p < r->npairs; p++)
	{
		int64		at = wals_ids_find(r->solved, r->nsolved, r->pairs[p].item);
		int64		known = r->pair_rated[p] ? wals_serve_item(r->m, r->pairs[p].item) : -1;

		if ((p & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		if (at >= 0)
			of_solved[at]++;
		if (known >= 0)
			rated_before[known]++;
	}
	*n = 0;
	while (i < nitems || k < r->nsolved)
	{
		bool		from_model = k >= r->nsolved || (i < nitems && r->m->ids[i] <= r->solved[k]);
		bool		solved = k < r->nsolved && (i >= nitems || r->solved[k] <= r->m->ids[i]);
		int64		c;

		if (solved && !r->known[k])
			c = -1;
		else if (from_model && r->counted_now)
			c = r->counts[i];
		else if (from_model)
			c = (int64) r->counts[i] + named[i] - rated_before[i];
		else
			c = of_solved[k];
		if (c >= 0)
			counts[(*n)++] = (int32) Min(c, PG_INT32_MAX);
		i += from_model;
		k += solved;
	}
	if (*n != nitems + r->done.items_added)
		return NULL;
	return counts;
}

/* G of the items as the users are solved against: with the solved ones in. */
static void
update_gram(Refresh *r)
{
	r->G = wals_patched_gram(r->m, r->solved, r->nsolved, r->Ys, r->known);
}

/* The users the pairs name, into r->users. */
static void
name_users(Refresh *r)
{
	r->users = palloc(sizeof(int64) * Max(r->npairs, 1));
	r->nusers = 0;
	for (int64 k = 0; k < r->npairs; k++)
		if (r->nusers == 0 || r->users[r->nusers - 1] != r->pairs[k].user)
			r->users[r->nusers++] = r->pairs[k].user;
	r->X = palloc0(sizeof(float) * r->f * Max(r->nusers, 1));
	r->has_x = palloc0(sizeof(bool) * Max(r->nusers, 1));
	r->Xold = palloc0(sizeof(float) * r->f * Max(r->nusers, 1));
	r->has_old = palloc0(sizeof(bool) * Max(r->nusers, 1));
	r->stored = palloc0(sizeof(bytea *) * Max(r->nusers, 1));
}

/* The users that rated an item of late[] (per solved item), which now has factors. */
static int64 *
users_of_late_items(const Refresh *r, const bool *late, int64 *n)
{
	int64	   *users = palloc(sizeof(int64) * Max(r->npairs, 1));

	*n = 0;
	for (int64 k = 0; k < r->npairs; k++)
	{
		int64		at = wals_ids_find(r->solved, r->nsolved, r->pairs[k].item);

		if ((k & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		if (at >= 0 && late[at] && r->known[at] &&
			(*n == 0 || users[*n - 1] != r->pairs[k].user))
			users[(*n)++] = r->pairs[k].user;
	}
	return users;
}

/* Which of the items chosen solve_some solves */
typedef enum SolveWhich
{
	SOLVE_NEW,					/* the new ones */
	SOLVE_KNOWN,				/* the ones the model knows */
	SOLVE_LATE					/* the new ones still without factors */
} SolveWhich;

/*
 * Solve some of the items chosen against us, from cells, into r->Ys and
 * r->known; with late, mark those solved there.  How many were solved.
 */
static int64
solve_some(Refresh *r, const WalsUserSide *us, const WalsCell *cells, int64 ncells,
		   SolveWhich which, bool *late)
{
	int64	   *ids = palloc(sizeof(int64) * Max(r->nsolved, 1));
	int64		n = 0;
	float	   *Y;
	bool	   *known;
	int64		j = 0;

	for (int64 k = 0; k < r->nsolved; k++)
		if (which == SOLVE_KNOWN ? !r->is_new[k] :
			r->is_new[k] && (which == SOLVE_NEW || !r->known[k]))
			ids[n++] = r->solved[k];
	if (n == 0)
		return 0;
	Y = palloc(sizeof(float) * r->f * n);
	known = palloc(sizeof(bool) * n);
	wals_solve_items(r->info, us, ids, n, cells, ncells, Y, known);
	for (int64 k = 0; k < r->nsolved && j < n; k++)
		if (r->solved[k] == ids[j])
		{
			memcpy(r->Ys + (size_t) k * r->f, Y + (size_t) j * r->f, sizeof(float) * r->f);
			r->known[k] = known[j++];
			if (late != NULL)
				late[k] = true;
		}
	return n;
}

/*
 * The rows of r's users that pass keep, from F (nusers x f), packed into
 * rows[0..n) with their ids into ids (unless NULL); returns n.
 */
static int64
gather_users(const Refresh *r, const bool *keep, const float *F, int64 *ids, float *rows)
{
	int64		n = 0;

	for (int64 u = 0; u < r->nusers; u++)
		if (keep[u])
		{
			if (ids != NULL)
				ids[n] = r->users[u];
			memcpy(rows + (size_t) n++ * r->f, F + (size_t) u * r->f, sizeof(float) * r->f);
		}
	return n;
}

/*
 * The users that rated a new item, as stored: its raters, every one of
 * them among the users the pairs name, with the kept Gram of all users.
 */
static void
stored_raters(const Refresh *r, WalsUserSide *us)
{
	us->ids = palloc(sizeof(int64) * Max(r->nusers, 1));
	us->X = palloc(sizeof(float) * r->f * Max(r->nusers, 1));
	us->n = gather_users(r, r->has_old, r->Xold, us->ids, us->X);
	us->G = r->Gu;
	us->total = r->users_before;
}

/*
 * XᵀX of every user now: r->Gu, the users' before the refresh, with the
 * rows of the users solved in place of their stored ones.
 */
static float *
users_gram(const Refresh *r)
{
	int			f = r->f;
	float	   *solved = palloc(sizeof(float) * f * Max(r->nusers, 1));
	float	   *stored = palloc(sizeof(float) * f * Max(r->nusers, 1));
	int64		nsolved = gather_users(r, r->has_x, r->X, NULL, solved);
	int64		nstored = gather_users(r, r->has_old, r->Xold, NULL, stored);
	float	   *G = palloc(sizeof(float) * f * f);

	memcpy(G, r->Gu, sizeof(float) * f * f);
	wals_gram_swap(G, stored, nstored, solved, nsolved, f);
	pfree(solved);
	pfree(stored);
	return G;
}

/*
 * The users as the refresh left them, for the items solved after them:
 * every user where they were all read; else the raters of the known items
 * chosen as stored, with the users solved in their place or beside them
 * (every rater of a new item is one of those), and the kept Gram brought
 * up to date.
 */
static void
users_now(Refresh *r, WalsUserSide *us, bool loaded, const WalsCell *cells, int64 ncells)
{
	int64	   *ids = palloc(sizeof(int64) * Max(r->nusers, 1));
	float	   *X = palloc(sizeof(float) * r->f * Max(r->nusers, 1));
	int64		nsolved = gather_users(r, r->has_x, r->X, ids, X);
	WalsCell   *of_known;
	int64		n = 0;
	float	   *G;

	if (loaded)
	{
		wals_user_side_update(us, r->f, ids, X, nsolved);
		return;
	}
	of_known = palloc(sizeof(WalsCell) * Max(ncells, 1));
	for (int64 c = 0; c < ncells; c++)
	{
		int64		at = wals_ids_find(r->solved, r->nsolved, cells[c].item);

		if ((c & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		if (at >= 0 && !r->is_new[at])
			of_known[n++] = cells[c];
	}
	/* a Gram for the update to swap rows in: the one made below replaces it */
	G = palloc(sizeof(float) * r->f * r->f);
	memcpy(G, r->Gu, sizeof(float) * r->f * r->f);
	if (n > 0)
		wals_user_side_raters(r->info, G, r->users_before, of_known, n, us);
	else
	{
		us->n = 0;
		us->ids = palloc(sizeof(int64));
		us->X = palloc(sizeof(float) * r->f);
		us->G = G;
	}
	wals_user_side_update(us, r->f, ids, X, nsolved);
	us->G = users_gram(r);
	us->total = r->users_before + r->done.users_added;
}

typedef struct RefreshArgs
{
	text	   *model;
	RefreshItems items;
} RefreshArgs;

static void
refresh(const RefreshArgs *a, Refresh *r, char **name)
{
	WalsModelInfo found;
	WalsRoleSave save;
	Oid			types[2] = {NAMEOID, TEXTOID};
	Datum		key[2];
	char	   *col;
	char	   *mark;
	Oid			type;
	Datum		high;
	WalsUserSide us = {0};
	WalsCell   *cells = NULL;
	int64		ncells = 0;
	bytea	   *gram;
	bytea	   *kept_counts;
	bool		loaded = false;
	int32	   *named;

	wals_model_resolve(a->model, &found);
	if (!wals_lock_model(found.schema, found.name, &found, false))
		wals_no_such_model(found.schema, found.name);
	*name = found.name;
	wals_work_begin(WALS_WORK_REFRESH, get_namespace_oid(found.schema, false), found.name);
	key[0] = DirectFunctionCall1(namein, CStringGetDatum(found.schema));
	key[1] = CStringGetTextDatum(found.name);
	if (wals_sql(psprintf("SELECT changed_col, changed_mark FROM %s"
						  " WHERE schema OPERATOR(pg_catalog.=) $1 AND model OPERATOR(pg_catalog.=) $2",
						  wals_catalog_table("wals_models")),
				 2, types, key, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		wals_no_such_model(found.schema, found.name);
	col = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	mark = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	if (!wals_catalog_state(found.schema, found.name, &gram, &kept_counts, &r->users_before))
		wals_no_such_model(found.schema, found.name);
	if (col == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("model \"%s\" has no changed column to refresh from", found.display),
				 errhint("Train it with wals_train(..., changed_col => 'column'), naming a column of its source that grows when a rating changes; or refresh given users with wals_refresh_users().")));

	wals_become_model_owner(&found, &save);
	r->m = wals_serve_model(cstring_to_text(wals_model_quoted(found.schema, found.name)));
	r->info = &r->m->info;
	r->f = r->m->factors;
	r->items = a->items;
	r->Gu = wals_gram_from_bytea(gram, r->f);
	r->counts = wals_counts_from_bytea(kept_counts, r->m->nitems);
	wals_model_source(r->info, &r->src);
	type = wals_changed_col_type(r->info->source, col, found.display);
	if (!wals_mark_read(r->src.relation, col, type, &high))
	{
		wals_unbecome(&save);
		r->done.by_refresh = true;
		wals_catalog_refreshed(&found, &r->done, NULL);
		wals_work_end();
		return;
	}
	wals_work_phase(WALS_PHASE_READING_CHANGES, 0);
	r->done.mark = wals_mark_text(high, type);
	r->done.ratings = read_pairs(r, col, type, mark);
	r->pair_rated = palloc0(sizeof(bool) * Max(r->npairs, 1));
	r->done.by_refresh = true;

	if (r->counts == NULL && r->items == REFRESH_CHANGED)
	{
		r->counts = count_items(r);
		r->counted_now = true;
	}
	choose_items(r, &named);
	name_users(r);
	wals_check_factor_table(r->info, r->info->user_rel, true);
	wals_refresh_read_stored(r);
	if (r->nsolved > 0)
	{
		WalsUserSide raters;

		/* every user for 'touched' (raters of any item), or to learn XᵀX */
		if (r->items == REFRESH_TOUCHED || r->Gu == NULL)
		{
			wals_user_side_load(r->info, &us);
			r->Gu = palloc(sizeof(float) * r->f * r->f);
			memcpy(r->Gu, us.G, sizeof(float) * r->f * r->f);
			loaded = true;
		}
		cells = item_cells(r, &ncells);
		/* 1. the new items, against their raters as they are */
		wals_work_phase(WALS_PHASE_SOLVING_ITEMS, 0);
		if (loaded)
			raters = us;
		else
			stored_raters(r, &raters);
		solve_some(r, &raters, cells, ncells, SOLVE_NEW, NULL);
	}
	update_gram(r);
	/* 2. every user named, against the items with factors */
	wals_refresh_pass(r, r->users, r->nusers, true);
	if (r->nsolved > 0)
	{
		bool	   *late = palloc0(sizeof(bool) * r->nsolved);
		bool		pending = false;
		int64		nlate;
		int64		nagain;
		int64	   *again;

		for (int64 k = 0; k < r->nsolved; k++)
			pending = pending || !r->is_new[k] || !r->known[k];
		if (pending)
		{
			users_now(r, &us, loaded, cells, ncells);
			/* 3. the known items chosen, against the users as 2 left them */
			wals_work_phase(WALS_PHASE_SOLVING_ITEMS, 0);
			solve_some(r, &us, cells, ncells, SOLVE_KNOWN, NULL);
			/* 4. the new items only new users rated, and those users again */
			nlate = solve_some(r, &us, cells, ncells, SOLVE_LATE, late);
			update_gram(r);
			if (nlate > 0)
			{
				again = users_of_late_items(r, late, &nagain);
				wals_refresh_pass(r, again, nagain, false);
			}
		}
		wals_work_phase(WALS_PHASE_STORING, 0);
		wals_store_items(r->info, r->solved, r->nsolved, r->Ys, r->known, &r->done);
	}
	wals_unbecome(&save);
	if (r->counts != NULL)
		r->done.item_counts = counts_after(r, named, &r->done.nitem_counts);
	/* the Gram of the users as they are now, for the next refresh */
	if (r->Gu != NULL && r->f <= WALS_USER_GRAM_MAX_FACTORS)
		r->done.user_gram = users_gram(r);
	{
		WalsItemsPatch patch = {r->m, r->solved, r->nsolved, r->Ys, r->known, r->G};

		wals_catalog_refreshed(&found, &r->done, &patch);
	}
	wals_work_end();
}

/*
 * wals_refresh(model text, solve_items text) RETURNS SETOF wals_refresh_result
 */
static Datum
refresh_call(PG_FUNCTION_ARGS)
{
	RefreshArgs a;
	Refresh		r = {0};
	instr_time	start;
	instr_time	end;
	char	   *name;
	char	   *items;
	Datum		values[8];
	bool		nulls[8] = {0};

	INSTR_TIME_SET_CURRENT(start);
	a.model = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"solve_items\" must not be null"),
				 errhint("Pass 'changed', 'new' or 'touched'.")));
	items = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (pg_strcasecmp(items, "changed") == 0)
		a.items = REFRESH_CHANGED;
	else if (pg_strcasecmp(items, "new") == 0)
		a.items = REFRESH_NEW;
	else if (pg_strcasecmp(items, "touched") == 0)
		a.items = REFRESH_TOUCHED;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"solve_items\": \"%s\"", items),
				 errhint("Pass 'changed' (new items, and those a tenth of whose ratings changed), 'new' (items the model does not know yet) or 'touched' (every item a changed rating names), each solved from all of its ratings.")));
	PreventCommandIfReadOnly("wals_refresh()");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	wals_spi_connect();
	refresh(&a, &r, &name);

	/* the values live in SPI's memory, until SPI_finish */
	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum(r.done.ratings);
	values[2] = Int64GetDatum(r.done.users);
	values[3] = Int64GetDatum(r.done.users_added);
	values[4] = Int64GetDatum(r.done.items);
	values[5] = Int64GetDatum(r.done.items_added);
	if (r.done.mark != NULL)
		values[6] = CStringGetTextDatum(r.done.mark);
	else
		nulls[6] = true;
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	values[7] = wals_seconds_datum(INSTR_TIME_GET_DOUBLE(end));
	tuplestore_putvalues(((ReturnSetInfo *) fcinfo->resultinfo)->setResult,
						 ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc, values, nulls);
	SPI_finish();
	return (Datum) 0;
}

Datum
wals_refresh(PG_FUNCTION_ARGS)
{
	return wals_call(refresh_call, fcinfo, "wals_refresh", true);
}
