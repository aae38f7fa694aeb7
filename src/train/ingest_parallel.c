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
 * the leader's parallel context, and reuses its own arrays.  When every
 * worker is done it leaves its ids there too, sorted, with the rank of
 * each of its provisional indices.
 *
 * The leader then takes each worker's ids into its own maps, which gives a
 * translation from the worker's provisional indices to its own, and moves
 * the worker's chunks into its rows through it, freeing each chunk once
 * moved.  The rows then are what one process would have read, in another
 * order, which nothing after depends on (the matrices are built the same
 * whatever the order of the rows, src/core/csr.c).  So at no moment do the
 * rows take more than their 12 bytes each and a chunk per process.
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

/* Rows a worker hands over at a time: 12 MB. */
#define WALS_INGEST_CHUNK_ROWS		(1 << 20)

#define WALS_INGEST_KEY_SHARED		1
#define WALS_INGEST_KEY_SCAN		2
#define WALS_INGEST_KEY_AREA		3

/* Room for a quoted, qualified relation name or a quoted column name. */
#define WALS_INGEST_NAME			(4 * NAMEDATALEN + 8)

/* A worker's rows handed over: n of each array, after the header. */
typedef struct IngestChunk
{
	dsa_pointer next;			/* the chunk handed over before */
	int64		n;
} IngestChunk;

/* What one worker leaves the leader. */
typedef struct IngestSlot
{
	dsa_pointer chunks;			/* the last chunk handed over */
	dsa_pointer user_ids;		/* sorted, then the rank of each index */
	int64		nusers;
	dsa_pointer item_ids;
	int64		nitems;
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

PGDLLEXPORT void wals_ingest_main(dsm_segment *seg, shm_toc *toc);

static Size
shared_size(int nslots)
{
	return add_size(offsetof(IngestShared, slot), mul_size(nslots, sizeof(IngestSlot)));
}

static IngestChunk *
chunk_at(dsa_area *area, dsa_pointer p, int32 **users, int32 **items, float **ratings)
{
	IngestChunk *c = dsa_get_address(area, p);
	char	   *data = (char *) c + MAXALIGN(sizeof(IngestChunk));

	*users = (int32 *) data;
	*items = (int32 *) (data + c->n * sizeof(int32));
	*ratings = (float *) (data + 2 * c->n * sizeof(int32));
	return c;
}

/* Hand a worker's rows over as a chunk and empty its arrays. */
static void
hand_over(Ingest *in)
{
	WorkerOut  *out = in->hand_over_arg;
	dsa_pointer p;
	IngestChunk *c;
	int32	   *users;
	int32	   *items;
	float	   *ratings;

	if (in->n == 0)
		return;
	p = dsa_allocate_extended(out->area,
							  MAXALIGN(sizeof(IngestChunk)) +
							  in->n * (2 * sizeof(int32) + sizeof(float)),
							  DSA_ALLOC_HUGE);
	c = dsa_get_address(out->area, p);
	c->n = in->n;
	chunk_at(out->area, p, &users, &items, &ratings);
	memcpy(users, in->user_idx, in->n * sizeof(int32));
	memcpy(items, in->item_idx, in->n * sizeof(int32));
	memcpy(ratings, in->ratings, in->n * sizeof(float));
	c->next = out->slot->chunks;
	out->slot->chunks = p;
	in->n = 0;
}

/*
 * A worker's ids of one side, sorted, followed by the rank of each of its
 * provisional indices, in the area.
 */
static dsa_pointer
leave_ids(dsa_area *area, const IdSide *side, int64 *count)
{
	int64		n = side->map.count;
	dsa_pointer p = dsa_allocate_extended(area, Max(n, 1) * (sizeof(int64) + sizeof(int32)),
										  DSA_ALLOC_HUGE);
	int64	   *ids = dsa_get_address(area, p);

	if (n > 0)
		wals_idmap_rank(&side->map, ids, (int32 *) (ids + n));
	*count = n;
	return p;
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
	wals_ingest_begin(&in, &args);
	in.layout = sh->layout;
	in.all_read = &sh->all_read;
	in.hand_over = hand_over;
	in.hand_over_arg = &out;
	wals_ingest_alloc(&in, WALS_INGEST_CHUNK_ROWS);

	rel = table_open(sh->relid, AccessShareLock);
	scan = table_beginscan_parallel(rel, pscan);
	wals_ingest_scan(&in, rel, scan);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	wals_ingest_flush(&in);
	hand_over(&in);

	slot->user_ids = leave_ids(area, &in.users, &slot->nusers);
	slot->item_ids = leave_ids(area, &in.items, &slot->nitems);
	slot->null_ids = in.null_ids;
	dsa_detach(area);
}

/*
 * The leader's provisional index of each of a worker's provisional indices
 * of one side, from the worker's ids (sorted, then ranks).
 */
static int32 *
translation(Ingest *in, IdSide *side, dsa_area *area, dsa_pointer p, int64 n)
{
	const int64 *ids = dsa_get_address(area, p);
	const int32 *rank = (const int32 *) (ids + n);
	int32	   *mine = palloc_extended(Max(n, 1) * sizeof(int32), MCXT_ALLOC_HUGE);
	int32	   *from = palloc_extended(Max(n, 1) * sizeof(int32), MCXT_ALLOC_HUGE);

	wals_ingest_map_ids(in, side, ids, n, mine);
	for (int64 k = 0; k < n; k++)
		from[k] = mine[rank[k]];
	pfree(mine);
	dsa_free(area, p);
	return from;
}

/* Move one worker's rows into the leader's, through its translations. */
static void
take_worker(Ingest *in, dsa_area *area, IngestSlot *slot)
{
	int32	   *tu = translation(in, &in->users, area, slot->user_ids, slot->nusers);
	int32	   *ti = translation(in, &in->items, area, slot->item_ids, slot->nitems);
	dsa_pointer p = slot->chunks;

	while (DsaPointerIsValid(p))
	{
		int32	   *users;
		int32	   *items;
		float	   *ratings;
		IngestChunk *c = chunk_at(area, p, &users, &items, &ratings);
		dsa_pointer next = c->next;

		wals_ingest_reserve(in, c->n);
		for (int64 k = 0; k < c->n; k++)
		{
			in->user_idx[in->n + k] = tu[users[k]];
			in->item_idx[in->n + k] = ti[items[k]];
		}
		memcpy(in->ratings + in->n, ratings, c->n * sizeof(float));
		in->n += c->n;
		dsa_free(area, p);
		p = next;
		CHECK_FOR_INTERRUPTS();
	}
	in->null_ids += slot->null_ids;
	pfree(tu);
	pfree(ti);
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
	copy_name(sh->rating_col, args->rating_col);
	copy_name(sh->user_col, args->user_col);
	copy_name(sh->item_col, args->item_col);
	pg_atomic_init_u64(&sh->all_read, 0);
	sh->nslots = args->workers;
	for (int w = 0; w < sh->nslots; w++)
	{
		sh->slot[w].chunks = InvalidDsaPointer;
		sh->slot[w].user_ids = InvalidDsaPointer;
		sh->slot[w].item_ids = InvalidDsaPointer;
	}
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

	in->all_read = &sh->all_read;
	wals_ingest_alloc(in, wals_ingest_estimate(rel));
	scan = table_beginscan_parallel(rel, pscan);
	wals_ingest_scan(in, rel, scan);
	table_endscan(scan);
	wals_ingest_flush(in);
	WaitForParallelWorkersToFinish(pcxt);

	for (int w = 0; w < launched; w++)
		take_worker(in, area, &sh->slot[w]);
	in->all_read = NULL;
	dsa_detach(area);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	return true;
}
