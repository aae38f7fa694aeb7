/*
 * test_idmap.c
 *	  Id maps: dense numbering by id order whatever the input order, for the
 *	  full int64 range, and lookups of absent ids.
 */
#include <stdlib.h>

#include "harness.h"

/* Build a map of ids[0..n) into freshly allocated buffers. */
static WalsStatus
build(WalsIdMap *map, const int64_t *ids, size_t n, int32_t *out,
	  int64_t *uniq, size_t *nuniq)
{
	size_t		nslots = wals_idmap_slots(n);

	wals_idmap_init(map, test_alloc(nslots, sizeof(int64_t)),
					test_alloc(nslots, sizeof(int32_t)), nslots);
	return wals_idmap_build(map, ids, n, out, uniq, nuniq);
}

static void
release(WalsIdMap *map)
{
	free(map->keys);
	free(map->vals);
}

static void
test_slots(void)
{
	size_t		n;

	CHECK(wals_idmap_slots(0) == 16, "slots(0) = %zu", wals_idmap_slots(0));
	CHECK(wals_idmap_slots(8) == 16, "slots(8) = %zu", wals_idmap_slots(8));
	CHECK(wals_idmap_slots(9) == 32, "slots(9) = %zu", wals_idmap_slots(9));
	for (n = 1; n < 5000; n += 37)
	{
		size_t		s = wals_idmap_slots(n);

		CHECK((s & (s - 1)) == 0 && s >= 2 * n && (s == 16 || s / 2 < 2 * n),
			  "slots(%zu) = %zu", n, s);
	}
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
	WalsIdMap	map;
	WalsIdMap	map2;
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

	CHECK(build(&map, ids, n, out, uniq, &nuniq) == WALS_OK, "build");
	CHECK(build(&map2, ids2, n, out2, uniq2, &nuniq2) == WALS_OK, "build shuffled");
	CHECK(nuniq == nbase && nuniq2 == nbase, "distinct %zu %zu", nuniq, nuniq2);
	CHECK(map.count == nbase, "count %zu", map.count);
	for (i = 0; i < nuniq; i++)
	{
		CHECK(uniq[i] == uniq2[i], "uniq[%zu] differs", i);
		if (i > 0)
			CHECK(uniq[i - 1] < uniq[i], "uniq not increasing at %zu", i);
		CHECK(wals_idmap_find(&map, uniq[i]) == (int32_t) i,
			  "find(uniq[%zu]) = %d", i, wals_idmap_find(&map, uniq[i]));
	}
	CHECK(uniq[0] == INT64_MIN && uniq[nuniq - 1] == INT64_MAX, "extremes");
	for (i = 0; i < n; i++)
	{
		CHECK(uniq[out[i]] == ids[i], "out[%zu] maps to the wrong id", i);
		CHECK(uniq2[out2[i]] == ids2[i], "out2[%zu] maps to the wrong id", i);
		CHECK(wals_idmap_find(&map2, ids[i]) == out[i], "maps disagree at %zu", i);
	}
	CHECK(wals_idmap_find(&map, 44) == -1, "absent 44");
	CHECK(wals_idmap_find(&map, -2) == -1, "absent -2");
	CHECK(wals_idmap_find(&map, INT64_MAX - 2) == -1, "absent INT64_MAX - 2");

	release(&map);
	release(&map2);
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
	WalsIdMap	map;
	size_t		i;
	int			bad = 0;

	for (i = 0; i < n; i++)
		ids[i] = (i % 2) ? (int64_t) (n - i) * 4096 : -(int64_t) i;
	CHECK(build(&map, ids, n, out, uniq, &nuniq) == WALS_OK, "build runs");
	for (i = 0; i < n; i++)
		bad += uniq[out[i]] != ids[i];
	for (i = 1; i < nuniq; i++)
		bad += uniq[i - 1] >= uniq[i];
	CHECK(bad == 0, "%d bad entries among runs", bad);
	CHECK(wals_idmap_find(&map, 4095) == -1, "absent 4095");
	release(&map);
	free(ids);
	free(out);
	free(uniq);
}

static void
test_edges(void)
{
	int64_t		one = 5;
	int32_t		out = -2;
	int64_t		uniq = 0;
	size_t		nuniq = 9;
	WalsIdMap	map;
	int64_t		keys[4];
	int32_t		vals[4];
	int64_t		ids[5] = {1, 2, 3, 4, 5};
	int32_t		outs[5];
	int64_t		uniqs[5];

	CHECK(build(&map, &one, 0, &out, &uniq, &nuniq) == WALS_OK && nuniq == 0,
		  "empty input");
	CHECK(wals_idmap_find(&map, 5) == -1, "find in an empty map");
	release(&map);

	CHECK(build(&map, &one, 1, &out, &uniq, &nuniq) == WALS_OK &&
		  nuniq == 1 && out == 0 && uniq == 5, "one id");
	CHECK(wals_idmap_build(&map, &one, 1, &out, &uniq, &nuniq) == WALS_EINVAL,
		  "a used map is refused");
	release(&map);

	wals_idmap_init(&map, keys, vals, 4);
	CHECK(wals_idmap_build(&map, ids, 5, outs, uniqs, &nuniq) == WALS_EINVAL,
		  "a table without room is refused");
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
	test_slots();
	test_order_independence();
	test_dense_runs();
	test_edges();
	test_ids_find();
}
