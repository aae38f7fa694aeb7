/*
 * refresh_internal.h
 *	  What the files of wals_refresh share: the refresh under way.
 */
#ifndef WALS_REFRESH_INTERNAL_H
#define WALS_REFRESH_INTERNAL_H

#include "wals_serve.h"

/* Users read, solved and written together. */
#define REFRESH_BATCH	2048

/* solve_items: which items the model knows a refresh solves again */
typedef enum RefreshItems
{
	REFRESH_NEW,				/* none */
	REFRESH_CHANGED,			/* those a tenth of whose ratings changed */
	REFRESH_TOUCHED				/* every one the changed rows name */
} RefreshItems;

/*
 * A refresh under way (refresh_changed.c), whose user side refresh_users.c
 * reads, solves and writes.
 */
typedef struct Refresh
{
	WalsServeModel *m;
	const WalsModelInfo *info;
	WalsSourceNames src;
	int			f;
	RefreshItems items;			/* solve_items */
	int32	   *counts;			/* ratings of each of the model's items, or NULL */
	WalsCell   *pairs;			/* merged ratings of the pairs, by (user, item) */
	int64		npairs;
	bool	   *pair_rated;		/* the pair was among its user's rated items */
	bool		counted_now;	/* counts read from the source as it is now */
	int64	   *solved;			/* the items solved here, increasing */
	int64		nsolved;
	bool	   *is_new;			/* per solved item */
	float	   *Ys;				/* their factors, nsolved x f */
	bool	   *known;			/* per solved item: it has factors */
	float	   *G;				/* Y^T Y with the solved items in */
	int64	   *users;			/* the users solved, increasing */
	int64		nusers;
	float	   *X;				/* their factors, nusers x f */
	bool	   *has_x;
	float	   *Xold;			/* their stored factors, before the refresh */
	bool	   *has_old;
	bytea	  **stored;			/* their stored rated items, or NULL */
	float	   *Gu;				/* XᵀX of every user before the refresh, or NULL */
	int64		users_before;	/* the model's users before it */
	WalsRefreshDone done;
} Refresh;

/* refresh_users.c */
extern void wals_refresh_read_stored(Refresh *r);
extern void wals_refresh_pass(Refresh *r, const int64 *which, int64 n, bool count);

#endif							/* WALS_REFRESH_INTERNAL_H */
