/*
 * ingest_internal.h
 *	  What reading the ratings shares between ingest.c, which reads them in
 *	  one process, and ingest_parallel.c, which has parallel workers read
 *	  parts of a table beside the leader.
 */
#ifndef WALS_INGEST_INTERNAL_H
#define WALS_INGEST_INTERNAL_H

#include "access/tableam.h"
#include "port/atomics.h"
#include "utils/rel.h"

#include "wals_train.h"

/*
 * Rows whose ids are mapped together: enough for the prefetching of the id
 * maps to hide most of their cache misses, few enough to stay in cache.
 */
#define WALS_INGEST_BATCH			512

/* Rows a parallel worker hands over at a time: 12 MB. */
#define WALS_INGEST_CHUNK_ROWS		(1 << 20)

/* The bytes of a row read: two indices and a rating. */
#define WALS_ROW_BYTES				(2 * sizeof(int32) + sizeof(float))

/* The values of a row, in this order, wherever they come from. */
#define ROW_USER	0
#define ROW_ITEM	1
#define ROW_RATING	2
#define ROW_VALUES	3

/* How to read a row's values. */
typedef struct RowLayout
{
	bool		has_rating;		/* false: every pair counts 1 */
	WalsValueKind	kind[ROW_VALUES];
	AttrNumber	attnum[ROW_VALUES]; /* in the table, for a direct scan */
} RowLayout;

/*
 * One side's id map, its memory, and the ids of the batch not yet mapped.
 * A parallel worker also keeps the ids new to its map since its last
 * hand-over, in order of their provisional indices.
 */
typedef struct IdSide
{
	WalsIdMap	map;
	void	   *buffer;
	size_t		bytes;
	int64		pending[WALS_INGEST_BATCH];
	const char *what;			/* for errors */
	bool		keep_new;
	int64	   *new_ids;
	int64		nnew;
	int64		new_room;
} IdSide;

/* Everything one process has read so far. */
typedef struct Ingest
{
	const WalsTrainArgs *args;
	RowLayout	layout;
	MemoryContext cxt;			/* where the arrays live */
	MemoryContext scratch;		/* numeric conversions, reset at each check */
	IdSide		users;
	IdSide		items;
	int32	   *user_idx;		/* provisional indices until renumbered */
	int32	   *item_idx;
	float	   *ratings;		/* also holds the ratings of the batch */
	int64		n;				/* rows mapped */
	int64		capacity;		/* always room for n plus a batch */
	int64		expected;		/* rows the planner expects, or the first
								 * capacity */
	WalsTempArray *spilled;		/* the arrays' files, once they outgrew
								 * wals.max_memory; else NULL */
	dsm_segment *seg[WALS_ROWS_ARRAYS]; /* the arrays' shared segments, where
										 * the build's workers will read them;
										 * else NULL */
	int64		prefaulted;		/* rows whose pages are faulted in */
	int			nbatch;			/* rows in the batch */
	int64		null_ids;
	int			countdown;		/* rows until the next check */
	int64		read;			/* rows mapped in this process's life */

	/*
	 * Where processes read together: the rows all of them have read (for
	 * wals.max_memory and the progress), and what this one has added to it.
	 */
	pg_atomic_uint64 *all_read;
	int64		counted;
	int			helpers;		/* the workers reading beside the leader */

	/*
	 * A parallel worker's rows go to the leader a few megabytes at a time:
	 * called when they fill the arrays, it hands them over and empties
	 * them.  NULL in the leader, whose arrays grow instead.
	 */
	void		(*hand_over) (struct Ingest *in);
	void	   *hand_over_arg;

	/*
	 * The leader takes the rows its workers have handed over after each
	 * batch of its own, so that they never pile up.
	 */
	void		(*take) (struct Ingest *in);
	void	   *take_arg;
} Ingest;

/* ingest.c */
extern void wals_ingest_begin(Ingest *in, const WalsTrainArgs *args);
extern void wals_ingest_alloc(Ingest *in, double capacity, bool shared);
extern void wals_ingest_scan(Ingest *in, Relation rel, TableScanDesc scan);
extern void wals_ingest_flush(Ingest *in);
extern void wals_ingest_map_ids(Ingest *in, IdSide *side, const int64 *ids, int64 n,
								int32 *out);
extern void wals_ingest_reserve(Ingest *in, int64 rows);

/* ingest_parallel.c */
extern bool wals_ingest_parallel(Ingest *in, Relation rel);

#endif							/* WALS_INGEST_INTERNAL_H */
