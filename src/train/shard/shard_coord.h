/*
 * shard_coord.h
 *	  The coordinator's side of a sharded training (coord_*.c): the
 *	  shards and their connections, the calls on them, and the state of a
 *	  training that its opening (coord_plan.c) and its engine
 *	  (coord_engine.c) share.
 */
#ifndef WALS_SHARD_COORD_H
#define WALS_SHARD_COORD_H

#include "catalog/pg_type.h"

#include "shard_wire.h"
#include "wals_shard.h"

/*
 * A shard: one foreign server of postgres_fdw (coord_fdw.c) or Citus node
 * (coord_citus.c), with the partitions or Citus shards it holds, and the
 * connection that reaches it (coord_conn.c).
 */
#define WALS_SHARD_MAX_ARGS		5

typedef struct WalsShardPart
{
	Oid			relid;			/* the foreign table here */
	char	   *remote;			/* its remote table, qualified and quoted */
	char	   *user_col;		/* its remote columns */
	char	   *item_col;
	char	   *rating_col;		/* NULL: every pair counts 1 */
} WalsShardPart;

typedef struct WalsShard
{
	Oid			server;			/* the foreign server; invalid for a Citus node */
	char	   *host;			/* the Citus node's */
	int			port;
	char	   *name;			/* the foreign server's, or the node's host:port */
	int			index;			/* from 0 */
	List	   *parts;			/* WalsShardPart */
	struct pg_conn *conn;		/* for the caller, coord_conn.c's */
	char	   *schema;			/* wals's schema there, quoted */
	char	   *sql;			/* the call being waited for */
	struct pg_result *result;	/* the last call's, until the next */
	struct pg_result *kept;		/* a half-sweep's answer, until every other
								 * shard has its rows */
	int64		rows;			/* rows it read */
	int			workers;		/* the most parallel workers a half-sweep launched */
	double		bytes;			/* sent to it and received from it */
	int32	   *own_users;		/* the dense users it solves, increasing */
	int64		nown_users;
	int32	   *own_items;
	int64		nown_items;
} WalsShard;

/* An argument of a call on a shard, binary; data NULL is SQL's NULL. */
typedef struct WalsShardArg
{
	Oid			type;
	const char *data;
	int			len;
} WalsShardArg;

/* coord_shards.c: every shard at once */
extern void wals_shards_connect(List *shards);

/* coord_calls.c: one call on a shard, its answer awaited apart */
extern void wals_shard_error_context(void *arg);
extern void wals_shard_send(WalsShard *s, const char *fn, int nargs, const WalsShardArg *args);
extern const char *wals_shard_wait_raw(WalsShard *s, int *len);
extern void wals_shard_clear(WalsShard *s);
extern void wals_shard_keep(WalsShard *s);
extern void wals_shard_forget(WalsShard *s);
extern bytea *wals_shard_wait(WalsShard *s);
extern void wals_shard_wait_none(WalsShard *shard);
extern void wals_shards_wait_none(WalsShards *sh);
extern void wals_shard_wait_wire(WalsShard *shard, WalsWire *w, const char *what);
extern int64 wals_shard_wait_int64(WalsShard *shard, const char *what);

/* coord_fdw.c, coord_citus.c: the shards of either kind, and a connection to one */
extern List *wals_fdw_shards_find(Oid source, const char *user_col, const char *item_col,
								  const char *rating_col);
extern struct pg_conn *wals_fdw_connect(WalsShard *s);
extern List *wals_citus_shards_find(Oid source, const char *user_col, const char *item_col,
									const char *rating_col);
extern bool wals_citus_in_transaction(void);
extern struct pg_conn *wals_citus_connect(WalsShard *s);

/* coord_conn.c: the connections of a sharded training */
extern struct pg_conn *wals_shard_conn_open(const char *const *keys, const char *const *vals,
											char **failure);
extern void wals_shard_conn_close(struct pg_conn *conn);
extern void wals_shard_conn_begin(struct pg_conn *conn);
extern struct pg_result *wals_shard_conn_result(struct pg_conn *conn);
extern pg_noreturn void wals_shard_conn_error(struct pg_result *res, struct pg_conn *conn);


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

#endif							/* WALS_SHARD_COORD_H */
