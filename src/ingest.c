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
 * from two growable hash maps as they arrive, and only once everything is
 * read are the few distinct ids sorted and the rows renumbered in place, so
 * that dense indices follow id order (src/core/idmap.c).
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "wals.h"

/*
 * Rows between two checks for a cancel and of wals.max_memory: a few
 * milliseconds of reading.
 */
#define WALS_INGEST_CHECK_ROWS		8192

/* Starting sizes; both grow by doubling. */
#define WALS_INGEST_INITIAL_ROWS	65536
#define WALS_IDMAP_INITIAL_SLOTS	1024

/* How a column's datums become numbers. */
typedef enum ValueKind
{
	VALUE_INT2,
	VALUE_INT4,
	VALUE_INT8,
	VALUE_FLOAT4,
	VALUE_FLOAT8,
	VALUE_NUMERIC
} ValueKind;

/* Where the three values of a row are, as attribute numbers from 1. */
typedef struct RowLayout
{
	AttrNumber	user_att;
	AttrNumber	item_att;
	AttrNumber	rating_att;		/* 0: no rating column, every pair counts 1 */
	AttrNumber	last_att;		/* the highest of the three */
	ValueKind	user_kind;
	ValueKind	item_kind;
	ValueKind	rating_kind;
} RowLayout;

/*
 * One side's id map.  The last id is remembered because tables are often
 * loaded or clustered by user, and a repeated id then costs no probe.
 */
typedef struct IdSide
{
	WalsIdMap	map;
	int64		last_id;
	int32		last_index;		/* -1 until the first id */
	const char *what;			/* for errors */
} IdSide;

/* Everything read so far. */
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
	float	   *ratings;
	int64		n;
	int64		capacity;
	int64		null_ids;
	int			countdown;		/* rows until the next check */
} Ingest;

/* The executor's receiver of the SPI path. */
typedef struct IngestReceiver
{
	DestReceiver pub;
	Ingest	   *ingest;
} IngestReceiver;

static void *
alloc_huge(MemoryContext cxt, size_t bytes)
{
	return MemoryContextAllocHuge(cxt, Max(bytes, 1));
}

static void
side_init(Ingest *in, IdSide *side, const char *what)
{
	WalsIdSlot *slots = alloc_huge(in->cxt, WALS_IDMAP_INITIAL_SLOTS * sizeof(WalsIdSlot));

	wals_report_core_status(wals_idmap_init(&side->map, slots, WALS_IDMAP_INITIAL_SLOTS),
							what, -1);
	side->last_index = -1;
	side->last_id = 0;
	side->what = what;
}

/* Rehash into twice the slots; the old table is freed at once. */
static void
side_grow(Ingest *in, IdSide *side)
{
	size_t		nslots = side->map.nslots * 2;
	WalsIdMap	bigger;
	WalsIdSlot *slots;

	if (nslots > MaxAllocHugeSize / sizeof(WalsIdSlot))
		wals_report_core_status(WALS_ETOOBIG, side->what, -1);
	slots = alloc_huge(in->cxt, nslots * sizeof(WalsIdSlot));
	wals_report_core_status(wals_idmap_init(&bigger, slots, nslots), side->what, -1);
	wals_report_core_status(wals_idmap_rehash(&side->map, &bigger), side->what, -1);
	pfree(side->map.slots);
	side->map = bigger;
}

static inline int32
side_index(Ingest *in, IdSide *side, int64 id)
{
	int32		index;

	if (id == side->last_id && side->last_index >= 0)
		return side->last_index;
	wals_report_core_status(wals_idmap_insert(&side->map, id, &index), side->what, -1);
	if (wals_idmap_full(&side->map))
		side_grow(in, side);
	side->last_id = id;
	side->last_index = index;
	return index;
}

/*
 * The arrays grow by doubling with repalloc, which for blocks this large is
 * a realloc the C library serves by remapping pages, not by copying them;
 * pages past the last row are never touched, so they cost no memory.
 */
static void
grow_rows(Ingest *in)
{
	int64		capacity = in->capacity * 2;

	if ((Size) capacity * sizeof(int32) > MaxAllocHugeSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("relation \"%s\" given as \"source\" has too many ratings",
						in->args->source_display),
				 errhint("Train on a view that selects fewer rows.")));
	in->user_idx = repalloc_huge(in->user_idx, capacity * sizeof(int32));
	in->item_idx = repalloc_huge(in->item_idx, capacity * sizeof(int32));
	in->ratings = repalloc_huge(in->ratings, capacity * sizeof(float));
	in->capacity = capacity;
}

/* Memory held by the rows read and the id maps. */
static double
ingest_bytes(const Ingest *in)
{
	return (double) in->n * (2 * sizeof(int32) + sizeof(float)) +
		(double) (in->users.map.nslots + in->items.map.nslots) * sizeof(WalsIdSlot);
}

static void
ingest_check(Ingest *in)
{
	CHECK_FOR_INTERRUPTS();
	wals_memory_check(ingest_bytes(in), "reading the ratings");
	MemoryContextReset(in->scratch);
	in->countdown = WALS_INGEST_CHECK_ROWS;
}

static void
bad_rating(const WalsTrainArgs *args, double value, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("column \"%s\" given as \"rating_col\" contains %s rating %g",
					args->rating_col, why, value),
			 errhint("%s", args->params.feedback == WALS_IMPLICIT ?
					 "Implicit feedback needs finite ratings greater than or equal to zero; filter the others out with a view." :
					 "Ratings must be finite; filter the others out with a view.")));
}

static inline int64
id_value(ValueKind kind, Datum value)
{
	switch (kind)
	{
		case VALUE_INT2:
			return DatumGetInt16(value);
		case VALUE_INT4:
			return DatumGetInt32(value);
		default:
			return DatumGetInt64(value);
	}
}

/* The rating as the ::float8 cast of the SPI path would give it. */
static double
rating_value(Ingest *in, Datum value)
{
	MemoryContext old;
	double		r;

	switch (in->layout.rating_kind)
	{
		case VALUE_INT2:
			return DatumGetInt16(value);
		case VALUE_INT4:
			return DatumGetInt32(value);
		case VALUE_INT8:
			return (double) DatumGetInt64(value);
		case VALUE_FLOAT4:
			return DatumGetFloat4(value);
		case VALUE_FLOAT8:
			return DatumGetFloat8(value);
		case VALUE_NUMERIC:
			break;
	}
	old = MemoryContextSwitchTo(in->scratch);
	r = DatumGetFloat8(DirectFunctionCall1(numeric_float8, value));
	MemoryContextSwitchTo(old);
	return r;
}

/* Check one rating and return it as the float the model uses. */
static float
check_rating(Ingest *in, Datum value, bool isnull)
{
	const WalsTrainArgs *args = in->args;
	double		r;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("column \"%s\" given as \"rating_col\" contains a null rating",
						args->rating_col),
				 errhint("Filter null ratings out with a view, or pass rating_col => NULL to count every pair as 1.")));
	r = rating_value(in, value);
	if (!isfinite(r))
		bad_rating(args, r, "the non-finite");
	if (fabs(r) > FLT_MAX)
		bad_rating(args, r, "the out-of-range");
	if (r < 0 && args->params.feedback == WALS_IMPLICIT)
		bad_rating(args, r, "the negative");
	return (float) r;
}

/* Add one row whose values are at the layout's attributes of values/nulls. */
static inline void
ingest_row(Ingest *in, const Datum *values, const bool *nulls)
{
	const RowLayout *lay = &in->layout;
	int64		n = in->n;

	if (--in->countdown <= 0)
		ingest_check(in);
	if (nulls[lay->user_att - 1] || nulls[lay->item_att - 1])
	{
		in->null_ids++;
		return;
	}
	if (n == in->capacity)
		grow_rows(in);
	in->ratings[n] = lay->rating_att == 0 ? 1.0f :
		check_rating(in, values[lay->rating_att - 1], nulls[lay->rating_att - 1]);
	in->user_idx[n] = side_index(in, &in->users,
								 id_value(lay->user_kind, values[lay->user_att - 1]));
	in->item_idx[n] = side_index(in, &in->items,
								 id_value(lay->item_kind, values[lay->item_att - 1]));
	in->n = n + 1;
}

/*
 * How a column of one of the accepted types is read, through any domain
 * over it (a domain's datums are its base type's); false for anything else.
 */
static bool
value_kind(Oid type, ValueKind *kind)
{
	switch (getBaseType(type))
	{
		case INT2OID:
			*kind = VALUE_INT2;
			return true;
		case INT4OID:
			*kind = VALUE_INT4;
			return true;
		case INT8OID:
			*kind = VALUE_INT8;
			return true;
		case FLOAT4OID:
			*kind = VALUE_FLOAT4;
			return true;
		case FLOAT8OID:
			*kind = VALUE_FLOAT8;
			return true;
		case NUMERICOID:
			*kind = VALUE_NUMERIC;
			return true;
		default:
			return false;
	}
}

/*
 * The attribute number and kind of a column the caller may SELECT, or false
 * when the column is missing, of another type, or not granted.
 */
static bool
readable_column(Relation rel, const char *name, bool rel_granted,
				bool is_id, AttrNumber *attnum, ValueKind *kind)
{
	Oid			relid = RelationGetRelid(rel);

	*attnum = get_attnum(relid, name);
	if (*attnum <= 0)
		return false;
	if (!value_kind(TupleDescAttr(RelationGetDescr(rel), *attnum - 1)->atttypid, kind))
		return false;
	if (is_id && *kind != VALUE_INT2 && *kind != VALUE_INT4 && *kind != VALUE_INT8)
		return false;
	return rel_granted ||
		pg_attribute_aclcheck(relid, *attnum, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
}

/*
 * Whether the SELECT of the SPI path would be a plain sequential scan of rel
 * showing every row the snapshot sees, with no error: then the layout is
 * filled in for a direct scan.  Every condition errs toward SPI.
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
	if (RELATION_IS_OTHER_TEMP(rel) || has_subclass(relid) || !ActiveSnapshotSet())
		return false;
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;

	rel_granted = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
	if (!readable_column(rel, args->user_col, rel_granted, true,
						 &lay->user_att, &lay->user_kind) ||
		!readable_column(rel, args->item_col, rel_granted, true,
						 &lay->item_att, &lay->item_kind))
		return false;
	lay->rating_att = 0;
	if (args->rating_col != NULL &&
		!readable_column(rel, args->rating_col, rel_granted, false,
						 &lay->rating_att, &lay->rating_kind))
		return false;
	lay->last_att = Max(Max(lay->user_att, lay->item_att), lay->rating_att);
	return true;
}

/*
 * The scan asks the table for only the leading attributes it needs, so
 * later columns are never deformed.
 */
static void
scan_directly(Ingest *in, Relation rel)
{
	TableScanDesc scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
	TupleTableSlot *slot = table_slot_create(rel, NULL);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		slot_getsomeattrs(slot, in->layout.last_att);
		ingest_row(in, slot->tts_values, slot->tts_isnull);
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
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

	in->layout.user_att = 1;
	in->layout.item_att = 2;
	in->layout.rating_att = args->rating_col != NULL ? 3 : 0;
	in->layout.user_kind = VALUE_INT8;
	in->layout.item_kind = VALUE_INT8;
	in->layout.rating_kind = VALUE_FLOAT8;

	receiver.pub.receiveSlot = receive_row;
	receiver.pub.rStartup = receive_startup;
	receiver.pub.rShutdown = receive_shutdown;
	receiver.pub.rDestroy = receive_destroy;
	receiver.pub.mydest = DestNone;
	receiver.ingest = in;
	options.read_only = true;
	options.dest = &receiver.pub;

	ret = SPI_execute_extended(query.data, &options);
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
			scan_directly(in, rel);
			table_close(rel, NoLock);
			return;
		}
		table_close(rel, NoLock);
	}
	scan_with_spi(in);
}

/*
 * The distinct ids of one side in increasing order, and its rows renumbered
 * from provisional indices to ranks; the map is freed.
 */
static int64 *
side_finish(Ingest *in, IdSide *side, int32 *index, int64 *count)
{
	size_t		nids = side->map.count;
	int64	   *ids = alloc_huge(in->cxt, nids * sizeof(int64));
	int32	   *rank = alloc_huge(in->cxt, nids * sizeof(int32));

	wals_idmap_rank(&side->map, ids, rank);
	pfree(side->map.slots);
	CHECK_FOR_INTERRUPTS();
	wals_idmap_renumber(index, in->n, rank);
	pfree(rank);
	*count = nids;
	return ids;
}

/*
 * Read the ratings the arguments describe into raw, with dense indices in
 * id order.  Must run inside an SPI connection.  Errors on a null or
 * non-finite rating, a negative implicit rating and a source with no usable
 * rows; rows with a null id are skipped and counted in a NOTICE.
 */
void
wals_ingest(const WalsTrainArgs *args, WalsRatings *raw)
{
	Ingest		in = {0};

	in.args = args;
	in.cxt = CurrentMemoryContext;
	in.scratch = AllocSetContextCreate(in.cxt, "wals ingest scratch", ALLOCSET_SMALL_SIZES);
	in.capacity = WALS_INGEST_INITIAL_ROWS;
	in.user_idx = alloc_huge(in.cxt, in.capacity * sizeof(int32));
	in.item_idx = alloc_huge(in.cxt, in.capacity * sizeof(int32));
	in.ratings = alloc_huge(in.cxt, in.capacity * sizeof(float));
	in.countdown = WALS_INGEST_CHECK_ROWS;
	side_init(&in, &in.users, "mapping user ids");
	side_init(&in, &in.items, "mapping item ids");

	read_source(&in);
	MemoryContextDelete(in.scratch);

	if (in.null_ids > 0)
		ereport(NOTICE,
				(errmsg("skipped %lld rows of \"%s\" with a null user or item id",
						(long long) in.null_ids, args->source_display)));
	if (in.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" given as \"source\" has no ratings", args->source_display),
				 errhint("Training needs at least one row with a user and an item id.")));

	memset(raw, 0, sizeof(*raw));
	raw->n = in.n;
	raw->null_ids = in.null_ids;
	raw->user_ids = side_finish(&in, &in.users, in.user_idx, &raw->nusers);
	raw->item_ids = side_finish(&in, &in.items, in.item_idx, &raw->nitems);
	raw->users = in.user_idx;
	raw->items = in.item_idx;
	raw->ratings = in.ratings;
}
