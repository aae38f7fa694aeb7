/*
 * idmap.c
 *	  Dense numbering of sparse int64 ids.
 *
 * User and item ids are arbitrary bigints (negative, huge, gappy), while the
 * solvers index factor rows densely.  Ids are numbered in two steps so that
 * reading never has to keep an int64 per row: while rows arrive, each new id
 * gets the next provisional index, in order of first sight, and rows keep
 * only that int32; once everything is read, the distinct ids are sorted and
 * each provisional index is mapped to the id's rank.  Numbering by rank
 * makes a model independent of the scan order, which a parallel or repeated
 * scan does not guarantee.
 *
 * Every row looks its two ids up, so the lookup is most of the cost of
 * reading, and it is bound by memory: a map of a few hundred thousand ids
 * outgrows the cache.  Two layouts keep it small.  While the ids lie in a
 * range not much wider than their number, as serial keys do, the map is an
 * array over that range: one load of 4 bytes per id, and the ids come out
 * sorted for free.  Otherwise it is an open-addressing hash kept at most
 * half full, a slot holding id and index side by side so that a probe
 * touches one cache line, with linear probing for short chains; the slots
 * of ids a few rows ahead are prefetched, so that the misses overlap.
 *
 * The caller owns the memory: wals_idmap_need says when a batch of ids does
 * not fit and how many bytes the map needs instead, and wals_idmap_move
 * carries the map over into a buffer of that size.
 */
#include <stdlib.h>

#include "wals_internal.h"

/* How many ids ahead of the one being inserted have their slot prefetched. */
#define WALS_IDMAP_PREFETCH		16

/*
 * A dense array may span this many ids per distinct id, or WALS_IDMAP_DENSE_MIN
 * ids, whichever is more: at 4 bytes an entry, never much more memory than
 * a hash table, which takes at least 32 bytes per id.
 */
#define WALS_IDMAP_DENSE_RATIO	8
#define WALS_IDMAP_DENSE_MIN	((uint64_t) 1 << 20)

/* The smallest arrays and tables worth a move. */
#define WALS_IDMAP_MIN_ENTRIES	1024

/* The layout a map moves to: what wals_idmap_need and wals_idmap_move agree on. */
typedef struct Layout
{
	int			dense;
	int64_t		lo;
	size_t		nslots;
} Layout;

/* The slot holding id, or the empty slot where it would go. */
static inline size_t
probe(const WalsIdMap *map, int64_t id)
{
	size_t		mask = map->nslots - 1;
	size_t		slot = (size_t) wals_mix64((uint64_t) id) & mask;

	while (map->slots[slot].index >= 0 && map->slots[slot].id != id)
		slot = (slot + 1) & mask;
	return slot;
}

/* Record index for id, which must be absent and fit. */
static inline void
store(WalsIdMap *map, int64_t id, int32_t index)
{
	if (map->dense != NULL)
		map->dense[(uint64_t) id - (uint64_t) map->lo] = index;
	else
	{
		WalsIdSlot *slot = &map->slots[probe(map, id)];

		slot->id = id;
		slot->index = index;
	}
}

/* Ask the cache for the entry of id; only a hint, so a no-op elsewhere. */
static inline void
prefetch_entry(const WalsIdMap *map, int64_t id)
{
#ifdef __GNUC__
	if (map->dense != NULL)
	{
		uint64_t	off = (uint64_t) id - (uint64_t) map->lo;

		if (off < map->nslots)
			__builtin_prefetch(&map->dense[off]);
	}
	else
		__builtin_prefetch(&map->slots[(size_t) wals_mix64((uint64_t) id) & (map->nslots - 1)]);
#else
	(void) map;
	(void) id;
#endif
}

/* qsort's comparator written without subtraction, which overflows on int64. */
static int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

static size_t
layout_bytes(const Layout *l)
{
	return l->nslots * (l->dense ? sizeof(int32_t) : sizeof(WalsIdSlot));
}

/* Slots for a hash table at most half full with count ids. */
static size_t
hash_slots(size_t at_least, size_t count)
{
	size_t		nslots = at_least < WALS_IDMAP_MIN_ENTRIES ? WALS_IDMAP_MIN_ENTRIES : at_least;

	while (nslots / 2 < count)
		nslots *= 2;
	return nslots;
}

/*
 * Whether ids[0..n) fit as the map is; if not, the layout to move to.  A
 * dense map stays dense while the range of its ids and the batch's stays
 * within the ratio, and then grows by at least doubling, with the room on
 * the side the ids grew towards, so that ids arriving in increasing or
 * decreasing order cost few moves; a map that outgrows the ratio becomes a
 * hash table for good, and a hash table doubles until half of it holds
 * count + n ids.
 */
static int
plan(const WalsIdMap *map, const int64_t *ids, size_t n, Layout *out)
{
	int64_t		bmin;
	int64_t		bmax;
	int64_t		lo;
	int64_t		hi;
	uint64_t	width;
	uint64_t	limit;
	uint64_t	want;
	size_t		i;

	if (n == 0)
		return 0;
	if (map->dense == NULL && map->slots != NULL)
	{
		if (map->count + n <= map->nslots / 2)
			return 0;
		out->dense = 0;
		out->lo = 0;
		out->nslots = hash_slots(map->nslots * 2, map->count + n);
		return 1;
	}

	bmin = bmax = ids[0];
	for (i = 1; i < n; i++)
	{
		bmin = ids[i] < bmin ? ids[i] : bmin;
		bmax = ids[i] > bmax ? ids[i] : bmax;
	}
	if (map->dense != NULL &&
		(uint64_t) bmin - (uint64_t) map->lo < map->nslots &&
		(uint64_t) bmax - (uint64_t) map->lo < map->nslots)
		return 0;

	lo = map->count > 0 && map->min_id < bmin ? map->min_id : bmin;
	hi = map->count > 0 && map->max_id > bmax ? map->max_id : bmax;
	width = (uint64_t) hi - (uint64_t) lo;
	limit = (uint64_t) (map->count + n) * WALS_IDMAP_DENSE_RATIO;
	limit = limit < WALS_IDMAP_DENSE_MIN ? WALS_IDMAP_DENSE_MIN : limit;
	if (width >= limit)
	{
		out->dense = 0;
		out->lo = 0;
		out->nslots = hash_slots(0, map->count + n);
		return 1;
	}

	want = (uint64_t) map->nslots * 2;
	want = want < width + 1 ? width + 1 : want;
	want = want < WALS_IDMAP_MIN_ENTRIES ? WALS_IDMAP_MIN_ENTRIES : want;
	want = want > limit ? limit : want;
	out->dense = 1;
	out->nslots = (size_t) want;
	if (map->count > 0 && bmin < map->min_id)
	{
		/* growing downwards: the room goes below, as far as int64 allows */
		out->lo = (uint64_t) hi - (uint64_t) INT64_MIN >= want - 1 ?
			(int64_t) ((uint64_t) hi - (want - 1)) : INT64_MIN;
	}
	else
		out->lo = (uint64_t) INT64_MAX - (uint64_t) lo >= want - 1 ?
			lo : (int64_t) ((uint64_t) INT64_MAX - (want - 1));
	return 1;
}

/*
 * An empty map holds no memory; the first batch sizes it.
 */
void
wals_idmap_init(WalsIdMap *map)
{
	map->dense = NULL;
	map->slots = NULL;
	map->lo = 0;
	map->nslots = 0;
	map->count = 0;
	map->min_id = 0;
	map->max_id = 0;
}

/* See plan() for the policy. */
size_t
wals_idmap_need(const WalsIdMap *map, const int64_t *ids, size_t n)
{
	Layout		l;

	return plan(map, ids, n, &l) ? layout_bytes(&l) : 0;
}

/*
 * Entries keep their index, so the rows read so far stay valid.  A hash
 * table is refilled in the order of its old slots or of the ids, which is as
 * good as any for probing.
 */
WalsStatus
wals_idmap_move(WalsIdMap *map, void *buffer, size_t bytes,
				const int64_t *ids, size_t n)
{
	WalsIdMap	to = *map;
	Layout		l;
	size_t		i;

	if (!plan(map, ids, n, &l) || bytes < layout_bytes(&l))
		return WALS_EINVAL;
	to.nslots = l.nslots;
	to.lo = l.lo;
	if (l.dense)
	{
		to.dense = buffer;
		to.slots = NULL;
		for (i = 0; i < l.nslots; i++)
			to.dense[i] = -1;
	}
	else
	{
		to.dense = NULL;
		to.slots = buffer;
		for (i = 0; i < l.nslots; i++)
			to.slots[i].index = -1;
	}

	if (map->dense != NULL)
	{
		for (i = 0; i < map->nslots; i++)
			if (map->dense[i] >= 0)
				store(&to, (int64_t) ((uint64_t) map->lo + i), map->dense[i]);
	}
	else if (map->slots != NULL)
	{
		for (i = 0; i < map->nslots; i++)
			if (map->slots[i].index >= 0)
				store(&to, map->slots[i].id, map->slots[i].index);
	}
	*map = to;
	return WALS_OK;
}

/* Provisional index of id, or -1 when absent. */
int32_t
wals_idmap_find(const WalsIdMap *map, int64_t id)
{
	if (map->dense != NULL)
	{
		uint64_t	off = (uint64_t) id - (uint64_t) map->lo;

		return off < map->nslots ? map->dense[off] : -1;
	}
	if (map->slots == NULL)
		return -1;
	return map->slots[probe(map, id)].index;
}

/*
 * An id equal to the one before it, common in tables clustered by user,
 * costs no lookup at all.  A hash table is checked for room up front, so a
 * probe always ends; an array, id by id, as the range check is one compare.
 */
WalsStatus
wals_idmap_insert_many(WalsIdMap *map, const int64_t *ids, size_t n, int32_t *index)
{
	size_t		i;

	if (n == 0)
		return WALS_OK;
	if (map->dense == NULL && (map->slots == NULL || map->count + n > map->nslots / 2))
		return WALS_EINVAL;
	for (i = 0; i < n && i < WALS_IDMAP_PREFETCH; i++)
		prefetch_entry(map, ids[i]);
	for (i = 0; i < n; i++)
	{
		int64_t		id = ids[i];
		int32_t    *e;

		if (i + WALS_IDMAP_PREFETCH < n)
			prefetch_entry(map, ids[i + WALS_IDMAP_PREFETCH]);
		if (i > 0 && id == ids[i - 1])
		{
			index[i] = index[i - 1];
			continue;
		}
		if (map->dense != NULL)
		{
			uint64_t	off = (uint64_t) id - (uint64_t) map->lo;

			if (off >= map->nslots)
				return WALS_EINVAL;
			e = &map->dense[off];
		}
		else
		{
			WalsIdSlot *slot = &map->slots[probe(map, id)];

			slot->id = id;
			e = &slot->index;
		}
		if (*e < 0)
		{
			if (map->count >= (size_t) INT32_MAX)
				return WALS_ETOOBIG;
			if (map->count == 0 || id < map->min_id)
				map->min_id = id;
			if (map->count == 0 || id > map->max_id)
				map->max_id = id;
			*e = (int32_t) map->count++;
		}
		index[i] = *e;
	}
	return WALS_OK;
}

/*
 * Sort the n slots at s by id, least significant byte first, through the
 * n slots at t, whose contents are lost; polls every WALS_CELL_POLL slots
 * of each pass.  Bytes all the ids share are skipped: ids that fit in
 * three bytes take three passes.
 */
static void
sort_slots(WalsIdSlot *s, WalsIdSlot *t, size_t n)
{
	WalsIdSlot *base = s;
	size_t		count[8][256];
	size_t		k;

	memset(count, 0, sizeof(count));
	for (k = 0; k < n; k++)
	{
		uint64_t	key = (uint64_t) s[k].id ^ ((uint64_t) 1 << 63);

		if (k % WALS_CELL_POLL == WALS_CELL_POLL - 1)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		for (int b = 0; b < 8; b++)
			count[b][(key >> (8 * b)) & 0xff]++;
	}
	for (int b = 0; b < 8; b++)
	{
		size_t		start = 0;
		WalsIdSlot *swap;

		if (count[b][((((uint64_t) s[0].id) ^ ((uint64_t) 1 << 63)) >> (8 * b)) & 0xff] == n)
			continue;
		for (int v = 0; v < 256; v++)
		{
			size_t		c = count[b][v];

			count[b][v] = start;
			start += c;
		}
		for (k = 0; k < n; k++)
		{
			uint64_t	key = (uint64_t) s[k].id ^ ((uint64_t) 1 << 63);

			if (k % WALS_CELL_POLL == WALS_CELL_POLL - 1)
				wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
			t[count[b][(key >> (8 * b)) & 0xff]++] = s[k];
		}
		swap = s;
		s = t;
		t = swap;
	}
	if (s != base)
		memcpy(base, s, n * sizeof(WalsIdSlot));
}

/*
 * A dense array lists its ids in order already.  A hash table, at most
 * half full, gathers its slots in its first half and sorts them by id
 * through its second, by radix in passes that poll, which spends it: a
 * qsort of 6.7 million ids took 1.2 to 1.4 s on the 2-core Xeon without
 * answering a cancel.
 */
void
wals_idmap_rank(WalsIdMap *map, int64_t *ids, int32_t *rank)
{
	size_t		n = 0;
	size_t		i;

	if (map->dense != NULL)
	{
		for (i = 0; i < map->nslots; i++)
		{
			if (i % WALS_CELL_POLL == WALS_CELL_POLL - 1)
				wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
			if (map->dense[i] >= 0)
			{
				ids[n] = (int64_t) ((uint64_t) map->lo + i);
				rank[map->dense[i]] = (int32_t) n++;
			}
		}
		return;
	}
	if (map->slots == NULL)
		return;
	for (i = 0; i < map->nslots; i++)
	{
		if (i % WALS_CELL_POLL == WALS_CELL_POLL - 1)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		if (map->slots[i].index >= 0)
			map->slots[n++] = map->slots[i];
	}
	if (n > 1)
		sort_slots(map->slots, map->slots + n, n);
	for (i = 0; i < n; i++)
	{
		if (i % WALS_CELL_POLL == WALS_CELL_POLL - 1)
			wals_poll((int64_t) WALS_CELL_POLL * WALS_CELL_WORK);
		ids[i] = map->slots[i].id;
		rank[map->slots[i].index] = (int32_t) i;
	}
}

/*
 * In place, so the rows never exist twice; a poll every WALS_CELL_POLL
 * rows, where a billion took seconds without one.
 */
void
wals_idmap_renumber(int32_t *index, size_t n, const int32_t *rank)
{
	for (size_t k = 0; k < n; k += WALS_CELL_POLL)
	{
		size_t		to = n - k < WALS_CELL_POLL ? n : k + WALS_CELL_POLL;

		for (size_t j = k; j < to; j++)
			index[j] = rank[index[j]];
		wals_poll((int64_t) (to - k) * WALS_CELL_WORK);
	}
}

/*
 * The binary searches; see the header.  One body for both widths: the
 * first index whose value is not below v, then whether it is v.
 */
#define FIND_BODY(a, n, v) \
	do { \
		int64_t		lo_ = 0; \
		int64_t		hi_ = (n); \
		while (lo_ < hi_) \
		{ \
			int64_t		mid_ = lo_ + (hi_ - lo_) / 2; \
			if ((a)[mid_] < (v)) \
				lo_ = mid_ + 1; \
			else \
				hi_ = mid_; \
		} \
		return (lo_ < (n) && (a)[lo_] == (v)) ? lo_ : -1; \
	} while (0)

int64_t
wals_ids_find(const int64_t *ids, int64_t n, int64_t id)
{
	FIND_BODY(ids, n, id);
}

/* Buckets of a directory over n ids: two ids a bucket where they spread evenly. */
static int64_t
directory_buckets(int64_t n)
{
	return n / 2 + 1;
}

size_t
wals_id_directory_size(int64_t n)
{
	return sizeof(int64_t) * (size_t) (directory_buckets(n) + 1);
}

WalsStatus
wals_id_directory_build(WalsIdDirectory *d, const int64_t *ids, int64_t n, int64_t *start)
{
	int64_t		most = directory_buckets(n);
	uint64_t	range;
	int64_t		b = 0;

	d->ids = ids;
	d->n = n;
	d->start = start;
	d->lo = n > 0 ? ids[0] : 0;
	d->shift = 0;
	range = n > 0 ? (uint64_t) ids[n - 1] - (uint64_t) ids[0] : 0;
	while ((range >> d->shift) >= (uint64_t) most)
		d->shift++;
	d->nbuckets = (int64_t) (range >> d->shift) + 1;
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		at;

		if (i > 0 && ids[i] <= ids[i - 1])
			return WALS_EINVAL;
		at = (int64_t) (((uint64_t) ids[i] - (uint64_t) d->lo) >> d->shift);
		while (b <= at)
			start[b++] = i;
		/* an id, a bucket or two: a few loads and stores (10M ids: 30 ms) */
		wals_poll(8);
	}
	while (b <= d->nbuckets)
		start[b++] = n;
	return WALS_OK;
}

int64_t
wals_id_directory_find(const WalsIdDirectory *d, int64_t id)
{
	uint64_t	b;
	int64_t		from;
	int64_t		found;

	if (d->n == 0 || id < d->lo)
		return -1;
	b = ((uint64_t) id - (uint64_t) d->lo) >> d->shift;
	if (b >= (uint64_t) d->nbuckets)
		return -1;
	from = d->start[b];
	found = wals_ids_find(d->ids + from, d->start[b + 1] - from, id);
	return found < 0 ? -1 : from + found;
}

int64_t
wals_index_find(const int32_t *a, int64_t n, int32_t v)
{
	FIND_BODY(a, n, v);
}

int64_t
wals_ids_sort_unique(int64_t *ids, int64_t n)
{
	int64_t		kept = 0;
	int64_t		k;

	if (n > 1)
		qsort(ids, (size_t) n, sizeof(int64_t), cmp_int64);
	for (k = 0; k < n; k++)
		if (kept == 0 || ids[kept - 1] != ids[k])
			ids[kept++] = ids[k];
	return kept;
}
