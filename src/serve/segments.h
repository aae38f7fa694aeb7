/*
 * segments.h
 *	  Segments of dynamic shared memory that hold an area of one version
 *	  of a model, published once per server and mapped by every backend
 *	  (segments.c); what goes in them is items.c's.
 */
#ifndef WALS_SEGMENTS_H
#define WALS_SEGMENTS_H

#include "storage/dsm.h"

/* What an area holds. */
typedef enum WalsAreaKind
{
	WALS_AREA_ITEMS = 1,		/* ids and their directory, Y, YᵀY and the index of Y */
	WALS_AREA_COSINE			/* the unit rows of Y and their index */
} WalsAreaKind;

/*
 * The head of an area, laid out by offsets from it: the same in a shared
 * segment and in a backend's own memory.  Its first fields are the key
 * that names the area: the version of the item table, the kind and the
 * width.
 */
typedef struct WalsArea
{
	uint32		magic;			/* written last, once the area is whole */
	uint32		layout;
	uint64		token;			/* also in the registry file */
	Oid			dbid;
	Oid			item_rel;
	int64		version;
	int32		kind;
	int32		factors;
	int64		nitems;
	int32		groups;			/* of the index, see wals_score.h */
	int32		usable;
	float		max_norm;
	int64		dir_lo;			/* of the directory of ids, see WalsIdDirectory */
	int32		dir_shift;
	int64		dir_buckets;
	Size		ids;			/* offsets from the head, 0 where absent */
	Size		dir;
	Size		Y;
	Size		G;
	Size		blocks;
	Size		total;
} WalsArea;

#define WALS_AREA_MAGIC 0x57414c53	/* "WALS" */
#define WALS_AREA_LAYOUT 2

extern void wals_area_key(WalsArea *key, Oid item_rel, int64 version, WalsAreaKind kind,
						  int factors);
extern dsm_segment *wals_segment_find(const WalsArea *key);
extern bool wals_segment_room_for(Size size);
extern dsm_segment *wals_segment_create(Size size);
extern dsm_segment *wals_segment_publish(const WalsArea *area, dsm_segment *seg);
extern void wals_segment_release(dsm_segment *seg);
extern void wals_segment_lock(Oid item_rel, bool lock);
extern void wals_segment_retire_older(Oid item_rel, int64 version);

#endif							/* WALS_SEGMENTS_H */
