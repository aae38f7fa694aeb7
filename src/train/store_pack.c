/*
 * store_pack.c
 *	  The rated items of a new user factor table packed by the training's
 *	  workers while the leader writes its rows.
 *
 * Each row of a user factor table carries the user's rated items, packed
 * (src/core/rated.c, catalog/factors.c).  At 100 million ratings the
 * packing was some 1.5 of the 3.6 s a store took, on one core of a 2-core
 * Xeon, the rest being the heap's: the gaps between item ids and the
 * ratings as varints, a few nanoseconds a rating.  Workers can read the
 * matrix by user in the training's shared blocks, though they cannot
 * insert rows; so they pack, and the leader inserts.
 *
 * Users go in batches, those of one multi-insert of store.c.  Batch b is
 * packed into slot b mod nslots of a ring in the parallel context's
 * segment, each user's bytea after the one before, by whichever process
 * takes it first from a counter: a worker, or the leader when the batch it
 * needs is not yet taken, so that the leader never waits on a batch no one
 * packs, and a store whose workers could not be had is the leader's alone.
 * The leader takes the batches in order; its tuples point into the slot
 * until they are written, and the slot is free for batch b + nslots once
 * the leader has moved past b.  A user whose packing might not fit in what
 * is left of the slot is left to the leader, which packs it in its own
 * memory.  The bytes written are those the leader alone packs, whatever
 * process packed them.
 *
 * While workers run, the leader is in parallel mode, where the heap's
 * multi-insert is allowed, as for CREATE TABLE AS, and so is keeping a
 * B-tree up to date, but not what a trigger, a check or an index
 * expression of the owner's might do: a table that has any is packed by
 * the leader alone (store.c).
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "wals_train.h"

#define WALS_PACK_KEY		1

/*
 * Ratings below which the leader packs alone: some 20 ms of packing, a few
 * times what starting a worker and mapping the blocks cost.
 */
#define WALS_PACK_PARALLEL_MIN_CELLS	((int64) 4 << 20)


/* Slots for each process, so that a worker rarely waits on the leader. */
#define WALS_PACK_SLOTS_EACH	2

/* The offset of a user that the leader packs itself. */
#define WALS_PACK_LEADER	((Size) -1)

/* One batch of packed users. */
typedef struct PackSlot
{
	pg_atomic_uint64 ready;		/* 1 + the batch packed in it; 0: none yet */
	Size		offset[WALS_STORE_BATCH];	/* of each user's bytea, from bytes */
} PackSlot;

/*
 * What the processes share, followed by the item ids, then the slots, then
 * the bytes of the slots.
 */
typedef struct PackShared
{
	WalsWorkspaceShape shape;
	int64		nusers;
	int64		nitems;
	int64		nbatches;
	int			nslots;
	pg_atomic_uint64 next;		/* the next batch to take */
	pg_atomic_uint64 passed;	/* batches the leader has written */
	ConditionVariable cv;		/* a batch packed, or one written */
} PackShared;

/* What a process packs with. */
typedef struct Packer
{
	PackShared *sh;
	const int64 *item_ids;
	const WalsCsr *R;
	int64	   *ids;			/* scratch for a row's cells */
	float	   *vals;
	int64		room;
} Packer;

struct WalsRatedPacker
{
	ParallelContext *pcxt;
	Packer		pk;
};

PGDLLEXPORT void wals_pack_main(dsm_segment *seg, shm_toc *toc);

static int64 *
item_ids_of(PackShared *sh)
{
	return (int64 *) ((char *) sh + MAXALIGN(sizeof(PackShared)));
}

/* The slot of batch b. */
static PackSlot *
slot_of(PackShared *sh, int64 b)
{
	char	   *slots = (char *) item_ids_of(sh) + MAXALIGN(sizeof(int64) * sh->nitems);

	return (PackSlot *) (slots + (b % sh->nslots) * MAXALIGN(sizeof(PackSlot)));
}

/* The bytes of the slot of batch b, after every slot. */
static char *
bytes_of(PackShared *sh, int64 b)
{
	char	   *bytes = (char *) item_ids_of(sh) + MAXALIGN(sizeof(int64) * sh->nitems) +
		sh->nslots * MAXALIGN(sizeof(PackSlot));

	return bytes + (b % sh->nslots) * WALS_PACK_SLOT_BYTES;
}

static Size
shared_bytes(int64 nitems, int nslots)
{
	return MAXALIGN(sizeof(PackShared)) + MAXALIGN(sizeof(int64) * nitems) +
		(Size) nslots * (MAXALIGN(sizeof(PackSlot)) + WALS_PACK_SLOT_BYTES);
}

/* Pack batch b into its slot, free for it, and say it is ready. */
static void
pack_batch(Packer *pk, int64 b)
{
	PackShared *sh = pk->sh;
	PackSlot   *slot = slot_of(sh, b);
	char	   *bytes = bytes_of(sh, b);
	int64		first = b * WALS_STORE_BATCH;
	int64		last = Min(first + WALS_STORE_BATCH, sh->nusers);
	Size		at = 0;

	for (int64 r = first; r < last; r++)
	{
		int64		n = pk->R->indptr[r + 1] - pk->R->indptr[r];

		CHECK_FOR_INTERRUPTS();
		if (wals_rated_row_bound(pk->R, r) > WALS_PACK_SLOT_BYTES - at)
		{
			slot->offset[r - first] = WALS_PACK_LEADER;
			continue;
		}
		if (n > pk->room)
		{
			pk->room = Max(n, 2 * pk->room);
			pk->ids = repalloc_huge(pk->ids, sizeof(int64) * pk->room);
			pk->vals = repalloc_huge(pk->vals, sizeof(float) * pk->room);
		}
		wals_rated_row_into(pk->item_ids, pk->R, r, (bytea *) (bytes + at), pk->ids, pk->vals);
		slot->offset[r - first] = at;
		at += MAXALIGN(VARSIZE(bytes + at));
	}
	pg_write_barrier();
	pg_atomic_write_u64(&slot->ready, (uint64) b + 1);
	ConditionVariableBroadcast(&sh->cv);
}

static void
packer_init(Packer *pk, PackShared *sh, const WalsCsr *R)
{
	pk->sh = sh;
	pk->item_ids = item_ids_of(sh);
	pk->R = R;
	pk->room = 1024;
	pk->ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * pk->room);
	pk->vals = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * pk->room);
}

/*
 * Entry point of a parallel worker: take batches until none is left, each
 * once the leader has written the batch that held its slot before.
 */
void
wals_pack_main(dsm_segment *seg, shm_toc *toc)
{
	PackShared *sh = shm_toc_lookup(toc, WALS_PACK_KEY, false);
	WalsWorkspace ws;
	Packer		pk;

	wals_workspace_attach(&sh->shape, &ws);
	packer_init(&pk, sh, &ws.by_user);
	for (;;)
	{
		int64		b = (int64) pg_atomic_fetch_add_u64(&sh->next, 1);

		if (b >= sh->nbatches)
			break;
		wals_build_wait(&sh->cv, &sh->passed, b - sh->nslots + 1);
		/* the leader's reads of the slot come before this process's writes */
		pg_memory_barrier();
		pack_batch(&pk, b);
	}
	wals_workspace_release(&ws);
}

/* See wals_train.h. */
WalsRatedPacker *
wals_rated_packer_begin(const WalsTrainArgs *args, const WalsWorkspace *ws,
						const int64 *item_ids)
{
	const WalsCsr *R = &ws->by_user;
	int			nslots = Min(WALS_PACK_SLOTS_EACH * (Min(args->workers, max_parallel_workers) + 1),
							 WALS_PACK_MAX_SLOTS);
	WalsRatedPacker *p;
	PackShared *sh;

	if (R->indptr[R->nrows] < WALS_PACK_PARALLEL_MIN_CELLS || args->workers < 1 ||
		IsInParallelMode() || !wals_workspace_shared(ws))
		return NULL;
	p = palloc0(sizeof(WalsRatedPacker));
	p->pcxt = wals_build_open_context("wals_pack_main", args->workers,
									  shared_bytes(R->ncols, nslots), WALS_PACK_KEY,
									  (void **) &sh);
	if (p->pcxt == NULL)
	{
		pfree(p);
		return NULL;
	}
	sh->shape = ws->shape;
	sh->nusers = R->nrows;
	sh->nitems = R->ncols;
	sh->nbatches = (R->nrows + WALS_STORE_BATCH - 1) / WALS_STORE_BATCH;
	sh->nslots = nslots;
	pg_atomic_init_u64(&sh->next, 0);
	pg_atomic_init_u64(&sh->passed, 0);
	ConditionVariableInit(&sh->cv);
	memcpy(item_ids_of(sh), item_ids, sizeof(int64) * R->ncols);
	for (int s = 0; s < nslots; s++)
		pg_atomic_init_u64(&slot_of(sh, s)->ready, 0);
	packer_init(&p->pk, sh, R);
	LaunchParallelWorkers(p->pcxt);
	ereport(DEBUG1,
			(errmsg_internal("wals: packing the rated items with %d parallel workers",
							 p->pcxt->nworkers_launched)));
	return p;
}

/*
 * Wait until batch b is packed, packing it here where no process has
 * taken it yet.
 */
static void
await_batch(Packer *pk, int64 b)
{
	PackShared *sh = pk->sh;
	PackSlot   *slot = slot_of(sh, b);

	ConditionVariablePrepareToSleep(&sh->cv);
	for (;;)
	{
		uint64		expected = (uint64) b;

		if (pg_atomic_read_u64(&slot->ready) == (uint64) b + 1)
			break;
		if (pg_atomic_compare_exchange_u64(&sh->next, &expected, (uint64) b + 1))
		{
			ConditionVariableCancelSleep();
			pack_batch(pk, b);
			return;
		}
		ConditionVariableSleep(&sh->cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	pg_read_barrier();
}

/*
 * See wals_train.h.  The rows before a batch's first have been written
 * when the leader asks for it, so the slots of the batches before are
 * free.
 */
Datum
wals_rated_packer_row(WalsRatedPacker *p, int64 r)
{
	Packer	   *pk = &p->pk;
	PackShared *sh = pk->sh;
	int64		b = r / WALS_STORE_BATCH;
	Size		offset;

	if (r % WALS_STORE_BATCH == 0)
	{
		pg_memory_barrier();
		pg_atomic_write_u64(&sh->passed, (uint64) b);
		ConditionVariableBroadcast(&sh->cv);
		await_batch(pk, b);
	}
	offset = slot_of(sh, b)->offset[r % WALS_STORE_BATCH];
	if (offset == WALS_PACK_LEADER)
		return PointerGetDatum(wals_rated_row_bytea(pk->item_ids, pk->R, r));
	return PointerGetDatum(bytes_of(sh, b) + offset);
}

/* See wals_train.h. */
void
wals_rated_packer_end(WalsRatedPacker *p)
{
	WaitForParallelWorkersToFinish(p->pcxt);
	wals_build_close_context(p->pcxt);
	pfree(p->pk.ids);
	pfree(p->pk.vals);
	pfree(p);
}
