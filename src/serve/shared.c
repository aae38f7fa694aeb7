/*
 * shared.c
 *	  The item side of one version of a model, built once per server into a
 *	  segment of dynamic shared memory that every backend serving it maps.
 *
 * What a call scores against (the item ids, their float factors, YᵀY and
 * the scoring engine's index, in one area laid out by offsets) depends only
 * on the model's version: the rows a training wrote, read as the model's
 * owner (roles.c).  So one copy serves every backend.  The training that
 * writes a version builds it (store.c, through wals_serve_preload), and
 * every other backend maps it at its first call: a new connection, or the
 * first call after a retraining commits, costs a lookup and a mapping, not
 * a read of the table, a Gram and an index.
 *
 * Design: a segment of dynamic shared memory per model version, rather
 * than relation pages (an index access method, or a fork).  The scoring
 * kernels read the index as one contiguous array (blocks of 16 items in
 * order of norm, then the maps of positions) and rescore from the float
 * rows wherever the candidates fall; through shared_buffers every query
 * would pin a buffer per page and the kernels would be rewritten to walk
 * pages.  A segment keeps the kernels, the layout and their speed as they
 * are (wals_score_index_remap, which parallel wals_evaluate already uses),
 * and costs what the pages would not: it is derived data, gone at a
 * restart, built once per server (a standby's first reader builds its
 * own), and it needs room in /dev/shm.  Where there is none, or the item
 * table forces row security on its owner (what the owner sees may then
 * change with the policies' functions), the backend builds a copy of its
 * own, as before; and so does a session that sets wals.shared_items off,
 * which then sees the edits made to the item table since its version was
 * trained, which the shared copy does not.
 *
 * Finding a segment: a file per published version in pg_stat_tmp, named
 * by database, item table and version, holds the segment's handle and a
 * random token that the segment's header repeats, so that a handle left by
 * an earlier run of the server (segments die with it, files do not) or
 * reused since is never taken for the model's.  This needs nothing in
 * shared_preload_libraries, on PostgreSQL 15 as on 18.  Two backends that
 * miss the same version build it one after the other, on a lock of the
 * item table's OID held only while building (the second then finds the
 * first's); a backend that finds the file takes no lock at all.
 *
 * Lifetime: a published segment is pinned, so that it outlives its
 * builder.  The first backend that loads a version committed by another
 * transaction retires the files of the model's older versions: it claims
 * each by renaming it, then unpins its segment, which lives on until the
 * last backend mapping it lets it go (a call in flight finishes on the old
 * version; a backend maps at most WALS_SERVE_MODELS models).  A version no
 * catalog row will name (its training rolled back) is older than the next
 * one loaded, and goes then; the files of item tables that no longer exist
 * (a model dropped) go at the next publication in the database.
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/dsm_impl.h"
#include "storage/fd.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "wals_serve.h"

#define ITEMS_MAGIC 0x57414c53	/* "WALS" */
#define ITEMS_LAYOUT 1

/* The head of an area; the sections follow at the offsets it gives. */
typedef struct ItemsHeader
{
	uint32		magic;			/* written last, once the area is whole */
	uint32		layout;
	uint64		token;			/* also in the registry file */
	Oid			dbid;
	Oid			item_rel;
	int64		version;
	int64		nitems;
	int32		factors;
	int32		groups;			/* of the index, see wals_score.h */
	int32		usable;
	float		max_norm;
	Size		ids;			/* offsets from the header */
	Size		Y;
	Size		G;
	Size		blocks;
	Size		total;
} ItemsHeader;

/* What a registry file holds. */
typedef struct ItemsEntry
{
	dsm_handle	handle;
	uint64		token;
} ItemsEntry;

/* The layout of n items of f factors. */
static void
layout(ItemsHeader *h, int64 n, int f)
{
	Size		off = sizeof(ItemsHeader);

	h->nitems = n;
	h->factors = f;
	h->ids = wals_area_section(&off, sizeof(int64) * n);
	h->Y = wals_area_section(&off, sizeof(float) * f * n);
	h->G = wals_area_section(&off, sizeof(float) * f * f);
	h->blocks = wals_area_section(&off, wals_score_index_size(n, f));
	h->total = off;
}

/* Point m's items at the area of header h. */
static void
map_area(WalsServeModel *m, const ItemsHeader *h)
{
	const char *base = (const char *) h;

	m->factors = h->factors;
	m->nitems = h->nitems;
	m->ids = (int64 *) (base + h->ids);
	m->Y = (float *) (base + h->Y);
	m->G = (float *) (base + h->G);
	memset(&m->index, 0, sizeof(m->index));
	m->index.n = h->nitems;
	m->index.f = h->factors;
	m->index.groups = h->groups;
	m->index.usable = h->usable;
	m->index.max_norm = h->max_norm;
	wals_score_index_remap(&m->index, m->Y, base + h->blocks);
}

/*
 * Fill the area of h, laid out for the rows of tuptable (item_id, factors,
 * in order of item_id), from them: ids strictly increasing, so that lookups
 * by binary search are sound whatever the table holds; factors checked as
 * factors.c checks them; then YᵀY and the index.
 */
static void
fill_area(ItemsHeader *h, SPITupleTable *tuptable, const WalsModelInfo *info)
{
	char	   *base = (char *) h;
	int64	   *ids = (int64 *) (base + h->ids);
	float	   *Y = (float *) (base + h->Y);
	float	   *G = (float *) (base + h->G);
	int			f = h->factors;
	WalsScoreIndex ix;

	for (int64 i = 0; i < h->nitems; i++)
	{
		HeapTuple	tuple = tuptable->vals[i];

		ids[i] = wals_read_id(tuple, tuptable->tupdesc, 1, info, NULL);
		if (i > 0 && ids[i] <= ids[i - 1])
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("the item factor table of model \"%s\" holds item " INT64_FORMAT " twice",
							info->display, ids[i]),
					 errhint("Train the model again with wals_train().")));
		wals_read_factors(tuple, tuptable->tupdesc, 2, f, Y + i * f, info);
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}

	/*
	 * What follows is arithmetic alone, O(items f^2) for the Gram, seconds
	 * at f = 4096, in which the core polls for a cancel; said at DEBUG1 for
	 * whoever wonders where a first call's time goes (t/023_cancel_wide.pl
	 * waits for it).
	 */
	ereport(DEBUG1,
			(errmsg("wals: read the %lld item factors of model \"%s\"; computing their Gram and index",
					(long long) h->nitems, info->display)));
	wals_zero_floats(G, (size_t) f * f);
	wals_gram_rows(Y, 0, h->nitems, f, G);
	wals_report_core_status(wals_score_index_build(&ix, Y, h->nitems, f, base + h->blocks),
							psprintf("indexing the item factors of model \"%s\"", info->display));
	h->groups = ix.groups;
	h->usable = ix.usable;
	h->max_norm = ix.max_norm;
}

/*
 * fill_area into the segment seg (NULL: private memory), which an error or
 * a cancel meanwhile drops: its mapping is the session's, not the
 * transaction's, so nothing else would.
 */
static void
fill_or_drop(ItemsHeader *h, SPITupleTable *tuptable, const WalsModelInfo *info,
			 dsm_segment *seg)
{
	PG_TRY();
	{
		fill_area(h, tuptable, info);
	}
	PG_CATCH();
	{
		if (seg != NULL)
			dsm_detach(seg);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* The registry file of a version of the item table relid. */
static char *
entry_path(Oid relid, int64 version)
{
	return psprintf("%s/wals.%u.%u." INT64_FORMAT, PG_STAT_TMP_DIR, MyDatabaseId, relid,
					version);
}

static bool
read_entry(const char *path, ItemsEntry *entry)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	bool		ok;

	if (fd < 0)
		return false;
	ok = read(fd, entry, sizeof(*entry)) == sizeof(*entry);
	CloseTransientFile(fd);
	return ok;
}

/*
 * The segments this backend maps for the session, each with the number of
 * cache entries that use it: a process maps a segment once, and an entry
 * reloaded for the same version (its item table's definition changed)
 * uses the mapping of the entry it replaces, which a call running outside
 * may still hold.
 */
typedef struct Mapping
{
	dsm_segment *seg;
	int			refs;
} Mapping;

static List *mappings = NIL;

static Mapping *
mapping_of(dsm_segment *seg)
{
	ListCell   *lc;

	foreach(lc, mappings)
	{
		Mapping    *m = lfirst(lc);

		if (m->seg == seg)
			return m;
	}
	return NULL;
}

/* One more entry uses seg, which is mapped for the session. */
static void
mapping_use(dsm_segment *seg)
{
	Mapping    *m = mapping_of(seg);

	if (m == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		m = palloc(sizeof(Mapping));
		m->seg = seg;
		m->refs = 0;
		mappings = lappend(mappings, m);
		MemoryContextSwitchTo(old);
	}
	m->refs++;
}

/* Whether seg, mapped here, holds what entry says (key, if not NULL, its version). */
static bool
holds(dsm_segment *seg, const ItemsEntry *entry, const ItemsHeader *key)
{
	const ItemsHeader *h = dsm_segment_address(seg);

	return dsm_segment_map_length(seg) >= sizeof(ItemsHeader) &&
		h->magic == ITEMS_MAGIC && h->layout == ITEMS_LAYOUT && h->token == entry->token &&
		h->total <= dsm_segment_map_length(seg) &&
		(key == NULL || (h->dbid == key->dbid && h->item_rel == key->item_rel &&
						 h->version == key->version && h->factors == key->factors));
}

/*
 * The segment entry names, if it still holds what the entry says (key, if
 * not NULL, the version it must carry), with *mapped telling whether this
 * backend mapped it before; NULL otherwise.  A segment mapped here only
 * now is the transaction's until dsm_pin_mapping.
 */
static dsm_segment *
attach_entry(const ItemsEntry *entry, const ItemsHeader *key, bool *mapped)
{
	dsm_segment *seg = dsm_find_mapping(entry->handle);

	*mapped = seg != NULL;
	if (seg == NULL)
		seg = dsm_attach(entry->handle);
	if (seg == NULL || holds(seg, entry, key))
		return seg;
	if (!*mapped)
		dsm_detach(seg);
	return NULL;
}

/* The published segment of the version key names, mapped for the session. */
static dsm_segment *
find(const ItemsHeader *key)
{
	ItemsEntry	entry;
	dsm_segment *seg;
	bool		mapped;

	if (!read_entry(entry_path(key->item_rel, key->version), &entry))
		return NULL;
	seg = attach_entry(&entry, key, &mapped);
	if (seg != NULL && !mapped)
		dsm_pin_mapping(seg);
	if (seg != NULL)
		mapping_use(seg);
	return seg;
}

/*
 * Retire the file at path, unless another backend claimed it first: its
 * segment, if still ours, is unpinned, to be freed by the last backend
 * that maps it (this one, maybe, at its next call).
 */
static void
retire(const char *path)
{
	char	   *claimed = psprintf("%s.retired.%d", path, MyProcPid);
	ItemsEntry	entry;

	if (rename(path, claimed) != 0)
		return;
	if (read_entry(claimed, &entry))
	{
		bool		mapped;
		dsm_segment *seg = attach_entry(&entry, NULL, &mapped);

		if (seg != NULL)
		{
			dsm_unpin_segment(entry.handle);
			if (!mapped)
				dsm_detach(seg);
		}
	}
	unlink(claimed);
}

/*
 * Retire the files of this database that name a version of item table
 * relid below version, and, when sweep, those of item tables that no
 * longer exist.
 */
static void
retire_older(Oid relid, int64 version, bool sweep)
{
	DIR		   *dir = AllocateDir(PG_STAT_TMP_DIR);
	struct dirent *de;
	char	   *prefix = psprintf("wals.%u.", MyDatabaseId);

	while ((de = ReadDir(dir, PG_STAT_TMP_DIR)) != NULL)
	{
		unsigned int rel;
		long long	v;
		int			end = 0;

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
			sscanf(de->d_name + strlen(prefix), "%u.%lld%n", &rel, &v, &end) != 2 ||
			de->d_name[strlen(prefix) + end] != '\0')
			continue;
		if (((Oid) rel == relid && v < version) ||
			(sweep && !SearchSysCacheExists1(RELOID, ObjectIdGetDatum((Oid) rel))))
			retire(psprintf("%s/%s", PG_STAT_TMP_DIR, de->d_name));
	}
	FreeDir(dir);
}

/*
 * Publish the segment seg holds for the version of h: its file written
 * aside and linked into place, which fails if another backend's is there.
 * Returns whether this one's is the version's segment now.
 */
static bool
publish(const ItemsHeader *h, dsm_segment *seg)
{
	char	   *path = entry_path(h->item_rel, h->version);
	char	   *tmp = psprintf("%s.new.%d", path, MyProcPid);
	ItemsEntry	entry = {dsm_segment_handle(seg), h->token};
	int			fd;
	bool		published;

	fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
	if (write(fd, &entry, sizeof(entry)) != sizeof(entry))
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		unlink(tmp);
		errno = save_errno ? save_errno : ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
	}
	CloseTransientFile(fd);
	published = link(tmp, path) == 0;
	if (!published)
	{
		/* a file of the server's earlier run, or of a build given up */
		ItemsEntry	theirs;
		bool		mapped = false;
		dsm_segment *other = read_entry(path, &theirs) ? attach_entry(&theirs, h, &mapped) : NULL;

		if (other != NULL && !mapped)
			dsm_detach(other);
		if (other == NULL)
			published = rename(tmp, path) == 0;
	}
	unlink(tmp);
	return published;
}

/*
 * Room for a segment of size bytes: dynamic shared memory of the POSIX
 * kind lives in /dev/shm, often a small tmpfs in containers, where a
 * segment that does not fit fails only when its pages are touched.
 */
static bool
room_for(Size size)
{
	struct statvfs fs;

	if (dynamic_shared_memory_type != DSM_IMPL_POSIX)
		return true;
	if (statvfs("/dev/shm", &fs) != 0)
		return false;
	return (double) fs.f_bavail * fs.f_frsize > (double) size * 1.1 + 64.0 * 1024 * 1024;
}

/*
 * A segment of size bytes, mapped for the session, or NULL where the
 * server cannot make one (no room, or no slot left): creating it runs in
 * a subtransaction of its own, so that a failure leaves only the fallback
 * to a copy of the backend's own.
 */
static dsm_segment *
create_segment(Size size)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	dsm_segment *volatile seg = NULL;

	if (!room_for(size))
		return NULL;
	/* no subtransaction in parallel mode (a query's leader): a failure is the call's */
	if (IsInParallelMode())
	{
		seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
		if (seg != NULL)
			dsm_pin_mapping(seg);
		return seg;
	}
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
		if (seg != NULL)
			dsm_pin_mapping(seg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ereport(DEBUG1,
				(errmsg("wals: no shared copy of %zu bytes: %s", size, edata->message)));
		FreeErrorData(edata);
		seg = NULL;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return seg;
}

/*
 * Whether a version of the model may be shared: its item table does not
 * force row security on its owner, whose policies' functions could then
 * give one reader what another does not see.
 */
static bool
shareable(const WalsModelInfo *info)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(info->item_rel));
	bool		forced;

	if (!HeapTupleIsValid(tuple))
		return false;
	forced = ((Form_pg_class) GETSTRUCT(tuple))->relforcerowsecurity;
	ReleaseSysCache(tuple);
	return !forced;
}

/*
 * The lock that serializes the builds of one item table's versions.  A
 * standby takes no lock of that mode: there two backends may both build,
 * and the second to publish maps the first's.
 */
static void
build_lock(Oid relid, bool lock)
{
	Oid			classid = get_relname_relid("wals_model_locks", wals_extension_schema());

	if (RecoveryInProgress())
		return;
	if (lock)
		LockDatabaseObject(classid, relid, 1, ExclusiveLock);
	else
		UnlockDatabaseObject(classid, relid, 1, ExclusiveLock);
}

/*
 * Build the items of info's version, as the model's owner: in a segment
 * that is then published, or in m's own memory where it cannot be.
 */
static void
build(WalsServeModel *m, const WalsModelInfo *info, ItemsHeader *key, bool share)
{
	SPITupleTable *tuptable;
	dsm_segment *seg = NULL;
	ItemsHeader *h;
	WalsRoleSave save;

	wals_become_model_owner(info, &save);
	wals_sql_expect(wals_sql(psprintf("SELECT item_id, factors FROM %s ORDER BY item_id",
									  wals_relation_name(info->item_rel)),
							 0, NULL, NULL, NULL, true, 0),
					SPI_OK_SELECT, info->item_rel);
	wals_unbecome(&save);
	tuptable = SPI_tuptable;
	layout(key, (int64) SPI_processed, info->factors);
	if (share)
		seg = create_segment(key->total);
	if (seg != NULL)
		h = dsm_segment_address(seg);
	else
		h = (ItemsHeader *) TYPEALIGN(WALS_AREA_ALIGN,
									  MemoryContextAllocHuge(m->cxt, key->total + WALS_AREA_ALIGN));
	memcpy(h, key, sizeof(ItemsHeader));
	h->magic = 0;
	fill_or_drop(h, tuptable, info, seg);
	SPI_freetuptable(tuptable);
	pg_write_barrier();
	h->magic = ITEMS_MAGIC;
	if (seg != NULL)
	{
		dsm_pin_segment(seg);
		if (publish(h, seg))
			mapping_use(seg);
		else
		{
			dsm_unpin_segment(dsm_segment_handle(seg));
			dsm_detach(seg);
			seg = find(key);
			if (seg == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_IN_USE),
						 errmsg("the shared items of model \"%s\" were replaced while being published",
								info->display),
						 errhint("Retry the call.")));
			h = dsm_segment_address(seg);
		}
		retire_older(info->item_rel, -1, true);
	}
	m->seg = seg;
	map_area(m, h);
}

/*
 * Set m's items (ids, Y, YᵀY, the index) to those of info's version: the
 * published segment where there is one, else built, and published where
 * the model may be shared.  retire: the version is another transaction's,
 * committed, so the model's older versions may go.  Must run inside an SPI
 * connection, after the caller's rights were checked.
 */
void
wals_items_load(WalsServeModel *m, const WalsModelInfo *info, bool retire)
{
	ItemsHeader key = {0};
	bool		share = wals_shared_items && shareable(info);
	dsm_segment *seg = NULL;

	key.layout = ITEMS_LAYOUT;
	key.token = pg_prng_uint64(&pg_global_prng_state);
	key.dbid = MyDatabaseId;
	key.item_rel = info->item_rel;
	key.version = info->version;
	key.factors = info->factors;
	m->seg = NULL;
	m->own_items = !wals_shared_items;
	if (share)
	{
		seg = find(&key);
		if (seg == NULL)
		{
			build_lock(info->item_rel, true);
			seg = find(&key);
			if (seg == NULL)
				build(m, info, &key, true);
			build_lock(info->item_rel, false);
		}
		if (seg != NULL)
		{
			m->seg = seg;
			map_area(m, dsm_segment_address(seg));
		}
	}
	else
		build(m, info, &key, false);
	if (share && retire)
		retire_older(info->item_rel, info->version, false);
}

/* Let go of m's items: its use of their segment's mapping, if shared. */
void
wals_items_release(WalsServeModel *m)
{
	Mapping    *map = m->seg == NULL ? NULL : mapping_of(m->seg);

	m->seg = NULL;
	if (map == NULL || --map->refs > 0)
		return;
	mappings = list_delete_ptr(mappings, map);
	dsm_detach(map->seg);
	pfree(map);
}
