/*
 * idmap.c
 *	  Dense numbering of sparse int64 ids with an open-addressing hash.
 *
 * User and item ids are arbitrary bigints (negative, huge, gappy), while the
 * solvers index factor rows densely.  Ids are numbered in two steps so that
 * reading never has to keep an int64 per row: while rows arrive, each new id
 * gets the next provisional index, in order of first sight, and rows keep
 * only that int32; once everything is read, the few distinct ids are sorted
 * and each provisional index is mapped to the id's rank.  Numbering by rank
 * makes a model independent of the scan order, which a parallel or repeated
 * scan does not guarantee.
 *
 * A slot holds its id and index side by side, so a lookup touches one cache
 * line, and linear probing over a table at most half full keeps chains short
 * even for the clustered ids real tables have.
 */
#include <stdlib.h>

#include "wals_internal.h"

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

/* qsort's comparator written without subtraction, which overflows on int64. */
static int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/*
 * A power of two, so that a mask replaces the modulo, and at least 4, so
 * that a table just past half full still has the free slot insert keeps.
 * Only the indices need clearing: an id is never read unless its slot is
 * taken.
 */
WalsStatus
wals_idmap_init(WalsIdMap *map, WalsIdSlot *slots, size_t nslots)
{
	size_t		i;

	if (nslots < 4 || (nslots & (nslots - 1)) != 0)
		return WALS_EINVAL;
	map->slots = slots;
	map->nslots = nslots;
	map->count = 0;
	for (i = 0; i < nslots; i++)
		slots[i].index = -1;
	return WALS_OK;
}

/* Callers test this after each insert and rehash into twice the slots. */
int
wals_idmap_full(const WalsIdMap *map)
{
	return map->count > map->nslots / 2;
}

/* A lookup stops at the first empty slot, so an absent id costs one chain. */
int32_t
wals_idmap_find(const WalsIdMap *map, int64_t id)
{
	return map->slots[probe(map, id)].index;
}

/*
 * One slot must stay empty whatever the caller does, or a probe for an
 * absent id would never end.
 */
WalsStatus
wals_idmap_insert(WalsIdMap *map, int64_t id, int32_t *index)
{
	size_t		slot = probe(map, id);

	if (map->slots[slot].index < 0)
	{
		if (map->count >= (size_t) INT32_MAX)
			return WALS_ETOOBIG;
		if (map->count + 2 > map->nslots)
			return WALS_EINVAL;
		map->slots[slot].id = id;
		map->slots[slot].index = (int32_t) map->count++;
	}
	*index = map->slots[slot].index;
	return WALS_OK;
}

/*
 * Reinserting keeps every index, so the rows read so far stay valid; slots
 * are visited in table order, which is as good as any for the new table.
 */
WalsStatus
wals_idmap_rehash(const WalsIdMap *from, WalsIdMap *to)
{
	size_t		i;

	if (to->count != 0 || 2 * from->count > to->nslots)
		return WALS_EINVAL;
	for (i = 0; i < from->nslots; i++)
	{
		if (from->slots[i].index >= 0)
		{
			size_t		slot = probe(to, from->slots[i].id);

			to->slots[slot] = from->slots[i];
		}
	}
	to->count = from->count;
	return WALS_OK;
}

/*
 * Sorting the ids themselves, then finding each one's provisional index
 * again, needs no array of pairs; both steps touch only the distinct ids.
 */
void
wals_idmap_rank(const WalsIdMap *map, int64_t *ids, int32_t *rank)
{
	size_t		n = 0;
	size_t		i;

	for (i = 0; i < map->nslots; i++)
		if (map->slots[i].index >= 0)
			ids[n++] = map->slots[i].id;
	if (n > 1)
		qsort(ids, n, sizeof(int64_t), cmp_int64);
	for (i = 0; i < n; i++)
		rank[wals_idmap_find(map, ids[i])] = (int32_t) i;
}

/* In place, so the rows never exist twice. */
void
wals_idmap_renumber(int32_t *index, size_t n, const int32_t *rank)
{
	size_t		k;

	for (k = 0; k < n; k++)
		index[k] = rank[index[k]];
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
