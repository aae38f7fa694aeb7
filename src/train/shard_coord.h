/*
 * shard_coord.h
 *	  The coordinator's side of a sharded training, shared by its opening
 *	  (shard_plan.c) and its engine (engine_shard.c): the training's state,
 *	  and the arguments and answers of the calls on the shards.
 */
#ifndef WALS_SHARD_COORD_H
#define WALS_SHARD_COORD_H

#include "catalog/pg_type.h"

#include "shard_wire.h"
#include "wals_train.h"

struct WalsShards
{
	const WalsTrainArgs *args;
	WalsProblem *problem;		/* from the engine's begin */
	char	   *names;			/* "s1", "s2", for messages */
	WalsShard **shard;
	int			n;
	int64		nusers;
	int64		nitems;
	uint8	   *user_owner;
	uint8	   *item_owner;
	float	   *X;
	float	   *Y;
	float	   *GX;
	float	   *GY;
	int			it;
	double		start_bytes;	/* moved before the first iteration */
	MemoryContextCallback cleanup;
	/* the page of rated items of each shard, where it reads, its next user */
	bytea	  **rated_page;
	WalsWire   *rated_at;
	int64	   *rated_next;
	char	   *summary;		/* the bytes moved, for the last NOTICE */
	MemoryContext cxt;			/* the training's, which the pages live in */
	/* the rows each shard answered its half-sweep with, in its kept result */
	const char **solved;
	int		   *solved_len;
	bool	   *paged;			/* or they come in pages */
};

static inline WalsShardArg
arg_int4(int32 v, uint32 *storage)
{
	WalsShardArg a = {INT4OID, (const char *) storage, sizeof(uint32)};

	*storage = pg_hton32((uint32) v);
	return a;
}

static inline WalsShardArg
arg_text(const char *v)
{
	WalsShardArg a = {TEXTOID, v, (int) strlen(v)};

	return a;
}

/* A text argument, SQL's NULL for a NULL v. */
static inline WalsShardArg
arg_text_or_null(const char *v)
{
	WalsShardArg a = {TEXTOID, v, v != NULL ? (int) strlen(v) : 0};

	return a;
}

static inline WalsShardArg
arg_bytes(Oid type, StringInfo buf)
{
	WalsShardArg a = {type, buf->data, buf->len};

	return a;
}

/* The most bytes one message of a sharded training takes. */
static inline int64
message_bytes(void)
{
	return (int64) wals_shard_message_size * 1024;
}

/* Wait for a shard's answer to a call that gives nothing. */
static inline void
wait_one(WalsShard *shard)
{
	int			len;

	wals_shard_wait_raw(shard, &len);
	wals_shard_clear(shard);
}

/* Wait for every shard's answer to the same call, which gives nothing. */
static inline void
wait_all(WalsShards *sh)
{
	for (int s = 0; s < sh->n; s++)
		wait_one(sh->shard[s]);
}

/*
 * Wait for shard's answer and start reading it (SQL's NULL reads as no
 * bytes); wals_shard_clear frees it once read.
 */
static inline void
wait_wire(WalsShard *shard, WalsWire *w, const char *what)
{
	int			len;
	const char *data = wals_shard_wait_raw(shard, &len);

	wals_wire_start(w, data != NULL ? data : "", data != NULL ? len : 0, what);
}

/* The int8 a shard answered. */
static inline int64
wait_int64(WalsShard *shard, const char *what)
{
	WalsWire	w;
	int64		v;

	wait_wire(shard, &w, what);
	v = wals_wire_int64(&w);
	wals_wire_done(&w);
	wals_shard_clear(shard);
	return v;
}

#endif							/* WALS_SHARD_COORD_H */
