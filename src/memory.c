/*
 * memory.c
 *	  The wals.max_memory limit.
 *
 * A training's memory is known from the ratings before the matrices and
 * factors are allocated, so a training that would not fit is refused up
 * front, with the figures, instead of failing (or swapping) halfway.
 * And the room that dynamic shared memory has left.
 */
#include "postgres.h"

#include <sys/statvfs.h>

#include "storage/dsm_impl.h"
#include "utils/builtins.h"

#include "wals.h"

/* bytes as pg_size_pretty writes them: "412 MB", "96 kB". */
char *
wals_pretty_bytes(double bytes)
{
	return TextDatumGetCString(DirectFunctionCall1(pg_size_pretty,
												   Int64GetDatum((int64) bytes)));
}

/*
 * Error out when bytes, the estimate of what the training needs at its peak
 * (or of what has been read so far), exceeds wals.max_memory.
 */
void
wals_memory_check(double bytes, const char *what)
{
	double		limit = (double) wals_max_memory * 1024.0;

	if (wals_max_memory <= 0 || bytes <= limit)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("training needs about %s for %s, more than wals.max_memory (%s)",
					wals_pretty_bytes(bytes), what, wals_pretty_bytes(limit)),
			 errhint("Train on fewer ratings or fewer factors, or have a superuser raise wals.max_memory.")));
}

/*
 * The bytes free where POSIX shared segments are files of a memory file
 * system of their own, /dev/shm on Linux; -1 where that cannot be known.
 * A container's is often 64 MB, and making a segment larger than what is
 * free raises an error, where memory of the process's own would serve.
 */
double
wals_shared_free(void)
{
	struct statvfs fs;

	if (dynamic_shared_memory_type != DSM_IMPL_POSIX || statvfs("/dev/shm", &fs) != 0)
		return -1;
	return (double) fs.f_bavail * (double) fs.f_frsize;
}
