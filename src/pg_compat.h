/*
 * pg_compat.h
 *	  The differences between the majors of PostgreSQL wals builds against
 *	  (15, 16, 17 and 18), and nothing else: the code is written against
 *	  15's API, and each name here gives that API on a later major, with
 *	  the same behaviour, or, where 15's call cannot stand, is a name of
 *	  wals's own (wals_*, WALS_*).  Included by wals.h, after postgres.h.
 */
#ifndef WALS_PG_COMPAT_H
#define WALS_PG_COMPAT_H

#include "executor/executor.h"
#include "nodes/parsenodes.h"

#if PG_VERSION_NUM >= 160000
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "parser/parse_relation.h"
#include "utils/acl.h"

/*
 * 16 folded the pg_*_aclcheck and pg_*_ownercheck of each catalog into
 * object_aclcheck and object_ownercheck.
 */
#define pg_namespace_aclcheck(nspid, roleid, mode) \
	object_aclcheck(NamespaceRelationId, (nspid), (roleid), (mode))
#define pg_namespace_ownercheck(nspid, roleid) \
	object_ownercheck(NamespaceRelationId, (nspid), (roleid))
#define pg_proc_aclcheck(procid, roleid, mode) \
	object_aclcheck(ProcedureRelationId, (procid), (roleid), (mode))

/*
 * 16 added a soft-error context; without one (NULL) a name that does not
 * parse is an error, as on 15.
 */
#define stringToQualifiedNameList(string) stringToQualifiedNameList((string), NULL)

/*
 * 16 added onlySummarizing, for the HOT updates that touch only summarizing
 * indexes; an insertion goes into every index, as on 15.
 */
#define ExecInsertIndexTuples(rri, slot, estate, update, noDupErr, specConflict, arbiterIndexes) \
	ExecInsertIndexTuples((rri), (slot), (estate), (update), (noDupErr), (specConflict), \
						  (arbiterIndexes), false)
#endif

#if PG_VERSION_NUM >= 170000
/* 17 named the lookup of a backend's status by its position (from 1) anew. */
#define pgstat_fetch_stat_local_beentry(idx) pgstat_get_local_beentry_by_index(idx)

/* 17 lets the caller give the lexer's struct; NULL allocates it, as on 15. */
#define makeJsonLexContextCstringLen(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen(NULL, (json), (len), (encoding), (need_escapes))
#endif

/*
 * A column's cached offset in a tuple, and what fetchatt reads of it: 18
 * keeps them in a compact copy of the column's attribute.
 */
#if PG_VERSION_NUM >= 180000
typedef CompactAttribute WalsColumnAttr;
#define wals_column_attr(desc, i) TupleDescCompactAttr((desc), (i))
#else
typedef FormData_pg_attribute WalsColumnAttr;
#define wals_column_attr(desc, i) TupleDescAttr((desc), (i))
#endif

/*
 * The range table of an executor state that writes one relation, rte
 * (wals_write_estate): 16 moved its permissions into RTEPermissionInfo
 * entries of their own, and 18 added the relations left after pruning,
 * here the one there is, as the logical replication worker does.
 */
static inline void
wals_init_range_table(EState *estate, RangeTblEntry *rte)
{
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;

	addRTEPermissionInfo(&perminfos, rte);
#endif
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#elif PG_VERSION_NUM >= 160000
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#else
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

/* 18 added the instrumentation of an index scan, where EXPLAIN asks for it. */
#if PG_VERSION_NUM >= 180000
#define wals_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define wals_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

#if PG_VERSION_NUM >= 180000
/* 18 can return a deferrable primary key, where asked to; 15 never does. */
#define RelationGetPrimaryKeyIndex(relation) RelationGetPrimaryKeyIndex((relation), false)
#endif

/*
 * 18 replaced pg_attribute_noreturn(), after a declaration, with
 * pg_noreturn, before it (C11's _Noreturn); GCC's attribute goes before as
 * well.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

#endif							/* WALS_PG_COMPAT_H */
