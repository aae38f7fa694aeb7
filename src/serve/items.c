/*
 * items.c
 *	  The item side of one version of a model, built once per server into a
 *	  segment of dynamic shared memory that every backend serving it maps.
 *
 * What a call scores against (the item ids, their float factors, YᵀY and
 * the scoring engine's index, in one area laid out by offsets) depends only
 * on the model's version: the rows a training wrote, read as the model's
 * owner (roles.c).  So one copy serves every backend.  The training that
 * writes a version builds it (store.c, through wals_serve_preload), and
 * every other backend maps it at its first call: a new connection, or the
 * first call after a retraining commits, costs a lookup and a mapping, not
 * a read of the table, a Gram and an index.  The index of the unit rows
 * that wals_similar_items scores by cosine is a second area, built from
 * the first by the first backend that needs it, and shared the same way.
 * segments.c finds, publishes, retires and frees the segments.
 *
 * Design: a segment of dynamic shared memory per model version, rather
 * than relation pages (an index access method, or a fork).  The scoring
 * kernels read the index as one contiguous array (blocks of 16 items in
 * order of norm, then the maps of positions) and rescore from the float
 * rows wherever the candidates fall; through shared_buffers every query
 * would pin a buffer per page and the kernels would be rewritten to walk
 * pages.  A segment keeps the kernels, the layout and their speed as they
 * are (wals_score_index_remap, which parallel wals_evaluate already uses),
 * and costs what the pages would not: it is derived data, gone at a
 * restart, and it needs room in /dev/shm.  What pages would give, a copy
 * that is replicated and survives a restart, the training gets by writing
 * the area it built into a table as well (src/catalog/images.c), and a
 * refresh by writing what it changed of it (item_images.c): a standby's
 * first reader, or a server's after a restart, copies those images into a
 * segment rather than reading the item table.  Where there is none, or
 * the item table forces row security on its owner (what the owner sees
 * may then change with the policies' functions), the backend builds a
 * copy of its own, as before; and so does a session that sets
 * wals.shared_items off, which then sees the edits made to the item table
 * since its version was trained, which the shared copy does not.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "segments.h"
#include "wals_serve.h"

/* The layout of an area of kind for n items of f factors. */
void
wals_area_layout(WalsArea *h, WalsAreaKind kind, int64 n, int f)
{
	Size		off = sizeof(WalsArea);

	h->nitems = n;
	h->factors = f;
	h->ids = kind == WALS_AREA_ITEMS ? wals_area_section(&off, sizeof(int64) * n) : 0;
	h->dir = kind == WALS_AREA_ITEMS ? wals_area_section(&off, wals_id_directory_size(n)) : 0;
	h->Y = wals_area_section(&off, sizeof(float) * f * n);
	h->G = kind == WALS_AREA_ITEMS ? wals_area_section(&off, sizeof(float) * f * f) : 0;
	h->blocks = wals_area_section(&off, wals_score_index_size(n, f));
	h->total = off;
}

/* The index of the area h, at whatever address it is mapped. */
static void
map_index(WalsScoreIndex *ix, const WalsArea *h)
{
	const char *base = (const char *) h;

	memset(ix, 0, sizeof(*ix));
	ix->n = h->nitems;
	ix->f = h->factors;
	ix->groups = h->groups;
	ix->usable = h->usable;
	ix->max_norm = h->max_norm;
	wals_score_index_remap(ix, (const float *) (base + h->Y), base + h->blocks);
}

/* Point m's items at the items area h. */
void
wals_area_map_items(WalsServeModel *m, const WalsArea *h)
{
	const char *base = (const char *) h;

	m->factors = h->factors;
	m->nitems = h->nitems;
	m->ids = (int64 *) (base + h->ids);
	m->Y = (float *) (base + h->Y);
	m->G = (float *) (base + h->G);
	m->item_dir.ids = m->ids;
	m->item_dir.n = h->nitems;
	m->item_dir.start = (const int64 *) (base + h->dir);
	m->item_dir.lo = h->dir_lo;
	m->item_dir.shift = h->dir_shift;
	m->item_dir.nbuckets = h->dir_buckets;
	map_index(&m->index, h);
}

/*
 * The directory of the ids of the items area h, built into it: what every
 * lookup of an item by its id goes through (a filter's ids, a user's rated
 * items), in place of a binary search of them all.
 */
static void
index_ids(WalsArea *h, const WalsModelInfo *info)
{
	char	   *base = (char *) h;
	WalsIdDirectory d;

	wals_report_core_status(wals_id_directory_build(&d, (const int64 *) (base + h->ids),
													h->nitems, (int64 *) (base + h->dir)),
							psprintf("indexing the item ids of model \"%s\"", info->display));
	h->dir_lo = d.lo;
	h->dir_shift = d.shift;
	h->dir_buckets = d.nbuckets;
}

/* The index of the rows of the area h, built into it, as what says. */
static void
index_rows(WalsArea *h, const char *what)
{
	char	   *base = (char *) h;
	WalsScoreIndex ix;

	wals_report_core_status(wals_score_index_build(&ix, (const float *) (base + h->Y),
												   h->nitems, h->factors, base + h->blocks),
							what);
	h->groups = ix.groups;
	h->usable = ix.usable;
	h->max_norm = ix.max_norm;
}

/*
 * The index of the rows of the area h, patched from the index of from's:
 * was and now map h's rows and from's to each other (see
 * wals_score_index_patch), so that only the rows changed are quantised.
 */
static void
index_patched_rows(WalsArea *h, const WalsServeModel *from, const int32 *was, const int32 *now,
				   const char *what)
{
	char	   *base = (char *) h;
	WalsScoreIndex ix;

	wals_report_core_status(wals_score_index_patch(&ix, (const float *) (base + h->Y),
												   h->nitems, h->factors, base + h->blocks,
												   &from->index, was, now),
							what);
	h->groups = ix.groups;
	h->usable = ix.usable;
	h->max_norm = ix.max_norm;
}

/*
 * Fill the items area h, laid out for the rows of tuptable (item_id,
 * factors, in order of item_id), from them: ids strictly increasing, so
 * that lookups by binary search are sound whatever the table holds;
 * factors checked as factors.c checks them; then YᵀY and the index.
 */
static void
fill_items(WalsArea *h, SPITupleTable *tuptable, const WalsModelInfo *info)
{
	char	   *base = (char *) h;
	int64	   *ids = (int64 *) (base + h->ids);
	float	   *Y = (float *) (base + h->Y);
	float	   *G = (float *) (base + h->G);
	int			f = h->factors;

	for (int64 i = 0; i < h->nitems; i++)
	{
		HeapTuple	tuple = tuptable->vals[i];

		ids[i] = wals_read_id(tuple, tuptable->tupdesc, 1, info, NULL);
		if (i > 0 && ids[i] <= ids[i - 1])
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("the item factor table of model \"%s\" holds item " INT64_FORMAT " twice",
							info->display, ids[i]),
					 errhint("Train the model again with wals_train().")));
		wals_read_factors(tuple, tuptable->tupdesc, 2, f, Y + i * f, info);
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}

	/*
	 * What follows is arithmetic alone, O(items f^2) for the Gram, seconds
	 * at f = 4096, in which the core polls for a cancel; said at DEBUG1 for
	 * whoever wonders where a first call's time goes (t/023_cancel_wide.pl
	 * and t/024_shared_items.pl wait for it).
	 */
	ereport(DEBUG1,
			(errmsg("wals: read the %lld item factors of model \"%s\"; computing their Gram and index",
					(long long) h->nitems, info->display)));
	index_ids(h, info);
	wals_zero_floats(G, (size_t) f * f);
	wals_gram_rows(Y, 0, h->nitems, f, G);
	index_rows(h, psprintf("indexing the item factors of model \"%s\"", info->display));
}

/*
 * Fill the items area h from patch->from's items with the patch's rows in
 * place (see WalsItemsPatch), and the patch's Gram; then the index.  The
 * rows a refresh did not change are copied, not read again, and so are
 * their bytes in the index.
 */
static void
fill_patched(WalsArea *h, const WalsItemsPatch *patch, const WalsModelInfo *info)
{
	char	   *base = (char *) h;
	int64	   *ids = (int64 *) (base + h->ids);
	float	   *Y = (float *) (base + h->Y);
	const WalsServeModel *from = patch->from;
	int			f = h->factors;
	int32	   *was = palloc_extended(sizeof(int32) * Max(h->nitems, 1), MCXT_ALLOC_HUGE);
	int32	   *now = palloc_extended(sizeof(int32) * Max(from->nitems, 1), MCXT_ALLOC_HUGE);
	int64		a = 0;
	int64		b = 0;
	int64		o = 0;

	while (a < from->nitems || b < patch->n)
	{
		bool		patched = b < patch->n && (a >= from->nitems || patch->ids[b] <= from->ids[a]);

		if ((o & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		if (patched)
		{
			if (a < from->nitems && from->ids[a] == patch->ids[b])
				now[a++] = -1;
			if (patch->known[b])
			{
				ids[o] = patch->ids[b];
				memcpy(Y + o * f, patch->Y + b * f, sizeof(float) * f);
				was[o++] = -1;
			}
			b++;
		}
		else
		{
			ids[o] = from->ids[a];
			memcpy(Y + o * f, from->Y + a * f, sizeof(float) * f);
			was[o] = (int32) a;
			now[a++] = (int32) o++;
		}
	}
	Assert(o == h->nitems);
	index_ids(h, info);
	memcpy(base + h->G, patch->G, sizeof(float) * f * f);
	ereport(DEBUG1,
			(errmsg("wals: patched %lld of the %lld item factors of model \"%s\"; indexing them",
					(long long) patch->n, (long long) h->nitems, info->display)));
	index_patched_rows(h, from, was, now,
					   psprintf("indexing the item factors of model \"%s\"", info->display));
	pfree(was);
	pfree(now);
}

/* The number of items once patch is applied. */
static int64
patched_count(const WalsItemsPatch *patch)
{
	int64		n = patch->from->nitems;

	for (int64 b = 0; b < patch->n; b++)
	{
		bool		had = wals_serve_item(patch->from, patch->ids[b]) >= 0;

		n += (patch->known[b] ? 1 : 0) - (had ? 1 : 0);
	}
	return n;
}

/*
 * Fill the cosine area h with the unit rows of m's items and their index.
 * A zero row stays zero: its similarity to anything is 0.
 */
static void
fill_cosine(WalsArea *h, const WalsServeModel *m)
{
	float	   *unit = (float *) ((char *) h + h->Y);
	int			f = m->factors;

	ereport(DEBUG1,
			(errmsg("wals: indexing the unit rows of the %lld items of model \"%s\"",
					(long long) m->nitems, m->info.display)));
	for (int64 i = 0; i < m->nitems; i++)
	{
		const float *y = m->Y + i * f;
		double		norm = 0.0;

		for (int a = 0; a < f; a++)
			norm += (double) y[a] * y[a];
		norm = sqrt(norm);
		for (int a = 0; a < f; a++)
			unit[i * f + a] = norm > 0.0 ? (float) (y[a] / norm) : 0.0f;
		if ((i & 255) == 255)
			CHECK_FOR_INTERRUPTS();
	}
	index_rows(h, psprintf("indexing the item factors of model \"%s\"", m->info.display));
}

/*
 * An area laid out as key says, in a segment of its own (*seg) where share
 * and the server has room for one, else in cxt.  Its head is the key, its
 * magic not yet set.
 */
WalsArea *
wals_area_new(const WalsArea *key, bool share, MemoryContext cxt, dsm_segment **seg)
{
	WalsArea   *h;

	*seg = share ? wals_segment_create(key->total) : NULL;
	if (*seg != NULL)
		h = dsm_segment_address(*seg);
	else
		h = (WalsArea *) TYPEALIGN(WALS_AREA_ALIGN,
								   MemoryContextAllocHuge(cxt, key->total + WALS_AREA_ALIGN));
	/* every byte is written next: fault the pages in a few calls, not one by one */
	wals_prefault(h, key->total);
	memcpy(h, key, sizeof(WalsArea));
	h->magic = 0;
	return h;
}

/*
 * The area h, whole, ready to be read: published where it is in seg, its
 * segment then being the one to map (this one, or another backend's of
 * the same area, published first).
 */
WalsArea *
wals_area_finish(WalsArea *h, dsm_segment **seg)
{
	pg_write_barrier();
	h->magic = WALS_AREA_MAGIC;
	if (*seg == NULL)
		return h;
	*seg = wals_segment_publish(h, *seg);
	return dsm_segment_address(*seg);
}

/*
 * Build the items of info's version, as the model's owner (or from the
 * version before and what a refresh changed of it, patch): in a segment
 * that is then published, or in m's own memory where it cannot be.  An
 * error or a cancel meanwhile drops the segment: its mapping is the
 * session's, so nothing else would.
 */
static void
build(WalsServeModel *m, const WalsModelInfo *info, WalsArea *key, bool share,
	  const WalsItemsPatch *patch)
{
	SPITupleTable *volatile tuptable = NULL;
	dsm_segment *seg;
	WalsArea   *h;
	WalsRoleSave save;

	if (patch != NULL)
		wals_area_layout(key, WALS_AREA_ITEMS, patched_count(patch), info->factors);
	else
	{
		wals_become_model_owner(info, &save);
		wals_sql_expect(wals_sql(psprintf("SELECT item_id, factors FROM %s ORDER BY item_id",
										  wals_relation_name(info->item_rel)),
								 0, NULL, NULL, NULL, true, 0),
						SPI_OK_SELECT, info->item_rel);
		wals_unbecome(&save);
		tuptable = SPI_tuptable;
		wals_area_layout(key, WALS_AREA_ITEMS, (int64) SPI_processed, info->factors);
	}
	h = wals_area_new(key, share, m->cxt, &seg);
	PG_TRY();
	{
		if (patch != NULL)
			fill_patched(h, patch, info);
		else
			fill_items(h, tuptable, info);
	}
	PG_CATCH();
	{
		if (seg != NULL)
			dsm_detach(seg);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (tuptable != NULL)
		SPI_freetuptable(tuptable);
	h = wals_area_finish(h, &seg);
	m->seg = seg;
	wals_area_map_items(m, h);
}

/*
 * The items of info's version as build makes them, where shared copied
 * from the version's images (item_images.c) rather than read from the
 * item table wherever they allow.
 */
static void
build_items(WalsServeModel *m, const WalsModelInfo *info, WalsArea *key, bool share,
			const WalsItemsPatch *patch)
{
	MemoryContext images;
	WalsItemsPatch changed;

	if (patch != NULL || !share)
	{
		build(m, info, key, share, patch);
		return;
	}
	/* what is copied from the images is the call's until built in */
	images = AllocSetContextCreate(CurrentMemoryContext, "wals item images",
								   ALLOCSET_DEFAULT_SIZES);
	switch (wals_items_from_image(m, info, key, &changed, images))
	{
		case WALS_IMAGE_COPIED:
			break;
		case WALS_IMAGE_PATCH:
			build(m, info, key, share, &changed);
			break;
		case WALS_IMAGE_NONE:
			build(m, info, key, share, NULL);
			break;
	}
	MemoryContextDelete(images);
}

/*
 * Whether a version of the model may be shared: the session lets it, and
 * its item table does not force row security on its owner, whose
 * policies' functions could then give one reader what another does not
 * see.
 */
static bool
shareable(const WalsModelInfo *info)
{
	HeapTuple	tuple;
	bool		forced;

	if (!wals_shared_items)
		return false;
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(info->item_rel));
	if (!HeapTupleIsValid(tuple))
		return false;
	forced = ((Form_pg_class) GETSTRUCT(tuple))->relforcerowsecurity;
	ReleaseSysCache(tuple);
	return !forced;
}

/*
 * Set m's items (ids, Y, YᵀY, the index) to those of info's version: the
 * published segment where there is one, else built, and published where
 * the model may be shared.  retire: the version is another transaction's,
 * committed, so the model's older versions may go.  Must run inside an SPI
 * connection, after the caller's rights were checked.
 */
void
wals_items_load(WalsServeModel *m, const WalsModelInfo *info, bool retire,
				const WalsItemsPatch *patch)
{
	WalsArea	key;
	bool		share = shareable(info);
	dsm_segment *seg = NULL;

	wals_area_key(&key, info->item_rel, info->version, WALS_AREA_ITEMS, info->factors);
	m->seg = NULL;
	m->cosine_seg = NULL;
	m->own_items = !wals_shared_items;
	if (share)
	{
		seg = wals_segment_find(&key);
		if (seg == NULL)
		{
			wals_segment_lock(info->item_rel, true);
			seg = wals_segment_find(&key);
			if (seg == NULL)
				build_items(m, info, &key, true, patch);
			wals_segment_lock(info->item_rel, false);
		}
		if (seg != NULL)
		{
			m->seg = seg;
			wals_area_map_items(m, dsm_segment_address(seg));
		}
	}
	else
		build_items(m, info, &key, false, patch);
	if (share && retire)
		wals_segment_retire_older(info->item_rel, info->version);
}

/*
 * The cosine area of m's items, laid out as key says, built in a segment
 * that is then published where share, else in cxt; *seg its segment.
 */
static WalsArea *
build_cosine(WalsServeModel *m, WalsArea *key, bool share, MemoryContext cxt,
			 dsm_segment **seg)
{
	WalsArea   *h;
	dsm_segment *built;

	wals_area_layout(key, WALS_AREA_COSINE, m->nitems, m->factors);
	h = wals_area_new(key, share, cxt, &built);
	PG_TRY();
	{
		fill_cosine(h, m);
	}
	PG_CATCH();
	{
		if (built != NULL)
			dsm_detach(built);
		PG_RE_THROW();
	}
	PG_END_TRY();
	h = wals_area_finish(h, &built);
	*seg = built;
	return h;
}

/*
 * The index over the unit rows of m's items, for cosine similarity: the
 * version's shared one where m's items are shared, built and published by
 * the first backend that needs it, else built in m's own memory, once.
 */
const WalsScoreIndex *
wals_cosine_load(WalsServeModel *m)
{
	WalsArea	key;
	WalsArea   *h = NULL;
	dsm_segment *seg = NULL;
	MemoryContext cxt;
	WalsScoreIndex *ix;

	if (m->cosine != NULL)
		return m->cosine;
	/* a cancel while building leaves nothing in m: cxt is the call's until then */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "wals cosine index",
								ALLOCSET_SMALL_SIZES);
	wals_area_key(&key, m->info.item_rel, m->info.version, WALS_AREA_COSINE, m->factors);
	if (m->seg != NULL)
	{
		seg = wals_segment_find(&key);
		if (seg == NULL)
		{
			wals_segment_lock(m->info.item_rel, true);
			seg = wals_segment_find(&key);
			if (seg == NULL)
				h = build_cosine(m, &key, true, cxt, &seg);
			wals_segment_lock(m->info.item_rel, false);
		}
		if (h == NULL)
			h = dsm_segment_address(seg);
	}
	else
		h = build_cosine(m, &key, false, cxt, &seg);
	ix = MemoryContextAlloc(cxt, sizeof(WalsScoreIndex));
	map_index(ix, h);
	MemoryContextSetParent(cxt, m->cxt);
	m->cosine_seg = seg;
	m->cosine = ix;
	return ix;
}

/* Let go of m's items: its uses of their segments, if shared. */
void
wals_items_release(WalsServeModel *m)
{
	if (m->cosine_seg != NULL)
		wals_segment_release(m->cosine_seg);
	if (m->seg != NULL)
		wals_segment_release(m->seg);
	m->cosine_seg = NULL;
	m->seg = NULL;
}
