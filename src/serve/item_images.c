/*
 * item_images.c
 *	  A version's items area copied from the images the training and the
 *	  refreshes since wrote (src/catalog/images.c), rather than built from
 *	  the item table.
 *
 * A training writes its version's whole area.  A refresh of items, which
 * may come every few minutes and change a few hundred rows, writes what it
 * changed instead: the ids, their rows (or that they are gone) and the new
 * YᵀY, under a head that names the version they change.  A reader of a
 * refreshed version on a standby, or after a restart, follows those heads
 * back to a whole image, copies it, merges what every refresh since
 * changed into one patch (an item's last change wins), and puts that in
 * place as the refresh did on the primary (items.c): it reads nothing of
 * the item table and computes no Gram, and quantises only the rows the
 * refreshes changed into the index.  What the refreshes since a whole image
 * wrote is kept under that image's size: the refresh that would pass it
 * writes its whole area instead, which replaces them all.
 */
#include "postgres.h"

#include "lib/binaryheap.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "segments.h"
#include "wals_serve.h"

#define WALS_PATCH_MAGIC 0x57414c50	/* "WALP" */

/*
 * The head of what a refresh changed; after it ids[n], Y[n][factors],
 * G[factors][factors], then known[n] as bytes.
 */
typedef struct WalsPatchHead
{
	uint32		magic;
	uint32		layout;			/* WALS_AREA_LAYOUT */
	Oid			item_rel;
	int32		factors;
	int64		version;
	int64		from;			/* the version it changes */
	int64		n;
} WalsPatchHead;

/* Bytes after the head of a change of n items of f factors. */
static Size
patch_body(int64 n, int f)
{
	return sizeof(int64) * n + sizeof(float) * (Size) f * n + sizeof(float) * f * f + n;
}

/*
 * Write the image of the version whose shared area is area: what patch
 * changed (NULL: a training's) where the version it changes has an image
 * and the changes kept beside it stay under its size, else the whole area,
 * in place of the item table's other images.
 */
void
wals_items_write_image(const WalsArea *area, const WalsItemsPatch *patch)
{
	if (patch != NULL)
	{
		int			f = area->factors;
		Size		bytes = sizeof(WalsPatchHead) + patch_body(patch->n, f);
		bool		present;
		int64		kept = wals_image_bytes(area->item_rel, patch->from->info.version, &present);

		if (kept < 0)
			return;
		if (present && (Size) kept + bytes <= 2 * area->total)
		{
			char	   *buf = palloc_extended(bytes, MCXT_ALLOC_HUGE);
			WalsPatchHead *head = (WalsPatchHead *) buf;
			char	   *at = buf + sizeof(WalsPatchHead);

			memset(head, 0, sizeof(*head));
			head->magic = WALS_PATCH_MAGIC;
			head->layout = WALS_AREA_LAYOUT;
			head->item_rel = area->item_rel;
			head->factors = f;
			head->version = area->version;
			head->from = patch->from->info.version;
			head->n = patch->n;
			memcpy(at, patch->ids, sizeof(int64) * patch->n);
			at += sizeof(int64) * patch->n;
			memcpy(at, patch->Y, sizeof(float) * (Size) f * patch->n);
			at += sizeof(float) * (Size) f * patch->n;
			memcpy(at, patch->G, sizeof(float) * f * f);
			at += sizeof(float) * f * f;
			for (int64 b = 0; b < patch->n; b++)
				*at++ = patch->known[b] ? 1 : 0;
			wals_image_write(area->item_rel, area->version, buf, sizeof(WalsPatchHead), bytes,
							 false);
			pfree(buf);
			return;
		}
	}
	wals_image_write(area->item_rel, area->version, area, sizeof(WalsArea), area->total, true);
}

/* The rows of one version's image: rows [first, first + count) of the result. */
typedef struct ImageRows
{
	int64		version;
	uint64		first;
	uint64		count;
} ImageRows;

/*
 * The bytes after the head of the image g, whole, into out (bytes long):
 * false where its chunks do not add up to that.
 */
static bool
read_body(SPITupleTable *tt, const ImageRows *g, char *out, Size bytes)
{
	Size		at = 0;

	for (uint64 k = g->first + 1; k < g->first + g->count; k++)
	{
		Size		len;
		bytea	   *data = wals_image_data(tt, k, &len);
		bool		fits = len <= bytes - at;

		if (fits)
			memcpy(out + at, VARDATA_ANY(data), len);
		pfree(data);
		if (!fits)
			return false;
		at += len;
		CHECK_FOR_INTERRUPTS();
	}
	return at == bytes;
}

/*
 * Copy the whole image g, whose head is head, into a new area laid out as
 * key says for it (shared where share, else in cxt): NULL, having made
 * nothing, where the head does not describe what this library lays out for
 * that many items.  *seg is the area's segment, not yet published.
 */
static WalsArea *
copy_area(SPITupleTable *tt, const ImageRows *g, const WalsArea *head, WalsArea *key,
		  bool share, MemoryContext cxt, dsm_segment **seg)
{
	WalsArea   *h;
	bool		whole = false;

	if (head->magic != WALS_AREA_MAGIC || head->layout != WALS_AREA_LAYOUT ||
		head->kind != WALS_AREA_ITEMS || head->item_rel != key->item_rel ||
		head->version != key->version || head->factors != key->factors || head->nitems < 0)
		return NULL;
	wals_area_layout(key, WALS_AREA_ITEMS, head->nitems, key->factors);
	if (head->ids != key->ids || head->dir != key->dir || head->Y != key->Y ||
		head->G != key->G || head->blocks != key->blocks || head->total != key->total)
		return NULL;
	h = wals_area_new(key, share, cxt, seg);
	PG_TRY();
	{
		whole = read_body(tt, g, (char *) h + sizeof(WalsArea), key->total - sizeof(WalsArea));
	}
	PG_CATCH();
	{
		if (*seg != NULL)
			dsm_detach(*seg);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!whole)
	{
		if (*seg != NULL)
			dsm_detach(*seg);
		return NULL;
	}
	h->groups = head->groups;
	h->usable = head->usable;
	h->max_norm = head->max_norm;
	h->dir_lo = head->dir_lo;
	h->dir_shift = head->dir_shift;
	h->dir_buckets = head->dir_buckets;
	return h;
}

/* What one refresh changed, as its image holds it. */
typedef struct Change
{
	int64		n;
	const int64 *ids;			/* increasing */
	const float *Y;
	const float *G;
	const uint8 *known;
	int64		next;			/* of the merge: the first id not yet taken */
	int			order;			/* of the merge: later refreshes higher */
} Change;

/*
 * Read the change image g, whose head is head, into c: false where it is
 * not whole or its ids are not increasing.
 */
static bool
read_change(Change *c, SPITupleTable *tt, const ImageRows *g, const WalsPatchHead *head)
{
	int			f = head->factors;
	Size		bytes = patch_body(head->n, f);
	char	   *body = palloc_extended(bytes, MCXT_ALLOC_HUGE);

	if (!read_body(tt, g, body, bytes))
		return false;
	c->n = head->n;
	c->ids = (const int64 *) body;
	c->Y = (const float *) (body + sizeof(int64) * head->n);
	c->G = c->Y + (Size) f * head->n;
	c->known = (const uint8 *) (c->G + f * f);
	c->next = 0;
	for (int64 i = 1; i < c->n; i++)
		if (c->ids[i] <= c->ids[i - 1])
			return false;
	return true;
}

/* Of the merge's heap: the change whose next id is lower first, then the later. */
static int
change_first(Datum a, Datum b, void *arg)
{
	const Change *x = (const Change *) DatumGetPointer(a);
	const Change *y = (const Change *) DatumGetPointer(b);
	int64		xi = x->ids[x->next];
	int64		yi = y->ids[y->next];

	if (xi != yi)
		return xi < yi ? 1 : -1;
	return x->order > y->order ? 1 : -1;
}

/*
 * Merge the changes c[0..k) (later refreshes last) into patch, in order
 * of id: where several changed an item, the last one's row.  One pass
 * over their rows, in O(rows log k).
 */
static void
merge_changes(Change *c, int k, int f, WalsItemsPatch *patch)
{
	binaryheap *heap = binaryheap_allocate(k, change_first, NULL);
	int64		rows = 0;
	int64		n = 0;
	int64	   *ids;
	float	   *Y;
	bool	   *known;
	float	   *G = palloc(sizeof(float) * f * f);

	for (int i = 0; i < k; i++)
	{
		c[i].order = i;
		rows += c[i].n;
		if (c[i].n > 0)
			binaryheap_add_unordered(heap, PointerGetDatum(&c[i]));
	}
	binaryheap_build(heap);
	ids = palloc_extended(sizeof(int64) * rows, MCXT_ALLOC_HUGE);
	Y = palloc_extended(sizeof(float) * (Size) f * rows, MCXT_ALLOC_HUGE);
	known = palloc_extended(rows, MCXT_ALLOC_HUGE);
	while (!binaryheap_empty(heap))
	{
		Change	   *t = (Change *) DatumGetPointer(binaryheap_first(heap));
		int64		id = t->ids[t->next];

		if (n == 0 || ids[n - 1] != id)
		{
			ids[n] = id;
			known[n] = t->known[t->next] != 0;
			memcpy(Y + n * f, t->Y + t->next * f, sizeof(float) * f);
			if ((n & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
			n++;
		}
		if (++t->next < t->n)
			binaryheap_replace_first(heap, PointerGetDatum(t));
		else
			binaryheap_remove_first(heap);
	}
	memcpy(G, c[k - 1].G, sizeof(float) * f * f);
	patch->ids = ids;
	patch->n = n;
	patch->Y = Y;
	patch->known = known;
	patch->G = G;
}

/* Index of the rows of version in groups[0..n) (in order of version), or -1. */
static int64
find_rows(const ImageRows *groups, int64 n, int64 version)
{
	int64		lo = 0;
	int64		hi = n;

	while (lo < hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (groups[mid].version < version)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && groups[lo].version == version ? lo : -1;
}

/*
 * The images of info's item table, grouped by version: false where a
 * version's chunks are not 0, 1, ... in order.
 */
static bool
group_rows(SPITupleTable *tt, uint64 rows, ImageRows **groups, int64 *n)
{
	ImageRows  *g = palloc(sizeof(ImageRows) * rows);
	int64		ng = 0;

	for (uint64 k = 0; k < rows; k++)
	{
		int64		version;
		int32		chunk;

		wals_image_row(tt, k, &version, &chunk);
		if (ng == 0 || g[ng - 1].version != version)
		{
			g[ng].version = version;
			g[ng].first = k;
			g[ng].count = 0;
			ng++;
		}
		if ((uint64) chunk != g[ng - 1].count)
			return false;
		g[ng - 1].count++;
	}
	*groups = g;
	*n = ng;
	return true;
}

/*
 * Copy the items of info's version into an area laid out as key says,
 * published where the server has room: from its whole image (WALS_IMAGE_COPIED, m then
 * maps it), or from the whole image of an earlier version, copied into
 * cxt, and what the refreshes since changed (WALS_IMAGE_PATCH: *patch
 * says what, from that copy, for the caller to build).  WALS_IMAGE_NONE,
 * having made nothing, where an image is missing or is not what this
 * library would lay out.  Allocates in cxt.
 */
WalsImageFound
wals_items_from_image(WalsServeModel *m, const WalsModelInfo *info, WalsArea *key,
					  WalsItemsPatch *patch, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	uint64		rows = wals_image_rows(info->item_rel);
	SPITupleTable *tt = SPI_tuptable;
	ImageRows  *groups;
	int64		ngroups;
	int64	   *chain;
	const WalsPatchHead **heads;
	int			nchain = 0;
	int64		version = info->version;
	const ImageRows *base = NULL;
	WalsArea	head;
	WalsArea	bkey;
	WalsArea   *h;
	dsm_segment *seg;
	Change	   *changes;
	WalsServeModel *from;

	if (rows == 0 || !group_rows(tt, rows, &groups, &ngroups))
		goto none;
	chain = palloc(sizeof(int64) * ngroups);
	heads = palloc(sizeof(WalsPatchHead *) * ngroups);

	/* back from info's version to a whole image, through at most every other */
	while (base == NULL && nchain < ngroups)
	{
		int64		g = find_rows(groups, ngroups, version);
		Size		len;
		bytea	   *data;

		if (g < 0)
			goto none;
		data = wals_image_data(tt, groups[g].first, &len);
		if (len == sizeof(WalsArea))
		{
			memcpy(&head, VARDATA_ANY(data), sizeof(WalsArea));
			base = &groups[g];
		}
		else if (len == sizeof(WalsPatchHead))
		{
			const WalsPatchHead *p = (const WalsPatchHead *) VARDATA_ANY(data);

			if (p->magic != WALS_PATCH_MAGIC || p->layout != WALS_AREA_LAYOUT ||
				p->item_rel != info->item_rel || p->factors != info->factors ||
				p->version != version || p->n < 0)
				goto none;
			heads[nchain] = p;
			chain[nchain++] = g;
			version = p->from;
		}
		else
			goto none;
	}
	if (base == NULL)
		goto none;

	bkey = *key;
	bkey.version = version;
	if (nchain == 0)
	{
		h = copy_area(tt, base, &head, &bkey, true, m->cxt, &seg);
		if (h == NULL)
			goto none;
		*key = bkey;
		ereport(DEBUG1,
				(errmsg("wals: copied the %lld item factors of model \"%s\", their Gram and index from their image",
						(long long) h->nitems, info->display)));
		h = wals_area_finish(h, &seg);
		m->seg = seg;
		wals_area_map_items(m, h);
		SPI_freetuptable(tt);
		MemoryContextSwitchTo(old);
		return WALS_IMAGE_COPIED;
	}

	h = copy_area(tt, base, &head, &bkey, false, cxt, &seg);
	if (h == NULL)
		goto none;
	changes = palloc(sizeof(Change) * nchain);
	for (int i = 0; i < nchain; i++)
	{
		int			j = nchain - 1 - i;

		if (!read_change(&changes[i], tt, &groups[chain[j]], heads[j]))
			goto none;
	}
	merge_changes(changes, nchain, info->factors, patch);
	ereport(DEBUG1,
			(errmsg_plural("wals: copied the %lld item factors of model \"%s\" from the image of an earlier version, and what %d refresh changed since",
						   "wals: copied the %lld item factors of model \"%s\" from the image of an earlier version, and what %d refreshes changed since",
						   nchain, (long long) h->nitems, info->display, nchain)));
	from = palloc0(sizeof(WalsServeModel));
	from->info = *info;
	from->info.version = version;
	h = wals_area_finish(h, &seg);
	wals_area_map_items(from, h);
	patch->from = from;
	SPI_freetuptable(tt);
	MemoryContextSwitchTo(old);
	return WALS_IMAGE_PATCH;

none:
	if (rows > 0)
		SPI_freetuptable(tt);
	MemoryContextSwitchTo(old);
	return WALS_IMAGE_NONE;
}
