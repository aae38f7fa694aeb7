/*
 * ingest.c
 *	  Reading the ratings of a training.
 *
 * A training must see exactly the rows "SELECT user_col, item_col,
 * rating_col FROM source" would show the caller, and nothing more.  When
 * the source is a plain table (or a populated materialized view) with no
 * inheritance children, no row-level security active for the caller and
 * SELECT granted on the columns used, that SELECT is a sequential scan, so
 * the table is scanned directly with the caller's snapshot: no executor, no
 * tuple copied, the columns read straight from the buffer.  Anything else
 * (views, foreign and partitioned tables, parents of children, RLS, missing
 * privileges, other types) goes through SPI, so that PostgreSQL itself
 * applies its rules and raises its own errors; rows are then taken from the
 * executor as they are produced rather than materialized in batches.
 *
 * Either way each row costs 12 bytes: ids become int32 provisional indices
 * from two growable id maps as they arrive, a batch at a time so that the
 * maps' cache misses overlap, and only once everything is read are the few
 * distinct ids sorted and the rows renumbered in place, so that dense
 * indices follow id order (src/core/idmap.c).
 *
 * A table of a few thousand pages or more, read by a training with
 * workers, is read by the workers beside the leader, each from its share
 * of one parallel scan (ingest_parallel.c); a view, or anything else that
 * goes through SPI, is read by the leader alone.  The leader then keeps
 * the rows in shared segments, sized from the planner's estimate, so that
 * the workers can renumber them and code their ratings (rows_prepare.c)
 * and scatter them into the matrix by item (build_parallel.c) with it;
 * rows past the estimate move them to its own memory, which can grow.
 *
 * Large buffers ask for transparent huge pages and are faulted in ahead of
 * use (pages.c), and the rows of a table are sized from the planner's
 * estimate up front: moving a growing array would break its huge pages.
 * The matrices are built from the rows by matrices.c.
 */
#include "postgres.h"

#include <math.h>
#include <sys/mman.h>

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "optimizer/plancat.h"
#include "storage/bufmgr.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "ingest_internal.h"
#include "wals_train.h"

/*
 * Rows between two checks for a cancel and of wals.max_memory: a few
 * milliseconds of reading.
 */
#define WALS_INGEST_CHECK_ROWS		8192

/* Rows whose pages are faulted in at a time, ahead of the rows read. */
#define WALS_INGEST_PREFAULT_ROWS	(1 << 20)

/*
 * Without an estimate the rows start with room for this many; they grow by
 * doubling.
 */
#define WALS_INGEST_INITIAL_ROWS	65536


/* The executor's receiver of the SPI path. */
typedef struct IngestReceiver
{
	DestReceiver pub;
	Ingest	   *ingest;
} IngestReceiver;

static void
side_init(IdSide *side, const char *what)
{
	wals_idmap_init(&side->map);
	side->buffer = NULL;
	side->bytes = 0;
	side->what = what;
	side->keep_new = false;
	side->new_ids = NULL;
	side->nnew = 0;
	side->new_room = 0;
}

/*
 * Keep the ids of the batch that the map has just given new provisional
 * indices, from first: they come in order of their indices.
 */
static void
keep_new_ids(Ingest *in, IdSide *side, const int32 *out, int32 first)
{
	int32		next = first;

	for (int k = 0; k < in->nbatch; k++)
	{
		if (out[k] != next)
			continue;
		if (side->nnew == side->new_room)
		{
			side->new_room = Max(2 * side->new_room, WALS_INGEST_BATCH);
			side->new_ids = side->new_ids == NULL ?
				MemoryContextAllocHuge(in->cxt, side->new_room * sizeof(int64)) :
				repalloc_huge(side->new_ids, side->new_room * sizeof(int64));
		}
		side->new_ids[side->nnew++] = side->pending[k];
		next++;
	}
}

/*
 * Map the pending ids of the batch to provisional indices at out, moving
 * the map to the bigger buffer it asks for when the insert is refused.
 * Asking first would take the least and greatest id of every batch, 2% of
 * a read of 100 million rows, for the few batches that need a move; the
 * ids a refused insert took keep their indices through the move.
 */
static void
side_map(Ingest *in, IdSide *side, int32 *out)
{
	int32		first = (int32) side->map.count;
	WalsStatus	status = wals_idmap_insert_many(&side->map, side->pending, in->nbatch, out);

	if (status == WALS_EINVAL)
	{
		size_t		bytes = wals_idmap_need(&side->map, side->pending, in->nbatch);
		void	   *buffer;

		if (bytes > MaxAllocHugeSize)
			wals_report_core_status(WALS_ETOOBIG, side->what);
		buffer = wals_alloc_huge(in->cxt, bytes);
		wals_prefault(buffer, bytes);
		wals_report_core_status(wals_idmap_move(&side->map, buffer, bytes,
												side->pending, in->nbatch),
								side->what);
		if (side->buffer != NULL)
			pfree(side->buffer);
		side->buffer = buffer;
		side->bytes = bytes;
		status = wals_idmap_insert_many(&side->map, side->pending, in->nbatch, out);
	}
	wals_report_core_status(status, side->what);
	if (side->keep_new)
		keep_new_ids(in, side, out, first);
}

/* Free p, an array of rows, or the shared segment *seg it lies in. */
static void
free_array(void *p, dsm_segment **seg)
{
	if (*seg != NULL)
		dsm_detach(*seg);
	else if (p != NULL)
		pfree(p);
	*seg = NULL;
}

/* A copy of the first used bytes of p in private room of room bytes; p freed. */
static void *
private_copy(Ingest *in, void *p, dsm_segment **seg, Size used, Size room)
{
	void	   *to = wals_alloc_huge(in->cxt, room);

	wals_copy_bytes(to, p, used);
	free_array(p, seg);
	return to;
}

/*
 * Move shared rows that outgrew the planner's estimate into private memory,
 * which can grow: a shared segment cannot, and is backed in full when it
 * is made.  The build then reads them in the leader alone.
 */
static void
unshare_rows(Ingest *in)
{
	int64		rows = in->n + in->nbatch;

	in->user_idx = private_copy(in, in->user_idx, &in->seg[WALS_ROWS_USERS],
								in->n * sizeof(int32), in->capacity * sizeof(int32));
	in->item_idx = private_copy(in, in->item_idx, &in->seg[WALS_ROWS_ITEMS],
								in->n * sizeof(int32), in->capacity * sizeof(int32));
	in->ratings = private_copy(in, in->ratings, &in->seg[WALS_ROWS_RATINGS],
							   rows * sizeof(float), in->capacity * sizeof(float));
	in->prefaulted = rows;
}

/*
 * The rows grow by doubling with repalloc, which for blocks this large is a
 * realloc the C library serves by remapping pages, not by copying them;
 * pages past the last row are never touched, so they cost no memory.
 */
static void
grow_rows(Ingest *in)
{
	int64		capacity = in->capacity * 2;

	if (in->seg[WALS_ROWS_USERS] != NULL)
		unshare_rows(in);

	if (in->spilled != NULL)
	{
		/* toward the rows the planner expects first, not twice as far */
		if (in->capacity < in->expected)
			capacity = Min(capacity, in->expected + in->expected / 16 + WALS_INGEST_BATCH);
		in->user_idx = wals_temp_grow(&in->spilled[WALS_ROWS_USERS], capacity * sizeof(int32));
		in->item_idx = wals_temp_grow(&in->spilled[WALS_ROWS_ITEMS], capacity * sizeof(int32));
		in->ratings = wals_temp_grow(&in->spilled[WALS_ROWS_RATINGS], capacity * sizeof(float));
		in->capacity = capacity;
		in->prefaulted = capacity;
		return;
	}

	if ((Size) capacity * sizeof(int32) > MaxAllocHugeSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("relation \"%s\" given as \"source\" has too many ratings",
						in->args->source_display),
				 errhint("Train on a view that selects fewer rows.")));
	in->user_idx = repalloc_huge(in->user_idx, capacity * sizeof(int32));
	in->item_idx = repalloc_huge(in->item_idx, capacity * sizeof(int32));
	in->ratings = repalloc_huge(in->ratings, capacity * sizeof(float));
	wals_advise_huge_pages(in->user_idx, capacity * sizeof(int32));
	wals_advise_huge_pages(in->item_idx, capacity * sizeof(int32));
	wals_advise_huge_pages(in->ratings, capacity * sizeof(float));
	in->capacity = capacity;
}

/* Make sure the pages of the next batch are faulted in. */
static void
prefault_rows(Ingest *in)
{
	int64		from = in->prefaulted;
	int64		to;

	if (in->n + WALS_INGEST_BATCH <= from || in->spilled != NULL)
		return;
	to = Min(in->capacity, from + WALS_INGEST_PREFAULT_ROWS);
	wals_prefault(in->user_idx + from, (to - from) * sizeof(int32));
	wals_prefault(in->item_idx + from, (to - from) * sizeof(int32));
	wals_prefault(in->ratings + from, (to - from) * sizeof(float));
	in->prefaulted = to;
}

/*
 * The rows' arrays in shared segments, which the build's workers can read,
 * where they can be had: false, nothing made, where they cannot.  A
 * segment is backed in full, so no more than wals.max_memory allows, and
 * leaving dynamic shared memory room for the matrices after them.
 */
static bool
share_rows(Ingest *in)
{
	double		bytes = (double) in->capacity * WALS_ROW_BYTES;
	double		shared_free = wals_shared_free();
	void	   *p[WALS_ROWS_ARRAYS];

	if ((wals_max_memory > 0 && bytes > (double) wals_max_memory * 1024.0) ||
		(shared_free >= 0 && shared_free < 2.0 * bytes))
		return false;
	StaticAssertStmt(sizeof(float) == sizeof(int32), "a rating takes an index's room");
	for (int a = 0; a < WALS_ROWS_ARRAYS; a++)
	{
		in->seg[a] = dsm_create(in->capacity * sizeof(int32), DSM_CREATE_NULL_IF_MAXSEGMENTS);
		if (in->seg[a] == NULL)
		{
			for (int b = 0; b < a; b++)
				free_array(NULL, &in->seg[b]);
			return false;
		}
		p[a] = dsm_segment_address(in->seg[a]);
	}
	in->user_idx = p[WALS_ROWS_USERS];
	in->item_idx = p[WALS_ROWS_ITEMS];
	in->ratings = p[WALS_ROWS_RATINGS];
	return true;
}

/*
 * Room for capacity rows, a batch at least: in shared segments where shared
 * asks for them and they can be had, else in private memory.
 */
void
wals_ingest_alloc(Ingest *in, double capacity, bool shared)
{
	in->capacity = (int64) Min(Max(capacity, WALS_INGEST_BATCH),
							   (double) (MaxAllocHugeSize / sizeof(int32)));
	in->expected = in->capacity;
	if (!shared || !share_rows(in))
	{
		in->user_idx = wals_alloc_huge(in->cxt, in->capacity * sizeof(int32));
		in->item_idx = wals_alloc_huge(in->cxt, in->capacity * sizeof(int32));
		in->ratings = wals_alloc_huge(in->cxt, in->capacity * sizeof(float));
	}
	in->prefaulted = 0;
	prefault_rows(in);
}

/*
 * Move the batch into the rows; rows that fill the arrays are handed over
 * where there is someone to hand them to, else the arrays grow.
 */
void
wals_ingest_flush(Ingest *in)
{
	side_map(in, &in->users, in->user_idx + in->n);
	side_map(in, &in->items, in->item_idx + in->n);
	in->n += in->nbatch;
	in->read += in->nbatch;
	in->nbatch = 0;
	if (in->take != NULL)
		in->take(in);
	if (in->n + WALS_INGEST_BATCH > in->capacity)
	{
		if (in->hand_over != NULL)
			in->hand_over(in);
		else
			grow_rows(in);
	}
	prefault_rows(in);
}

/*
 * Map ids[0..n) of one side, read elsewhere (by a parallel worker), to
 * this process's provisional indices at out, a batch at a time; the batch
 * must be empty.
 */
void
wals_ingest_map_ids(Ingest *in, IdSide *side, const int64 *ids, int64 n, int32 *out)
{
	Assert(in->nbatch == 0);
	for (int64 done = 0; done < n; done += in->nbatch)
	{
		in->nbatch = (int) Min(n - done, WALS_INGEST_BATCH);
		memcpy(side->pending, ids + done, in->nbatch * sizeof(int64));
		side_map(in, side, out + done);
		if ((done / WALS_INGEST_BATCH) % 64 == 0)
			CHECK_FOR_INTERRUPTS();
	}
	in->nbatch = 0;
}

/* Room for rows more rows, faulted in. */
void
wals_ingest_reserve(Ingest *in, int64 rows)
{
	while (in->n + rows + WALS_INGEST_BATCH > in->capacity)
		grow_rows(in);
	if (in->spilled != NULL)
		return;
	wals_prefault(in->user_idx + in->n, rows * sizeof(int32));
	wals_prefault(in->item_idx + in->n, rows * sizeof(int32));
	wals_prefault(in->ratings + in->n, rows * sizeof(float));
	in->prefaulted = Max(in->prefaulted, in->n + rows);
}

/*
 * A temporary file of room bytes holding the used bytes of p, which is
 * freed.
 */
static void *
spill_array(WalsTempArray *t, void *p, dsm_segment **seg, Size used, Size room,
			const char *what)
{
	void	   *to = wals_temp_alloc(t, Max(room, used), what);

	/* written and then read in order */
	wals_temp_advise(t, MADV_SEQUENTIAL);
	wals_copy_bytes(to, p, used);
	free_array(p, seg);
	return to;
}

/*
 * Move the three arrays of rows read into temporary files with room for
 * room rows: the ids of rows rows and the ratings of rated rows (the batch's
 * among them).  Returns the files, in the current context.
 */
static WalsTempArray *
spill_rows_to_files(int32 **users, int32 **items, float **ratings, dsm_segment **seg,
					int64 rows, int64 rated, int64 room)
{
	WalsTempArray *t = palloc0(sizeof(WalsTempArray) * WALS_ROWS_ARRAYS);

	*users = spill_array(&t[WALS_ROWS_USERS], *users, &seg[WALS_ROWS_USERS],
						 rows * sizeof(int32), room * sizeof(int32), "the user ids read");
	*items = spill_array(&t[WALS_ROWS_ITEMS], *items, &seg[WALS_ROWS_ITEMS],
						 rows * sizeof(int32), room * sizeof(int32), "the item ids read");
	*ratings = spill_array(&t[WALS_ROWS_RATINGS], *ratings, &seg[WALS_ROWS_RATINGS],
						   rated * sizeof(float), room * sizeof(float), "the ratings read");
	return t;
}

/*
 * Move the rows read so far, the ratings of the batch with them, into
 * temporary files, where the rows to come go too: from now on the training
 * is out of core.
 */
static void
spill_rows(Ingest *in)
{
	MemoryContext old = MemoryContextSwitchTo(in->cxt);
	int64		rows = in->n + in->nbatch;

	/*
	 * Files as large as the rows the planner expects, but no more than
	 * twice the rows read: stale statistics must not reserve the disk, or
	 * temp_file_limit, for rows that never come.  They grow toward the
	 * rows expected, then by doubling.
	 */
	in->capacity = Min(in->capacity, Max(2 * rows, in->n + 2 * WALS_INGEST_BATCH));

	in->spilled = spill_rows_to_files(&in->user_idx, &in->item_idx, &in->ratings, in->seg,
									  in->n, rows, in->capacity);
	in->prefaulted = in->capacity;
	MemoryContextSwitchTo(old);
	ereport(DEBUG1,
			(errmsg_internal("model \"%s\": the rows read go to temporary files from row %lld on",
							 in->args->model_display, (long long) rows)));
}

/*
 * Check for a cancel, and the memory of the rows read and this process's
 * id maps; where processes read together, of the rows all of them have
 * read.  Where the training may go out of core, the rows that outgrow
 * wals.max_memory go to temporary files instead, and only the maps
 * count.  The leader shows the rows read in its progress.
 */
static void
ingest_check(Ingest *in)
{
	int64		rows = in->read + in->nbatch;
	double		rows_bytes;
	double		maps_bytes;

	CHECK_FOR_INTERRUPTS();
	if (in->all_read != NULL)
	{
		rows = (int64) pg_atomic_add_fetch_u64(in->all_read, rows - in->counted);
		in->counted = in->read + in->nbatch;
	}
	if (in->hand_over == NULL)
		wals_work_rows(rows);
	rows_bytes = (double) rows * WALS_ROW_BYTES;
	maps_bytes = (double) (in->users.bytes + in->items.bytes);
	if (in->args->may_spill)
	{
		/*
		 * Beside the leader's rows and maps: each worker's maps, about the
		 * leader's, its rows and the chunk it handed over, and the rows
		 * faulted in ahead.
		 */
		double		beside = in->helpers * (maps_bytes + 2.0 * WALS_INGEST_CHUNK_ROWS * WALS_ROW_BYTES) +
			(double) WALS_INGEST_PREFAULT_ROWS * WALS_ROW_BYTES;

		if (in->hand_over == NULL && in->spilled == NULL && wals_max_memory > 0 &&
			rows_bytes + maps_bytes + beside > (double) wals_max_memory * 1024.0)
			spill_rows(in);
		rows_bytes = 0;
	}
	wals_memory_check(rows_bytes + maps_bytes, "reading the ratings");
	MemoryContextReset(in->scratch);
	in->countdown = WALS_INGEST_CHECK_ROWS;
}

/* Raise the error of a rating that check_rating refuses. */
static pg_noinline void
reject_rating(const WalsTrainArgs *args, double value, bool isnull)
{
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("column \"%s\" given as \"rating_col\" contains a null rating",
						args->rating_col),
				 errhint("Filter null ratings out with a view, or pass rating_col => NULL to count every pair as 1.")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("column \"%s\" given as \"rating_col\" contains %s rating %g",
					args->rating_col,
					isfinite(value) ? "the out-of-range" : "the non-finite", value),
			 errhint("Ratings must be finite real numbers; filter the others out with a view.")));
}

static inline int64
id_value(WalsValueKind kind, Datum value)
{
	switch (kind)
	{
		case WALS_VALUE_INT2:
			return DatumGetInt16(value);
		case WALS_VALUE_INT4:
			return DatumGetInt32(value);
		default:
			return DatumGetInt64(value);
	}
}

/* numeric_float8 allocates, so it runs in the scratch context. */
static pg_noinline double
numeric_rating(Ingest *in, Datum value)
{
	MemoryContext old = MemoryContextSwitchTo(in->scratch);
	double		r = DatumGetFloat8(DirectFunctionCall1(numeric_float8, value));

	MemoryContextSwitchTo(old);
	return r;
}

/* The rating as the ::float8 cast of the SPI path would give it. */
static inline double
rating_value(Ingest *in, Datum value)
{
	switch (in->layout.kind[ROW_RATING])
	{
		case WALS_VALUE_INT2:
			return DatumGetInt16(value);
		case WALS_VALUE_INT4:
			return DatumGetInt32(value);
		case WALS_VALUE_INT8:
			return (double) DatumGetInt64(value);
		case WALS_VALUE_FLOAT4:
			return DatumGetFloat4(value);
		case WALS_VALUE_FLOAT8:
			return DatumGetFloat8(value);
		case WALS_VALUE_NUMERIC:
			break;
	}
	return numeric_rating(in, value);
}

/*
 * Check one rating and return it as the float the model uses.  One test
 * passes every good rating: comparisons with NaN are false, so a NaN fails
 * the range check as well.
 */
static inline float
check_rating(Ingest *in, Datum value, bool isnull)
{
	double		r;

	if (unlikely(isnull))
		reject_rating(in->args, 0, true);
	r = rating_value(in, value);
	if (unlikely(!wals_rating_ok(r)))
		reject_rating(in->args, r, false);
	return (float) r;
}

/*
 * Add one row, its values in ROW_* order, to the batch; its ids are mapped
 * when the batch is full.  Inlined into the scan's loop, where the compiler
 * had made it a call a row: at 100M ratings with one worker the read took
 * 3.49 to 4.00 s, where it took 3.52 to 4.23 s (five reads of each,
 * alternated).
 */
static pg_attribute_always_inline void
ingest_row(Ingest *in, const Datum *values, const bool *nulls)
{
	const RowLayout *lay = &in->layout;
	int			k = in->nbatch;

	if (--in->countdown <= 0)
		ingest_check(in);
	if (nulls[ROW_USER] || nulls[ROW_ITEM])
	{
		in->null_ids++;
		return;
	}
	in->ratings[in->n + k] = !lay->has_rating ? 1.0f :
		check_rating(in, values[ROW_RATING], nulls[ROW_RATING]);
	in->users.pending[k] = id_value(lay->kind[ROW_USER], values[ROW_USER]);
	in->items.pending[k] = id_value(lay->kind[ROW_ITEM], values[ROW_ITEM]);
	if (++in->nbatch == WALS_INGEST_BATCH)
		wals_ingest_flush(in);
}

/*
 * The attribute number and kind of a column the caller may SELECT, or false
 * when the column is missing, of another type, or not granted.
 */
static bool
readable_column(Relation rel, const char *name, bool rel_granted,
				bool is_id, AttrNumber *attnum, WalsValueKind *kind)
{
	Oid			relid = RelationGetRelid(rel);

	*attnum = get_attnum(relid, name);
	if (*attnum <= 0)
		return false;
	if (!wals_value_kind(TupleDescAttr(RelationGetDescr(rel), *attnum - 1)->atttypid, kind))
		return false;
	if (is_id && !WALS_VALUE_IS_ID(*kind))
		return false;
	return rel_granted ||
		pg_attribute_aclcheck(relid, *attnum, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
}

/*
 * Whether the SELECT of the SPI path would be a plain sequential scan of
 * heap rel showing every row the snapshot sees, with no error: then the
 * layout is filled in for a direct scan.  Every condition errs toward SPI.
 * Where Citus is installed, a distributed table's rows are on its workers
 * and the local relation is an empty shell that Citus's planner reads
 * through: only a SELECT sees them.
 */
static bool
can_scan_directly(const WalsTrainArgs *args, Relation rel, RowLayout *lay)
{
	Oid			relid = RelationGetRelid(rel);
	char		relkind = rel->rd_rel->relkind;
	bool		rel_granted;

	if (relkind != RELKIND_RELATION &&
		!(relkind == RELKIND_MATVIEW && RelationIsPopulated(rel)))
		return false;
	if (rel->rd_tableam != GetHeapamTableAmRoutine() || RELATION_IS_OTHER_TEMP(rel) ||
		has_subclass(relid) || !ActiveSnapshotSet())
		return false;
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED ||
		OidIsValid(get_extension_oid("citus", true)))
		return false;

	rel_granted = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
	if (!readable_column(rel, args->user_col, rel_granted, true,
						 &lay->attnum[ROW_USER], &lay->kind[ROW_USER]) ||
		!readable_column(rel, args->item_col, rel_granted, true,
						 &lay->attnum[ROW_ITEM], &lay->kind[ROW_ITEM]))
		return false;
	lay->has_rating = args->rating_col != NULL;
	if (lay->has_rating &&
		!readable_column(rel, args->rating_col, rel_granted, false,
						 &lay->attnum[ROW_RATING], &lay->kind[ROW_RATING]))
		return false;
	return true;
}

/*
 * The planner's estimate of the rows, with a margin for those added since
 * it was made, but never more than the pages of rel can hold: an estimate
 * too low only costs a move of the rows, one too high only address space.
 */
double
wals_ingest_estimate(Relation rel)
{
	BlockNumber pages;
	double		tuples;
	double		allvisfrac;

	estimate_rel_size(rel, NULL, &pages, &tuples, &allvisfrac);
	return Min(tuples * 1.1 + WALS_INGEST_BATCH,
			   (double) RelationGetNumberOfBlocks(rel) * MaxHeapTuplesPerPage);
}

/*
 * The attributes of the columns used, and their offsets in a tuple's data,
 * or false when one is not at a fixed offset: then each is found by
 * heap_getattr.  A column at a fixed offset has one once a tuple has been
 * read up to it (nocachegetattr caches it in the descriptor).
 */
static bool
fixed_offsets(const RowLayout *lay, TupleDesc desc, const WalsColumnAttr **att, int *off,
			  int *natts)
{
	int			columns = lay->has_rating ? ROW_VALUES : ROW_RATING;

	*natts = 0;
	for (int c = 0; c < columns; c++)
	{
		att[c] = wals_column_attr(desc, lay->attnum[c] - 1);
		if (att[c]->attcacheoff < 0 || !att[c]->attbyval)
			return false;
		off[c] = att[c]->attcacheoff;
		*natts = Max(*natts, lay->attnum[c]);
	}
	return true;
}

/*
 * Tuples are read in place in the pinned page, and only the columns used
 * are fetched from them, at offsets cached in the descriptor when the
 * columns before are of fixed width: no copy, no slot, no other column.
 * A tuple without nulls that has all the columns takes them at those
 * offsets directly, as fastgetattr would, without a call a column.
 */
void
wals_ingest_scan(Ingest *in, Relation rel, TableScanDesc scan)
{
	const RowLayout *lay = &in->layout;
	TupleDesc	desc = RelationGetDescr(rel);
	HeapTuple	tuple;
	Datum		values[ROW_VALUES] = {0};
	bool		nulls[ROW_VALUES] = {false};
	const WalsColumnAttr *att[ROW_VALUES] = {NULL};
	int			off[ROW_VALUES] = {0};
	int			natts = 0;
	bool		fixed = false;

	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		HeapTupleHeader td = tuple->t_data;

		if (fixed && !HeapTupleHasNulls(tuple) && HeapTupleHeaderGetNatts(td) >= natts)
		{
			char	   *tp = (char *) td + td->t_hoff;

			values[ROW_USER] = fetchatt(att[ROW_USER], tp + off[ROW_USER]);
			values[ROW_ITEM] = fetchatt(att[ROW_ITEM], tp + off[ROW_ITEM]);
			if (lay->has_rating)
				values[ROW_RATING] = fetchatt(att[ROW_RATING], tp + off[ROW_RATING]);
			nulls[ROW_USER] = nulls[ROW_ITEM] = nulls[ROW_RATING] = false;
		}
		else
		{
			values[ROW_USER] = heap_getattr(tuple, lay->attnum[ROW_USER], desc,
											&nulls[ROW_USER]);
			values[ROW_ITEM] = heap_getattr(tuple, lay->attnum[ROW_ITEM], desc,
											&nulls[ROW_ITEM]);
			if (lay->has_rating)
				values[ROW_RATING] = heap_getattr(tuple, lay->attnum[ROW_RATING], desc,
												  &nulls[ROW_RATING]);
			if (!fixed)
				fixed = fixed_offsets(lay, desc, att, off, &natts);
		}
		ingest_row(in, values, nulls);
	}
}

static bool
receive_row(TupleTableSlot *slot, DestReceiver *self)
{
	Ingest	   *in = ((IngestReceiver *) self)->ingest;

	slot_getallattrs(slot);
	ingest_row(in, slot->tts_values, slot->tts_isnull);
	return true;
}

static void
receive_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
receive_shutdown(DestReceiver *self)
{
}

static void
receive_destroy(DestReceiver *self)
{
}

/*
 * The SELECT runs with the caller's snapshot (read-only SPI), privileges and
 * policies; its casts give the layout of the SPI path.
 */
static void
scan_with_spi(Ingest *in)
{
	const WalsTrainArgs *args = in->args;
	StringInfoData query;
	IngestReceiver receiver = {0};
	SPIExecuteOptions options = {0};
	int			ret;

	initStringInfo(&query);
	appendStringInfo(&query, "SELECT (%s)::pg_catalog.int8, (%s)::pg_catalog.int8",
					 quote_identifier(args->user_col), quote_identifier(args->item_col));
	if (args->rating_col != NULL)
		appendStringInfo(&query, ", (%s)::pg_catalog.float8", quote_identifier(args->rating_col));
	appendStringInfo(&query, " FROM %s", args->source_name);

	in->layout.has_rating = args->rating_col != NULL;
	in->layout.kind[ROW_USER] = WALS_VALUE_INT8;
	in->layout.kind[ROW_ITEM] = WALS_VALUE_INT8;
	in->layout.kind[ROW_RATING] = WALS_VALUE_FLOAT8;

	receiver.pub.receiveSlot = receive_row;
	receiver.pub.rStartup = receive_startup;
	receiver.pub.rShutdown = receive_shutdown;
	receiver.pub.rDestroy = receive_destroy;
	receiver.pub.mydest = DestNone;
	receiver.ingest = in;
	options.read_only = true;
	options.dest = &receiver.pub;

	ret = wals_sql_extended(query.data, &options);
	if (ret < 0)
		elog(ERROR, "wals: could not run \"%s\": %s", query.data,
			 SPI_result_code_string(ret));
	pfree(query.data);
}

/* Read every row of the source, by a direct scan where it is safe. */
static void
read_source(Ingest *in)
{
	const WalsTrainArgs *args = in->args;
	char		relkind = get_rel_relkind(args->source);

	if (relkind == RELKIND_RELATION || relkind == RELKIND_MATVIEW)
	{
		Relation	rel = table_open(args->source, AccessShareLock);

		if (can_scan_directly(args, rel, &in->layout))
		{
			if (!wals_ingest_parallel(in, rel))
			{
				TableScanDesc scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);

				wals_ingest_alloc(in, wals_ingest_estimate(rel), false);
				wals_ingest_scan(in, rel, scan);
				table_endscan(scan);
			}
			table_close(rel, NoLock);
			wals_ingest_flush(in);
			return;
		}
		table_close(rel, NoLock);
	}
	wals_ingest_alloc(in, WALS_INGEST_INITIAL_ROWS, false);
	scan_with_spi(in);
	wals_ingest_flush(in);
}

/*
 * The distinct ids of one side in increasing order, and at *rank the rank
 * of each provisional index, for its rows to be renumbered; the map is
 * freed.  A source with no rows, which a shard may read, never gave its
 * map a buffer.
 */
static int64 *
side_rank(Ingest *in, IdSide *side, int32 **rank, int64 *count)
{
	size_t		nids = side->map.count;
	int64	   *ids = wals_alloc_huge(in->cxt, nids * sizeof(int64));

	*rank = wals_alloc_huge(in->cxt, nids * sizeof(int32));
	wals_idmap_rank(&side->map, ids, *rank);
	if (side->buffer != NULL)
		pfree(side->buffer);
	side->buffer = NULL;
	side->bytes = 0;
	CHECK_FOR_INTERRUPTS();
	*count = nids;
	return ids;
}

/* Start reading in the current memory context, nothing read yet. */
void
wals_ingest_begin(Ingest *in, const WalsTrainArgs *args)
{
	memset(in, 0, sizeof(*in));
	in->args = args;
	in->cxt = CurrentMemoryContext;
	in->scratch = AllocSetContextCreate(in->cxt, "wals ingest scratch", ALLOCSET_SMALL_SIZES);
	in->countdown = WALS_INGEST_CHECK_ROWS;
	side_init(&in->users, "mapping user ids");
	side_init(&in->items, "mapping item ids");
}

/*
 * Read the ratings the arguments describe into raw, with dense indices in
 * id order.  Must run inside an SPI connection.  Errors on a null rating, one
 * that is not finite as a real, and a source with no usable rows; rows with
 * a null id are skipped and counted in a NOTICE.
 */
void
wals_ingest(const WalsTrainArgs *args, WalsRatings *raw, bool may_be_empty)
{
	Ingest		in;
	int32	   *user_rank;
	int32	   *item_rank;

	wals_ingest_begin(&in, args);
	wals_work_phase(WALS_PHASE_READING, -1);
	read_source(&in);
	MemoryContextDelete(in.scratch);

	if (in.null_ids > 0)
		ereport(NOTICE,
				(errmsg("skipped %lld rows of \"%s\" with a null user or item id",
						(long long) in.null_ids, args->source_display)));
	if (in.n == 0 && !may_be_empty)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" given as \"source\" has no ratings", args->source_display),
				 errhint("Training needs at least one row with a user and an item id.")));

	memset(raw, 0, sizeof(*raw));
	raw->n = in.n;
	raw->null_ids = in.null_ids;
	raw->user_ids = side_rank(&in, &in.users, &user_rank, &raw->nusers);
	raw->item_ids = side_rank(&in, &in.items, &item_rank, &raw->nitems);
	raw->users = in.user_idx;
	raw->items = in.item_idx;
	raw->ratings = in.ratings;
	raw->spilled = in.spilled;
	memcpy(raw->seg, in.seg, sizeof(raw->seg));
	if (in.seg[WALS_ROWS_USERS] != NULL)
	{
		/* the room the estimate left past the rows, which the segments back */
		wals_release_shared(in.user_idx + in.n, (in.capacity - in.n) * sizeof(int32));
		wals_release_shared(in.item_idx + in.n, (in.capacity - in.n) * sizeof(int32));
		wals_release_shared(in.ratings + in.n, (in.capacity - in.n) * sizeof(float));
	}
	/* shared rows are renumbered, and coded, with the workers */
	if (!wals_rows_prepare(args, raw, user_rank, item_rank, true))
	{
		wals_idmap_renumber(raw->users, raw->n, user_rank);
		wals_idmap_renumber(raw->items, raw->n, item_rank);
	}
	pfree(user_rank);
	pfree(item_rank);
}

/*
 * Move raw's rows into temporary files, for a training that goes out of
 * core once it has read them.
 */
void
wals_ratings_spill(WalsRatings *raw)
{
	if (raw->spilled == NULL)
		raw->spilled = spill_rows_to_files(&raw->users, &raw->items, &raw->ratings, raw->seg,
										   raw->n, raw->n, raw->n);
}

/* Where raw keeps the pointer to its array which. */
void	  **
wals_ratings_array(WalsRatings *raw, WalsRowArray which)
{
	return which == WALS_ROWS_USERS ? (void **) &raw->users :
		which == WALS_ROWS_ITEMS ? (void **) &raw->items : (void **) &raw->ratings;
}

/* Free one of raw's three arrays, from memory or with its file. */
void
wals_ratings_free(WalsRatings *raw, WalsRowArray which)
{
	void	  **p = wals_ratings_array(raw, which);

	if (raw->spilled != NULL)
		wals_temp_free(&raw->spilled[which]);
	else
		free_array(*p, &raw->seg[which]);
	*p = NULL;
}

/*
 * Room for raw's codes, in memory: shared where its rows are, for the
 * build's workers to read.
 */
void
wals_ratings_alloc_codes(WalsRatings *raw)
{
	if (raw->seg[WALS_ROWS_USERS] != NULL)
		raw->codes_seg = dsm_create(Max(raw->n, 1), DSM_CREATE_NULL_IF_MAXSEGMENTS);
	raw->codes = raw->codes_seg != NULL ? dsm_segment_address(raw->codes_seg) :
		MemoryContextAllocHuge(CurrentMemoryContext, Max(raw->n, 1));
}

/* Free raw's codes, if it has any. */
void
wals_ratings_free_codes(WalsRatings *raw)
{
	free_array(raw->codes, &raw->codes_seg);
	raw->codes = NULL;
}


/* The bytes of raw's rows and ids, as wals_ratings_copy copies them. */
double
wals_ratings_bytes(const WalsRatings *raw)
{
	return (double) raw->n * (2 * sizeof(int32) + sizeof(float)) +
		(double) (raw->nusers + raw->nitems) * sizeof(int64);
}

/*
 * A copy of from's rows and ids into to, in cxt, whose arrays
 * wals_build_matrices may consume as it consumes the ones read.
 */
void
wals_ratings_copy(const WalsRatings *from, WalsRatings *to, MemoryContext cxt)
{
	memset(to, 0, sizeof(*to));
	to->n = from->n;
	to->nusers = from->nusers;
	to->nitems = from->nitems;
	to->null_ids = from->null_ids;
	to->users = wals_alloc_huge(cxt, from->n * sizeof(int32));
	to->items = wals_alloc_huge(cxt, from->n * sizeof(int32));
	to->ratings = wals_alloc_huge(cxt, from->n * sizeof(float));
	to->user_ids = wals_alloc_huge(cxt, from->nusers * sizeof(int64));
	to->item_ids = wals_alloc_huge(cxt, from->nitems * sizeof(int64));
	wals_copy_bytes(to->users, from->users, from->n * sizeof(int32));
	wals_copy_bytes(to->items, from->items, from->n * sizeof(int32));
	wals_copy_bytes(to->ratings, from->ratings, from->n * sizeof(float));
	wals_copy_bytes(to->user_ids, from->user_ids, from->nusers * sizeof(int64));
	wals_copy_bytes(to->item_ids, from->item_ids, from->nitems * sizeof(int64));
}
