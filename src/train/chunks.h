/*
 * chunks.h
 *	  The rows of a half-sweep cut into chunks that processes claim, and
 *	  the lowest row that failed in any of them: what the CPU engine
 *	  (engine_cpu.c) and a shard's parallel half-sweep
 *	  (shard/peer_parallel.c) share, so that a row is solved and a failure
 *	  named the same way on one server and on the shards.
 */
#ifndef WALS_CHUNKS_H
#define WALS_CHUNKS_H

#include "port/atomics.h"

#include "wals_core.h"

/* Rows solved between two checks for a cancel, at most. */
#define WALS_ROWS_PER_CHECK		256

/* No row has failed: the value wals_record_failure's word starts from. */
#define WALS_NO_FAILURE			PG_UINT64_MAX

extern int64 wals_max_chunks(int64 nrows, int f);
extern int64 wals_cut_chunks(const WalsCsr *R, int f, int64 *bounds);
extern void wals_record_failure(pg_atomic_uint64 *failed, WalsStatus status, int64 row);
extern WalsStatus wals_recorded_failure(uint64 failed, int64 *row);

#endif							/* WALS_CHUNKS_H */
