/*
 * peer_solve.c
 *	  A shard's side of a sharded training, from its matrices on (after
 *	  peer_route.c):
 *
 *	  wals_shard_start		both matrices of the owned rows
 *	  wals_shard_put		rows of factors: the owned rows' own, or the
 *							rows another shard solved
 *	  wals_shard_solve		a half-sweep over the owned rows of a side
 *	  wals_shard_take		the factors of its rows, a page at a time
 *	  wals_shard_loss		the owned users' part of the loss
 *	  wals_shard_rated		the owned users' rated items, as stored
 *	  wals_shard_end		free everything; the most memory it held
 *
 * A shard keeps the rows it solves; the rows every other shard solved
 * come to it after each half-sweep (wals_shard_put, in pages), and with
 * its own they are the other side of its next half-sweep, whose Gram comes
 * with the call.  It solves its rows exactly as src/core solves them on
 * one server, and returns the Gram of those rows, the items'
 * regularisation, and then the rows; the users' cells and regularisation
 * it sums once the items are solved, from every item's factors
 * (wals_shard_loss), which it keeps for the next half-sweep of the users.
 * The coordinator adds it all up into exactly the loss src/core computes,
 * but for the order of the sums.
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "shard_peer.h"

PG_FUNCTION_INFO_V1(wals_shard_start);
PG_FUNCTION_INFO_V1(wals_shard_put);
PG_FUNCTION_INFO_V1(wals_shard_solve);
PG_FUNCTION_INFO_V1(wals_shard_take);
PG_FUNCTION_INFO_V1(wals_shard_loss);
PG_FUNCTION_INFO_V1(wals_shard_rated);
PG_FUNCTION_INFO_V1(wals_shard_end);

/*
 * The matrix of the owned rows own (nown, increasing) of one side from
 * cells (row, col dense in the whole training), duplicates merged as
 * src/core merges them; the columns are the other side's ncols rows.
 */
static void
build_matrix(Session *s, Cells *c, bool by_user, const int32 *own, int64 nown,
			 int64 ncols, WalsCsr *out)
{
	int32	   *rows = palloc_extended(sizeof(int32) * Max(c->n, 1), MCXT_ALLOC_HUGE);
	int64	   *tmp_indptr = palloc_extended(sizeof(int64) * (ncols + 1), MCXT_ALLOC_HUGE);
	int32	   *tmp_idx = palloc_extended(sizeof(int32) * Max(c->n, 1), MCXT_ALLOC_HUGE);
	float	   *tmp_val = palloc_extended(sizeof(float) * Max(c->n, 1), MCXT_ALLOC_HUGE);
	const int32 *key = by_user ? c->row : c->col;
	const int32 *col = by_user ? c->col : c->row;
	WalsStatus	st;

	wals_shard_note_peak(s);
	for (int64 k = 0; k < c->n; k++)
		rows[k] = (int32) wals_index_find(own, nown, key[k]);
	out->indptr = wals_shard_alloc_rows(sizeof(int64) * (nown + 1));
	out->indices = wals_shard_alloc_rows(sizeof(int32) * c->n);
	out->values = wals_shard_alloc_rows(sizeof(float) * c->n);
	st = wals_csr_from_coo(s->params.feedback, nown, ncols, c->n, rows, col, c->val, out,
						   tmp_indptr, tmp_idx, tmp_val, NULL);
	if (st != WALS_OK)
		wals_report_core_status(st, "building a shard's matrices");
	out->nrows = nown;
	out->ncols = ncols;
	pfree(rows);
	pfree(tmp_indptr);
	pfree(tmp_idx);
	pfree(tmp_val);
	wals_shard_cells_free(c);
}

/* The room of what the solves read: both matrices and the factors. */
static Size
rows_bytes(const Session *s)
{
	int64		f = s->params.factors;
	const WalsCsr *m[2] = {&s->by_user, &s->by_item};
	Size		bytes = 0;

	for (int side = 0; side < 2; side++)
		bytes += wals_shard_rows_bytes(sizeof(int64) * (m[side]->nrows + 1)) +
			wals_shard_rows_bytes(sizeof(int32) * m[side]->indptr[m[side]->nrows]) +
			wals_shard_rows_bytes(sizeof(float) * m[side]->indptr[m[side]->nrows]) +
			wals_shard_rows_bytes(sizeof(float) * m[side]->nrows * f);
	return bytes + wals_shard_rows_bytes(sizeof(float) * Max(s->nusers, s->nitems) * f);
}

/*
 * What wals_shard_start adds at its peak to what the session holds: both
 * matrices of the owned rows and the scratch of building them (8 bytes a
 * row and a column, 20 a cell), each matrix again when it is moved into
 * the segment shared with workers, and the factors the solves read.
 */
static double
start_bytes(const Session *s)
{
	double		f = s->params.factors;
	double		cells = (double) s->out_users[s->shard].n + (double) s->out_items[s->shard].n;
	double		rows = (double) s->own_nusers + (double) s->own_nitems;
	double		most = (double) Max(s->nusers, s->nitems);

	return 2 * (sizeof(int64) * (rows + 2) + 8 * cells) +
		sizeof(int64) * (most + 1) + 12 * cells +
		sizeof(float) * f * (rows + most) + 6 * (double) wals_shard_rows_bytes(0);
}

/* Move matrix m into what wals_shard_alloc_rows gives now. */
static void
move_matrix(WalsCsr *m)
{
	int64		nnz = m->indptr[m->nrows];
	int64	   *indptr = wals_shard_alloc_rows(sizeof(int64) * (m->nrows + 1));
	int32	   *indices = wals_shard_alloc_rows(sizeof(int32) * nnz);
	float	   *values = wals_shard_alloc_rows(sizeof(float) * nnz);

	memcpy(indptr, m->indptr, sizeof(int64) * (m->nrows + 1));
	memcpy(indices, m->indices, sizeof(int32) * nnz);
	memcpy(values, m->values, sizeof(float) * nnz);
	m->indptr = indptr;
	m->indices = indices;
	m->values = values;
}

/*
 * wals_shard_start() RETURNS bigint
 *
 * Once every inbox has arrived: both matrices of the owned rows; the owned
 * users' cells once merged, which the coordinator adds up.
 */
Datum
wals_shard_start(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_START);
	int			f = s->params.factors;
	MemoryContext old;
	int64		longest = 0;

	wals_shard_reserve(s, start_bytes(s), "the matrices of a sharded training");
	wals_shard_changing(s);
	old = MemoryContextSwitchTo(s->cxt);
	/*
	 * The matrices are built in memory of their own, and then moved into
	 * the segment shared with workers: reserving it before would hold the
	 * item matrix beside every cell and the scratch of the user matrix.
	 */
	s->rows_cxt = AllocSetContextCreate(s->cxt, "wals shard matrices", ALLOCSET_DEFAULT_SIZES);
	build_matrix(s, &s->out_users[s->shard], true, s->own_users, s->own_nusers, s->nitems,
				 &s->by_user);
	build_matrix(s, &s->out_items[s->shard], false, s->own_items, s->own_nitems, s->nusers,
				 &s->by_item);
	wals_shard_share_rows(s, rows_bytes(s));
	if (s->seg != NULL)
	{
		move_matrix(&s->by_user);
		move_matrix(&s->by_item);
		wals_shard_note_peak(s);
		MemoryContextDelete(s->rows_cxt);
		s->rows_cxt = s->cxt;
	}
	s->X = wals_shard_alloc_rows(sizeof(float) * s->own_nusers * f);
	s->Y = wals_shard_alloc_rows(sizeof(float) * s->own_nitems * f);
	for (int64 r = 0; r < s->own_nusers; r++)
		longest = Max(longest, s->by_user.indptr[r + 1] - s->by_user.indptr[r]);
	for (int64 r = 0; r < s->own_nitems; r++)
		longest = Max(longest, s->by_item.indptr[r + 1] - s->by_item.indptr[r]);
	s->scratch_floats = wals_solve_scratch(&s->params, longest);
	wals_shard_reserve(s, sizeof(float) * (double) s->scratch_floats * (1 + s->workers),
					   "the solvers of a sharded training");
	s->scratch = wals_alloc_huge(s->cxt, sizeof(float) * s->scratch_floats);
	s->other = wals_shard_alloc_rows(sizeof(float) * Max(s->nusers, s->nitems) * f);
	wals_shard_note_peak(s);
	MemoryContextSwitchTo(old);
	wals_shard_leave(SHARD_START);
	PG_RETURN_INT64(s->by_user.indptr[s->own_nusers]);
}

/*
 * wals_shard_put(side int, shard int, first bigint, rows bytea) RETURNS void
 *
 * Factors of the rows of side (0 users, 1 items) that shard owns, from its
 * first-th on, f floats each: this shard's own, their starting factors; or
 * another shard's, which the next half-sweep or loss here reads.  Another
 * shard's rows come whole and in order, first 0 starting them anew, and
 * rows of the side not held replace what other holds.
 */
Datum
wals_shard_put(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_PUT);
	int			side = PG_GETARG_INT32(0);
	int			t = PG_GETARG_INT32(1);
	int64		first = PG_GETARG_INT64(2);
	bytea	   *rows = PG_GETARG_BYTEA_PP(3);
	int			f = s->params.factors;
	int64		total;
	WalsWire	w;
	int64		n;

	if (side < 0 || side > 1 || t < 0 || t >= s->nshards)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_put(): no side %d of shard %d", side, t)));
	total = s->nrows_of[side][t];
	n = (int64) (VARSIZE_ANY_EXHDR(rows) / (sizeof(float) * f));
	if (t != s->shard)
	{
		OtherSide	want = side == 0 ? OTHER_USERS : OTHER_ITEMS;

		if (s->other_side != want)
		{
			s->other_side = want;
			memset(s->other_in, 0, sizeof(int64) * s->nshards);
		}
		if (first == 0)
			s->other_in[t] = 0;
		if (first != s->other_in[t])
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("wals_shard_put(): factors out of order")));
	}
	if (first < 0 || first > total || n > total - first)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals_shard_put(): rows " INT64_FORMAT " to " INT64_FORMAT
						" of " INT64_FORMAT, first, first + n, total)));
	wals_wire_start(&w, VARDATA_ANY(rows), VARSIZE_ANY_EXHDR(rows), "factors");
	if (t == s->shard)
		wals_wire_floats(&w, (side == 0 ? s->X : s->Y) + (size_t) first * f, n * f);
	else
	{
		const int32 *at = s->rows_of[side][t] + first;

		for (int64 k = 0; k < n; k++)
			wals_wire_floats(&w, s->other + (size_t) at[k] * f, f);
		s->other_in[t] += n;
	}
	wals_wire_done(&w);
	wals_shard_leave(SHARD_PUT);
	PG_RETURN_VOID();
}

/*
 * Make other every row of side's factors (0 users, 1 items): every other
 * shard's must have come since that side was last solved, and this
 * shard's own are copied in.
 */
static void
other_ready(Session *s, int side, const char *fn)
{
	int			f = s->params.factors;
	const float *own = side == 0 ? s->X : s->Y;
	const int32 *at = s->rows_of[side][s->shard];

	for (int t = 0; t < s->nshards; t++)
		if (t != s->shard &&
			(s->other_side != (side == 0 ? OTHER_USERS : OTHER_ITEMS) ||
			 s->other_in[t] != s->nrows_of[side][t]))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s(): the %s factors of shard %d have not all come", fn,
							side == 0 ? "user" : "item", t)));
	for (int64 k = 0; k < s->nrows_of[side][s->shard]; k++)
		memcpy(s->other + (size_t) at[k] * f, own + (size_t) k * f, sizeof(float) * f);
	s->other_side = side == 0 ? OTHER_USERS : OTHER_ITEMS;
}

/*
 * wals_shard_solve(side int, doing text, gram bytea, max_bytes bigint)
 * RETURNS bytea
 *
 * A half-sweep over this shard's rows of side (0 users, 1 items) from
 * every row of the other side (the other shards' put before) and its Gram: the items' regularisation (0 for the users, whose
 * loss wals_shard_loss gives), the parallel workers it launched, the Gram
 * of the rows solved, and the rows
 * when all fit in max_bytes (else wals_shard_take gives them).  A row that
 * cannot be solved is the error wals_train raises on one server, naming
 * the row's id and doing (what the coordinator was doing).
 */
Datum
wals_shard_solve(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_SOLVE);
	int			side = PG_GETARG_INT32(0);
	char	   *doing = text_to_cstring(PG_GETARG_TEXT_PP(1));
	bytea	   *gb = PG_GETARG_BYTEA_PP(2);
	int64		most = PG_GETARG_INT64(3);
	int			f = s->params.factors;
	bool		users = side == 0;
	const WalsCsr *R = users ? &s->by_user : &s->by_item;
	float	   *mine = users ? s->X : s->Y;
	int64		nmine = users ? s->own_nusers : s->own_nitems;
	float	   *G;
	WalsFailure failure = {0};
	int64		bad = -1;
	double		loss;
	WalsWire	w;
	StringInfoData buf;
	double		bytes;
	bool		with_rows;

	if (side != 0 && side != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_solve(): no side %d", side)));
	other_ready(s, 1 - side, "wals_shard_solve");
	wals_shard_reserve(s, 2 * sizeof(float) * (double) f * f, "the Gram matrix of a sharded training");
	G = palloc(sizeof(float) * f * f);
	wals_wire_start(&w, VARDATA_ANY(gb), VARSIZE_ANY_EXHDR(gb), "Gram matrix");
	wals_wire_floats(&w, G, (int64) f * f);
	wals_wire_done(&w);

	failure.status = wals_shard_solve_rows(s, R, G, mine, &bad);
	if (failure.status != WALS_OK)
	{
		failure.side = users ? WALS_SIDE_USERS : WALS_SIDE_ITEMS;
		failure.row = bad >= 0 ? (users ? s->own_users : s->own_items)[bad] : -1;
		wals_report_failure(&failure, doing, s->user_ids, s->item_ids);
	}
	CHECK_FOR_INTERRUPTS();
	loss = users ? 0 : wals_reg_rows(&s->params, R, mine, 0, nmine);
	memset(G, 0, sizeof(float) * f * f);
	wals_gram_rows(mine, 0, nmine, f, G);

	bytes = sizeof(double) + sizeof(int64) + sizeof(float) * ((double) f * f + (double) nmine * f);
	with_rows = bytes <= (double) most;
	wals_shard_buffer(s, &buf, with_rows ? bytes :
					  sizeof(double) + sizeof(int64) + sizeof(float) * (double) f * f, SHARD_SOLVE);
	wals_put_double(&buf, loss);
	wals_put_int64(&buf, s->launched);
	wals_put_floats(&buf, G, (int64) f * f);
	if (with_rows)
		wals_put_floats(&buf, mine, nmine * f);
	wals_shard_leave(SHARD_SOLVE);
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/*
 * wals_shard_take(side int, first bigint, count bigint) RETURNS bytea
 *
 * The factors of this shard's rows of side (0 users, 1 items), as last
 * solved, from the first-th to first + count (at most what there is), f
 * floats each.
 */
Datum
wals_shard_take(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_TAKE);
	int			side = PG_GETARG_INT32(0);
	int64		first = PG_GETARG_INT64(1);
	int64		count = PG_GETARG_INT64(2);
	int			f = s->params.factors;
	int64		n = side == 0 ? s->own_nusers : s->own_nitems;
	StringInfoData buf;

	if (side < 0 || side > 1 || first < 0 || first > n || count < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_take(): no rows of side %d from " INT64_FORMAT, side,
						first)));
	count = Min(count, n - first);
	wals_shard_buffer(s, &buf, sizeof(float) * (double) count * f, SHARD_TAKE);
	wals_put_floats(&buf, (side == 0 ? s->X : s->Y) + (size_t) first * f, count * f);
	wals_shard_leave(SHARD_TAKE);
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/*
 * wals_shard_loss() RETURNS float8
 *
 * Once both half-sweeps are done and every item's factors have come: this
 * shard's users' part of the loss, their cells and their regularisation,
 * over their rows as src/core sums them on one server (the items' factors
 * read at random are the smaller side).  The items' factors stay for the
 * next half-sweep of the users.
 */
Datum
wals_shard_loss(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_LOSS);
	double		loss;

	other_ready(s, 1, "wals_shard_loss");
	loss = wals_shard_loss_rows(s);
	wals_shard_leave(SHARD_LOSS);
	PG_RETURN_FLOAT8(loss);
}

/*
 * wals_shard_rated(first bigint, max_bytes bigint) RETURNS bytea
 *
 * The owned users' rated items as the user factor table stores them
 * (wals_rated_bytea), from the first-th owned user, as many whole users as
 * fit in max_bytes but at least one: a length, then the value, each.
 */
Datum
wals_shard_rated(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_RATED);
	int64		first = PG_GETARG_INT64(0);
	int64		most = PG_GETARG_INT64(1);
	StringInfoData buf;

	if (first < 0 || first > s->own_nusers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wals_shard_rated(): no user " INT64_FORMAT, first)));
	wals_shard_buffer(s, &buf, 0, SHARD_RATED);
	for (int64 r = first; r < s->own_nusers; r++)
	{
		bytea	   *b = wals_rated_row_bytea(s->item_ids, &s->by_user, r);
		double		len = (double) buf.len + sizeof(int64) + VARSIZE(b) - VARHDRSZ;

		if (r > first && (len > (double) most || len >= (double) MaxAllocSize))
			break;
		wals_shard_reserve(s, len, "the answer of wals_shard_rated()");
		wals_put_int64(&buf, VARSIZE(b) - VARHDRSZ);
		appendBinaryStringInfo(&buf, VARDATA(b), VARSIZE(b) - VARHDRSZ);
		pfree(b);
	}
	wals_shard_leave(SHARD_RATED);
	PG_RETURN_BYTEA_P(wals_shard_bytea(&buf));
}

/*
 * wals_shard_end() RETURNS bigint: free this backend's training at once;
 * the most memory it held, in bytes.
 */
Datum
wals_shard_end(PG_FUNCTION_ARGS)
{
	Session    *s = wals_shard_enter(SHARD_END);
	Size		peak;

	wals_shard_note_peak(s);
	peak = s->peak;
	wals_shard_session_free();
	wals_shard_leave(SHARD_END);
	PG_RETURN_INT64((int64) peak);
}
