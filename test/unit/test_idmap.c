/*
 * test_idmap.c
 *	  Id maps: provisional indices in order of first sight that survive
 *	  every rehash, dense numbering by id order whatever the input order,
 *	  for the full int64 range, and lookups of absent ids.
 */
#include <stdlib.h>

#include "harness.h"

/* A map grown the way ingest grows it: doubling whenever it gets full. */
typedef struct GrowingMap
{
	WalsIdMap	map;
	int			rehashes;
} GrowingMap;

static void
grow_init(GrowingMap *g, size_t nslots)
{
	WalsStatus	st = wals_idmap_init(&g->map, test_alloc(nslots, sizeof(WalsIdSlot)), nslots);

	CHECK(st == WALS_OK, "init %zu slots: status %d", nslots, (int) st);
	g->rehashes = 0;
}

static int32_t
grow_insert(GrowingMap *g, int64_t id)
{
	int32_t		index = -1;
	WalsStatus	st = wals_idmap_insert(&g->map, id, &index);

	CHECK(st == WALS_OK, "insert %lld: status %d", (long long) id, (int) st);
	if (wals_idmap_full(&g->map))
	{
		WalsIdMap	bigger;
		size_t		nslots = g->map.nslots * 2;

		wals_idmap_init(&bigger, test_alloc(nslots, sizeof(WalsIdSlot)), nslots);
		st = wals_idmap_rehash(&g->map, &bigger);
		CHECK(st == WALS_OK, "rehash to %zu: status %d", nslots, (int) st);
		free(g->map.slots);
		g->map = bigger;
		g->rehashes++;
	}
	return index;
}

/*
 * Map ids[0..n) the way ingest does: provisional indices into out, then the
 * sorted distinct ids into uniq and out renumbered to ranks.
 */
static void
map_all(const int64_t *ids, size_t n, int32_t *out, int64_t *uniq,
		size_t *nuniq)
{
	GrowingMap	g;
	int32_t    *rank;
	size_t		i;

	grow_init(&g, 4);
	for (i = 0; i < n; i++)
		out[i] = grow_insert(&g, ids[i]);
	*nuniq = g.map.count;
	rank = test_alloc(g.map.count + 1, sizeof(int32_t));
	wals_idmap_rank(&g.map, uniq, rank);
	wals_idmap_renumber(out, n, rank);
	free(rank);
	free(g.map.slots);
}

static void
test_map_init(void)
{
	WalsIdSlot	slots[16];
	WalsIdMap	map;

	CHECK(wals_idmap_init(&map, slots, 0) == WALS_EINVAL, "0 slots refused");
	CHECK(wals_idmap_init(&map, slots, 2) == WALS_EINVAL, "2 slots refused");
	CHECK(wals_idmap_init(&map, slots, 12) == WALS_EINVAL, "12 slots refused");
	CHECK(wals_idmap_init(&map, slots, 16) == WALS_OK && map.count == 0 &&
		  map.nslots == 16, "16 slots");
	CHECK(!wals_idmap_full(&map), "an empty map is not full");
	CHECK(wals_idmap_find(&map, 0) == -1, "find in an empty map");
}

/*
 * Provisional indices follow first sight and stay put through every
 * rehash; the load never passes one half once the caller has grown.
 */
static void
test_growth(void)
{
	size_t		n = 50000;
	GrowingMap	g;
	TestRng		rng;
	int64_t    *seen = test_alloc(n, sizeof(int64_t));
	size_t		nseen = 0;
	size_t		i;
	int			bad = 0;

	rng_seed(&rng, 3);
	grow_init(&g, 4);
	for (i = 0; i < n; i++)
	{
		int64_t		id;
		int32_t		index;

		if (nseen > 0 && rng_uniform(&rng) < 0.5)
			id = seen[rng_below(&rng, (int) nseen)];
		else
			id = (int64_t) rng_next(&rng);
		index = grow_insert(&g, id);
		if (index == (int32_t) nseen)
			seen[nseen++] = id;
		else
			bad += index < 0 || index > (int32_t) nseen || seen[index] != id;
		bad += g.map.count * 2 > g.map.nslots;
	}
	CHECK(bad == 0, "%d inserts gave a wrong index or left the map too full", bad);
	CHECK(g.map.count == nseen, "count %zu, seen %zu", g.map.count, nseen);
	CHECK(g.rehashes >= 10, "only %d rehashes", g.rehashes);
	for (i = 0; i < nseen; i++)
		bad += wals_idmap_find(&g.map, seen[i]) != (int32_t) i;
	CHECK(bad == 0, "%d ids lost their index in a rehash", bad);
	free(g.map.slots);
	free(seen);
}

/* Awkward ids, repeated, in one order and then shuffled. */
static void
test_order_independence(void)
{
	int64_t		base[] = {INT64_MAX, -1, 0, INT64_MIN, 42, 1000000000000LL,
		-7, 3, INT64_MIN + 1, 41, 43, INT64_MAX - 1};
	size_t		nbase = sizeof(base) / sizeof(base[0]);
	size_t		n = nbase * 3;
	int64_t    *ids = test_alloc(n, sizeof(int64_t));
	int64_t    *ids2 = test_alloc(n, sizeof(int64_t));
	int32_t    *out = test_alloc(n, sizeof(int32_t));
	int32_t    *out2 = test_alloc(n, sizeof(int32_t));
	int64_t    *uniq = test_alloc(n, sizeof(int64_t));
	int64_t    *uniq2 = test_alloc(n, sizeof(int64_t));
	size_t		nuniq;
	size_t		nuniq2;
	TestRng		rng;
	size_t		i;

	rng_seed(&rng, 7);
	for (i = 0; i < n; i++)
		ids[i] = base[i % nbase];
	for (i = 0; i < n; i++)
		ids2[i] = ids[i];
	for (i = n - 1; i > 0; i--)
	{
		size_t		j = (size_t) rng_below(&rng, (int) i + 1);
		int64_t		t = ids2[i];

		ids2[i] = ids2[j];
		ids2[j] = t;
	}

	map_all(ids, n, out, uniq, &nuniq);
	map_all(ids2, n, out2, uniq2, &nuniq2);
	CHECK(nuniq == nbase && nuniq2 == nbase, "distinct %zu %zu", nuniq, nuniq2);
	for (i = 0; i < nuniq; i++)
	{
		CHECK(uniq[i] == uniq2[i], "uniq[%zu] differs", i);
		if (i > 0)
			CHECK(uniq[i - 1] < uniq[i], "uniq not increasing at %zu", i);
	}
	CHECK(uniq[0] == INT64_MIN && uniq[nuniq - 1] == INT64_MAX, "extremes");
	for (i = 0; i < n; i++)
	{
		CHECK(uniq[out[i]] == ids[i], "out[%zu] maps to the wrong id", i);
		CHECK(uniq2[out2[i]] == ids2[i], "out2[%zu] maps to the wrong id", i);
		CHECK(wals_ids_find(uniq, (int64_t) nuniq, ids[i]) == out[i],
			  "rank of ids[%zu] is not its position", i);
	}

	free(ids);
	free(ids2);
	free(out);
	free(out2);
	free(uniq);
	free(uniq2);
}

/* Many consecutive and strided ids: long probe chains if the hash were weak. */
static void
test_dense_runs(void)
{
	size_t		n = 20000;
	int64_t    *ids = test_alloc(n, sizeof(int64_t));
	int32_t    *out = test_alloc(n, sizeof(int32_t));
	int64_t    *uniq = test_alloc(n, sizeof(int64_t));
	size_t		nuniq;
	size_t		i;
	int			bad = 0;

	for (i = 0; i < n; i++)
		ids[i] = (i % 2) ? (int64_t) (n - i) * 4096 : -(int64_t) i;
	map_all(ids, n, out, uniq, &nuniq);
	CHECK(nuniq == n, "distinct %zu", nuniq);
	for (i = 0; i < n; i++)
		bad += uniq[out[i]] != ids[i];
	for (i = 1; i < nuniq; i++)
		bad += uniq[i - 1] >= uniq[i];
	CHECK(bad == 0, "%d bad entries among runs", bad);
	free(ids);
	free(out);
	free(uniq);
}

/* The map protects itself from a caller that forgets to grow it. */
static void
test_edges(void)
{
	WalsIdSlot	slots[4];
	WalsIdSlot	small[4];
	WalsIdSlot	big[8];
	WalsIdMap	map;
	WalsIdMap	other;
	int32_t		index = -5;
	int64_t		ids[4];
	int32_t		rank[4];

	wals_idmap_init(&map, slots, 4);
	wals_idmap_rank(&map, ids, rank);
	CHECK(map.count == 0, "ranking an empty map");

	CHECK(wals_idmap_insert(&map, 9, &index) == WALS_OK && index == 0, "first id");
	CHECK(wals_idmap_insert(&map, -9, &index) == WALS_OK && index == 1, "second id");
	CHECK(!wals_idmap_full(&map), "two of four slots is not full");
	CHECK(wals_idmap_insert(&map, 5, &index) == WALS_OK && index == 2, "third id");
	CHECK(wals_idmap_full(&map), "three of four slots is full");
	CHECK(wals_idmap_insert(&map, 6, &index) == WALS_EINVAL,
		  "the last free slot is kept free");
	CHECK(wals_idmap_insert(&map, -9, &index) == WALS_OK && index == 1,
		  "a known id is still found in a full map");
	CHECK(wals_idmap_find(&map, 6) == -1, "absent id in a full map");

	wals_idmap_init(&other, small, 4);
	CHECK(wals_idmap_rehash(&map, &other) == WALS_EINVAL, "rehash into too few slots");
	wals_idmap_init(&other, big, 8);
	CHECK(wals_idmap_rehash(&map, &other) == WALS_OK && other.count == 3 &&
		  wals_idmap_find(&other, 9) == 0 && wals_idmap_find(&other, -9) == 1 &&
		  wals_idmap_find(&other, 5) == 2, "rehash keeps the indices");
	CHECK(wals_idmap_rehash(&map, &other) == WALS_EINVAL, "rehash into a used map");

	wals_idmap_rank(&other, ids, rank);
	CHECK(ids[0] == -9 && ids[1] == 5 && ids[2] == 9, "ranked ids sorted");
	CHECK(rank[0] == 2 && rank[1] == 0 && rank[2] == 1, "ranks by id");
}

/* The sorted-id search finds every present id and no absent one. */
static void
test_ids_find(void)
{
	int64_t		ids[6] = {INT64_MIN, -7, 0, 3, 1000000007, INT64_MAX};
	int			i;

	for (i = 0; i < 6; i++)
		CHECK(wals_ids_find(ids, 6, ids[i]) == i, "sorted id %d found", i);
	CHECK(wals_ids_find(ids, 6, 1) == -1, "absent id between two");
	CHECK(wals_ids_find(ids, 6, -8) == -1, "absent id below one");
	CHECK(wals_ids_find(ids + 1, 4, INT64_MAX) == -1, "absent id past the end");
	CHECK(wals_ids_find(ids, 0, 0) == -1, "empty array");
}

/* Entry point: every id-map check. */
void
test_idmap(void)
{
	test_map_init();
	test_growth();
	test_order_independence();
	test_dense_runs();
	test_edges();
	test_ids_find();
}
