/*
 * wals_shard.h
 *	  A training whose ratings stay on the servers of a sharded source, as
 *	  the training sees it (train.c, store.c): whether a source is sharded,
 *	  the opening on its shards, the engine that iterates there, and the
 *	  rated items each shard keeps.
 *
 * The rest of src/train/shard stays behind this header: the coordinator's
 * side (coord_*.c, shard_coord.h), the shards' side (peer_*.c,
 * shard_peer.h), and what both agree on (shard_wire.h).  A shard is one
 * postgres_fdw foreign server or Citus node; the list of them is opaque
 * here.
 */
#ifndef WALS_SHARD_H
#define WALS_SHARD_H

#include "wals_train.h"

typedef struct WalsShards WalsShards;

/* coord_shards.c: the shards of a source, NIL where it trains here */
extern List *wals_shards_find(Oid source, const char *user_col, const char *item_col,
							  const char *rating_col);
extern bool wals_shards_citus(List *shards);
extern bool wals_shards_in_transaction(List *shards);
extern void wals_shards_disconnect(List *shards);

/* coord_plan.c, coord_engine.c: a training on the shards */
extern WalsShards *wals_shards_open(const WalsTrainArgs *args, List *shards, WalsData *data);
extern void wals_shards_start(WalsShards *sh, float *X, float *Y, WalsData *data);
extern bytea *wals_shards_rated(WalsShards *sh, int64 r);
extern const WalsEngine wals_shard_engine;

#endif							/* WALS_SHARD_H */
