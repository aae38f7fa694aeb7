/*
 * segments.c
 *	  Segments of dynamic shared memory that hold an area of one version of
 *	  a model (segments.h), published once per server and found, mapped,
 *	  retired and freed here; items.c decides what an area holds.
 *
 * Finding a segment: a file per published area in pg_stat_tmp, named by
 * database, item table, version and kind, holds the segment's handle and a
 * random token that the area's head repeats, so that a handle left by an
 * earlier run of the server (segments die with it, files do not) or reused
 * since is never taken for the model's.  This needs nothing in
 * shared_preload_libraries, on PostgreSQL 15 as on 18.  Two backends that
 * miss the same area build it one after the other, on a lock of the item
 * table's OID held only while building (the second then finds the
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
 * (a model dropped) go at the next publication in the database, and those
 * of a database dropped at the next publication in any.
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/dsm_impl.h"
#include "storage/fd.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "segments.h"
#include "wals_catalog.h"

/* What a registry file holds. */
typedef struct AreaEntry
{
	dsm_handle	handle;
	uint64		token;
} AreaEntry;

/* A key for the area of kind of a version of the item table item_rel. */
void
wals_area_key(WalsArea *key, Oid item_rel, int64 version, WalsAreaKind kind, int factors)
{
	memset(key, 0, sizeof(*key));
	key->layout = WALS_AREA_LAYOUT;
	key->token = pg_prng_uint64(&pg_global_prng_state);
	key->dbid = MyDatabaseId;
	key->item_rel = item_rel;
	key->version = version;
	key->kind = kind;
	key->factors = factors;
}

/* The registry file of the area key names. */
static char *
entry_path(const WalsArea *key)
{
	return psprintf("%s/wals.%u.%u." INT64_FORMAT ".%d", PG_STAT_TMP_DIR, key->dbid,
					key->item_rel, key->version, key->kind);
}

static bool
read_entry(const char *path, AreaEntry *entry)
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

/* Whether seg, mapped here, holds what entry says (key, if not NULL, its area). */
static bool
holds(dsm_segment *seg, const AreaEntry *entry, const WalsArea *key)
{
	const WalsArea *h = dsm_segment_address(seg);

	return dsm_segment_map_length(seg) >= sizeof(WalsArea) &&
		h->magic == WALS_AREA_MAGIC && h->layout == WALS_AREA_LAYOUT &&
		h->token == entry->token && h->total <= dsm_segment_map_length(seg) &&
		(key == NULL || (h->dbid == key->dbid && h->item_rel == key->item_rel &&
						 h->version == key->version && h->kind == key->kind &&
						 h->factors == key->factors));
}

/*
 * The segment entry names, if it still holds what the entry says (key, if
 * not NULL, the version it must carry), with *mapped telling whether this
 * backend mapped it before; NULL otherwise.  A segment mapped here only
 * now is the transaction's until dsm_pin_mapping.
 */
static dsm_segment *
attach_entry(const AreaEntry *entry, const WalsArea *key, bool *mapped)
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

/*
 * The published segment of the area key names, mapped for the session and
 * used once more (wals_segment_release lets it go), or NULL.
 */
dsm_segment *
wals_segment_find(const WalsArea *key)
{
	AreaEntry	entry;
	dsm_segment *seg;
	bool		mapped;

	if (!read_entry(entry_path(key), &entry))
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
	AreaEntry	entry;

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
 * Retire the files of this database that name an area of a version of
 * item table relid below version, and, when sweep, those of item tables
 * that no longer exist and of databases that no longer exist (no backend
 * of theirs is left to do it).
 */
static void
retire_files(Oid relid, int64 version, bool sweep)
{
	DIR		   *dir = AllocateDir(PG_STAT_TMP_DIR);
	struct dirent *de;

	while ((de = ReadDir(dir, PG_STAT_TMP_DIR)) != NULL)
	{
		unsigned int db;
		unsigned int rel;
		long long	v;
		int			kind;
		int			end = 0;
		bool		gone;

		if (sscanf(de->d_name, "wals.%u.%u.%lld.%d%n", &db, &rel, &v, &kind, &end) != 4 ||
			de->d_name[end] != '\0')
			continue;
		if ((Oid) db != MyDatabaseId)
			gone = sweep && !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum((Oid) db));
		else
			gone = ((Oid) rel == relid && v < version) ||
				(sweep && !SearchSysCacheExists1(RELOID, ObjectIdGetDatum((Oid) rel)));
		if (gone)
			retire(psprintf("%s/%s", PG_STAT_TMP_DIR, de->d_name));
	}
	FreeDir(dir);
}

/* Retire the areas of the versions of item table relid below version. */
void
wals_segment_retire_older(Oid relid, int64 version)
{
	retire_files(relid, version, false);
}

/*
 * Write the file of the area h, which seg holds, aside and link it into
 * place, which fails if another backend's is there.  Returns whether this
 * one's is the area's segment now.
 */
static bool
write_entry(const WalsArea *h, dsm_segment *seg)
{
	char	   *path = entry_path(h);
	char	   *tmp = psprintf("%s.new.%d", path, MyProcPid);
	AreaEntry	entry = {dsm_segment_handle(seg), h->token};
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
		AreaEntry	theirs;
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
 * Publish seg, a segment of wals_segment_create that holds the whole area
 * h, for every backend: pinned, then named by its file.  Returns the
 * segment that holds the area now, used once more: seg, or, where another
 * backend published the same area first, theirs (seg is then dropped).
 * Files of item tables and databases that no longer exist go meanwhile.
 */
dsm_segment *
wals_segment_publish(const WalsArea *h, dsm_segment *seg)
{
	dsm_pin_segment(seg);
	if (write_entry(h, seg))
		mapping_use(seg);
	else
	{
		dsm_unpin_segment(dsm_segment_handle(seg));
		dsm_detach(seg);
		seg = wals_segment_find(h);
		if (seg == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("the shared copy of a model's items was replaced while being published"),
					 errhint("Retry the call.")));
	}
	retire_files(InvalidOid, 0, true);
	return seg;
}

/* Let go of one use of seg, a segment of wals_segment_find or _publish. */
void
wals_segment_release(dsm_segment *seg)
{
	Mapping    *map = mapping_of(seg);

	if (map == NULL || --map->refs > 0)
		return;
	mappings = list_delete_ptr(mappings, map);
	dsm_detach(map->seg);
	pfree(map);
}

/*
 * Room for a segment of size bytes: dynamic shared memory of the POSIX
 * kind lives in /dev/shm, often a small tmpfs in containers, where a
 * segment that does not fit fails only when its pages are touched.
 */
bool
wals_segment_room_for(Size size)
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
 * to a copy of the backend's own.  Until it is published, the caller
 * detaches it if anything fails: its mapping is the session's, not the
 * transaction's.
 */
dsm_segment *
wals_segment_create(Size size)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	dsm_segment *volatile seg = NULL;

	if (!wals_segment_room_for(size))
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
 * The lock that serializes the builds of one item table's versions.  A
 * standby takes no lock of that mode: there two backends may both build,
 * and the second to publish maps the first's.
 */
void
wals_segment_lock(Oid relid, bool lock)
{
	Oid			classid = get_relname_relid("wals_model_locks", wals_extension_schema());

	if (RecoveryInProgress())
		return;
	if (lock)
		LockDatabaseObject(classid, relid, 1, ExclusiveLock);
	else
		UnlockDatabaseObject(classid, relid, 1, ExclusiveLock);
}
