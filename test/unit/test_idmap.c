/*
 * test_idmap.c
 *	  Id maps: provisional indices in order of first sight that survive
 *	  every move, the array layout for serial ids and the hash layout for
 *	  the others, dense numbering by id order whatever the input order, for
 *	  the full int64 range, and lookups of absent ids; the directory over
 *	  sorted ids that serving looks items up in.
 */
#include <stdlib.h>

#include "harness.h"

/*
 * A map and the buffer it lives in, moved the way ingest moves it: before
 * the insert, or, with insert_first, only once an insert is refused, which
 * may leave part of the batch inserted.
 */
typedef struct GrowingMap
{
	WalsIdMap	map;
	void	   *buffer;
	int			moves;
	int			insert_first;
} GrowingMap;

static void
grow_init(GrowingMap *g)
{
	wals_idmap_init(&g->map);
	g->buffer = NULL;
	g->moves = 0;
	g->insert_first = 0;
}

static void
grow_insert(GrowingMap *g, const int64_t *ids, size_t n, int32_t *index)
{
	size_t		bytes;
	WalsStatus	st;

	if (g->insert_first)
	{
		st = wals_idmap_insert_many(&g->map, ids, n, index);
		if (st != WALS_EINVAL)
		{
			CHECK(st == WALS_OK, "insert %zu ids: status %d", n, (int) st);
			return;
		}
	}
	bytes = wals_idmap_need(&g->map, ids, n);
	CHECK(bytes > 0 || !g->insert_first, "a refused insert of %zu ids needs a move", n);
	if (bytes > 0)
	{
		void	   *buffer = test_alloc(bytes, 1);

		st = wals_idmap_move(&g->map, buffer, bytes, ids, n);
		CHECK(st == WALS_OK, "move to %zu bytes: status %d", bytes, (int) st);
		free(g->buffer);
		g->buffer = buffer;
		g->moves++;
	}
	st = wals_idmap_insert_many(&g->map, ids, n, index);
	CHECK(st == WALS_OK, "insert %zu ids: status %d", n, (int) st);
}

/*
 * Map ids[0..n) the way ingest does: provisional indices into out, batch by
 * batch, then the sorted distinct ids into uniq and out renumbered to ranks.
 * Returns whether the map ended as an array.
 */
static int
map_all(const int64_t *ids, size_t n, size_t batch, int insert_first, int32_t *out,
		int64_t *uniq, size_t *nuniq)
{
	GrowingMap	g;
	int32_t    *rank;
	size_t		i;
	int			dense;

	grow_init(&g);
	g.insert_first = insert_first;
	for (i = 0; i < n; i += batch)
		grow_insert(&g, ids + i, n - i < batch ? n - i : batch, out + i);
	*nuniq = g.map.count;
	rank = test_alloc(g.map.count + 1, sizeof(int32_t));
	wals_idmap_rank(&g.map, uniq, rank);
	wals_idmap_renumber(out, n, rank);
	dense = g.map.dense != NULL;
	free(rank);
	free(g.buffer);
	return dense;
}

/* Fisher-Yates, seeded. */
static void
shuffle(int64_t *ids, size_t n, uint64_t seed)
{
	TestRng		rng;
	size_t		i;

	rng_seed(&rng, seed);
	for (i = n - 1; i > 0; i--)
	{
		size_t		j = (size_t) rng_below(&rng, (int) i + 1);
		int64_t		t = ids[i];

		ids[i] = ids[j];
		ids[j] = t;
	}
}

/*
 * Every id keeps the index of its first sight, ranks follow id order, and
 * the same ids in another order and other batches give the same ranks; a
 * map moved only once an insert is refused gives the same ranks too.
 */
static void
check_mapping(const char *what, const int64_t *ids, size_t n, int expect_dense)
{
	int64_t    *ids2 = test_alloc(n, sizeof(int64_t));
	int32_t    *out = test_alloc(n, sizeof(int32_t));
	int32_t    *out2 = test_alloc(n, sizeof(int32_t));
	int32_t    *out3 = test_alloc(n, sizeof(int32_t));
	int64_t    *uniq = test_alloc(n, sizeof(int64_t));
	int64_t    *uniq2 = test_alloc(n, sizeof(int64_t));
	int64_t    *uniq3 = test_alloc(n, sizeof(int64_t));
	size_t		nuniq;
	size_t		nuniq2;
	size_t		nuniq3;
	size_t		i;
	int			dense;
	int			bad = 0;

	for (i = 0; i < n; i++)
		ids2[i] = ids[i];
	shuffle(ids2, n, 7);

	dense = map_all(ids, n, 256, 0, out, uniq, &nuniq);
	CHECK(dense == expect_dense, "%s: array layout %d, expected %d", what, dense, expect_dense);
	map_all(ids2, n, 7, 1, out2, uniq2, &nuniq2);
	CHECK(nuniq == nuniq2, "%s: distinct %zu and %zu", what, nuniq, nuniq2);
	for (i = 0; i < nuniq && i < nuniq2; i++)
		bad += uniq[i] != uniq2[i] || (i > 0 && uniq[i - 1] >= uniq[i]);
	CHECK(bad == 0, "%s: %d sorted ids wrong", what, bad);
	for (i = 0; i < n; i++)
		bad += uniq[out[i]] != ids[i] || uniq2[out2[i]] != ids2[i] ||
			wals_ids_find(uniq, (int64_t) nuniq, ids[i]) != out[i];
	CHECK(bad == 0, "%s: %d ranks wrong", what, bad);
	map_all(ids, n, 256, 1, out3, uniq3, &nuniq3);
	for (i = 0; i < n; i++)
		bad += out3[i] != out[i];
	CHECK(bad == 0 && nuniq3 == nuniq, "%s: %d ranks differ where the map moves on a refusal",
		  what, bad);

	free(ids2);
	free(out);
	free(out2);
	free(out3);
	free(uniq);
	free(uniq2);
	free(uniq3);
}

/* Awkward ids, repeated: the extremes of int64 force the hash layout. */
static void
test_extremes(void)
{
	int64_t		base[] = {INT64_MAX, -1, 0, INT64_MIN, 42, 1000000000000LL,
		-7, 3, INT64_MIN + 1, 41, 43, INT64_MAX - 1};
	size_t		nbase = sizeof(base) / sizeof(base[0]);
	int64_t		ids[36];
	size_t		i;

	for (i = 0; i < 36; i++)
		ids[i] = base[i % nbase];
	check_mapping("extremes", ids, 36, 0);
}

/* Serial ids, negative ones, and ids at either end of int64 stay arrays. */
static void
test_serial(void)
{
	size_t		n = 60000;
	int64_t    *ids = test_alloc(n, sizeof(int64_t));
	size_t		i;

	for (i = 0; i < n; i++)
		ids[i] = (int64_t) (i % 20000) + 1;
	check_mapping("serial", ids, n, 1);
	for (i = 0; i < n; i++)
		ids[i] = -(int64_t) (i * 7 % 30011);
	check_mapping("negative", ids, n, 1);
	for (i = 0; i < n; i++)
		ids[i] = INT64_MAX - (int64_t) (i % 5000);
	check_mapping("top of int64", ids, n, 1);
	for (i = 0; i < n; i++)
		ids[i] = INT64_MIN + (int64_t) (i % 5000);
	check_mapping("bottom of int64", ids, n, 1);
	free(ids);
}

/* Random 64-bit ids and strided ones take the hash layout. */
static void
test_sparse(void)
{
	size_t		n = 50000;
	int64_t    *ids = test_alloc(n, sizeof(int64_t));
	TestRng		rng;
	size_t		i;

	rng_seed(&rng, 5);
	for (i = 0; i < n; i++)
		ids[i] = i > 0 && rng_uniform(&rng) < 0.5 ?
			ids[rng_below(&rng, (int) i)] : (int64_t) rng_next(&rng);
	check_mapping("random", ids, n, 0);
	for (i = 0; i < n; i++)
		ids[i] = (i % 2) ? (int64_t) (n - i) * 4096 : -(int64_t) i;
	check_mapping("strided", ids, n, 0);
	free(ids);
}

/*
 * Provisional indices follow first sight and stay put through every move;
 * a hash table never gets more than half full.  Batches of every size from
 * 1 to 300 mix new ids, known ids and runs of the same id, and the ids
 * start serial and then turn sparse, so the map changes layout on the way.
 */
static void
test_growth(int insert_first)
{
	size_t		n = 50000;
	GrowingMap	g;
	TestRng		rng;
	int64_t    *ids = test_alloc(n, sizeof(int64_t));
	int32_t    *index = test_alloc(n, sizeof(int32_t));
	int64_t    *seen = test_alloc(n, sizeof(int64_t));
	size_t		nseen = 0;
	size_t		i;
	size_t		k;
	int			bad = 0;
	int			was_dense = 0;

	rng_seed(&rng, 3);
	for (i = 0; i < n; i++)
	{
		double		u = rng_uniform(&rng);

		if (i > 0 && u < 0.2)
			ids[i] = ids[i - 1];
		else if (i > 0 && u < 0.6)
			ids[i] = ids[rng_below(&rng, (int) i)];
		else if (i < n / 2)
			ids[i] = rng_below(&rng, 100000);
		else
			ids[i] = (int64_t) rng_next(&rng);
	}
	grow_init(&g);
	g.insert_first = insert_first;
	for (i = 0; i < n; i += k)
	{
		size_t		j;

		k = 1 + (size_t) rng_below(&rng, 300);
		if (k > n - i)
			k = n - i;
		grow_insert(&g, ids + i, k, index + i);
		for (j = i; j < i + k; j++)
		{
			if (index[j] == (int32_t) nseen)
				seen[nseen++] = ids[j];
			else
				bad += index[j] < 0 || index[j] > (int32_t) nseen ||
					seen[index[j]] != ids[j];
		}
		if (g.map.dense != NULL)
			was_dense = 1;
		else
			bad += g.map.count * 2 > g.map.nslots;
	}
	CHECK(bad == 0, "%d inserts gave a wrong index or left the table too full", bad);
	CHECK(was_dense && g.map.dense == NULL, "serial then sparse: array, then hash");
	CHECK(g.map.count == nseen, "count %zu, seen %zu", g.map.count, nseen);
	for (i = 0; i < nseen; i++)
		bad += wals_idmap_find(&g.map, seen[i]) != (int32_t) i;
	CHECK(bad == 0, "%d ids lost their index in a move", bad);
	free(g.buffer);
	free(ids);
	free(index);
	free(seen);
}

/* Ids arriving in increasing or decreasing order cost few moves. */
static void
test_monotone(void)
{
	size_t		n = 200000;
	int64_t    *ids = test_alloc(n, sizeof(int64_t));
	int32_t    *index = test_alloc(n, sizeof(int32_t));
	GrowingMap	g;
	int			dir;
	size_t		i;

	for (dir = 0; dir < 2; dir++)
	{
		int			bad = 0;

		for (i = 0; i < n; i++)
			ids[i] = dir == 0 ? (int64_t) i : -(int64_t) i;
		grow_init(&g);
		for (i = 0; i < n; i += 256)
			grow_insert(&g, ids + i, n - i < 256 ? n - i : 256, index + i);
		for (i = 0; i < n; i++)
			bad += index[i] != (int32_t) i;
		CHECK(bad == 0, "direction %d: %d indices not in order of sight", dir, bad);
		CHECK(g.map.dense != NULL && g.moves <= 12,
			  "direction %d: %d moves, array %d", dir, g.moves, g.map.dense != NULL);
		free(g.buffer);
	}
	free(ids);
	free(index);
}

/* The map refuses to be misused rather than overrun its memory. */
static void
test_edges(void)
{
	GrowingMap	g;
	WalsIdMap	fresh;
	int64_t		first[] = {9, -9, -9, 9};
	int64_t		far[] = {(int64_t) 1 << 40};
	int32_t		index[4] = {-5, -5, -5, -5};
	int64_t		ids[8];
	int32_t		rank[8];
	char		small[8];
	size_t		bytes;

	wals_idmap_init(&fresh);
	CHECK(wals_idmap_find(&fresh, 0) == -1, "find in an empty map");
	CHECK(wals_idmap_need(&fresh, first, 0) == 0, "an empty batch needs nothing");
	CHECK(wals_idmap_insert_many(&fresh, first, 0, index) == WALS_OK, "an empty batch");
	wals_idmap_rank(&fresh, ids, rank);
	CHECK(wals_idmap_insert_many(&fresh, first, 4, index) == WALS_EINVAL && fresh.count == 0,
		  "an insert into a map with no memory is refused");
	bytes = wals_idmap_need(&fresh, first, 4);
	CHECK(bytes > sizeof(small) &&
		  wals_idmap_move(&fresh, small, sizeof(small), first, 4) == WALS_EINVAL,
		  "a buffer smaller than needed is refused");

	grow_init(&g);
	grow_insert(&g, first, 4, index);
	CHECK(g.map.count == 2 && index[0] == 0 && index[1] == 1 && index[2] == 1 &&
		  index[3] == 0, "repeats keep their index");
	CHECK(wals_idmap_need(&g.map, first, 4) == 0 &&
		  wals_idmap_move(&g.map, small, sizeof(small), first, 4) == WALS_EINVAL,
		  "a move that is not needed is refused");
	CHECK(wals_idmap_insert_many(&g.map, far, 1, index) == WALS_EINVAL,
		  "an id outside the array is refused");
	grow_insert(&g, far, 1, index);
	CHECK(g.map.dense == NULL && index[0] == 2 && wals_idmap_find(&g.map, 9) == 0 &&
		  wals_idmap_find(&g.map, -9) == 1, "array to hash keeps the indices");
	CHECK(wals_idmap_find(&g.map, 10) == -1, "absent id in a hash");
	wals_idmap_rank(&g.map, ids, rank);
	CHECK(ids[0] == -9 && ids[1] == 9 && ids[2] == far[0], "ranked ids sorted");
	CHECK(rank[0] == 1 && rank[1] == 0 && rank[2] == 2, "ranks by id");
	free(g.buffer);
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

/* A directory over ids[0..n) finds each of them, and nothing between them. */
static int
directory_misses(const int64_t *ids, int64_t n)
{
	int64_t    *start = test_alloc(wals_id_directory_size(n), 1);
	WalsIdDirectory d;
	int			bad = 0;
	int64_t		i;

	if (wals_id_directory_build(&d, ids, n, start) != WALS_OK)
		bad++;
	for (i = 0; i < n; i++)
	{
		bad += wals_id_directory_find(&d, ids[i]) != i;
		if (ids[i] > INT64_MIN && (i == 0 || ids[i - 1] != ids[i] - 1))
			bad += wals_id_directory_find(&d, ids[i] - 1) != -1;
		if (ids[i] < INT64_MAX && (i == n - 1 || ids[i + 1] != ids[i] + 1))
			bad += wals_id_directory_find(&d, ids[i] + 1) != -1;
	}
	bad += (int) (d.nbuckets * 2 > n + 2);
	free(start);
	return bad;
}

/*
 * The directory of sorted ids: serial ids, ids with gaps, ids bunched at
 * both ends of the int64 range, a single id, none; ids out of order are
 * refused.
 */
static void
test_directory(void)
{
	int64_t		n = 50000;
	int64_t    *ids = test_alloc((size_t) n, sizeof(int64_t));
	int64_t		extremes[6] = {INT64_MIN, INT64_MIN + 1, -7, 0, INT64_MAX - 1, INT64_MAX};
	int64_t		unordered[3] = {1, 3, 3};
	int64_t		start[4];
	TestRng		rng;
	WalsIdDirectory d;
	int64_t		i;

	rng_seed(&rng, 7);
	for (i = 0; i < n; i++)
		ids[i] = 1000 + i;
	CHECK(directory_misses(ids, n) == 0, "serial ids");
	for (i = 0; i < n; i++)
		ids[i] = (i == 0 ? -5000 : ids[i - 1]) + 1 + rng_below(&rng, 40);
	CHECK(directory_misses(ids, n) == 0, "ids with gaps");
	for (i = 0; i < n; i++)
		ids[i] = i < n / 2 ? INT64_MIN + i * 3 : INT64_MAX - (n - 1 - i) * 5;
	CHECK(directory_misses(ids, n) == 0, "ids bunched at both ends of the range");
	CHECK(directory_misses(extremes, 6) == 0, "the extremes of int64");
	CHECK(directory_misses(extremes + 3, 1) == 0, "one id");
	CHECK(directory_misses(ids, 0) == 0, "no ids");
	CHECK(wals_id_directory_build(&d, ids, 0, start) == WALS_OK &&
		  wals_id_directory_find(&d, 0) == -1, "find among no ids");
	CHECK(wals_id_directory_size(3) <= sizeof(start) &&
		  wals_id_directory_build(&d, unordered, 3, start) == WALS_EINVAL,
		  "ids that do not increase are refused");
	free(ids);
}

/* The dense-index search, and ids sorted and kept once. */
static void
test_index_find_sort_unique(void)
{
	int32_t		idx[5] = {0, 3, 4, 9, INT32_MAX};
	int64_t		ids[8] = {5, -2, 5, INT64_MAX, -2, INT64_MIN, 0, 5};
	int64_t		want[5] = {INT64_MIN, -2, 0, 5, INT64_MAX};
	int64_t		n;
	int			i;

	for (i = 0; i < 5; i++)
		CHECK(wals_index_find(idx, 5, idx[i]) == i, "dense index %d found", i);
	CHECK(wals_index_find(idx, 5, 5) == -1, "absent dense index");
	CHECK(wals_index_find(idx, 0, 0) == -1, "empty dense indices");
	n = wals_ids_sort_unique(ids, 8);
	CHECK(n == 5, "8 ids, 5 distinct: kept %lld", (long long) n);
	for (i = 0; i < 5 && i < n; i++)
		CHECK(ids[i] == want[i], "id %d in order", i);
	CHECK(wals_ids_sort_unique(ids, 0) == 0, "no ids");
}

/* Entry point: every id-map check. */
void
test_idmap(void)
{
	test_index_find_sort_unique();
	test_extremes();
	test_serial();
	test_sparse();
	test_growth(0);
	test_growth(1);
	test_monotone();
	test_edges();
	test_ids_find();
	test_directory();
}
