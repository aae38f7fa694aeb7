/*
 * score_exact.c
 *	  Scoring on the float factors alone: the exact scan of a query (the
 *	  reference, and the result wherever the bounds do not apply), and the
 *	  batch through the matrix product, which the portable path turns to
 *	  where its first pass would not stop early.  Why the product's
 *	  selection is exact is told at the head of score_query.c.
 */
#include <math.h>
#include <string.h>

#include "score_internal.h"

/*
 * Batch blocks of the matrix product: 64 users by 2048 items of product
 * (512 KB) stay in the second-level cache while their rows are selected,
 * and measured fastest for OpenBLAS at f = 64 among 32 to 512 users and
 * 1024 to 27,000 items.
 */
#define PRODUCT_USERS 64
#define PRODUCT_ITEMS 2048

/*
 * Positions in a filter's two lists, which only move forward, for the
 * paths that visit items in their own order: the exact scan and the
 * matrix product.
 */
typedef struct Cursor
{
	const int32_t *skip;
	int64_t		nskip;
	int64_t		s;
	const int32_t *allow;		/* NULL: every item */
	int64_t		nallow;
	int64_t		a;
} Cursor;

static void
cursor_init(Cursor *c, const WalsScoreFilter *filter)
{
	memset(c, 0, sizeof(*c));
	if (filter == NULL)
		return;
	c->skip = filter->skip;
	c->nskip = filter->skip ? filter->nskip : 0;
	c->allow = filter->allow;
	c->nallow = filter->allow ? filter->nallow : 0;
}

/* Whether item i is in the skip list; items must come in increasing order. */
static inline int
cursor_skips(Cursor *c, int64_t i)
{
	while (c->s < c->nskip && c->skip[c->s] < i)
		c->s++;
	return c->s < c->nskip && c->skip[c->s] == i;
}

/* Whether item i is eligible; items must come in increasing order. */
static inline int
cursor_admits(Cursor *c, int64_t i)
{
	if (c->allow)
	{
		while (c->a < c->nallow && c->allow[c->a] < i)
			c->a++;
		if (c->a == c->nallow || c->allow[c->a] != i)
			return 0;
	}
	return !cursor_skips(c, i);
}

/*
 * Items of the exact scan between two counts of its work towards the next
 * poll, less one (a mask): per item, the count would cost a tenth of a dot
 * product at f = 64.  An item's work is its dot product and its push into
 * the heap, which with a large k costs more than the product.
 */
#define EXACT_POLL_ITEMS 255
#define EXACT_ITEM_WORK(f) (2 * (int64_t) (f) + 256)

/*
 * The reference itself: each eligible item scored in index order and
 * pushed into the heap, as wals_topk_select does with a skip list.
 */
int
wals_score_exact_topk(const WalsScoreIndex *ix, const float *x,
					  const WalsScoreFilter *filter, int k, int32_t *idx,
					  float *score)
{
	float		(*dot) (const float *, const float *, int) = wals_kernels()->dot;
	int			f = ix->f;
	WalsTopK	heap;
	Cursor		c;
	int64_t		i;

	wals_topk_init(&heap, k, idx, score);
	cursor_init(&c, filter);
	if (c.allow)
	{
		int64_t		prev = -1;
		int64_t		a;

		for (a = 0; a < c.nallow; a++)
		{
			if ((a & EXACT_POLL_ITEMS) == EXACT_POLL_ITEMS)
				wals_poll((EXACT_POLL_ITEMS + 1) * EXACT_ITEM_WORK(f));
			i = c.allow[a];
			if (i <= prev || i >= ix->n)
				continue;
			prev = i;
			if (!cursor_skips(&c, i))
				wals_topk_push(&heap, (int32_t) i, dot(x, ix->Y + (size_t) i * f, f));
		}
	}
	else
		for (i = 0; i < ix->n; i++)
		{
			if ((i & EXACT_POLL_ITEMS) == EXACT_POLL_ITEMS)
				wals_poll((EXACT_POLL_ITEMS + 1) * EXACT_ITEM_WORK(f));
			if (!cursor_skips(&c, i))
				wals_topk_push(&heap, (int32_t) i, dot(x, ix->Y + (size_t) i * f, f));
		}
	return wals_topk_finish(&heap);
}

/* One user of a product block: its heap of products and its filter. */
typedef struct ProductUser
{
	WalsTopK	heap;			/* the best products, k + 8 at most */
	Cursor		cursor;
	double		margin;			/* 2M of score_query.c's header */
	int			exact;			/* scanned alone instead */
} ProductUser;

/* Products a user's heap keeps: 0 where every user scans exactly. */
static int
product_keep(const WalsScoreIndex *ix, int k)
{
	if (k < 1 || !prunes(ix, NULL, k))
		return 0;
	return k + 8 < ix->n ? k + 8 : (int) ix->n;
}

/* Where a product batch keeps its state. */
typedef struct ProductScratch
{
	float	   *product;		/* PRODUCT_USERS rows of up to PRODUCT_ITEMS */
	ProductUser *users;
	int32_t    *heap_idx;		/* keep per user */
	float	   *heap_score;
} ProductScratch;

/* Bytes of a product batch's scratch, and where its parts go from p. */
static size_t
product_scratch_layout(const WalsScoreIndex *ix, int k, unsigned char *p,
					   ProductScratch *ps)
{
	int64_t		items = ix->n < PRODUCT_ITEMS ? ix->n : PRODUCT_ITEMS;
	size_t		keep = (size_t) product_keep(ix, k);
	size_t		sp = wals_align_size(sizeof(float) * PRODUCT_USERS * (size_t) items);
	size_t		su = wals_align_size(sizeof(ProductUser) * PRODUCT_USERS);
	size_t		sh = wals_align_size(4 * PRODUCT_USERS * keep);

	if (ps)
	{
		ps->product = (float *) p;
		ps->users = (ProductUser *) (p + sp);
		ps->heap_idx = (int32_t *) (p + sp + su);
		ps->heap_score = (float *) (p + sp + su + sh);
	}
	return sp + su + 2 * sh;
}

size_t
wals_score_product_scratch_size(const WalsScoreIndex *ix, int k)
{
	return product_scratch_layout(ix, k, NULL, NULL);
}

static inline float
heap_floor(const WalsTopK *heap)
{
	return heap->size == heap->k ? heap->score[0] : -INFINITY;
}

/*
 * Push the eligible items of one row of products, items base + j.  Only a
 * product above the heap's worst can enter: an equal one has a higher
 * index than everything already in.
 */
static void
product_select(const float *s, int64_t base, int m, ProductUser *u)
{
	float		t = heap_floor(&u->heap);
	int			j;

	for (j = 0; j < m; j++)
		if (s[j] > t && cursor_admits(&u->cursor, base + j))
		{
			wals_topk_push(&u->heap, (int32_t) (base + j), s[j]);
			t = heap_floor(&u->heap);
		}
}

/*
 * Whether user x can be selected from the products: the same conditions
 * as the first pass of a single query, where its margin is set.
 */
static int
product_user_begin(const WalsScoreIndex *ix, const float *x,
				   const WalsScoreFilter *filter, int k, int keep,
				   int32_t *heap_idx, float *heap_score, ProductUser *u)
{
	double		x2 = 0.0;
	double		xn;
	int			j;

	cursor_init(&u->cursor, filter);
	wals_topk_init(&u->heap, keep, heap_idx, heap_score);
	u->exact = 1;
	if (keep == 0 || !ix->usable || !prunes(ix, filter, k))
		return 0;
	for (j = 0; j < ix->f; j++)
	{
		if (!isfinite(x[j]))
			return 0;
		x2 += (double) x[j] * x[j];
	}
	xn = sqrt(x2) * (1.0 + SLACK_DOUBLE);
	if (xn * ix->max_norm > SCORE_MAX_PRODUCT)
		return 0;
	u->margin = 4.0 * (dot_gamma(ix->f) * xn * ix->max_norm +
					   underflow_eta(ix->f)) * (1.0 + SLACK_FLOAT);
	u->exact = 0;
	return 1;
}

/*
 * The user's results from its heap of products, or from the exact scan
 * when the heap may have missed an item within the margin of the k-th.
 */
static int
product_user_finish(const WalsScoreIndex *ix, const float *x,
					const WalsScoreFilter *filter, int k, ProductUser *u,
					int32_t *idx, float *score)
{
	float		(*dot) (const float *, const float *, int) = wals_kernels()->dot;
	int			f = ix->f;
	WalsTopK	heap;
	double		floor;
	int			h;
	int			j;

	if (u->exact)
		return wals_score_exact_topk(ix, x, filter, k, idx, score);
	h = wals_topk_finish(&u->heap);
	floor = h >= k ? (double) u->heap.score[k - 1] - u->margin : -INFINITY;
	if (h == u->heap.k && (double) u->heap.score[h - 1] >= floor)
		return wals_score_exact_topk(ix, x, filter, k, idx, score);
	wals_topk_init(&heap, k, idx, score);
	for (j = 0; j < h && (double) u->heap.score[j] >= floor; j++)
		wals_topk_push(&heap, u->heap.idx[j],
					   dot(x, ix->Y + (size_t) u->heap.idx[j] * f, f));
	return wals_topk_finish(&heap);
}

/*
 * The batch where the first pass has no byte products in hardware: one
 * cblas_sgemm per block of users and items, whose products are selected
 * row by row.
 */
void
wals_score_batch_product(const WalsScoreIndex *ix, const float *X,
						 int64_t lo, int64_t hi,
						 const WalsScoreFilter *filters, int k,
						 int32_t *idx, float *score, int *count,
						 unsigned char *scratch)
{
	int			f = ix->f;
	int			keep = product_keep(ix, k);
	ProductScratch ps;
	int64_t		u0;

	product_scratch_layout(ix, k, scratch, &ps);
	for (u0 = lo; u0 < hi; u0 += PRODUCT_USERS)
	{
		int			nu = hi - u0 < PRODUCT_USERS ? (int) (hi - u0) : PRODUCT_USERS;
		int			selecting = 0;
		int64_t		i0;
		int			j;

		for (j = 0; j < nu; j++)
			selecting |= product_user_begin(ix, X + (size_t) (u0 + j) * f,
											filters ? &filters[u0 + j] : NULL,
											k, keep,
											ps.heap_idx + (size_t) j * keep,
											ps.heap_score + (size_t) j * keep,
											&ps.users[j]);
		for (i0 = 0; selecting && i0 < ix->n; i0 += PRODUCT_ITEMS)
		{
			int			m = ix->n - i0 < PRODUCT_ITEMS ? (int) (ix->n - i0) : PRODUCT_ITEMS;

			wals_blas()->sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nu, m, f,
						       1.0f, X + (size_t) u0 * f, f, ix->Y + (size_t) i0 * f, f,
						       0.0f, ps.product, m);
			for (j = 0; j < nu; j++)
				if (!ps.users[j].exact)
					product_select(ps.product + (size_t) j * m, i0, m,
								   &ps.users[j]);
			/* at most WALS_BLAS_PIECE, at f = 4096 */
			wals_poll((int64_t) nu * m * (f + 2));
		}
		for (j = 0; j < nu; j++)
			count[u0 + j] = product_user_finish(ix, X + (size_t) (u0 + j) * f,
												filters ? &filters[u0 + j] : NULL,
												k, &ps.users[j],
												idx + (size_t) (u0 + j) * k,
												score + (size_t) (u0 + j) * k);
	}
}

/*
 * One cblas_sgemm where the product is within WALS_BLAS_PIECE, else
 * blocks of items, each its own call followed by a poll.
 */
void
wals_score_product(const float *X, int m, const float *Y, int64_t n, int f,
				   float *scores)
{
	int64_t		per_item = (int64_t) m * f;
	int64_t		step = n;
	int64_t		i0;

	if (m <= 0 || n <= 0)
		return;
	if (per_item * n > WALS_BLAS_PIECE)
	{
		step = WALS_BLAS_PIECE / (per_item > 0 ? per_item : 1);
		step -= step % BLOCK;
		step = step < BLOCK ? BLOCK : step;
	}
	for (i0 = 0; i0 < n; i0 += step)
	{
		int			nb = (int) (n - i0 < step ? n - i0 : step);

		wals_blas()->sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nb, f, 1.0f, X, f,
					       Y + (size_t) i0 * f, f, 0.0f, scores + i0, (int) n);
		wals_poll(per_item * nb);
	}
}
