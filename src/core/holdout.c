/*
 * holdout.c
 *	  A validation share of the ratings, held out of a training, and the
 *	  ranking quality of factors on it.
 *
 * Whether a cell is held out depends on (seed, user id, item id) alone,
 * never on the order rows were read in or on the other cells, so the same
 * ratings and seed always give the same split; a user keeps at least one
 * training cell, the first, so that no user becomes unknown to the model
 * for the sake of its validation.
 */
#include <string.h>

#include <cblas.h>

#include "wals_internal.h"
#include "wals_metrics.h"

/* Users scored together, with one matrix product. */
#define HOLDOUT_BLOCK 64

static int
held(uint64_t seed, int64_t row_id, int64_t col_id, double share)
{
	uint64_t	h = wals_mix64(wals_mix64(seed + UINT64_C(0x9e3779b97f4a7c15) * (uint64_t) row_id) ^
							   (uint64_t) col_id);

	return (double) (h >> 11) * (1.0 / 9007199254740992.0) < share;
}

/*
 * Whether cell j of row u, whose first cell is first, is held out: by its
 * hash, unless every cell of the row is, when the first stays.
 */
static int
row_holds(const WalsCsr *R, int64_t u, int64_t first, const int64_t *row_ids,
		  const int64_t *col_ids, double share, uint64_t seed, int64_t j,
		  int all_held)
{
	if (all_held && j == first)
		return 0;
	return held(seed, row_ids[u], col_ids[R->indices[j]], share);
}

static int
all_cells_held(const WalsCsr *R, int64_t u, const int64_t *row_ids,
			   const int64_t *col_ids, double share, uint64_t seed)
{
	for (int64_t j = R->indptr[u]; j < R->indptr[u + 1]; j++)
		if (!held(seed, row_ids[u], col_ids[R->indices[j]], share))
			return 0;
	return 1;
}

int64_t
wals_holdout_count(const WalsCsr *R, const int64_t *row_ids,
				   const int64_t *col_ids, double share, uint64_t seed)
{
	int64_t		n = 0;

	for (int64_t u = 0; u < R->nrows; u++)
	{
		int			all = all_cells_held(R, u, row_ids, col_ids, share, seed);

		for (int64_t j = R->indptr[u]; j < R->indptr[u + 1]; j++)
			n += row_holds(R, u, R->indptr[u], row_ids, col_ids, share, seed, j, all);
	}
	return n;
}

void
wals_holdout_split(WalsCsr *R, const int64_t *row_ids, const int64_t *col_ids,
				   double share, uint64_t seed, WalsCsr *out)
{
	int64_t		kept = 0;
	int64_t		taken = 0;

	out->nrows = R->nrows;
	out->ncols = R->ncols;
	out->indptr[0] = 0;
	for (int64_t u = 0; u < R->nrows; u++)
	{
		int64_t		lo = R->indptr[u];
		int64_t		hi = R->indptr[u + 1];
		int			all = all_cells_held(R, u, row_ids, col_ids, share, seed);

		/* kept <= lo: the kept cells move left, never over unread ones */
		R->indptr[u] = kept;
		for (int64_t j = lo; j < hi; j++)
		{
			if (row_holds(R, u, lo, row_ids, col_ids, share, seed, j, all))
			{
				out->indices[taken] = R->indices[j];
				out->values[taken++] = R->values[j];
				continue;
			}
			R->indices[kept] = R->indices[j];
			R->values[kept++] = R->values[j];
		}
		out->indptr[u + 1] = taken;
	}
	R->indptr[R->nrows] = kept;
}

void
wals_holdout_join(const WalsCsr *keep, const WalsCsr *held_cells, WalsCsr *out)
{
	int64_t		n = 0;

	out->nrows = keep->nrows;
	out->ncols = keep->ncols;
	out->indptr[0] = 0;
	for (int64_t u = 0; u < keep->nrows; u++)
	{
		int64_t		a = keep->indptr[u];
		int64_t		b = held_cells->indptr[u];

		while (a < keep->indptr[u + 1] || b < held_cells->indptr[u + 1])
		{
			int			from_keep = b == held_cells->indptr[u + 1] ||
				(a < keep->indptr[u + 1] && keep->indices[a] < held_cells->indices[b]);

			out->indices[n] = from_keep ? keep->indices[a] : held_cells->indices[b];
			out->values[n++] = from_keep ? keep->values[a++] : held_cells->values[b++];
		}
		out->indptr[u + 1] = n;
	}
}

int64_t
wals_holdout_users(const WalsCsr *held_cells, int64_t max_users)
{
	int64_t		n = 0;

	for (int64_t u = 0; u < held_cells->nrows; u++)
		n += held_cells->indptr[u + 1] > held_cells->indptr[u];
	return max_users > 0 && n > max_users ? max_users : n;
}

/* Floats rounded up to a multiple of 2, so that what follows is 8-aligned. */
static size_t
even(size_t n)
{
	return (n + 1) / 2 * 2;
}

size_t
wals_holdout_scratch(int64_t nitems, int f, int k)
{
	return sizeof(float) * (even((size_t) HOLDOUT_BLOCK * nitems) + even((size_t) HOLDOUT_BLOCK * f)) +
		sizeof(int64_t) * HOLDOUT_BLOCK + wals_metrics_scratch_size(nitems, k);
}

/* Score the block's users over every item, then add each to acc. */
static WalsStatus
score_block(const float *X, const float *Y, int f, const WalsCsr *train,
			const WalsCsr *held_cells, const int64_t *users, int n,
			float *xs, float *scores, void *mscratch, WalsMetricsAcc *acc)
{
	int64_t		nitems = train->ncols;

	for (int r = 0; r < n; r++)
		memcpy(xs + (size_t) r * f, X + (size_t) users[r] * f, sizeof(float) * f);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, (int) nitems, f, 1.0f, xs, f,
				Y, f, 0.0f, scores, (int) nitems);
	for (int r = 0; r < n; r++)
	{
		int64_t		u = users[r];
		WalsStatus	st;

		st = wals_metrics_user(acc, scores + (size_t) r * nitems, nitems,
							   train->indices + train->indptr[u],
							   train->indptr[u + 1] - train->indptr[u],
							   held_cells->indices + held_cells->indptr[u],
							   held_cells->indptr[u + 1] - held_cells->indptr[u], mscratch);
		if (st != WALS_OK)
			return st;
	}
	return WALS_OK;
}

WalsStatus
wals_holdout_metrics(const float *X, const float *Y, int f, const WalsCsr *train,
					 const WalsCsr *held_cells, int k, int64_t max_users,
					 void *scratch, WalsMetrics *out)
{
	int64_t		nitems = train->ncols;
	int64_t		with = wals_holdout_users(held_cells, 0);
	int64_t		want = wals_holdout_users(held_cells, max_users);
	float	   *scores = scratch;
	float	   *xs = scores + even((size_t) HOLDOUT_BLOCK * nitems);
	int64_t    *users = (int64_t *) (xs + even((size_t) HOLDOUT_BLOCK * f));
	void	   *mscratch = users + HOLDOUT_BLOCK;
	WalsMetricsAcc acc;
	int64_t		seen = 0;
	int			n = 0;
	WalsStatus	st;

	st = wals_metrics_init(&acc, k);
	if (st != WALS_OK)
		return st;
	for (int64_t u = 0; u < held_cells->nrows && want > 0; u++)
	{
		if (held_cells->indptr[u + 1] == held_cells->indptr[u])
			continue;
		/* want of the with users that have held cells, evenly spread */
		seen++;
		if (seen * want / with == (seen - 1) * want / with)
			continue;
		users[n++] = u;
		if (n == HOLDOUT_BLOCK)
		{
			st = score_block(X, Y, f, train, held_cells, users, n, xs, scores, mscratch, &acc);
			if (st != WALS_OK)
				return st;
			n = 0;
		}
	}
	if (n > 0)
	{
		st = score_block(X, Y, f, train, held_cells, users, n, xs, scores, mscratch, &acc);
		if (st != WALS_OK)
			return st;
	}
	wals_metrics_finish(&acc, out);
	return WALS_OK;
}
