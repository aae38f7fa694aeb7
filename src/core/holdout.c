/*
 * holdout.c
 *	  A validation share of the ratings, held out of a training, and the
 *	  ranking quality of factors on it.
 *
 * Whether a cell is held out depends on (seed, user id, item id) alone,
 * never on the order rows were read in or on the other cells, so the same
 * ratings and seed always give the same split; a user keeps at least one
 * training cell, the first, so that no user becomes unknown to the model
 * for the sake of its validation.  Under implicit feedback a dislike (a
 * merged rating below zero) is never held out: the held-out cells are the
 * items the validation expects the user to be recommended, which a dislike
 * is not, and in training it tells the model what the user does not want.
 */
#include <string.h>

#include "wals_internal.h"
#include "wals_metrics.h"
#include "wals_score.h"

#define HOLDOUT_BLOCK WALS_HOLDOUT_BLOCK

static int
held(uint64_t seed, int64_t row_id, int64_t col_id, double share)
{
	uint64_t	h = wals_mix64(wals_mix64(seed + UINT64_C(0x9e3779b97f4a7c15) * (uint64_t) row_id) ^
							   (uint64_t) col_id);

	return (double) (h >> 11) * (1.0 / 9007199254740992.0) < share;
}

/* Whether cell j of R, of row u, would be held out, its row aside. */
static int
cell_held(const WalsCsr *R, WalsFeedback feedback, int64_t u, const int64_t *row_ids,
		  const int64_t *col_ids, double share, uint64_t seed, int64_t j)
{
	if (feedback == WALS_IMPLICIT && wals_csr_value(R, j) < 0.0f)
		return 0;
	return held(seed, row_ids[u], col_ids[R->indices[j]], share);
}

/*
 * Whether cell j of row u, whose first cell is first, is held out: by its
 * hash, unless every cell of the row is, when the first stays.
 */
static int
row_holds(const WalsCsr *R, WalsFeedback feedback, int64_t u, int64_t first,
		  const int64_t *row_ids, const int64_t *col_ids, double share, uint64_t seed,
		  int64_t j, int all_held)
{
	if (all_held && j == first)
		return 0;
	return cell_held(R, feedback, u, row_ids, col_ids, share, seed, j);
}

static int
all_cells_held(const WalsCsr *R, WalsFeedback feedback, int64_t u, const int64_t *row_ids,
			   const int64_t *col_ids, double share, uint64_t seed)
{
	for (int64_t j = R->indptr[u]; j < R->indptr[u + 1]; j++)
		if (!cell_held(R, feedback, u, row_ids, col_ids, share, seed, j))
			return 0;
	return 1;
}

int64_t
wals_holdout_count(const WalsCsr *R, WalsFeedback feedback, const int64_t *row_ids,
				   const int64_t *col_ids, double share, uint64_t seed)
{
	int64_t		n = 0;
	int64_t		local = 0;

	for (int64_t u = 0; u < R->nrows; u++)
	{
		int			all = all_cells_held(R, feedback, u, row_ids, col_ids, share, seed);

		wals_poll_local(&local, 2 * (R->indptr[u + 1] - R->indptr[u] + 1) * WALS_CELL_WORK);
		for (int64_t j = R->indptr[u]; j < R->indptr[u + 1]; j++)
			n += row_holds(R, feedback, u, R->indptr[u], row_ids, col_ids, share, seed, j,
						   all);
	}
	wals_poll(local);
	return n;
}

void
wals_holdout_split(WalsCsr *R, WalsFeedback feedback, const int64_t *row_ids,
				   const int64_t *col_ids, double share, uint64_t seed, WalsCsr *out)
{
	int64_t		kept = 0;
	int64_t		taken = 0;
	int64_t		local = 0;

	out->nrows = R->nrows;
	out->ncols = R->ncols;
	out->indptr[0] = 0;
	for (int64_t u = 0; u < R->nrows; u++)
	{
		int64_t		lo = R->indptr[u];
		int64_t		hi = R->indptr[u + 1];
		int			all = all_cells_held(R, feedback, u, row_ids, col_ids, share, seed);

		wals_poll_local(&local, 2 * (hi - lo + 1) * WALS_CELL_WORK);
		/* kept <= lo: the kept cells move left, never over unread ones */
		R->indptr[u] = kept;
		for (int64_t j = lo; j < hi; j++)
		{
			if (row_holds(R, feedback, u, lo, row_ids, col_ids, share, seed, j, all))
			{
				out->indices[taken] = R->indices[j];
				out->values[taken++] = wals_csr_value(R, j);
				continue;
			}
			R->indices[kept] = R->indices[j];
			wals_csr_copy_rating(R, kept++, R, j);
		}
		out->indptr[u + 1] = taken;
	}
	wals_poll(local);
	R->indptr[R->nrows] = kept;
}

void
wals_holdout_join(const WalsCsr *keep, const WalsCsr *held_cells, WalsCsr *out)
{
	int64_t		n = 0;
	int64_t		local = 0;

	out->nrows = keep->nrows;
	out->ncols = keep->ncols;
	out->indptr[0] = 0;
	for (int64_t u = 0; u < keep->nrows; u++)
	{
		int64_t		a = keep->indptr[u];
		int64_t		b = held_cells->indptr[u];

		wals_poll_local(&local, (keep->indptr[u + 1] - a + held_cells->indptr[u + 1] - b + 1) *
						WALS_CELL_WORK);
		while (a < keep->indptr[u + 1] || b < held_cells->indptr[u + 1])
		{
			int			from_keep = b == held_cells->indptr[u + 1] ||
				(a < keep->indptr[u + 1] && keep->indices[a] < held_cells->indices[b]);

			out->indices[n] = from_keep ? keep->indices[a] : held_cells->indices[b];
			out->values[n++] = from_keep ? wals_csr_value(keep, a++) :
				held_cells->values[b++];
		}
		out->indptr[u + 1] = n;
	}
	wals_poll(local);
}

int64_t
wals_holdout_users(const WalsCsr *held_cells, int64_t max_users)
{
	int64_t		n = 0;

	for (int64_t u = 0; u < held_cells->nrows; u++)
		n += held_cells->indptr[u + 1] > held_cells->indptr[u];
	return max_users > 0 && n > max_users ? max_users : n;
}

/*
 * The next user from *u on that wals_holdout_pick picks, -1 after the
 * last: want of the with users that have held cells, evenly spread in
 * user order; *seen counts the users with held cells passed so far.
 */
static int64_t
next_pick(const WalsCsr *held_cells, int64_t with, int64_t want, int64_t *u, int64_t *seen)
{
	for (; *u < held_cells->nrows && want > 0; (*u)++)
	{
		if (held_cells->indptr[*u + 1] == held_cells->indptr[*u])
			continue;
		(*seen)++;
		if (*seen * want / with != (*seen - 1) * want / with)
			return (*u)++;
	}
	return -1;
}

int64_t
wals_holdout_pick(const WalsCsr *held_cells, int64_t max_users, int64_t *users)
{
	int64_t		with = wals_holdout_users(held_cells, 0);
	int64_t		want = wals_holdout_users(held_cells, max_users);
	int64_t		u = 0;
	int64_t		seen = 0;
	int64_t		n = 0;
	int64_t		next;

	while ((next = next_pick(held_cells, with, want, &u, &seen)) >= 0)
		users[n++] = next;
	return n;
}

/* The sections of wals_holdout_score's scratch, or only their sizes. */
typedef struct HoldoutScratch
{
	float	   *xs;				/* the block's user factors, in a row each */
	float	   *scores;			/* with AUC: the block's scores of every item */
	void	   *mscratch;		/* with AUC: wals_metrics_user's */
	WalsScoreFilter *filters;	/* without: each user's training items */
	int32_t    *idx;			/* without: the block's top k */
	float	   *top;
	int		   *count;
	void	   *bscratch;		/* without: wals_score_topk_batch's */
} HoldoutScratch;

static size_t
layout(int64_t nitems, int f, int k, int with_auc, unsigned char *p, HoldoutScratch *hs)
{
	size_t		b = HOLDOUT_BLOCK;
	size_t		sizes[7];
	void	  **at[7];
	int			n = 0;
	size_t		off = 0;
	HoldoutScratch none;

	if (hs == NULL)
		hs = &none;
	memset(hs, 0, sizeof(*hs));
	sizes[n] = b * f * sizeof(float);
	at[n++] = (void **) &hs->xs;
	if (with_auc)
	{
		sizes[n] = b * nitems * sizeof(float);
		at[n++] = (void **) &hs->scores;
		sizes[n] = wals_metrics_scratch_size(nitems, k);
		at[n++] = &hs->mscratch;
	}
	else
	{
		sizes[n] = b * sizeof(WalsScoreFilter);
		at[n++] = (void **) &hs->filters;
		sizes[n] = b * k * sizeof(int32_t);
		at[n++] = (void **) &hs->idx;
		sizes[n] = b * k * sizeof(float);
		at[n++] = (void **) &hs->top;
		sizes[n] = b * sizeof(int);
		at[n++] = (void **) &hs->count;
		sizes[n] = wals_score_batch_scratch_bound(nitems, f, k);
		at[n++] = &hs->bscratch;
	}
	for (int j = 0; j < n; j++)
	{
		if (p != NULL)
			*at[j] = p + off;
		off += wals_align_size(sizes[j]);
	}
	return off + WALS_ALIGN;
}

size_t
wals_holdout_scratch(int64_t nitems, int f, int k, int with_auc)
{
	return layout(nitems, f, k, with_auc, NULL, NULL);
}

/*
 * Users [0, n) of the block, every item scored with one matrix product and
 * every metric from the scores, AUC included.
 */
static WalsStatus
score_block_all(const WalsScoreIndex *ix, const WalsCsr *train, const WalsCsr *held_cells,
				const int64_t *users, int n, const HoldoutScratch *hs, WalsMetricsAcc *parts)
{
	int64_t		nitems = ix->n;

	wals_score_product(hs->xs, n, ix->Y, nitems, ix->f, hs->scores);
	for (int r = 0; r < n; r++)
	{
		int64_t		u = users[r];
		WalsStatus	st;

		st = wals_metrics_user(&parts[r], hs->scores + (size_t) r * nitems, nitems,
							   train->indices + train->indptr[u],
							   train->indptr[u + 1] - train->indptr[u],
							   held_cells->indices + held_cells->indptr[u],
							   held_cells->indptr[u + 1] - held_cells->indptr[u], hs->mscratch);
		if (st != WALS_OK)
			return st;
	}
	return WALS_OK;
}

/* Users [0, n) of the block, ranked as wals_recommend ranks them. */
static WalsStatus
score_block_ranked(const WalsScoreIndex *ix, const WalsCsr *train, const WalsCsr *held_cells,
				   const int64_t *users, int n, int k, const HoldoutScratch *hs,
				   WalsMetricsAcc *parts)
{
	for (int r = 0; r < n; r++)
	{
		int64_t		u = users[r];

		hs->filters[r].skip = train->indices + train->indptr[u];
		hs->filters[r].nskip = train->indptr[u + 1] - train->indptr[u];
		hs->filters[r].allow = NULL;
		hs->filters[r].nallow = 0;
	}
	wals_score_topk_batch(ix, hs->xs, 0, n, hs->filters, k, hs->idx, hs->top, hs->count,
						  hs->bscratch);
	for (int r = 0; r < n; r++)
	{
		int64_t		u = users[r];
		WalsStatus	st;

		st = wals_metrics_user_ranked(&parts[r], hs->idx + (size_t) r * k, hs->count[r], ix->n,
									  train->indices + train->indptr[u],
									  train->indptr[u + 1] - train->indptr[u],
									  held_cells->indices + held_cells->indptr[u],
									  held_cells->indptr[u + 1] - held_cells->indptr[u]);
		if (st != WALS_OK)
			return st;
	}
	return WALS_OK;
}

WalsStatus
wals_holdout_score(const WalsScoreIndex *ix, const float *X, const WalsCsr *train,
				   const WalsCsr *held_cells, const int64_t *users, int64_t n, int k,
				   int with_auc, void *scratch, WalsMetricsAcc *parts)
{
	HoldoutScratch hs;
	int			f = ix->f;

	if (k < 1 || ix->n > INT32_MAX)
		return WALS_EINVAL;
	layout(ix->n, ix->f, k, with_auc, wals_align_ptr(scratch), &hs);
	for (int64_t lo = 0; lo < n; lo += HOLDOUT_BLOCK)
	{
		int			b = n - lo < HOLDOUT_BLOCK ? (int) (n - lo) : HOLDOUT_BLOCK;
		WalsStatus	st;

		for (int r = 0; r < b; r++)
		{
			memcpy(hs.xs + (size_t) r * f, X + (size_t) users[lo + r] * f, sizeof(float) * f);
			st = wals_metrics_init(&parts[lo + r], k);
			if (st != WALS_OK)
				return st;
		}
		st = with_auc ?
			score_block_all(ix, train, held_cells, users + lo, b, &hs, parts + lo) :
			score_block_ranked(ix, train, held_cells, users + lo, b, k, &hs, parts + lo);
		if (st != WALS_OK)
			return st;
	}
	return WALS_OK;
}

/* Merge the block's users into acc, in user order. */
static WalsStatus
score_and_merge(const WalsScoreIndex *ix, const float *X, const WalsCsr *train,
				const WalsCsr *held_cells, const int64_t *users, int n, int k, int with_auc,
				void *scratch, WalsMetricsAcc *acc)
{
	WalsMetricsAcc parts[HOLDOUT_BLOCK];
	WalsStatus	st;

	st = wals_holdout_score(ix, X, train, held_cells, users, n, k, with_auc, scratch, parts);
	for (int j = 0; st == WALS_OK && j < n; j++)
		wals_metrics_merge(acc, &parts[j]);
	return st;
}

WalsStatus
wals_holdout_rmse(const float *X, const float *Y, int f, const WalsCsr *held_cells, double *rmse)
{
	const WalsCsr *h = held_cells;
	WalsRmseAcc acc;

	if (X == NULL || Y == NULL || f < 1 || h == NULL || rmse == NULL)
		return WALS_EINVAL;
	for (int64_t c = 0; c < h->indptr[h->nrows]; c++)
		if (h->indices[c] < 0 || h->indices[c] >= h->ncols)
			return WALS_EINVAL;
	wals_rmse_init(&acc);
	for (int64_t u = 0; u < h->nrows; u++)
	{
		const float *x = X + u * (int64_t) f;

		for (int64_t c = h->indptr[u]; c < h->indptr[u + 1]; c++)
		{
			const float *y = Y + (int64_t) h->indices[c] * f;
			double		dot = 0.0;
			double		e;

			for (int j = 0; j < f; j++)
				dot += (double) x[j] * y[j];
			e = dot - h->values[c];
			acc.sse += e * e;
			acc.cells++;
		}
		wals_poll((int64_t) f * (h->indptr[u + 1] - h->indptr[u]) + 1);
	}
	*rmse = wals_rmse_finish(&acc);
	return WALS_OK;
}

WalsStatus
wals_holdout_metrics(const WalsScoreIndex *ix, const float *X, const WalsCsr *train,
					 const WalsCsr *held_cells, int k, int with_auc, int64_t max_users,
					 void *scratch, WalsMetrics *out)
{
	int64_t		with = wals_holdout_users(held_cells, 0);
	int64_t		want = wals_holdout_users(held_cells, max_users);
	int64_t		users[HOLDOUT_BLOCK];
	WalsMetricsAcc acc;
	int64_t		u = 0;
	int64_t		seen = 0;
	int64_t		next;
	int			n = 0;
	WalsStatus	st;

	st = wals_metrics_init(&acc, k);
	while (st == WALS_OK && (next = next_pick(held_cells, with, want, &u, &seen)) >= 0)
	{
		users[n++] = next;
		if (n == HOLDOUT_BLOCK)
		{
			st = score_and_merge(ix, X, train, held_cells, users, n, k, with_auc, scratch, &acc);
			n = 0;
		}
	}
	if (st == WALS_OK && n > 0)
		st = score_and_merge(ix, X, train, held_cells, users, n, k, with_auc, scratch, &acc);
	if (st == WALS_OK)
		wals_metrics_finish(&acc, out);
	return st;
}
