/*
 * wals_core.h
 *	  The WALS engine without PostgreSQL: id maps, sparse matrices, the
 *	  per-row solvers, the exact loss and top-k selection.
 *
 * Everything here works on buffers the caller owns and, where work can be
 * split, on a half-open row range [lo, hi), so that one function serves a
 * single backend, each parallel worker and the unit tests alike.  Functions
 * report failure through a WalsStatus and never allocate or print; the
 * server glue turns a status into an ereport in one place.  Their long
 * loops call the caller's poll hook every few milliseconds of work (see
 * wals_set_poll_hook below), which may leave them without returning.
 *
 * Matrices are dense row-major float: row r of an n x f factor matrix starts
 * at r * f.  Sparse matrices are CSR with int64 row pointers (nnz may exceed
 * 2^31) and int32 column indices (users and items are each fewer than 2^31).
 *
 * The objective (DESIGN section 1), over all cells, unobserved ones with
 * weight w0 and target 0:
 *
 *	  L = sum_ui c_ui (p_ui - x_u.y_i)^2 + lambda (sum_u s_u |x_u|^2 + sum_i s_i |y_i|^2)
 *
 * with, for an observed rating r:
 *	  implicit: p = 1, c = 1 + alpha r, s = 1
 *	  explicit: p = r, c = 1,           s = number of ratings of the row
 * and w0 the unobserved weight (1 for implicit, 0 for explicit by default;
 * any other value gives WALS as in TensorFlow).
 */
#ifndef WALS_CORE_H
#define WALS_CORE_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum WalsStatus
{
	WALS_OK = 0,
	WALS_EINVAL,				/* an argument is out of its domain */
	WALS_ENONFINITE,			/* a rating or a result is NaN or infinite */
	WALS_ESINGULAR,				/* a row's system is not positive definite */
	WALS_ETOOBIG,				/* more distinct ids than int32 indices allow */
	WALS_ENOMEM,				/* a training engine ran out of its memory */
	WALS_EDEVICE,				/* a training engine's device failed */
	WALS_ECODES					/* more distinct ratings than codes hold */
} WalsStatus;

/* A short lower-case description of a status, for error details. */
extern const char *wals_status_string(WalsStatus status);

/* ---------- interrupts (poll.c) ---------- */

/*
 * A function of the caller's that the core calls from inside its long
 * loops, between pieces of work of about WALS_POLL_WORK multiply-adds
 * (wals_internal.h): a few milliseconds on any CPU, whatever the number
 * of factors, so that every call of the core, from the Cholesky solve of
 * one row at f = 4096 to the Gram of a wide model, reaches the hook
 * within about 10 ms of arithmetic.  Work too small to need it (a row at
 * f = 64, a short scan) calls it rarely or never.
 *
 * The hook may return, and the core goes on; or it may not return: the
 * server's hook is CHECK_FOR_INTERRUPTS(), which on a cancel or a
 * statement_timeout longjmps out through the core's frames.  The core
 * allows that: it holds nothing across a poll that must be released (it
 * allocates nothing, takes no lock, changes no global state but the
 * budget), so leaving it there loses nothing.  What the call was writing
 * into the caller's buffers (factors, a Gram, an index, results) is then
 * partly written, and the caller must not use it, as after a failure.
 * The hook must not call back into the core.
 *
 * One hook per process, installed once (the server at _PG_init, so that
 * its parallel workers have it too); NULL, the default, polls nothing, as
 * the unit tests and the benchmarks run.
 */
typedef void (*WalsPollHook) (void);

extern void wals_set_poll_hook(WalsPollHook hook);

/*
 * What loads BLAS and LAPACK before the core first calls them, and then
 * binds them, or raises an error (blas.c): the server's library is not
 * linked to them.  wals_blas_bind binds them where they are loaded, and
 * says whether they are.  Only in a core built without WALS_BLAS_LINKED,
 * whose programs link BLAS themselves.
 */
typedef void (*WalsBlasLoader) (void);

extern void wals_set_blas_loader(WalsBlasLoader loader);
extern bool wals_blas_bind(void);

/*
 * p[0..n) = 0, and dst[0..n) = src[0..n), polling between slices: the first
 * write to a fresh page costs microseconds, 170 ms for an f x f matrix at
 * f = 4096 and a second for the factors of 20,000 rows, so the caller's
 * clears of a Gram and copies of factors go through these.  wals_copy_bytes
 * copies bytes bytes so, whatever they hold: the arrays of a matrix that a
 * training moves into its shared workspace (hundreds of megabytes).
 */
extern void wals_zero_floats(float *p, size_t n);
extern void wals_copy_floats(float *dst, const float *src, size_t n);
extern void wals_copy_bytes(void *dst, const void *src, size_t bytes);

typedef enum WalsFeedback
{
	WALS_IMPLICIT = 0,
	WALS_EXPLICIT
} WalsFeedback;

/*
 * Whether a model takes rating r, wherever a rating comes from (a source,
 * an argument, a stored row): finite as a float.  Both feedback kinds take
 * the same ratings, implicit feedback reading a negative one as a dislike
 * (wals_cell_weights).  A NaN fails the first comparison, as every
 * comparison with it is false.
 */
static inline int
wals_rating_ok(double r)
{
	return r >= -FLT_MAX && r <= FLT_MAX;
}

typedef enum WalsSolver
{
	WALS_CHOLESKY = 0,
	WALS_CG,
	WALS_SUBSPACE				/* iALS++: exact solves of blocks of dimensions */
} WalsSolver;

typedef struct WalsParams
{
	WalsFeedback feedback;
	WalsSolver	solver;
	int			factors;		/* f */
	int			cg_steps;		/* CG steps per row and half-sweep */
	float		regularization; /* lambda */
	float		alpha;			/* implicit confidence slope */
	float		w0;				/* unobserved weight, already resolved */
	int			block_size;		/* dimensions per block of WALS_SUBSPACE */
	bool		frequency_scaled;	/* s = (n + w0 N)^reg_exponent */
	float		reg_exponent;	/* nu of that scale */
} WalsParams;

/*
 * splitmix64's finalizer, a full-avalanche bijection of 64 bits: it spreads
 * consecutive ids over the hash slots and turns (seed, id, k) into
 * independent-looking random bits.
 */
static inline uint64_t
wals_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * The scale s of a row's regularisation, lambda s |x|^2 in L, for a row
 * of n ratings when the other side has ncols rows.  Frequency scaling
 * (Rendle, Krichene, Zhang, Koren, arXiv:2110.14037) is
 * s = (n + w0 ncols)^nu: the row's share of all weighted cells; without
 * it, s is what every model had before it, 1 for implicit feedback and n
 * for explicit (ALS-WR).  nu = 0 and 1 are exact, without pow().
 */
static inline double
wals_row_scale(const WalsParams *params, int64_t n, int64_t ncols)
{
	double		base;

	if (!params->frequency_scaled)
		return params->feedback == WALS_EXPLICIT ? (double) n : 1.0;
	if (params->reg_exponent == 0.0f)
		return 1.0;
	base = (double) n + (double) params->w0 * (double) ncols;
	return params->reg_exponent == 1.0f ? base : pow(base, params->reg_exponent);
}

/*
 * The distinct ratings of a training's matrices when there are few of
 * them, as stars and counts are: each cell then keeps a one-byte code into
 * value[] instead of a float, which takes a rating's two cells from 16
 * bytes to 10.  slot[] finds a value's code by its bits.
 */
#define WALS_CODES			256
#define WALS_CODE_SLOTS		(2 * WALS_CODES)

typedef struct WalsCodebook
{
	int32_t		n;				/* codes in use */
	float		value[WALS_CODES];
	int16_t		slot[WALS_CODE_SLOTS];	/* a code, or -1 */
} WalsCodebook;

/* An empty codebook. */
extern void wals_codebook_init(WalsCodebook *cb);

/*
 * The code of v, given one when it has none yet; -1 when every code is
 * taken.  Values are compared by their bits, -0 apart from 0.
 */
extern int	wals_codebook_code(WalsCodebook *cb, float v);

/*
 * Whether every value of v[0..n) gets a code of cb, which gives them
 * theirs, and writes them at codes[0..n) unless codes is NULL; false, with
 * cb full and codes partly written, when they are more than WALS_CODES.
 */
extern bool wals_codebook_take(WalsCodebook *cb, const float *v, size_t n,
							   uint8_t *codes);

/* The values of codes[0..n) of cb, a whole matrix's, polling as it goes. */
extern void wals_codebook_decode(const WalsCodebook *cb, const uint8_t *codes, size_t n,
								 float *v);

/*
 * Compressed sparse rows.  The cells hold the merged rating r of each cell;
 * the solvers derive c and p from it and the params.  Within a row, indices
 * are strictly increasing.  A cell's rating is values[k], or, where values
 * is NULL, codebook->value[codes[k]]: read them with wals_csr_values.
 */
typedef struct WalsCsr
{
	int64_t		nrows;
	int64_t		ncols;
	int64_t	   *indptr;			/* nrows + 1 entries */
	int32_t	   *indices;		/* indptr[nrows] entries */
	float	   *values;			/* indptr[nrows] entries, or NULL */
	uint8_t    *codes;			/* indptr[nrows] entries, without values */
	WalsCodebook *codebook;		/* without values */
} WalsCsr;

/* The rating of cell k of R. */
static inline float
wals_csr_value(const WalsCsr *R, int64_t k)
{
	return R->values != NULL ? R->values[k] : R->codebook->value[R->codes[k]];
}

/* Cell i's rating of from into cell j of to, which keeps them as from does. */
static inline void
wals_csr_copy_rating(WalsCsr *to, int64_t j, const WalsCsr *from, int64_t i)
{
	if (from->values != NULL)
		to->values[j] = from->values[i];
	else
		to->codes[j] = from->codes[i];
}

/*
 * The ratings of cells [at, at + n) of R as floats: in place, or decoded
 * into buf (room for n).
 */
static inline const float *
wals_csr_values(const WalsCsr *R, int64_t at, int64_t n, float *buf)
{
	const uint8_t *c;
	const float *value;
	int64_t		k;

	if (R->values != NULL)
		return R->values + at;
	c = R->codes + at;
	value = R->codebook->value;
	for (k = 0; k < n; k++)
		buf[k] = value[c[k]];
	return buf;
}

/* ---------- id maps (idmap.c) ---------- */

/*
 * A map from int64 ids to int32 provisional indices, numbered from 0 in
 * order of first insertion: an array over the range of the ids while it is
 * not much wider than their number, else an open-addressing hash kept at
 * most half full.  The caller owns the memory: before inserting a batch it
 * asks wals_idmap_need and, when that is not 0, moves the map into a buffer
 * of that many bytes with wals_idmap_move and frees the old one.  Once every
 * id is in, wals_idmap_rank gives the ids sorted and the rank of each
 * provisional index, and wals_idmap_renumber turns provisional indices into
 * ranks, so that dense index order is id order whatever the order of
 * insertion.
 */
typedef struct WalsIdSlot
{
	int64_t		id;
	int32_t		index;			/* -1 marks an empty slot */
} WalsIdSlot;

typedef struct WalsIdMap
{
	int32_t    *dense;			/* array layout: index of id lo + k at
								 * dense[k], -1 when absent; else NULL */
	WalsIdSlot *slots;			/* hash layout, else NULL */
	int64_t		lo;
	size_t		nslots;			/* entries of dense, or slots (a power of 2) */
	size_t		count;			/* distinct ids inserted */
	int64_t		min_id;			/* the least and greatest of them */
	int64_t		max_id;
} WalsIdMap;

/* An empty map, holding no memory yet. */
extern void wals_idmap_init(WalsIdMap *map);

/*
 * 0 when ids[0..n) can be inserted as the map is; else the size in bytes of
 * the buffer the map must move to first.
 */
extern size_t wals_idmap_need(const WalsIdMap *map, const int64_t *ids, size_t n);

/*
 * Move the map into buffer, of the size wals_idmap_need gave for the same
 * ids (WALS_EINVAL if smaller, or if no move was needed), keeping every
 * index.  The old buffer is the caller's to free.
 */
extern WalsStatus wals_idmap_move(WalsIdMap *map, void *buffer, size_t bytes,
								  const int64_t *ids, size_t n);

/* Provisional index of id, or -1 when absent. */
extern int32_t wals_idmap_find(const WalsIdMap *map, int64_t id);

/*
 * Insert ids[0..n) in order, each new id with the next provisional index,
 * and write the index of every one to index[0..n).  WALS_EINVAL when the
 * map had to move first, WALS_ETOOBIG past INT32_MAX distinct ids; either
 * may leave the ids before the failing one inserted.
 */
extern WalsStatus wals_idmap_insert_many(WalsIdMap *map, const int64_t *ids,
										 size_t n, int32_t *index);

/*
 * ids[0..count) receives the distinct ids in increasing order and
 * rank[p] the position in ids of the id with provisional index p.  A map
 * of the hash layout is spent: it sorts its slots where they lie, and
 * only its memory is left to free.
 */
extern void wals_idmap_rank(WalsIdMap *map, int64_t *ids, int32_t *rank);

/* index[k] = rank[index[k]] for k < n. */
extern void wals_idmap_renumber(int32_t *index, size_t n, const int32_t *rank);

/*
 * Index of id in ids[0..n), which must be strictly increasing (as the ids
 * from wals_idmap_rank are), or -1 when absent.  For lookups against a
 * stored model, where keeping the hash table would cost memory.
 */
extern int64_t wals_ids_find(const int64_t *ids, int64_t n, int64_t id);

/*
 * A directory over strictly increasing ids, for lookups without a search
 * of them all: bucket b holds the ids from lo + b * 2^shift up to the next
 * bucket's, ids[start[b] .. start[b + 1]), and a lookup searches its
 * bucket alone.  Ids spread evenly put about two in a bucket, so a lookup
 * costs a load or two where a binary search of 41,000 ids cost 110 ns; ids
 * bunched together cost no more than the search of them all.  start is the
 * caller's, wals_id_directory_size bytes, so that it can live in shared
 * memory; the struct only points at it.
 */
typedef struct WalsIdDirectory
{
	const int64_t *ids;
	int64_t		n;
	const int64_t *start;		/* nbuckets + 1 entries */
	int64_t		lo;
	int			shift;
	int64_t		nbuckets;
} WalsIdDirectory;

/* Bytes of the start array of a directory over n ids. */
extern size_t wals_id_directory_size(int64_t n);

/*
 * Fill start (wals_id_directory_size(n) bytes) for ids[0..n), strictly
 * increasing, and return the directory's shape in *d; WALS_EINVAL for ids
 * that do not increase.
 */
extern WalsStatus wals_id_directory_build(WalsIdDirectory *d, const int64_t *ids, int64_t n,
										  int64_t *start);

/* Index of id among the directory's ids, or -1 when absent. */
extern int64_t wals_id_directory_find(const WalsIdDirectory *d, int64_t id);

/* Index of v in a[0..n), strictly increasing dense indices, or -1. */
extern int64_t wals_index_find(const int32_t *a, int64_t n, int32_t v);

/*
 * Sort ids[0..n) and keep each once, in place; the count kept.  For ids
 * gathered from several places (the servers of a sharded training).
 */
extern int64_t wals_ids_sort_unique(int64_t *ids, int64_t n);

/* ---------- sparse build (csr.c) ---------- */

/*
 * Bytes of scratch with which a scatter or transpose of n cells may take
 * the faster two-level counting sort (see csr.c): about n / 64, 300 kB at
 * least, and 0 for sorts too small to need it.
 */
extern size_t wals_csr_scratch_bytes(size_t n);

/*
 * Counting-scatter coordinates (row[k], col[k], val[k]), k < n, into out, an
 * nrows x ncols CSR whose indptr has nrows + 1 entries and whose indices and
 * values (or codes, where out->values is NULL, of out->codebook) have room
 * for n.  Within a row, cells keep their input order, so columns are
 * unsorted and may repeat: out is only fit for wals_csr_transpose_merge.
 * With a scratch of wals_csr_scratch_bytes(n) (or more; NULL or less takes
 * the one-level sort) a large scatter is faster; the result is the same.
 * Returns WALS_EINVAL for a size or an index out of range, WALS_ENONFINITE
 * for a non-finite value and WALS_ECODES for a value the codebook has no
 * room for.
 */
extern WalsStatus wals_csr_scatter(int64_t nrows, int64_t ncols, size_t n,
								   const int32_t *row, const int32_t *col,
								   const float *val, WalsCsr *out,
								   void *scratch, size_t scratch_bytes);

/*
 * wals_csr_scatter of coordinates whose ratings are code[k], k < n, codes
 * of out->codebook, into out, which has codes: a rating takes 9 bytes as
 * coordinates, not 12, beside the 5 of out.  Returns WALS_EINVAL as
 * wals_csr_scatter does, and for out with values or a code its codebook
 * does not hold.
 */
extern WalsStatus wals_csr_scatter_codes(int64_t nrows, int64_t ncols, size_t n,
										 const int32_t *row, const int32_t *col,
										 const uint8_t *code, WalsCsr *out,
										 void *scratch, size_t scratch_bytes);

/*
 * Bytes of scratch wals_csr_group_in_place needs for nrows rows.
 */
extern size_t wals_csr_group_scratch_bytes(int64_t nrows);

/*
 * Group coordinates (row[k], col[k], val[k]), k < n, by row, in place: on
 * return col[0..n) and val[0..n) hold row 0's cells, then row 1's, ..., in
 * no particular order within a row, repeats kept, and indptr[0..nrows] (room
 * for nrows + 1) the row starts, indptr[nrows] = n; row[] is clobbered.  The
 * result is fit for wals_csr_transpose_merge (as an nrows x ncols CSR with
 * indices = col, values = val), which then gives exactly what it gives after
 * wals_csr_scatter.  Returns WALS_EINVAL for a size or an index out of range
 * and WALS_ENONFINITE for a non-finite value, checked before anything moves
 * (the arrays are then unchanged).  scratch: wals_csr_group_scratch_bytes(nrows)
 * bytes, 200 kB for 10 million rows; NULL or fewer is WALS_EINVAL.  Like the
 * scatter and the transposes, it polls every few milliseconds of its passes;
 * a hook that does not return leaves the arrays partly grouped.
 */
extern WalsStatus wals_csr_group_in_place(int64_t nrows, int64_t ncols, size_t n,
										  int32_t *row, int32_t *col, float *val,
										  int64_t *indptr, void *scratch,
										  size_t scratch_bytes);

/*
 * The transpose of in (whose rows may be unsorted and repeat columns) with
 * duplicate cells merged: summed for implicit, averaged for explicit, in an
 * order that does not depend on the order of in's rows.  out is sized from
 * in (ncols + 1 pointers, room for all of in's cells); on return its rows
 * are strictly increasing and out->indptr[out->nrows] is the merged nnz.
 * scratch as for wals_csr_scatter, of wals_csr_scratch_bytes(in's nnz).
 * Returns WALS_ENONFINITE when a merged cell overflows a float.
 */
extern WalsStatus wals_csr_transpose_merge(WalsFeedback feedback,
										   const WalsCsr *in, WalsCsr *out,
										   void *scratch, size_t scratch_bytes);

/* The transpose of a CSR (its CSC, as a CSR by column); rows stay sorted. */
extern void wals_csr_transpose(const WalsCsr *in, WalsCsr *out);

/* wals_csr_transpose, through a scratch as for wals_csr_transpose_merge. */
extern void wals_csr_transpose_with(const WalsCsr *in, WalsCsr *out,
									void *scratch, size_t scratch_bytes);

/*
 * Sort rows [first, last) of csr by column where they lie, and merge their
 * repeats as wals_csr_transpose_merge merges them (csr_rows.c): the rows
 * start at csr->indptr[first..last) and the last ends at *end; merged,
 * they are packed from the first row's start on, indptr[first..last)
 * their new starts and *end their new end.  Rows that fit the scratch, of
 * any size (a cell takes 8 bytes, 5 with codes), are sorted through it,
 * faster than in place; wals_csr_scratch_bytes(nnz) serves.  Given a
 * matrix by item of wals_csr_scatter, every row sorted gives, to the bit,
 * the transpose of its wals_csr_transpose_merge, with codes once that has
 * put the merged ratings in the codebook they share.  Processes may take disjoint ranges of
 * one csr at once, each knowing its range's end beforehand, and close the
 * gaps after with wals_csr_move_rows, range by range in order.  Returns
 * as wals_csr_transpose_merge, and WALS_ECODES where a merged rating has
 * no code in csr's codebook.
 */
extern WalsStatus wals_csr_sort_rows(WalsFeedback feedback, WalsCsr *csr, int64_t first,
									 int64_t last, int64_t *end, void *scratch,
									 size_t scratch_bytes);

/*
 * Move rows [first, last) of csr, which end at end, down so that they
 * start at to, their starts with them.
 */
extern void wals_csr_move_rows(WalsCsr *csr, int64_t first, int64_t last, int64_t end,
							   int64_t to);

/* wals_csr_sort_rows over every row of csr, indptr[nrows] set. */
extern WalsStatus wals_csr_sort_merge(WalsFeedback feedback, WalsCsr *csr, void *scratch,
									  size_t scratch_bytes);

/*
 * The transpose of in into out (wals_csr_transpose_merge where merge,
 * wals_csr_transpose_with otherwise) taken by several processes that map
 * in, out and a WalsCsrSplit of wals_csr_split_size(out's rows,
 * count_bytes) bytes in shared memory, count_bytes being what the split
 * may spend on counts (each chunk counts out's rows, 4 bytes a row).
 * begin (one process) cuts in's rows into wals_csr_split_chunks chunks;
 * false, leaving nothing to undo, where the transpose is too small for
 * two levels or fewer than two chunks' counts fit: take the transpose in
 * one process then.  Then count each chunk (in any process, in any
 * order); plan (one process, with a scratch as for the transposes; false
 * as begin, out's counts then to be made again); scatter each chunk and
 * sort each of the wals_csr_split_parts partitions, each process with a
 * scratch of its own of wals_csr_scratch_bytes(in's nnz), with the merge
 * that end is given (each sort then notes whether its rows repeat a
 * column, so that end merges only from the first that does); and end (one
 * process): out is then the one-process transpose's, to the bit.  Every
 * step must be finished in every process before the next begins.
 */
typedef struct WalsCsrSplit WalsCsrSplit;

extern size_t wals_csr_split_size(int64_t out_rows, size_t count_bytes);
extern bool wals_csr_split_begin(WalsCsrSplit *s, const WalsCsr *in, WalsCsr *out,
								 size_t count_bytes);
extern int64_t wals_csr_split_chunks(const WalsCsrSplit *s);
extern int64_t wals_csr_split_parts(const WalsCsrSplit *s);
extern void wals_csr_split_count(WalsCsrSplit *s, const WalsCsr *in, int64_t chunk);
extern bool wals_csr_split_plan(WalsCsrSplit *s, WalsCsr *out, void *scratch,
								size_t scratch_bytes);
extern WalsStatus wals_csr_split_scatter(const WalsCsrSplit *s, const WalsCsr *in,
										 WalsCsr *out, int64_t chunk, void *scratch,
										 size_t scratch_bytes);
extern WalsStatus wals_csr_split_sort(WalsCsrSplit *s, WalsCsr *out, int64_t part, bool merge,
									  void *scratch, size_t scratch_bytes);
extern WalsStatus wals_csr_split_end(const WalsCsrSplit *s, WalsCsr *out, bool merge,
									 WalsFeedback feedback);

/*
 * The merge of end, a partition at a time, for the one process that
 * merges while others still sort: begin, then merge_part for each
 * partition in order, each once its sort and those of the partitions
 * before it are done, and merge_end; out is then end's, to the bit.
 * merge_part writes only the cells and row starts of that partition and
 * those before it.  The most partitions a split has is WALS_CSR_MAX_PARTS.
 */
#define WALS_CSR_MAX_PARTS	2048

typedef struct WalsCsrMerge
{
	int64_t		part;			/* the next partition to merge */
	int64_t		w;				/* where its first cell goes, once cells move */
	bool		moving;			/* a partition before it repeated a column */
} WalsCsrMerge;

extern void wals_csr_split_merge_begin(WalsCsrMerge *m);
extern WalsStatus wals_csr_split_merge_part(const WalsCsrSplit *s, WalsCsr *out,
											WalsCsrMerge *m, WalsFeedback feedback);
extern void wals_csr_split_merge_end(const WalsCsrSplit *s, WalsCsr *out, const WalsCsrMerge *m);

/*
 * wals_csr_scatter_codes short of its last pass, into out and s (of
 * wals_csr_split_size(nrows, 0) bytes, in memory the processes share):
 * the cells are in out by partition, each of the wals_csr_split_parts(s)
 * partitions then to be sorted by wals_csr_split_sort, in any process and
 * any order, and wals_csr_split_end(s, out, false, ...) last, in one; out
 * is then wals_csr_scatter_codes's, to the bit.  A scatter too small for
 * two levels leaves s without partitions and out finished.
 */
extern WalsStatus wals_csr_scatter_codes_split(WalsCsrSplit *s, int64_t nrows, int64_t ncols,
											   size_t n, const int32_t *row,
											   const int32_t *col, const uint8_t *code,
											   WalsCsr *out, void *scratch,
											   size_t scratch_bytes);

/*
 * wals_csr_scatter_codes of n rows taken by several processes as the
 * transpose above is: begin (one process) cuts the rows into
 * wals_csr_split_chunks runs of equal length, into out's shape; false
 * where the scatter is too small for two levels or fewer than two chunks'
 * counts fit (take wals_csr_scatter_codes then).  Then count each chunk,
 * which checks its rows as wals_csr_scatter_codes does (WALS_EINVAL on
 * one out of range); plan; scatter each chunk; sort each partition; and
 * end (merge false): out is then wals_csr_scatter_codes's, to the bit.
 */
extern bool wals_csr_split_rows_begin(WalsCsrSplit *s, int64_t nrows, int64_t ncols,
									  size_t n, WalsCsr *out, size_t count_bytes);
extern WalsStatus wals_csr_split_rows_count(WalsCsrSplit *s, const WalsCsr *out,
											const int32_t *row, const int32_t *col,
											const uint8_t *code, int64_t chunk);
extern WalsStatus wals_csr_split_rows_scatter(const WalsCsrSplit *s, const int32_t *row,
											  const int32_t *col, const uint8_t *code,
											  WalsCsr *out, int64_t chunk, void *scratch,
											  size_t scratch_bytes);

/*
 * wals_csr_scatter by column into the scratch (tmp_indptr of ncols + 1,
 * tmp_idx and tmp_val of n), then wals_csr_transpose_merge into out, for
 * callers that can afford both copies at once.  counts (room for n, or
 * NULL) receives the number of coordinates merged into each cell of out.
 */
extern WalsStatus wals_csr_from_coo(WalsFeedback feedback,
									int64_t nrows, int64_t ncols, size_t n,
									const int32_t *row, const int32_t *col,
									const float *val, WalsCsr *out,
									int64_t *tmp_indptr, int32_t *tmp_idx,
									float *tmp_val, int32_t *counts);

/* ---------- validation hold-out (holdout.c) ---------- */

/*
 * The cells of R (by user, ids row_ids and col_ids) that a validation
 * share of share (0 to 1) holds out with this seed: a cell is held out
 * when a hash of (seed, its user's id, its item's id) falls below share,
 * except that a user whose cells would all be held out keeps its first,
 * and that under implicit feedback a dislike (below zero) stays.
 */
extern int64_t wals_holdout_count(const WalsCsr *R, WalsFeedback feedback,
								  const int64_t *row_ids, const int64_t *col_ids,
								  double share, uint64_t seed);

/*
 * Move those cells from R into out (R's shape; indptr of nrows + 1, room
 * for wals_holdout_count cells, values as floats), compacting R in place:
 * rows stay sorted.  Both poll as the build's passes do; a hook that does
 * not return leaves R partly compacted.
 */
extern void wals_holdout_split(WalsCsr *R, WalsFeedback feedback, const int64_t *row_ids,
							   const int64_t *col_ids, double share, uint64_t seed,
							   WalsCsr *out);

/*
 * keep and held_cells (as wals_holdout_split leaves them) merged back into
 * out, R as it was but with values as floats: rows sorted, room for all the
 * cells; polls as the split does.
 */
extern void wals_holdout_join(const WalsCsr *keep, const WalsCsr *held_cells, WalsCsr *out);

/* The users with held-out cells, at most max_users (0: no limit). */
extern int64_t wals_holdout_users(const WalsCsr *held_cells, int64_t max_users);

/* ---------- factors (init.c) ---------- */

/*
 * Deterministic initial factors for rows [lo, hi) of X: entry (r, k) is a
 * normal deviate of standard deviation scale drawn from (seed, ids[r], k)
 * alone, so a row's start does not depend on how many rows there are or in
 * which order they were read.
 */
extern void wals_init_rows(float *X, const int64_t *ids, int64_t lo, int64_t hi,
						   int f, uint64_t seed, float scale);

/* ---------- solvers (gram.c, solve.c, kernels*.c) ---------- */

/* The family of vector kernels in use, e.g. "avx512". */
extern const char *wals_kernels_name(void);

/*
 * Whether a family of kernels can be chosen by name ("auto", "avx512",
 * "avx2", "neon", "generic"): 1 if so, 0 for one this CPU or build cannot
 * run, -1 for a name that is none of these.
 */
extern int	wals_kernels_check(const char *name);

/*
 * Use this family from now on, in the solvers and in scoring alike ("auto":
 * the widest this CPU runs); the name must have passed wals_kernels_check.
 */
extern void wals_kernels_use(const char *name);

/* The families this CPU runs, widest first, e.g. "avx512,avx2,generic". */
extern const char *wals_kernels_available(void);

/*
 * G += sum over rows [lo, hi) of Y of y y^T (f x f, full symmetric, row-major).
 * The caller zeroes G first; partial sums of disjoint ranges add up.
 */
extern void wals_gram_rows(const float *Y, int64_t lo, int64_t hi, int f, float *G);

/*
 * Floats of scratch one process needs to solve rows with these params and
 * at most max_row_nnz ratings in a row.  For Cholesky and CG it does not
 * grow with max_row_nnz past a block of cells; the subspace solver keeps
 * a prediction for each cell of the longest row.
 */
extern size_t wals_solve_scratch(const WalsParams *params, int64_t max_row_nnz);

/*
 * Solve rows [lo, hi) of X given the other side Y, whose Gram G = Y^T Y is
 * already computed.  R has one row per row of X and columns index Y.  Row u
 * solves
 *	  (w0 G + sum_i (c_ui - w0) y_i y_i^T + lambda s_u I) x_u = sum_i c_ui p_ui y_i
 * exactly (Cholesky), with params->cg_steps conjugate gradient steps warm
 * started from the current x_u, or (subspace, iALS++) by one sweep of exact
 * solves over blocks of params->block_size dimensions, the others held at
 * their current values: O(nnz f b) per row instead of O(nnz f^2), never
 * raising the row's loss, and exact when block_size >= f.  A row without
 * ratings gets the zero vector.  On WALS_ESINGULAR or WALS_ENONFINITE,
 * *bad_row (when not NULL) names the first failing row; WALS_EINVAL for a
 * bad range or params (such as cg_steps < 0 for CG, block_size < 1 for the
 * subspace solver).  G is not read when w0 is 0.
 */
extern WalsStatus wals_solve_rows(const WalsParams *params, const WalsCsr *R,
								  const float *Y, const float *G, float *X,
								  int64_t lo, int64_t hi, float *scratch,
								  int64_t *bad_row);

/* ---------- loss (loss.c) ---------- */

/*
 * Part of L from rows [lo, hi) of R: sum over their observed cells of
 * c (p - x.y)^2 - w0 (x.y)^2, plus lambda s_u |x_u|^2.  Accumulated in double.
 */
extern double wals_loss_rows(const WalsParams *params, const WalsCsr *R,
							 const float *X, const float *Y,
							 int64_t lo, int64_t hi);

/* lambda sum over rows [lo, hi) of s_i |y_i|^2, s_i read from Rt. */
extern double wals_reg_rows(const WalsParams *params, const WalsCsr *Rt,
							const float *Y, int64_t lo, int64_t hi);

/* The unobserved term over every cell, w0 sum_ab GX_ab GY_ab (trace identity). */
extern double wals_loss_unobserved(const WalsParams *params,
								   const float *GX, const float *GY);

/* ---------- acceleration (accel.c) ---------- */

/*
 * ALS-NCG (arXiv:1508.03110) moves all factors z = (X, Y) at once along a
 * direction d, which train/ncg.c chooses from an ALS sweep.  Along d the
 * objective is a quartic in the step t, L(z + t d) = sum_k coef[k] t^k,
 * whose five coefficients come exactly from one pass over the observed
 * cells and the same Gram identities as the loss.
 */
#define WALS_LINE_TERMS 5

/*
 * coef += the terms of rows [lo, hi) of R in L(z + t d): their observed
 * cells' c (p - x(t).y(t))^2 - w0 (x(t).y(t))^2 and lambda s_u |x(t)|^2,
 * with x(t) = x + t dx and y(t) = y + t dy.  Accumulated in double.
 */
extern void wals_line_rows(const WalsParams *params, const WalsCsr *R,
						   const float *X, const float *DX,
						   const float *Y, const float *DY,
						   int64_t lo, int64_t hi, double coef[WALS_LINE_TERMS]);

/* coef += lambda s_i |y_i + t dy_i|^2 over rows [lo, hi), s_i read from Rt. */
extern void wals_line_reg_rows(const WalsParams *params, const WalsCsr *Rt,
							   const float *Y, const float *DY,
							   int64_t lo, int64_t hi, double coef[WALS_LINE_TERMS]);

/* C += X^T D over rows [lo, hi): C_ab = sum_u x_ua d_ub (f x f, row-major). */
extern void wals_cross_rows(const float *X, const float *D, int64_t lo, int64_t hi,
							int f, float *C);

/*
 * coef += the unobserved term w0 trace(GX(t) GY(t)), with GX(t) = GX +
 * t (CX + CX^T) + t^2 GDX the Gram of X + t DX (CX = X^T DX, GDX = DX^T DX),
 * and the same for Y.
 */
extern void wals_line_unobserved(const WalsParams *params,
								 const float *GX, const float *CX, const float *GDX,
								 const float *GY, const float *CY, const float *GDY,
								 double coef[WALS_LINE_TERMS]);

/*
 * The step t minimising sum_k coef[k] t^k, and its value: 1, or 0 when the
 * polynomial has no finite minimum (a step cannot be taken).
 */
extern int	wals_quartic_min(const double coef[WALS_LINE_TERMS], double *t, double *value);

/* ---------- explanations (explain.c) ---------- */

/* Doubles of scratch wals_explain_row needs at f factors. */
extern size_t wals_explain_scratch(int f);

/*
 * The score of an item y_i for the user whose n rated cells are idx/val
 * (merged ratings, as in a CSR row), split into one term per cell:
 * contrib[j] = c_j p_j (A^-1 y_i) . y_idx[j], A being the user's exact
 * system against Y with Gram G (see wals_solve_rows).  The terms add up to
 * y_i . x for the x that system solves.  WALS_ESINGULAR when A is not
 * positive definite.
 */
extern WalsStatus wals_explain_row(const WalsParams *params, const float *G,
								   const float *Y, int64_t ncols, const int32_t *idx,
								   const float *val, int64_t n, const float *yi,
								   float *contrib, double *scratch);

/* ---------- top-k (topk.c) ---------- */

/*
 * A bounded heap keeping the k best (score, index) pairs: a higher score
 * wins, and among equal scores the lower index (= the lower id, since
 * indices follow id order).  NaN scores are never kept.
 */
typedef struct WalsTopK
{
	int			k;
	int			size;
	int32_t    *idx;			/* k entries, caller-owned */
	float	   *score;			/* k entries, caller-owned */
} WalsTopK;

extern void wals_topk_init(WalsTopK *heap, int k, int32_t *idx, float *score);
extern void wals_topk_push(WalsTopK *heap, int32_t idx, float score);

/* Sort the kept pairs best first, in place; returns how many there are. */
extern int	wals_topk_finish(WalsTopK *heap);

/*
 * The k best of scores[0..n), skipping the sorted indices skip[0..nskip).
 * Fills idx/score best first and returns the count, min(k, eligible).
 */
extern int	wals_topk_select(const float *scores, int64_t n,
							 const int32_t *skip, int64_t nskip,
							 int k, int32_t *idx, float *score);

/* ---------- a user's rated items, packed (rated.c) ---------- */

/*
 * A model keeps each user's rated items (the merged cells a training saw:
 * distinct item ids and their ratings) beside the user's factors, packed in
 * a few bytes a rating so that writing them costs little more than the
 * factors: strictly increasing ids as varint deltas, and the ratings as
 * nothing (all 1), varints (all whole numbers from 0 to 2^32 - 1) or
 * float32, whichever fits.  Decoding checks every byte: the packed form is
 * read back from a table whose owner may have written anything into it.
 */

/* Bytes wals_rated_pack may write for n items, at most. */
extern size_t wals_rated_pack_bound(int64_t n);

/*
 * Pack ids[0..n) (strictly increasing) with ratings[0..n) into out, which
 * has room for wals_rated_pack_bound(n) bytes; returns the bytes written.
 */
extern size_t wals_rated_pack(const int64_t *ids, const float *ratings, int64_t n,
							  uint8_t *out);

/*
 * The number of items packed in in[0..len), which is at most len; WALS_EINVAL
 * for bytes that are not a packed list.
 */
extern WalsStatus wals_rated_count(const uint8_t *in, size_t len, int64_t *n);

/*
 * Unpack in[0..len) into ids[0..n) and ratings[0..n), n from
 * wals_rated_count; WALS_EINVAL for bytes that are not a packed list
 * (ids not strictly increasing, or out of range, or trailing bytes).
 */
extern WalsStatus wals_rated_unpack(const uint8_t *in, size_t len, int64_t n,
									int64_t *ids, float *ratings);

#endif							/* WALS_CORE_H */
