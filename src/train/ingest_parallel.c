/*
 * ingest_parallel.c
 *	  Reading a table with parallel workers beside the leader, as a parallel
 *	  sequential scan does.
 *
 * The leader and its workers share one parallel heap scan, each taking the
 * next blocks as it goes, with the caller's snapshot, and read the rows of
 * their blocks the way ingest.c reads a table alone: the columns straight
 * from the pinned page, the ids into provisional indices of id maps of
 * their own.  A worker's rows cannot stay in its memory, which goes when it
 * exits, and the rows of the whole table need not sit in two places at
 * once: so a worker hands its rows over in chunks of a few megabytes, each
 * allocated in an area of dynamic shared memory (DSA) that lives as long as
 * the leader's parallel context, and reuses its own arrays.  A chunk
 * carries the ids the worker met first since the chunk before, in the
 * order of the provisional indices it gave them.
 *
 * After each batch of its own the leader takes the chunks handed over
 * since it last looked: it maps their new ids into its own maps, which
 * extends a translation from the worker's provisional indices to its own,
 * moves the rows into its own through it, and frees the chunk.  The rows
 * then are what one process would have read, in another order, which
 * nothing after depends on (the matrices are built the same whatever the
 * order of the rows, src/core/csr.c).  A DSA keeps the segments it grew
 * until it is detached, however much of them is freed, so chunks left to
 * pile up until the workers were done once held half the table twice
 * over, beside the leader's rows; taken as they come, they take a few
 * chunks of it, and the rows never more than their 12 bytes each.  The
 * leader's rows are shared segments (ingest.c), which the workers of the
 * build read after it.
 *
 * An error in a worker (a rating out of range, a cancel) reaches the leader
 * as in any parallel query; the DSA area and its chunks go with the
 * parallel context.  Where no worker can be had, the leader reads alone.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/relscan.h"
#include "access/table.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lwlock.h"
#include "storage/shm_toc.h"
#include "utils/dsa.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "ingest_internal.h"

/*
 * Tables smaller than this are read by the leader alone: starting workers
 * costs more than they would save.
 */
#define WALS_INGEST_PARALLEL_MIN_PAGES	4096

#define WALS_INGEST_KEY_SHARED		1
#define WALS_INGEST_KEY_SCAN		2
#define WALS_INGEST_KEY_AREA		3

/* Room for a quoted, qualified relation name or a quoted column name. */
#define WALS_INGEST_NAME			(4 * NAMEDATALEN + 8)

/*
 * A worker's rows handed over, after the header: the user ids and the item
 * ids new since the chunk before, then n of each array of rows.
 */
typedef struct IngestChunk
{
	dsa_pointer next;			/* handed over after this one, once taken */
	int64		new_users;
	int64		new_items;
	int64		n;
} IngestChunk;

/* What one worker leaves the leader. */
typedef struct IngestSlot
{
	pg_atomic_uint64 chunks;	/* the last chunk handed over and not taken */
	int64		null_ids;
} IngestSlot;

/* The reading's state in the parallel context's segment. */
typedef struct IngestShared
{
	Oid			relid;
	RowLayout	layout;
	char		source_display[WALS_INGEST_NAME];
	char		rating_col[WALS_INGEST_NAME];
	char		user_col[WALS_INGEST_NAME];
	char		item_col[WALS_INGEST_NAME];
	bool		may_spill;		/* the leader keeps rows in temporary files */
	pg_atomic_uint64 all_read;
	int			nslots;
	IngestSlot	slot[FLEXIBLE_ARRAY_MEMBER];
} IngestShared;

/* A worker's hand-over target. */
typedef struct WorkerOut
{
	dsa_area   *area;
	IngestSlot *slot;
} WorkerOut;

/*
 * The leader's translation of one worker's provisional indices of one side
 * into its own, extended by each chunk.
 */
typedef struct Translation
{
	int32	   *to;
	int64		n;
	int64		room;
} Translation;

/* What the leader takes its workers' chunks with. */
typedef struct Taker
{
	dsa_area   *area;
	IngestShared *shared;
	int			nworkers;
	Translation *users;			/* one per worker */
	Translation *items;
} Taker;

PGDLLEXPORT void wals_ingest_main(dsm_segment *seg, shm_toc *toc);

static Size
shared_size(int nslots)
{
	return add_size(offsetof(IngestShared, slot), mul_size(nslots, sizeof(IngestSlot)));
}

/* The parts of chunk c, mapped. */
typedef struct ChunkParts
{
	int64	   *user_ids;
	int64	   *item_ids;
	int32	   *users;
	int32	   *items;
	float	   *ratings;
} ChunkParts;

static Size
chunk_bytes(int64 new_users, int64 new_items, int64 n)
{
	return MAXALIGN(sizeof(IngestChunk)) + (new_users + new_items) * sizeof(int64) +
		n * (2 * sizeof(int32) + sizeof(float));
}

static void
chunk_parts(IngestChunk *c, ChunkParts *parts)
{
	char	   *data = (char *) c + MAXALIGN(sizeof(IngestChunk));

	parts->user_ids = (int64 *) data;
	parts->item_ids = parts->user_ids + c->new_users;
	parts->users = (int32 *) (parts->item_ids + c->new_items);
	parts->items = parts->users + c->n;
	parts->ratings = (float *) (parts->items + c->n);
}

/* Hand a worker's rows and new ids over as a chunk and empty its arrays. */
static void
hand_over(Ingest *in)
{
	WorkerOut  *out = in->hand_over_arg;
	dsa_pointer p;
	IngestChunk *c;
	ChunkParts	parts;
	uint64		head;

	if (in->n == 0 && in->users.nnew == 0 && in->items.nnew == 0)
		return;
	p = dsa_allocate_extended(out->area,
							  chunk_bytes(in->users.nnew, in->items.nnew, in->n),
							  DSA_ALLOC_HUGE);
	c = dsa_get_address(out->area, p);
	c->new_users = in->users.nnew;
	c->new_items = in->items.nnew;
	c->n = in->n;
	chunk_parts(c, &parts);
	memcpy(parts.user_ids, in->users.new_ids, c->new_users * sizeof(int64));
	memcpy(parts.item_ids, in->items.new_ids, c->new_items * sizeof(int64));
	memcpy(parts.users, in->user_idx, in->n * sizeof(int32));
	memcpy(parts.items, in->item_idx, in->n * sizeof(int32));
	memcpy(parts.ratings, in->ratings, in->n * sizeof(float));
	head = pg_atomic_read_u64(&out->slot->chunks);
	do
		c->next = (dsa_pointer) head;
	while (!pg_atomic_compare_exchange_u64(&out->slot->chunks, &head, (uint64) p));
	in->n = 0;
	in->users.nnew = 0;
	in->items.nnew = 0;
}

/* Entry point of a parallel worker: read blocks until the scan runs out. */
void
wals_ingest_main(dsm_segment *seg, shm_toc *toc)
{
	IngestShared *sh = shm_toc_lookup(toc, WALS_INGEST_KEY_SHARED, false);
	ParallelTableScanDesc pscan = shm_toc_lookup(toc, WALS_INGEST_KEY_SCAN, false);
	dsa_area   *area = dsa_attach_in_place(shm_toc_lookup(toc, WALS_INGEST_KEY_AREA, false),
										   seg);
	IngestSlot *slot = &sh->slot[ParallelWorkerNumber];
	WalsTrainArgs args = {0};
	WorkerOut	out = {area, slot};
	Ingest		in;
	Relation	rel;
	TableScanDesc scan;

	args.source_display = sh->source_display;
	args.rating_col = sh->layout.has_rating ? sh->rating_col : NULL;
	args.user_col = sh->user_col;
	args.item_col = sh->item_col;
	args.may_spill = sh->may_spill;
	wals_ingest_begin(&in, &args);
	in.layout = sh->layout;
	in.all_read = &sh->all_read;
	in.hand_over = hand_over;
	in.hand_over_arg = &out;
	in.users.keep_new = true;
	in.items.keep_new = true;
	wals_ingest_alloc(&in, WALS_INGEST_CHUNK_ROWS, false);

	rel = table_open(sh->relid, AccessShareLock);
	scan = table_beginscan_parallel(rel, pscan);
	wals_ingest_scan(&in, rel, scan);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	wals_ingest_flush(&in);
	hand_over(&in);
	slot->null_ids = in.null_ids;
	dsa_detach(area);
}

/* Extend t with the leader's indices of a worker's n new ids of side. */
static void
translate_new(Ingest *in, IdSide *side, Translation *t, const int64 *ids, int64 n)
{
	if (t->n + n > t->room)
	{
		t->room = Max(2 * t->room, t->n + n);
		t->to = t->to == NULL ?
			MemoryContextAllocHuge(in->cxt, Max(t->room, 1) * sizeof(int32)) :
			repalloc_huge(t->to, t->room * sizeof(int32));
	}
	wals_ingest_map_ids(in, side, ids, n, t->to + t->n);
	t->n += n;
}

/* Move chunk p of worker w into the leader's rows, and free it. */
static void
take_chunk(Ingest *in, Taker *tk, int w, dsa_pointer p)
{
	IngestChunk *c = dsa_get_address(tk->area, p);
	ChunkParts	parts;
	const int32 *tu;
	const int32 *ti;

	chunk_parts(c, &parts);
	translate_new(in, &in->users, &tk->users[w], parts.user_ids, c->new_users);
	translate_new(in, &in->items, &tk->items[w], parts.item_ids, c->new_items);
	tu = tk->users[w].to;
	ti = tk->items[w].to;
	wals_ingest_reserve(in, c->n);
	for (int64 k = 0; k < c->n; k++)
	{
		in->user_idx[in->n + k] = tu[parts.users[k]];
		in->item_idx[in->n + k] = ti[parts.items[k]];
	}
	memcpy(in->ratings + in->n, parts.ratings, c->n * sizeof(float));
	in->n += c->n;
	dsa_free(tk->area, p);
}

/*
 * Take every chunk the workers have handed over since the leader last
 * looked, each worker's in the order it handed them over, as its new ids
 * require.
 */
static void
take(Ingest *in)
{
	Taker	   *tk = in->take_arg;

	for (int w = 0; w < tk->nworkers; w++)
	{
		IngestSlot *slot = &tk->shared->slot[w];
		dsa_pointer p;
		dsa_pointer first = InvalidDsaPointer;

		if (pg_atomic_read_u64(&slot->chunks) == (uint64) InvalidDsaPointer)
			continue;
		/* the list runs from the last handed over: turn it around */
		p = (dsa_pointer) pg_atomic_exchange_u64(&slot->chunks,
												 (uint64) InvalidDsaPointer);
		while (DsaPointerIsValid(p))
		{
			IngestChunk *c = dsa_get_address(tk->area, p);
			dsa_pointer next = c->next;

			c->next = first;
			first = p;
			p = next;
		}
		for (p = first; DsaPointerIsValid(p);)
		{
			dsa_pointer next = ((IngestChunk *) dsa_get_address(tk->area, p))->next;

			take_chunk(in, tk, w, p);
			p = next;
			CHECK_FOR_INTERRUPTS();
		}
	}
}

static void
copy_name(char *to, const char *from)
{
	if (from != NULL && strlen(from) >= WALS_INGEST_NAME)
		elog(ERROR, "wals: name \"%s\" too long to pass to parallel workers", from);
	strlcpy(to, from != NULL ? from : "", WALS_INGEST_NAME);
}

/*
 * Read rel, which in's layout says how, with the parallel workers the
 * training asks for, into in's rows.  False, having read nothing, where
 * rel is too small to be worth workers or none can be had: the caller
 * then reads alone.
 */
bool
wals_ingest_parallel(Ingest *in, Relation rel)
{
	const WalsTrainArgs *args = in->args;
	Snapshot	snapshot = GetActiveSnapshot();
	ParallelContext *pcxt;
	IngestShared *sh;
	ParallelTableScanDesc pscan;
	Size		scan_bytes;
	Size		area_bytes = dsa_minimum_size();
	void	   *area_place;
	dsa_area   *area;
	TableScanDesc scan;
	int			launched;
	Taker		tk;

	/* workers cannot see the leader's temporary tables, kept in its memory */
	if (args->workers <= 0 || RelationUsesLocalBuffers(rel) ||
		RelationGetNumberOfBlocks(rel) < WALS_INGEST_PARALLEL_MIN_PAGES)
		return false;

	EnterParallelMode();
	pcxt = CreateParallelContext("wals", "wals_ingest_main", args->workers);
	scan_bytes = table_parallelscan_estimate(rel, snapshot);
	shm_toc_estimate_chunk(&pcxt->estimator, shared_size(args->workers));
	shm_toc_estimate_chunk(&pcxt->estimator, scan_bytes);
	shm_toc_estimate_chunk(&pcxt->estimator, area_bytes);
	shm_toc_estimate_keys(&pcxt->estimator, 3);
	InitializeParallelDSM(pcxt);
	if (pcxt->seg == NULL)
	{
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		return false;
	}

	sh = shm_toc_allocate(pcxt->toc, shared_size(args->workers));
	memset(sh, 0, shared_size(args->workers));
	sh->relid = RelationGetRelid(rel);
	sh->layout = in->layout;
	copy_name(sh->source_display, args->source_display);
	sh->may_spill = args->may_spill;
	copy_name(sh->rating_col, args->rating_col);
	copy_name(sh->user_col, args->user_col);
	copy_name(sh->item_col, args->item_col);
	pg_atomic_init_u64(&sh->all_read, 0);
	sh->nslots = args->workers;
	for (int w = 0; w < sh->nslots; w++)
		pg_atomic_init_u64(&sh->slot[w].chunks, (uint64) InvalidDsaPointer);
	shm_toc_insert(pcxt->toc, WALS_INGEST_KEY_SHARED, sh);
	pscan = shm_toc_allocate(pcxt->toc, scan_bytes);
	table_parallelscan_initialize(rel, pscan, snapshot);
	shm_toc_insert(pcxt->toc, WALS_INGEST_KEY_SCAN, pscan);
	area_place = shm_toc_allocate(pcxt->toc, area_bytes);
	area = dsa_create_in_place(area_place, area_bytes, LWTRANCHE_PARALLEL_QUERY_DSA, pcxt->seg);
	shm_toc_insert(pcxt->toc, WALS_INGEST_KEY_AREA, area_place);

	LaunchParallelWorkers(pcxt);
	launched = pcxt->nworkers_launched;
	ereport(DEBUG1,
			(errmsg_internal("wals: reading \"%s\" with %d parallel workers",
							 args->source_display, launched)));

	tk.area = area;
	tk.shared = sh;
	tk.nworkers = launched;
	tk.users = palloc0(Max(launched, 1) * sizeof(Translation));
	tk.items = palloc0(Max(launched, 1) * sizeof(Translation));
	in->take = take;
	in->take_arg = &tk;
	in->all_read = &sh->all_read;
	in->helpers = launched;
	wals_ingest_alloc(in, wals_ingest_estimate(rel), true);
	scan = table_beginscan_parallel(rel, pscan);
	wals_ingest_scan(in, rel, scan);
	table_endscan(scan);
	wals_ingest_flush(in);
	WaitForParallelWorkersToFinish(pcxt);
	take(in);
	in->take = NULL;
	for (int w = 0; w < launched; w++)
	{
		in->null_ids += sh->slot[w].null_ids;
		if (tk.users[w].to != NULL)
			pfree(tk.users[w].to);
		if (tk.items[w].to != NULL)
			pfree(tk.items[w].to);
	}
	in->all_read = NULL;
	dsa_detach(area);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	return true;
}
