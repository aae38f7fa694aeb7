/*
 * idmap.c
 *	  Dense numbering of sparse int64 ids with an open-addressing hash.
 *
 * User and item ids are arbitrary bigints (negative, huge, gappy), while the
 * solvers index factor rows densely.  Linear probing over a table at most
 * half full keeps lookups to a cache line or two, and numbering ids by rank
 * rather than by arrival makes a model independent of the scan order, which
 * a parallel or repeated scan does not guarantee.
 */
#include <stdlib.h>

#include "wals_internal.h"

/* The slot holding id, or the empty slot where it would go. */
static inline size_t
probe(const WalsIdMap *map, int64_t id)
{
	size_t		mask = map->nslots - 1;
	size_t		slot = (size_t) wals_mix64((uint64_t) id) & mask;

	while (map->vals[slot] >= 0 && map->keys[slot] != id)
		slot = (slot + 1) & mask;
	return slot;
}

/* qsort's comparator written without subtraction, which overflows on int64. */
static int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/*
 * A power of two, so a mask replaces the modulo, and at least twice the
 * distinct count, so probe chains stay short even for clustered ids.
 */
size_t
wals_idmap_slots(size_t max_distinct)
{
	size_t		n = 16;

	while (n < max_distinct * 2)
		n *= 2;
	return n;
}

/*
 * Only vals needs clearing: a key is never read unless its slot is taken,
 * which saves touching half the table's memory.
 */
void
wals_idmap_init(WalsIdMap *map, int64_t *keys, int32_t *vals, size_t nslots)
{
	size_t		i;

	map->keys = keys;
	map->vals = vals;
	map->nslots = nslots;
	map->count = 0;
	for (i = 0; i < nslots; i++)
		vals[i] = -1;
}

/* A lookup stops at the first empty slot, so an absent id costs one chain. */
int32_t
wals_idmap_find(const WalsIdMap *map, int64_t id)
{
	return map->vals[probe(map, id)];
}

/*
 * Three passes keep it O(n) apart from sorting the distinct ids, usually far
 * fewer than n: insert with provisional numbers, sort the distinct ids and
 * renumber their slots by rank, then look every input id up again.  The
 * table must be fresh and have a free slot past n ids, or probing could
 * loop forever.
 */
WalsStatus
wals_idmap_build(WalsIdMap *map, const int64_t *ids, size_t n,
				 int32_t *out, int64_t *uniq, size_t *nuniq)
{
	size_t		i;

	*nuniq = 0;
	if (map->count != 0 || map->nslots <= n ||
		(map->nslots & (map->nslots - 1)) != 0)
		return WALS_EINVAL;

	for (i = 0; i < n; i++)
	{
		size_t		slot = probe(map, ids[i]);

		if (map->vals[slot] >= 0)
			continue;
		if (map->count >= (size_t) INT32_MAX)
			return WALS_ETOOBIG;
		map->keys[slot] = ids[i];
		map->vals[slot] = (int32_t) map->count;
		uniq[map->count++] = ids[i];
	}

	if (map->count > 1)
		qsort(uniq, map->count, sizeof(int64_t), cmp_int64);
	for (i = 0; i < map->count; i++)
		map->vals[probe(map, uniq[i])] = (int32_t) i;
	for (i = 0; i < n; i++)
		out[i] = map->vals[probe(map, ids[i])];

	*nuniq = map->count;
	return WALS_OK;
}

/* Binary search; see the header. */
int64_t
wals_ids_find(const int64_t *ids, int64_t n, int64_t id)
{
	int64_t		lo = 0;
	int64_t		hi = n;

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < n && ids[lo] == id) ? lo : -1;
}
