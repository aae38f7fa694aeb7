/*
 * shard_peer.h
 *	  A shard's side of a sharded training (peer_*.c): what it keeps
 *	  between the coordinator's calls (peer_load.c reads, peer_route.c
 *	  routes the cells, peer_solve.c solves with them), one session per
 *	  backend, freed with its transaction (peer_session.c).
 *
 * The calls are a protocol, and any role granted them may send them in any
 * order, with any arguments, from anywhere: each begins with
 * wals_shard_enter, which refuses a call that its session's state does not
 * allow (the one table of them is in peer_session.c) and any call made while
 * another runs (from a view that wals_shard_load reads, say), and ends
 * with wals_shard_leave, which moves the session to its next state.
 */
#ifndef WALS_SHARD_PEER_H
#define WALS_SHARD_PEER_H

#include "shard_wire.h"
#include "chunks.h"
#include "wals_train.h"

/* Cells as (row, column, value). */
typedef struct Cells
{
	int64		n;
	int64		cap;
	int32	   *row;
	int32	   *col;
	float	   *val;
} Cells;

/* One partition's rows as read, dense in its own ids. */
typedef struct Loaded
{
	WalsRatings raw;
	int32	   *umap;			/* its dense users and items in the training's */
	int32	   *imap;
	struct Loaded *next;
} Loaded;

/* Where a session is between two calls. */
typedef enum ShardState
{
	SHARD_NONE,					/* no training begun in this transaction */
	SHARD_LOADING,				/* partitions read */
	SHARD_LISTED,				/* their distinct ids counted and paged out */
	SHARD_PLANNED,				/* the parameters known, the plan coming */
	SHARD_ROUTED,				/* the cells in their boxes, exchanged */
	SHARD_STARTED,				/* the matrices built: half-sweeps, factors */
	SHARD_FAILED,				/* a call failed while changing the session */
	SHARD_NSTATES
} ShardState;

/* The calls, one a SQL function each. */
typedef enum ShardCall
{
	SHARD_LOAD,
	SHARD_IDS,
	SHARD_ID_PAGE,
	SHARD_PLAN,
	SHARD_PLAN_PAGE,
	SHARD_ROUTE,
	SHARD_OUTBOX,
	SHARD_INBOX,
	SHARD_START,
	SHARD_PUT,
	SHARD_SOLVE,
	SHARD_TAKE,
	SHARD_LOSS,
	SHARD_RATED,
	SHARD_END,
	SHARD_NCALLS
} ShardCall;

/* Which factors other holds, and how many of their rows have come. */
typedef enum OtherSide
{
	OTHER_NONE = 0,
	OTHER_USERS,
	OTHER_ITEMS
} OtherSide;

typedef struct Session
{
	MemoryContext cxt;
	SubTransactionId subid;		/* the subtransaction it belongs to */
	ShardState	state;			/* set by wals_shard_leave and
								 * wals_shard_changing only */
	Size		peak;			/* the most the session held, in bytes */
	Loaded	   *loaded;
	int64		rows;
	int64		null_ids;
	int64	   *local_users;	/* the distinct ids read, increasing */
	int64		nlocal_users;
	int64	   *local_items;
	int64		nlocal_items;

	/* from wals_shard_plan and its pages */
	WalsParams	params;
	int			shard;
	int			nshards;
	int64		nusers;
	int64		nitems;
	int64	   *user_ids;		/* every user's id, increasing, as come */
	int64	   *item_ids;
	uint8	   *user_owner;		/* the shard of each, as come */
	uint8	   *item_owner;
	int64		user_ids_in;	/* how many of each have come */
	int64		item_ids_in;
	int64		own_nusers;
	int64		own_nitems;
	int32	   *own_users;		/* the dense users this shard owns, increasing */
	int32	   *own_items;
	int32	  **rows_of[2];		/* per side (users, items) and shard: the rows
								 * that shard owns, as own_users */
	int64	   *nrows_of[2];
	Cells	   *out_users;		/* per shard: cells of users it owns */
	Cells	   *out_items;		/* per shard: cells of items it owns */
	int64	   *out_sent;		/* per shard: out cells sent, users then items */

	int			workers;		/* parallel workers a half-sweep may use */
	int			launched;		/* those the last half-sweep launched */

	/* from wals_shard_start */
	MemoryContext rows_cxt;		/* what the solves read, when not in seg */
	dsm_segment *seg;			/* what the solves read, shared with workers */
	char	   *seg_next;		/* its unused part */
	char	   *seg_end;
	WalsCsr		by_user;		/* own users x every item */
	WalsCsr		by_item;		/* own items x every user */
	float	   *X;				/* own users' factors */
	float	   *Y;				/* own items' factors */
	float	   *other;			/* every row of one side's factors */
	OtherSide	other_side;
	int64	   *other_in;		/* per shard: the rows of its own that have come */
	float	   *scratch;
	int64		scratch_floats; /* of each process solving the longest row */
} Session;

extern Session *wals_shard_enter(ShardCall call);
extern void wals_shard_changing(Session *s);
extern void wals_shard_leave(ShardCall call);
extern const char *wals_shard_call_name(ShardCall call);
extern void wals_shard_reserve(Session *s, double bytes, const char *what);
extern void *wals_shard_alloc(Size bytes);
extern void *wals_shard_alloc_rows(Size bytes);
extern Size wals_shard_rows_bytes(Size bytes);

/* peer_parallel.c */
extern void wals_shard_share_rows(Session *s, Size bytes);
extern WalsStatus wals_shard_solve_rows(Session *s, const WalsCsr *R, const float *G,
										float *mine, int64 *bad);
extern double wals_shard_loss_rows(Session *s);
extern void wals_shard_note_peak(Session *s);
extern void wals_shard_session_free(void);
extern void wals_shard_cells_free(Cells *c);

extern void wals_shard_buffer(Session *s, StringInfo buf, double bytes, ShardCall call);

/* A bytea of buf, whose first VARHDRSZ bytes were reserved for its header. */
static inline bytea *
wals_shard_bytea(StringInfo buf)
{
	SET_VARSIZE(buf->data, buf->len);
	return (bytea *) buf->data;
}

#endif							/* WALS_SHARD_PEER_H */
