/*
 * tempfiles.c
 *	  Arrays of a training kept in temporary files mapped into memory, for
 *	  ratings that do not fit in wals.max_memory.
 *
 * A training out of core keeps the same arrays it keeps in memory (the
 * rows read, the cells of both matrices) in the same layout, so the same
 * code builds and sweeps them and the factors come out the same to the
 * bit; only their pages belong to a file.  The kernel reads them in as
 * a sweep reaches them and writes back and drops them behind it, so a
 * training holds in its own memory only the factors, the matrices' row
 * starts and its scratch.  Every pass over the cells goes in row order, and
 * the scatter and the transposes that build them (src/core/csr.c) write
 * through the lines of a few hundred partitions, each advancing through
 * its own range, which is what lets the page cache stream them
 * (matrices.c says why the rows are not grouped in place there).
 *
 * The file is one of PostgreSQL's temporary files: in temp_tablespaces,
 * deleted when it is closed or its transaction ends, whatever way it ends,
 * and then counted in pg_stat_database and by log_temp_files.
 * Its blocks are allocated on disk before its pages are mapped, so that a
 * full disk is an error here and not a SIGBUS when a page is first
 * written; and, since the pages are written through the mapping and not
 * through PostgreSQL's writes, the files of a process are held to
 * temp_file_limit here.  A parallel worker maps the file by its path,
 * for reading, for as long as the leader keeps it.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "commands/tablespace.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "wals_train.h"

/* Bytes of this process's mapped temporary files, against temp_file_limit. */
static double tempfile_bytes = 0;

/*
 * Unmap t, once.  At the end of the context that owns t, after an error
 * too, only this: the file is closed, and deleted, by the transaction's
 * resource owner.
 */
static void
unmap(void *arg)
{
	WalsTempArray *t = arg;

	if (t->base == NULL)
		return;
	tempfile_bytes -= t->bytes;
	(void) munmap(t->base, t->bytes);
	t->base = NULL;
}

static int
open_path(const char *path, int flags)
{
	int			fd = open(path, flags | PG_BINARY, 0);

	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open temporary file \"%s\": %m", path)));
	return fd;
}

/*
 * Give the file of t at least bytes, allocated on disk, and map them;
 * bytes are checked against temp_file_limit first.
 */
static void
size_and_map(WalsTempArray *t, Size bytes)
{
	char	   *path = FilePathName(t->file);
	int			fd;
	int			rc;
	void	   *p;

	if (temp_file_limit >= 0 &&
		(tempfile_bytes - t->bytes + bytes) / 1024.0 > (double) temp_file_limit)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("temporary file size exceeds temp_file_limit (%dkB)", temp_file_limit),
				 errdetail("A training out of core keeps its ratings in temporary files, %s for %s.",
						   wals_pretty_bytes((double) bytes), t->what),
				 errhint("Have a superuser raise temp_file_limit or wals.max_memory.")));
	fd = open_path(path, O_RDWR);
	rc = posix_fallocate(fd, (off_t) t->bytes, (off_t) (bytes - t->bytes));
	if (rc != 0)
	{
		close(fd);
		errno = rc;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not extend temporary file \"%s\" to %s: %m",
						path, wals_pretty_bytes((double) bytes)),
				 errhint("A training out of core keeps its ratings in temporary files; free space in temp_tablespaces, or raise wals.max_memory.")));
	}
	if (t->base == NULL)
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	else
		p = mremap(t->base, t->bytes, bytes, MREMAP_MAYMOVE);
	close(fd);
	if (p == MAP_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not map temporary file \"%s\" of %s: %m",
						path, wals_pretty_bytes((double) bytes))));
	tempfile_bytes += bytes - t->bytes;
	t->base = p;
	t->bytes = bytes;
}

/*
 * Map a new temporary file of bytes into t, for what (in messages); it
 * lives until wals_temp_free or the end of the current memory context, and
 * its file until then or the transaction's end.  t itself must live until
 * that context ends, freed or not, since the context's end looks at it.
 */
void *
wals_temp_alloc(WalsTempArray *t, Size bytes, const char *what)
{
	MemoryContextCallback *cb = MemoryContextAlloc(CurrentMemoryContext,
												   sizeof(MemoryContextCallback));

	memset(t, 0, sizeof(*t));
	t->what = what;
	/* in temp_tablespaces, as a sort's files go */
	PrepareTempTablespaces();
	t->file = OpenTemporaryFile(false);
	cb->func = unmap;
	cb->arg = t;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, cb);
	size_and_map(t, Max(bytes, 1));
	return t->base;
}

/* Grow t to bytes; its contents stay, maybe at another address. */
void *
wals_temp_grow(WalsTempArray *t, Size bytes)
{
	if (bytes > t->bytes)
		size_and_map(t, bytes);
	return t->base;
}

/* Unmap t and delete its file. */
void
wals_temp_free(WalsTempArray *t)
{
	if (t->base == NULL)
		return;
	unmap(t);
	FileClose(t->file);
}

/*
 * Advise the kernel of how t will be read (madvise): MADV_SEQUENTIAL for
 * rows read in order, which it may read far ahead and drop behind.
 */
void
wals_temp_advise(WalsTempArray *t, int advice)
{
	if (t->base != NULL)
		(void) madvise(t->base, t->bytes, advice);
}

/* The path a parallel worker maps t by. */
const char *
wals_temp_path(const WalsTempArray *t)
{
	return FilePathName(t->file);
}

/*
 * Map bytes of the temporary file at path for reading, in a parallel
 * worker: the mapping lasts as long as the process.
 */
const void *
wals_temp_attach(const char *path, Size bytes)
{
	int			fd = open_path(path, O_RDONLY);
	void	   *p = mmap(NULL, Max(bytes, 1), PROT_READ, MAP_SHARED, fd, 0);

	close(fd);
	if (p == MAP_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not map temporary file \"%s\": %m", path)));
	return p;
}
