/*
 * score.c
 *	  Exact top-k recommendation scores: an int8 first pass with provable
 *	  bounds, exact rescoring of the items those bounds cannot rule out,
 *	  and batches of users that share the first pass or, on the portable
 *	  path, go through the matrix product.
 *
 * A query's reference is the scan of every eligible item with the core's
 * float dot product (wals_score_dot).  Scanning 27,000 float rows of 64
 * factors reads 7 MB, more than a core's caches hold, so the first pass
 * reads a copy of Y in bytes instead, a quarter of that, with one scale per
 * item, and bounds each item's reference score from below and above.  The
 * k-th best lower bound is a floor under the k-th best reference score:
 * only items whose upper bound reaches it can be in the result.  Those few
 * are scored again with wals_score_dot and selected with the same heap as
 * the reference, so indices, scores and order are the reference's own.
 * The float scores returned never come from the approximation.
 *
 * Why the bounds hold.  Write u = 2^-24, and split y = yq + ey and
 * x = xq + ex, where yq = s_y q_y with q_y integers in [-127, 127] and
 * s_y = max|y_j| / 127 (likewise xq, one scale per query), and ey, ex are
 * the quantisation errors, whose norms are measured exactly (in double,
 * rounded up) rather than estimated.  Then:
 *
 *	 x.y = xq.yq + xq.ey + ex.y, so |x.y - xq.yq| <= |xq||ey| + |ex||y|
 *	 (Cauchy-Schwarz on each term);
 *
 *	 the reference r = fl(x.y), summed in any order with or without fused
 *	 multiply-adds, has |r - x.y| <= gamma sum_j |x_j y_j| <= gamma |x||y|
 *	 with gamma = m u / (1 - m u) for m = f + 2 (Higham, Accuracy and
 *	 Stability of Numerical Algorithms, section 3.1; f roundings suffice on
 *	 any path of the summation tree, two are spare), plus an absolute eta
 *	 for underflow;
 *
 *	 the first pass computes the integer q_x.q_y exactly and
 *	 a = fl(float(q_x.q_y) fl(s_x s_y)): three roundings, so
 *	 |a - xq.yq| <= 3.0001 u |xq||yq| <= 3.0001 u |xq| (|y| + |ey|);
 *
 *	 forming a - E and a + E in float costs u (|a| + E) more.
 *
 * Hence every item's reference lies in [fl(a - E), fl(a + E)] with
 *	 E = A |ey| + B |y| + eta,  A = |xq| (1 + 8u),
 *	 B = |ex| + gamma |x| + 8u |xq|,  eta = f 2^-112,
 * where the 8u terms hold the 4.0002u above, A, B and eta are inflated by
 * 2^-20 and rounded up so that the float evaluation of E (at most four
 * roundings of nonnegative terms) cannot fall short, and eta covers
 * underflow in the reference (f 2^-126, even flushed) and in a (at most
 * 127^2 f 2^-150).  The rounding mode is the default, to nearest, and
 * subnormal inputs are not flushed to zero, as in PostgreSQL.  Overflow is
 * excluded up front: a query whose |x| max|y| exceeds 2^100 is scanned
 * exactly, as is any query against an item matrix holding a non-finite
 * value, or with a non-finite x.
 *
 * Why the selection is exact.  Let T be the k-th best lower bound among
 * eligible items.  Those k items have references >= T, so the k-th best
 * reference is >= T, and every item of the reference top k has
 * upper >= reference >= T: it is among the candidates.  The reference order
 * is total (score, then index), so the top k of any superset of the
 * reference top k is the reference top k.  During the scan the running
 * threshold only rises towards T, so the candidates gathered against it
 * are a superset, filtered against the final T at the end.
 *
 * Layout.  Items go in blocks of 16, one vector of 32-bit lanes: per group
 * of four factors, 64 bytes hold the four bytes of each of the 16 items,
 * so that one VNNI instruction (vpdpbusd) adds four products to each of
 * 16 item sums with no horizontal reduction; then 16 scales s_y, 16 error
 * norms |ey| and 16 norms |y|.  Bytes are stored as q_y + 128, unsigned,
 * because vpdpbusd multiplies unsigned bytes by signed ones and only the
 * signed operand can be a broadcast from memory (the query's four bytes);
 * the 128 sum_j q_x,j it adds is subtracted once per query.
 *
 * Paths.  What computes the byte sums follows the kernel family in use
 * (wals_kernels_use): AVX-512 with VNNI; AVX2, which AVX-512 without VNNI
 * uses too; NEON with SDOT (Arm's dotprod) or without; and a portable path
 * that reads the layout in 16-byte vectors of int16 products, which every
 * vector unit has.  The integer sums are exact on every path, in any
 * order, so all give the same a; only their evaluations of E may round
 * differently, which the bound allows for.
 * AVX2 multiplies bytes only in vpmaddubsw, which adds two products of an
 * unsigned and a signed byte into an int16 lane that saturates, and the
 * stored bytes times q_x could reach 2 * 255 * 127.  A lane of stored
 * bytes (0 to 255) lies between 255 times the sum of its negative query
 * bytes and 255 times the sum of its positive ones, so where neither sum
 * exceeds 128 in magnitude, 255 * 128 = 32640 fits and the lane is exact.
 * Such "narrow" groups of four factors (about 86% on random or trained
 * factors) go in as stored, two groups in one lane (added with vpaddw,
 * which wraps, exact where the true sum fits) where all their bytes
 * together still meet the condition.  The other groups go in as |q_x|
 * times q_y with q_x's sign (vpsignb): products of at most 127^2, lanes of
 * at most 32258 (neither byte is ever -128).  vpmaddwd then adds the lanes
 * into int32 sums, exactly.  NEON multiplies signed bytes by signed bytes,
 * so its paths turn the stored bytes back into q_y: SDOT adds four
 * products into an int32 lane; without it, vmull_s8 forms products of at
 * most 127^2 in int16 lanes and vmlal_s8 adds one more, as the portable
 * path does, before they are widened.
 *
 * Filters are applied inside the scan: a sorted skip list and an optional
 * sorted allow list are walked beside the block index, making a 16-bit
 * mask of eligible items per block, and blocks without an allowed item are
 * jumped over.  The bounds only prune when k is small beside the eligible
 * items; otherwise the exact scan is cheaper, and gives the same result.
 *
 * A batch with byte products in vectors (all but the portable path) runs
 * the first pass of SCAN_USERS users block by block, so that a block read
 * from memory serves them all: a single query is bound by the traffic
 * from the last-level cache, a batch by arithmetic.  On the portable path,
 * where byte products cost several instructions each, the batch scores
 * blocks of users against blocks of items with one cblas_sgemm each.  The
 * product's scores s obey the same rounding bound as the reference, so
 * |s - r| <= M = 2 (gamma |x| max|y| + eta).  If S_k is the k-th best s,
 * k items have r >= S_k - M, so every item of the reference top k has
 * s >= S_k - 2M.  A heap per user keeps the best k + 8 products; when its
 * worst lies below S_k - 2M it holds every such item, which are then
 * rescored with wals_score_dot; when it does not (many near-ties), that
 * user alone is scanned exactly.  NEON without SDOT shares the first pass
 * too, a choice made without an Arm machine to time it: its byte products
 * take about as many instructions per item as the matrix product's
 * multiply-adds of four floats, and read a quarter of the memory.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "wals_internal.h"
#include "wals_score.h"

/* Items per block: one vector of 16 int32 or float lanes. */
#define BLOCK 16

/*
 * Sums of f products of a byte and a signed byte stay inside int32, from
 * the byte offset's correction on: f (128 + 255) 127 < 2^31.
 */
#define SCORE_MAX_F 32768

/* Past this |x| max|y|, scores may near overflow: scan exactly. */
#define SCORE_MAX_PRODUCT 0x1p100

/*
 * The bounds prune when k is this many times smaller than the eligible
 * items; above, nearly every item would be rescored anyway.
 */
#define PRUNE_RATIO 4

/*
 * Batch blocks of the matrix product: 64 users by 2048 items of product
 * (512 KB) stay in the second-level cache while their rows are selected,
 * and measured fastest for OpenBLAS at f = 64 among 32 to 512 users and
 * 1024 to 27,000 items.
 */
#define PRODUCT_USERS 64
#define PRODUCT_ITEMS 2048

/*
 * The scan asks for the block this many ahead, every cache line of it:
 * the hardware's own prefetching alone left a single query waiting on
 * memory, about 5% of its time with VNNI and 10% on the AVX2 path.
 */
#define PREFETCH_BLOCKS 4

/*
 * Queries sharing each block of the first pass in a batch: the block is
 * read from memory once for all of them, and their state stays in the
 * first-level cache.
 */
#define SCAN_USERS 8

#define U_ROUND 0x1p-24

/* Relative slack on quantities computed in double before their use. */
#define SLACK_DOUBLE 0x1p-30
#define SLACK_FLOAT 0x1p-20

static size_t
align_size(size_t bytes)
{
	return (bytes + WALS_ALIGN - 1) & ~(size_t) (WALS_ALIGN - 1);
}

static unsigned char *
align_ptr(void *p)
{
	return (unsigned char *) (((uintptr_t) p + WALS_ALIGN - 1) &
							  ~(uintptr_t) (WALS_ALIGN - 1));
}

static int64_t
block_count(int64_t n)
{
	return (n + BLOCK - 1) / BLOCK;
}

/* Bytes of one block: the factor groups, then scales, errors, norms. */
static size_t
block_bytes(int groups)
{
	return (size_t) (groups + 3) * 64;
}

/* The least float not below v. */
static float
float_up(double v)
{
	float		r = (float) v;

	if ((double) r < v)
		r = nextafterf(r, INFINITY);
	return r;
}

/* gamma of the header, for the rounding of any f-term dot product. */
static double
dot_gamma(int f)
{
	double		mu = (f + 2) * U_ROUND;

	return mu / (1.0 - mu);
}

/* The absolute allowance for underflow, eta of the header. */
static double
underflow_eta(int f)
{
	return f * 0x1p-112;
}

static int
clamp_byte(double v)
{
	long		q = lrint(v);

	return q > 127 ? 127 : q < -127 ? -127 : (int) q;
}

float
wals_score_dot(const float *x, const float *y, int f)
{
	return wals_kernels()->dot(x, y, f);
}

size_t
wals_score_index_size(int64_t n, int f)
{
	if (n < 0 || f < 1 || f > SCORE_MAX_F)
		return 0;
	return (size_t) block_count(n) * block_bytes((f + 3) / 4) + WALS_ALIGN;
}

/*
 * Item lane of a block from its factors y.  Returns 0, leaving the lane
 * empty, when y holds a non-finite value; else its norm goes to *norm.
 */
static int
quantise_item(const float *y, int f, unsigned char *blk, int groups, int lane,
			  double *norm)
{
	float	   *meta = (float *) (blk + 64 * (size_t) groups);
	double		m = 0.0;
	double		n2 = 0.0;
	double		e2 = 0.0;
	float		s;
	int			j;

	for (j = 0; j < f; j++)
	{
		if (!isfinite(y[j]))
			return 0;
		m = fmax(m, fabs((double) y[j]));
	}
	s = (float) (m / 127.0);
	for (j = 0; j < f; j++)
	{
		int			q = s > 0.0f ? clamp_byte(y[j] / (double) s) : 0;
		double		e = y[j] - (double) s * q;

		blk[64 * (j / 4) + 4 * lane + j % 4] = (unsigned char) (q + 128);
		n2 += (double) y[j] * y[j];
		e2 += e * e;
	}
	meta[lane] = s;
	meta[BLOCK + lane] = float_up(sqrt(e2) * (1.0 + SLACK_DOUBLE));
	meta[2 * BLOCK + lane] = float_up(sqrt(n2) * (1.0 + SLACK_DOUBLE));
	*norm = meta[2 * BLOCK + lane];
	return 1;
}

/*
 * Padding lanes and factors hold q = 0 with zero scale and norms, so they
 * add nothing to a sum; the scan masks padding items out anyway.
 */
WalsStatus
wals_score_index_build(WalsScoreIndex *ix, const float *Y, int64_t n, int f,
					   void *buffer)
{
	int			groups = (f + 3) / 4;
	size_t		bb = block_bytes(groups);
	unsigned char *blocks;
	double		max_norm = 0.0;
	int			usable = 1;
	int64_t		b;

	if (n < 0 || f < 1 || f > SCORE_MAX_F)
		return WALS_EINVAL;
	blocks = align_ptr(buffer);
	for (b = 0; b < block_count(n); b++)
	{
		unsigned char *blk = blocks + (size_t) b * bb;
		int			lane;

		memset(blk, 128, 64 * (size_t) groups);
		memset(blk + 64 * (size_t) groups, 0, 3 * 64);
		for (lane = 0; lane < BLOCK && b * BLOCK + lane < n; lane++)
		{
			double		norm = 0.0;

			usable &= quantise_item(Y + (size_t) (b * BLOCK + lane) * f, f,
									blk, groups, lane, &norm);
			max_norm = fmax(max_norm, norm);
		}
	}
	ix->Y = Y;
	ix->n = n;
	ix->f = f;
	ix->groups = groups;
	ix->usable = usable;
	ix->max_norm = (float) max_norm;
	ix->blocks = blocks;
	return WALS_OK;
}

/* ---------- filters ---------- */

/* Positions in a filter's two lists, which only move forward. */
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

/* The first block from b on that holds an allowed item, or nblocks. */
static inline int64_t
cursor_next_block(Cursor *c, int64_t b, int64_t nblocks)
{
	int64_t		first;

	if (c->allow == NULL)
		return b;
	while (c->a < c->nallow && c->allow[c->a] < b * BLOCK)
		c->a++;
	if (c->a == c->nallow)
		return nblocks;
	first = c->allow[c->a] / BLOCK;
	return first < nblocks ? first : nblocks;
}

/* The eligible lanes of block b of an index of n items. */
static inline uint32_t
cursor_block_mask(Cursor *c, int64_t b, int64_t n)
{
	int64_t		base = b * BLOCK;
	int64_t		end = base + BLOCK;
	uint32_t	mask = 0xffff;

	if (c->allow)
	{
		mask = 0;
		for (; c->a < c->nallow && c->allow[c->a] < end; c->a++)
			if (c->allow[c->a] >= base)
				mask |= 1u << (c->allow[c->a] - base);
	}
	for (; c->s < c->nskip && c->skip[c->s] < end; c->s++)
		if (c->skip[c->s] >= base)
			mask &= ~(1u << (c->skip[c->s] - base));
	if (end > n)
		mask &= (1u << (n - base)) - 1;
	return mask;
}

/* Whether the bounds can prune enough for k among the filter's items. */
static int
prunes(const WalsScoreIndex *ix, const WalsScoreFilter *filter, int k)
{
	int64_t		items = ix->n;

	if (filter && filter->allow && filter->nallow < items)
		items = filter->nallow;
	return (int64_t) k * PRUNE_RATIO < items;
}

/* ---------- the exact scan ---------- */

/*
 * The reference itself: each eligible item scored in index order and
 * pushed into the heap, as wals_topk_select does with a skip list.
 */
static int
exact_topk(const WalsScoreIndex *ix, const float *x,
		   const WalsScoreFilter *filter, int k, int32_t *idx, float *score)
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
			if (!cursor_skips(&c, i))
				wals_topk_push(&heap, (int32_t) i, dot(x, ix->Y + (size_t) i * f, f));
	return wals_topk_finish(&heap);
}

/* ---------- the first pass ---------- */

/* Where one query's first pass keeps its state. */
typedef struct QueryScratch
{
	int32_t    *qx;				/* groups of four signed bytes */
	int32_t    *offset;			/* see Query */
	int32_t    *qx_ordered;
	int32_t    *qabs_ordered;
	int16_t    *pairs;			/* 16 per group, see Query */
	int32_t    *lower_idx;		/* the lower-bound heap, k entries */
	float	   *lower_score;
	int32_t    *cand;			/* candidates, n at most */
	float	   *cand_upper;
} QueryScratch;

/*
 * Bytes of one query's scratch, and where its parts go from p (aligned)
 * when qs is not NULL.  The lower-bound heap only runs when k < n (see
 * prunes): min(k, n) entries.
 */
static size_t
query_scratch_layout(const WalsScoreIndex *ix, int k, unsigned char *p,
					 QueryScratch *qs)
{
	int64_t		kk = k < 1 ? 1 : k < ix->n ? k : ix->n;
	size_t		sq = align_size(4 * (size_t) ix->groups);
	size_t		sp = align_size(32 * (size_t) ix->groups);
	size_t		sk = align_size(4 * (size_t) kk);
	size_t		sn = align_size(4 * (size_t) ix->n);

	if (qs)
	{
		qs->qx = (int32_t *) p;
		qs->offset = (int32_t *) (p + sq);
		qs->qx_ordered = (int32_t *) (p + 2 * sq);
		qs->qabs_ordered = (int32_t *) (p + 3 * sq);
		qs->pairs = (int16_t *) (p + 4 * sq);
		qs->lower_idx = (int32_t *) (p + 4 * sq + sp);
		qs->lower_score = (float *) (p + 4 * sq + sp + sk);
		qs->cand = (int32_t *) (p + 4 * sq + sp + 2 * sk);
		qs->cand_upper = (float *) (p + 4 * sq + sp + 2 * sk + sn);
	}
	return 4 * sq + sp + 2 * sk + 2 * sn;
}

/* What the first pass needs of a query, from prepare_query. */
typedef struct Query
{
	const int32_t *qx;			/* q_x, groups of four signed bytes */
	/* for block_avx2, cheap beside any scan: the groups in its order */
	const int32_t *offset;		/* byte offsets in a block, narrow first */
	const int32_t *qx_ordered;	/* their q_x */
	const int32_t *qabs_ordered;	/* and |q_x| */
	int			paired;			/* how many are in pairs */
	int			narrow;			/* how many are narrow, those included */
	int32_t		corr_narrow;	/* corr's share of the narrow groups */
	const int16_t *pairs;		/* per group, q_x of positions 0 and 2 in 8
								 * alternating int16, then of 1 and 3 */
	int32_t		corr;			/* -128 sum_j q_x,j: the byte offset's share */
	float		sx;				/* s_x */
	float		A;				/* the terms of E, see the header */
	float		B;
	float		eta;
} Query;

/*
 * Whether block_avx2 may add vpmaddubsw's int16 lanes of groups a and b
 * of query bytes (b may be none) without saturating or wrapping, as the
 * header explains (Paths).  A lane adds the products of bytes 0 and 1 of
 * a group, or of bytes 2 and 3.
 */
static int
lanes_fit(const int8_t *a, const int8_t *b)
{
	int			h;
	int			j;

	for (h = 0; h < 4; h += 2)
	{
		int			pos = 0;
		int			neg = 0;

		for (j = h; j < h + 2; j++)
		{
			pos += (a[j] > 0 ? a[j] : 0) + (b[j] > 0 ? b[j] : 0);
			neg += (a[j] < 0 ? a[j] : 0) + (b[j] < 0 ? b[j] : 0);
		}
		if (pos > 128 || neg < -128)
			return 0;
	}
	return 1;
}

/*
 * Narrow groups a group tries as partners: enough to pair nearly as many
 * as trying all of them does, in time linear in f.
 */
#define PAIR_WINDOW 8

/*
 * Order the groups of query bytes q8 for block_avx2: pairs of narrow
 * groups that fit one lane together, then the other narrow groups, then
 * the wide ones; the scratch receives their offsets in a block, their
 * bytes, and the bytes' absolute values.  q->paired and q->narrow count
 * the groups before the others and before the wide ones; q->corr_narrow
 * is the narrow groups' share of corr.
 */
static void
order_groups(const int8_t *q8, int groups, const QueryScratch *qs, Query *q)
{
	static const int8_t none[4] = {0};
	int32_t    *order = qs->offset; /* group numbers, offsets at the end */
	int			front = 0;
	int			back;
	int			n = 0;
	int			i;
	int			j;

	for (i = 0; i < groups; i++)
		if (lanes_fit(q8 + 4 * i, none))
			order[n++] = i;
	q->narrow = back = n;
	for (i = 0; i < groups; i++)
		if (!lanes_fit(q8 + 4 * i, none))
			order[n++] = i;

	/* Pairs gather at the front, narrow groups left alone at the back. */
	while (front < back)
	{
		int32_t		g = order[front];

		for (j = front + 1; j < back && j <= front + PAIR_WINDOW; j++)
			if (lanes_fit(q8 + 4 * g, q8 + 4 * order[j]))
				break;
		if (j < back && j <= front + PAIR_WINDOW)
		{
			order[front] = order[j];
			order[j] = order[front + 1];
			order[front + 1] = g;
			front += 2;
		}
		else
		{
			order[front] = order[--back];
			order[back] = g;
		}
	}
	q->paired = front;

	q->corr_narrow = 0;
	for (i = 0; i < groups; i++)
	{
		const int8_t *x = q8 + 4 * order[i];
		uint8_t    *xabs = (uint8_t *) &qs->qabs_ordered[i];

		memcpy(&qs->qx_ordered[i], x, 4);
		for (j = 0; j < 4; j++)
		{
			xabs[j] = (uint8_t) abs(x[j]);
			if (i < q->narrow)
				q->corr_narrow -= 128 * x[j];
		}
		order[i] *= 64;
	}
}

/*
 * Quantise x into the scratch and derive the bound's terms.  Returns 0
 * where the bounds do not apply: the query must then scan exactly.
 */
static int
prepare_query(const WalsScoreIndex *ix, const float *x, const QueryScratch *qs,
			  Query *q)
{
	int			f = ix->f;
	int8_t	   *q8 = (int8_t *) qs->qx;
	double		mx = 0.0;
	double		x2 = 0.0;
	double		xq2 = 0.0;
	double		e2 = 0.0;
	double		xn;
	double		xqn;
	double		en;
	int64_t		qsum = 0;
	float		s;
	int			g;
	int			j;

	if (!ix->usable)
		return 0;
	for (j = 0; j < f; j++)
	{
		if (!isfinite(x[j]))
			return 0;
		mx = fmax(mx, fabs((double) x[j]));
		x2 += (double) x[j] * x[j];
	}
	xn = sqrt(x2) * (1.0 + SLACK_DOUBLE);
	if (xn * ix->max_norm > SCORE_MAX_PRODUCT)
		return 0;
	s = (float) (mx / 127.0);
	memset(q8, 0, 4 * (size_t) ix->groups);
	for (j = 0; j < f; j++)
	{
		int			v = s > 0.0f ? clamp_byte(x[j] / (double) s) : 0;
		double		h = (double) s * v;

		q8[j] = (int8_t) v;
		qsum += v;
		xq2 += h * h;
		e2 += (x[j] - h) * (x[j] - h);
	}
	for (g = 0; g < ix->groups; g++)
		for (j = 0; j < 8; j++)
		{
			qs->pairs[16 * g + j] = q8[4 * g + 2 * (j % 2)];
			qs->pairs[16 * g + 8 + j] = q8[4 * g + 2 * (j % 2) + 1];
		}
	xqn = sqrt(xq2) * (1.0 + SLACK_DOUBLE);
	en = sqrt(e2) * (1.0 + SLACK_DOUBLE);
	order_groups(q8, ix->groups, qs, q);
	q->qx = qs->qx;
	q->offset = qs->offset;
	q->qx_ordered = qs->qx_ordered;
	q->qabs_ordered = qs->qabs_ordered;
	q->pairs = qs->pairs;
	q->corr = (int32_t) (-128 * qsum);
	q->sx = s;
	q->A = float_up(xqn * (1.0 + 8 * U_ROUND) * (1.0 + SLACK_FLOAT));
	q->B = float_up((en + dot_gamma(f) * xn + 8 * U_ROUND * xqn) *
					(1.0 + SLACK_FLOAT));
	q->eta = float_up(underflow_eta(f) * (1.0 + SLACK_FLOAT));
	return 1;
}

/* A query's first pass: the running floor and the candidates so far. */
typedef struct Scan
{
	WalsTopK	lower;			/* the k best lower bounds */
	float		threshold;		/* the k-th of them, -inf until k are in */
	int32_t    *cand;			/* items whose upper bound reached it */
	float	   *cand_upper;
	int64_t		ncand;
} Scan;

/*
 * Start the first pass of query x in its scratch, or return 0 where the
 * query must scan exactly: the bounds would not prune, or do not apply.
 */
static int
query_begin(const WalsScoreIndex *ix, const float *x,
			const WalsScoreFilter *filter, int k, const QueryScratch *qs,
			Query *q, Cursor *c, Scan *st)
{
	if (!prunes(ix, filter, k) || !prepare_query(ix, x, qs, q))
		return 0;
	wals_topk_init(&st->lower, k, qs->lower_idx, qs->lower_score);
	st->threshold = -INFINITY;
	st->cand = qs->cand;
	st->cand_upper = qs->cand_upper;
	st->ncand = 0;
	cursor_init(c, filter);
	return 1;
}

/*
 * Record block items as candidates (mask cand) and push their lower bounds.
 * Items pushed below a threshold raised by an earlier lane are refused by
 * the heap itself.
 */
static void
scan_take(Scan *st, int64_t base, uint32_t cand, const float *lower,
		  const float *upper)
{
	int			lane;

	for (lane = 0; lane < BLOCK; lane++)
	{
		if (!(cand >> lane & 1))
			continue;
		st->cand[st->ncand] = (int32_t) (base + lane);
		st->cand_upper[st->ncand++] = upper[lane];
		if (lower[lane] > st->threshold)
			wals_topk_push(&st->lower, (int32_t) (base + lane), lower[lane]);
	}
	if (st->lower.size == st->lower.k)
		st->threshold = st->lower.score[0];
}

/*
 * One instruction set's first pass, for nu queries at once, its bounds
 * alone (for tests), and the batch that suits it.
 */
typedef struct ScorePath ScorePath;

struct ScorePath
{
	const char *name;
	void		(*scan) (const WalsScoreIndex *ix, const Query *q, Cursor *c,
						 Scan *st, int nu);
	void		(*bounds) (const WalsScoreIndex *ix, const Query *q,
						   float *lower, float *upper);
	void		(*batch) (const WalsScoreIndex *ix, const float *X,
						  int64_t lo, int64_t hi,
						  const WalsScoreFilter *filters, int k,
						  int32_t *idx, float *score, int *count,
						  unsigned char *scratch);
};

static const ScorePath *score_path(void);

/*
 * A path's core: the bounds of the 16 items of blk for query q; returns
 * the eligible lanes whose upper bound reaches threshold, storing both
 * bounds when there are any.
 */
typedef uint32_t (*BlockFn) (const unsigned char *blk, int groups,
							 const Query *q, float threshold,
							 uint32_t eligible, float *lower, float *upper);

/*
 * The loops around a block function are written once and inlined into
 * each path's functions, where the constant block function is inlined in
 * turn, compiled for that path's instruction set.
 */
#ifdef __GNUC__
#define SCORE_INLINE inline __attribute__((always_inline))
#define SCORE_PREFETCH(p) __builtin_prefetch(p)
#else
#define SCORE_INLINE inline
#define SCORE_PREFETCH(p) ((void) (p))
#endif

/* The first block from b on that one of the nu users may take. */
static int64_t
next_block(Cursor *c, int nu, int64_t b, int64_t nblocks)
{
	int64_t		first = nblocks;
	int			u;

	for (u = 0; u < nu && first > b; u++)
	{
		int64_t		next = cursor_next_block(&c[u], b, nblocks);

		first = next < first ? next : first;
	}
	return first;
}

/* The candidates whose upper bound reaches the final floor, rescored. */
static int
rescore(const WalsScoreIndex *ix, const float *x, const Scan *st, int k,
		int32_t *idx, float *score)
{
	float		(*dot) (const float *, const float *, int) = wals_kernels()->dot;
	int			f = ix->f;
	WalsTopK	heap;
	int64_t		c;

	wals_topk_init(&heap, k, idx, score);
	for (c = 0; c < st->ncand; c++)
		if (st->cand_upper[c] >= st->threshold)
			wals_topk_push(&heap, st->cand[c],
						   dot(x, ix->Y + (size_t) st->cand[c] * f, f));
	return wals_topk_finish(&heap);
}

/*
 * The first pass of nu queries at once, block by block, so that a block
 * read from memory serves them all while it is in the first-level cache.
 * Each path inlines this body with its own block function, compiled for
 * its own instruction set.
 */
static SCORE_INLINE void
scan_body(const WalsScoreIndex *ix, const Query *q, Cursor *c, Scan *st,
		  int nu, BlockFn block)
{
	int64_t		nblocks = block_count(ix->n);
	size_t		bb = block_bytes(ix->groups);
	int64_t		b;
	int			u;

	for (b = next_block(c, nu, 0, nblocks); b < nblocks;
		 b = next_block(c, nu, b + 1, nblocks))
	{
		size_t		o;

		if (b + PREFETCH_BLOCKS < nblocks)
			for (o = 0; o < bb; o += 64)
				SCORE_PREFETCH(ix->blocks + (size_t) (b + PREFETCH_BLOCKS) * bb + o);
		for (u = 0; u < nu; u++)
		{
			float		lower[BLOCK];
			float		upper[BLOCK];
			uint32_t	eligible = cursor_block_mask(&c[u], b, ix->n);
			uint32_t	cand;

			if (eligible == 0)
				continue;
			cand = block(ix->blocks + (size_t) b * bb, ix->groups, &q[u],
						 st[u].threshold, eligible, lower, upper);
			if (cand)
				scan_take(&st[u], b * BLOCK, cand, lower, upper);
		}
	}
}

/* Every item's bounds, for tests, through the same block function. */
static SCORE_INLINE void
bounds_body(const WalsScoreIndex *ix, const Query *q, float *lower,
			float *upper, BlockFn block)
{
	size_t		bb = block_bytes(ix->groups);
	int64_t		b;

	for (b = 0; b < block_count(ix->n); b++)
	{
		float		lo[BLOCK];
		float		up[BLOCK];
		int64_t		j;

		block(ix->blocks + (size_t) b * bb, ix->groups, q, -INFINITY, 0xffff,
			  lo, up);
		for (j = 0; j < BLOCK && b * BLOCK + j < ix->n; j++)
		{
			lower[b * BLOCK + j] = lo[j];
			upper[b * BLOCK + j] = up[j];
		}
	}
}

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__

/*
 * 16 bytes as 8 int16 or 4 int32 lanes, the width every vector unit has.
 * Without byte products in hardware, one is cheapest in 16 bits: the four
 * bytes of item j are two int16 lanes, and each lane's low and high byte,
 * made signed (q_y, without the offset), times the query's bytes for
 * those positions (Query.pairs) gives products of at most 127^2, two of
 * which still fit in an int16 before they are widened.
 */
typedef int16_t ScoreI16 __attribute__((vector_size(16), may_alias));
typedef uint16_t ScoreU16 __attribute__((vector_size(16), may_alias));
typedef int32_t ScoreI32 __attribute__((vector_size(16), may_alias));
typedef uint32_t ScoreU32 __attribute__((vector_size(16), may_alias));

/* The exact q_x.q_y of the 16 items of blk. */
static inline void
block_sums(const unsigned char *blk, int groups, const int16_t *pairs,
		   int32_t *sums)
{
	ScoreI32	acc[4] = {{0}};
	int			g;
	int			c;

	for (g = 0; g < groups; g++)
	{
		ScoreI16	x_low = *(const ScoreI16 *) (pairs + 16 * g);
		ScoreI16	x_high = *(const ScoreI16 *) (pairs + 16 * g + 8);

		/*
		 * Shifts left are done unsigned, where they are defined for every
		 * value; shifts right signed, which extends the sign.
		 */
		for (c = 0; c < 4; c++)
		{
			ScoreU16	w = *(const ScoreU16 *) (blk + 64 * (size_t) g + 16 * c) ^
				(uint16_t) 0x8080;	/* q_y + 128 back to q_y */
			ScoreI16	low = (ScoreI16) (w << 8) >> 8;
			ScoreI16	high = (ScoreI16) w >> 8;
			ScoreU32	p = (ScoreU32) (low * x_low + high * x_high);

			acc[c] += ((ScoreI32) (p << 16) >> 16) + ((ScoreI32) p >> 16);
		}
	}
	memcpy(sums, acc, sizeof(acc));
}

#else

/* Plain loops where vectors or the byte order are unknown. */
static void
block_sums(const unsigned char *blk, int groups, const int16_t *pairs,
		   int32_t *sums)
{
	int			g;
	int			j;

	for (j = 0; j < BLOCK; j++)
		sums[j] = 0;
	for (g = 0; g < groups; g++)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		const int16_t *xg = pairs + 16 * g;

		for (j = 0; j < BLOCK; j++)
			sums[j] += (p[4 * j] - 128) * xg[0] + (p[4 * j + 1] - 128) * xg[8] +
				(p[4 * j + 2] - 128) * xg[1] + (p[4 * j + 3] - 128) * xg[9];
	}
}

#endif

/*
 * The portable BlockFn.  The integer sums are exact in any order and with
 * either byte offset, so every path gives the same a.
 */
static uint32_t
block_portable(const unsigned char *blk, int groups, const Query *q,
			   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	int32_t		sums[BLOCK];
	uint32_t	cand = 0;
	int			j;

	block_sums(blk, groups, q->pairs, sums);
	for (j = 0; j < BLOCK; j++)
	{
		float		a = (float) sums[j] * (q->sx * meta[j]);
		float		e = q->A * meta[BLOCK + j] +
			(q->B * meta[2 * BLOCK + j] + q->eta);

		lower[j] = a - e;
		upper[j] = a + e;
		if ((eligible >> j & 1) && upper[j] >= threshold)
			cand |= 1u << j;
	}
	return cand;
}

/* The portable path's scan and bounds. */
static void
scan_portable(const WalsScoreIndex *ix, const Query *q, Cursor *c, Scan *st,
			  int nu)
{
	scan_body(ix, q, c, st, nu, block_portable);
}

static void
bounds_portable(const WalsScoreIndex *ix, const Query *q, float *lower,
				float *upper)
{
	bounds_body(ix, q, lower, upper, block_portable);
}

/* ---------- x86: AVX-512 VNNI, and AVX2 ---------- */

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define SCORE_X86 1

#include <immintrin.h>

#define WALS_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))
#define WALS_VNNI_INLINE WALS_VNNI inline __attribute__((always_inline))
#define WALS_AVX2 __attribute__((target("avx2,fma")))
#define WALS_AVX2_INLINE WALS_AVX2 inline __attribute__((always_inline))

/*
 * block_portable in vectors: one vpdpbusd per group adds four products to
 * each of the 16 item sums.  Four accumulators break the chain of
 * dependent vpdpbusd; integer sums do not depend on their order.
 */
static WALS_VNNI_INLINE uint32_t
block_vnni(const unsigned char *blk, int groups, const Query *q,
		   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	__m512i		a0 = _mm512_set1_epi32(q->corr);
	__m512i		a1 = _mm512_setzero_si512();
	__m512i		a2 = _mm512_setzero_si512();
	__m512i		a3 = _mm512_setzero_si512();
	__m512		a;
	__m512		e;
	__m512		lo;
	__m512		up;
	__mmask16	cand;
	int			g = 0;

	for (; g + 4 <= groups; g += 4)
	{
		const unsigned char *p = blk + 64 * (size_t) g;

		a0 = _mm512_dpbusd_epi32(a0, _mm512_load_si512(p), _mm512_set1_epi32(q->qx[g]));
		a1 = _mm512_dpbusd_epi32(a1, _mm512_load_si512(p + 64), _mm512_set1_epi32(q->qx[g + 1]));
		a2 = _mm512_dpbusd_epi32(a2, _mm512_load_si512(p + 128), _mm512_set1_epi32(q->qx[g + 2]));
		a3 = _mm512_dpbusd_epi32(a3, _mm512_load_si512(p + 192), _mm512_set1_epi32(q->qx[g + 3]));
	}
	for (; g < groups; g++)
		a0 = _mm512_dpbusd_epi32(a0, _mm512_load_si512(blk + 64 * (size_t) g),
								 _mm512_set1_epi32(q->qx[g]));
	a0 = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
	a = _mm512_mul_ps(_mm512_cvtepi32_ps(a0),
					  _mm512_mul_ps(_mm512_set1_ps(q->sx), _mm512_load_ps(meta)));
	e = _mm512_fmadd_ps(_mm512_set1_ps(q->A), _mm512_load_ps(meta + BLOCK),
						_mm512_fmadd_ps(_mm512_set1_ps(q->B),
										_mm512_load_ps(meta + 2 * BLOCK),
										_mm512_set1_ps(q->eta)));
	lo = _mm512_sub_ps(a, e);
	up = _mm512_add_ps(a, e);
	cand = _mm512_mask_cmp_ps_mask((__mmask16) eligible, up,
								   _mm512_set1_ps(threshold), _CMP_GE_OQ);
	if (cand)
	{
		_mm512_storeu_ps(lower, lo);
		_mm512_storeu_ps(upper, up);
	}
	return cand;
}

static WALS_VNNI void
scan_vnni(const WalsScoreIndex *ix, const Query *q, Cursor *c, Scan *st,
		  int nu)
{
	scan_body(ix, q, c, st, nu, block_vnni);
}

static WALS_VNNI void
bounds_vnni(const WalsScoreIndex *ix, const Query *q, float *lower,
			float *upper)
{
	bounds_body(ix, q, lower, upper, block_vnni);
}

/* The bounds of eight items from their sums, as block_vnni forms them. */
static WALS_AVX2_INLINE uint32_t
bounds8_avx2(__m256i sums, const float *meta, const Query *q,
			 float threshold, float *lower, float *upper)
{
	__m256		a = _mm256_mul_ps(_mm256_cvtepi32_ps(sums),
								  _mm256_mul_ps(_mm256_set1_ps(q->sx),
												_mm256_loadu_ps(meta)));
	__m256		e = _mm256_fmadd_ps(_mm256_set1_ps(q->A),
									_mm256_loadu_ps(meta + BLOCK),
									_mm256_fmadd_ps(_mm256_set1_ps(q->B),
													_mm256_loadu_ps(meta + 2 * BLOCK),
													_mm256_set1_ps(q->eta)));
	__m256		up = _mm256_add_ps(a, e);

	_mm256_storeu_ps(lower, _mm256_sub_ps(a, e));
	_mm256_storeu_ps(upper, up);
	return (uint32_t) _mm256_movemask_ps(_mm256_cmp_ps(up, _mm256_set1_ps(threshold),
													   _CMP_GE_OQ));
}

/*
 * block_portable in AVX2, eight items a vector, in the order of
 * order_groups; why no int16 lane saturates or wraps is in the header
 * (Paths).  Per vector, a pair of narrow groups costs two vpmaddubsw, a
 * vpaddw and one vpmaddwd, a wide group a vpxor, a vpsignb, a vpmaddubsw
 * and a vpmaddwd; only ports 0 and 1 run the multiplies and vpsignb, so
 * those counts bound the loop.
 */
static WALS_AVX2_INLINE uint32_t
block_avx2(const unsigned char *blk, int groups, const Query *q,
		   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	const __m256i flip = _mm256_set1_epi8((char) 0x80);
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i		lo = _mm256_set1_epi32(q->corr_narrow);
	__m256i		hi = lo;
	uint32_t	cand;
	int			i;

	for (i = 0; i < q->paired; i += 2)
	{
		const __m256i *p = (const __m256i *) (blk + q->offset[i]);
		const __m256i *r = (const __m256i *) (blk + q->offset[i + 1]);
		__m256i		xp = _mm256_set1_epi32(q->qx_ordered[i]);
		__m256i		xr = _mm256_set1_epi32(q->qx_ordered[i + 1]);

		lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p), xp),
																	 _mm256_maddubs_epi16(_mm256_load_si256(r), xr)),
													ones));
		hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p + 1), xp),
																	 _mm256_maddubs_epi16(_mm256_load_si256(r + 1), xr)),
													ones));
	}
	for (; i < q->narrow; i++)
	{
		const __m256i *p = (const __m256i *) (blk + q->offset[i]);
		__m256i		x = _mm256_set1_epi32(q->qx_ordered[i]);

		lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p), x), ones));
		hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_load_si256(p + 1), x), ones));
	}
	for (; i < groups; i++)
	{
		const __m256i *p = (const __m256i *) (blk + q->offset[i]);
		__m256i		x = _mm256_set1_epi32(q->qx_ordered[i]);
		__m256i		xabs = _mm256_set1_epi32(q->qabs_ordered[i]);
		__m256i		y0 = _mm256_xor_si256(_mm256_load_si256(p), flip);
		__m256i		y1 = _mm256_xor_si256(_mm256_load_si256(p + 1), flip);

		lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(xabs, _mm256_sign_epi8(y0, x)), ones));
		hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(xabs, _mm256_sign_epi8(y1, x)), ones));
	}
	cand = bounds8_avx2(lo, meta, q, threshold, lower, upper);
	cand |= bounds8_avx2(hi, meta + 8, q, threshold, lower + 8, upper + 8) << 8;
	return cand & eligible;
}

static WALS_AVX2 void
scan_avx2(const WalsScoreIndex *ix, const Query *q, Cursor *c, Scan *st,
		  int nu)
{
	scan_body(ix, q, c, st, nu, block_avx2);
}

static WALS_AVX2 void
bounds_avx2(const WalsScoreIndex *ix, const Query *q, float *lower,
			float *upper)
{
	bounds_body(ix, q, lower, upper, block_avx2);
}

#endif							/* x86 */

/* ---------- Arm: NEON, with or without SDOT ---------- */

#if defined(__aarch64__) && defined(__GNUC__)
#define SCORE_NEON 1

#include <arm_neon.h>

#define WALS_NEON_INLINE inline __attribute__((always_inline))

/*
 * GCC compiles SDOT in functions of their own target; clang 14's
 * arm_neon.h offers it only where the whole file is built for it, which is
 * all PostgreSQL's bitcode of this file needs (the server runs GCC's).
 */
#if defined(__ARM_FEATURE_DOTPROD)
#define WALS_DOTPROD
#elif !defined(__clang__)
#define WALS_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

/* The bounds of four items from their sums, as block_vnni forms them. */
static WALS_NEON_INLINE uint32_t
bounds4_neon(int32x4_t sums, const float *meta, const Query *q,
			 float threshold, float *lower, float *upper)
{
	static const uint32_t lane_bits[4] = {1, 2, 4, 8};
	float32x4_t a = vmulq_f32(vcvtq_f32_s32(sums),
							  vmulq_n_f32(vld1q_f32(meta), q->sx));
	float32x4_t e = vfmaq_n_f32(vfmaq_n_f32(vdupq_n_f32(q->eta),
											vld1q_f32(meta + 2 * BLOCK), q->B),
								vld1q_f32(meta + BLOCK), q->A);
	float32x4_t up = vaddq_f32(a, e);

	vst1q_f32(lower, vsubq_f32(a, e));
	vst1q_f32(upper, up);
	return vaddvq_u32(vandq_u32(vcgeq_f32(up, vdupq_n_f32(threshold)),
								vld1q_u32(lane_bits)));
}

/* The candidates among 16 items from their sums, four to a vector. */
static WALS_NEON_INLINE uint32_t
bounds16_neon(const int32x4_t *sums, const unsigned char *blk, int groups,
			  const Query *q, float threshold, uint32_t eligible,
			  float *lower, float *upper)
{
	const float *meta = (const float *) (blk + 64 * (size_t) groups);
	uint32_t	cand = 0;
	int			c;

	for (c = 0; c < 4; c++)
		cand |= bounds4_neon(sums[c], meta + 4 * c, q, threshold,
							 lower + 4 * c, upper + 4 * c) << (4 * c);
	return cand & eligible;
}

/*
 * block_portable in NEON without SDOT.  Bytes made signed again (q_y)
 * times q_x in vmull_s8 are products of at most 127^2 in int16 lanes;
 * vmlal_s8 adds those of the next group, at most 32258 in all, still
 * exact; vpadalq_s16 adds adjacent lanes into int32, two per item, which
 * vpaddq_s32 adds at the end.
 */
static WALS_NEON_INLINE uint32_t
block_neon(const unsigned char *blk, int groups, const Query *q,
		   float threshold, uint32_t eligible, float *lower, float *upper)
{
	const uint8x16_t flip = vdupq_n_u8(0x80);
	int32x4_t	lo[4];
	int32x4_t	hi[4];
	int32x4_t	sums[4];
	int			g;
	int			c;

	for (c = 0; c < 4; c++)
		lo[c] = hi[c] = vdupq_n_s32(0);
	for (g = 0; g + 2 <= groups; g += 2)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));
		int8x16_t	x1 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g + 1]));

		for (c = 0; c < 4; c++)
		{
			int8x16_t	y0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip));
			int8x16_t	y1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 64 + 16 * c), flip));

			lo[c] = vpadalq_s16(lo[c], vmlal_s8(vmull_s8(vget_low_s8(y0), vget_low_s8(x0)),
												vget_low_s8(y1), vget_low_s8(x1)));
			hi[c] = vpadalq_s16(hi[c], vmlal_high_s8(vmull_high_s8(y0, x0), y1, x1));
		}
	}
	if (g < groups)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));

		for (c = 0; c < 4; c++)
		{
			int8x16_t	y0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip));

			lo[c] = vpadalq_s16(lo[c], vmull_s8(vget_low_s8(y0), vget_low_s8(x0)));
			hi[c] = vpadalq_s16(hi[c], vmull_high_s8(y0, x0));
		}
	}
	for (c = 0; c < 4; c++)
		sums[c] = vpaddq_s32(lo[c], hi[c]);
	return bounds16_neon(sums, blk, groups, q, threshold, eligible, lower,
						 upper);
}

static void
scan_neon(const WalsScoreIndex *ix, const Query *q, Cursor *c, Scan *st,
		  int nu)
{
	scan_body(ix, q, c, st, nu, block_neon);
}

static void
bounds_neon(const WalsScoreIndex *ix, const Query *q, float *lower,
			float *upper)
{
	bounds_body(ix, q, lower, upper, block_neon);
}

#ifdef WALS_DOTPROD
#define SCORE_DOTPROD 1

/*
 * block_portable with SDOT, which adds four products of signed bytes into
 * each int32 lane: q_y (the stored byte made signed again) times q_x,
 * exact.  Two sets of accumulators alternate between groups, so that no
 * SDOT waits for the one before.
 */
static WALS_DOTPROD WALS_NEON_INLINE uint32_t
block_dotprod(const unsigned char *blk, int groups, const Query *q,
			  float threshold, uint32_t eligible, float *lower, float *upper)
{
	const uint8x16_t flip = vdupq_n_u8(0x80);
	int32x4_t	even[4];
	int32x4_t	odd[4];
	int32x4_t	sums[4];
	int			g;
	int			c;

	for (c = 0; c < 4; c++)
		even[c] = odd[c] = vdupq_n_s32(0);
	for (g = 0; g + 2 <= groups; g += 2)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));
		int8x16_t	x1 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g + 1]));

		for (c = 0; c < 4; c++)
		{
			even[c] = vdotq_s32(even[c], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip)), x0);
			odd[c] = vdotq_s32(odd[c], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 64 + 16 * c), flip)), x1);
		}
	}
	if (g < groups)
	{
		const unsigned char *p = blk + 64 * (size_t) g;
		int8x16_t	x0 = vreinterpretq_s8_s32(vdupq_n_s32(q->qx[g]));

		for (c = 0; c < 4; c++)
			even[c] = vdotq_s32(even[c], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16 * c), flip)), x0);
	}
	for (c = 0; c < 4; c++)
		sums[c] = vaddq_s32(even[c], odd[c]);
	return bounds16_neon(sums, blk, groups, q, threshold, eligible, lower,
						 upper);
}

static WALS_DOTPROD void
scan_dotprod(const WalsScoreIndex *ix, const Query *q, Cursor *c, Scan *st,
			 int nu)
{
	scan_body(ix, q, c, st, nu, block_dotprod);
}

static WALS_DOTPROD void
bounds_dotprod(const WalsScoreIndex *ix, const Query *q, float *lower,
			   float *upper)
{
	bounds_body(ix, q, lower, upper, block_dotprod);
}
#endif							/* WALS_DOTPROD */

#endif							/* aarch64 */

/* ---------- batch: through the matrix product ---------- */

/* One user of a product block: its heap of products and its filter. */
typedef struct ProductUser
{
	WalsTopK	heap;			/* the best products, k + 8 at most */
	Cursor		cursor;
	double		margin;			/* 2M of the header */
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
	size_t		sp = align_size(sizeof(float) * PRODUCT_USERS * (size_t) items);
	size_t		su = align_size(sizeof(ProductUser) * PRODUCT_USERS);
	size_t		sh = align_size(4 * PRODUCT_USERS * keep);

	if (ps)
	{
		ps->product = (float *) p;
		ps->users = (ProductUser *) (p + sp);
		ps->heap_idx = (int32_t *) (p + sp + su);
		ps->heap_score = (float *) (p + sp + su + sh);
	}
	return sp + su + 2 * sh;
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
		return exact_topk(ix, x, filter, k, idx, score);
	h = wals_topk_finish(&u->heap);
	floor = h >= k ? (double) u->heap.score[k - 1] - u->margin : -INFINITY;
	if (h == u->heap.k && (double) u->heap.score[h - 1] >= floor)
		return exact_topk(ix, x, filter, k, idx, score);
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
static void
batch_product(const WalsScoreIndex *ix, const float *X, int64_t lo,
			  int64_t hi, const WalsScoreFilter *filters, int k,
			  int32_t *idx, float *score, int *count, unsigned char *scratch)
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

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nu, m, f,
						1.0f, X + (size_t) u0 * f, f, ix->Y + (size_t) i0 * f, f,
						0.0f, ps.product, m);
			for (j = 0; j < nu; j++)
				if (!ps.users[j].exact)
					product_select(ps.product + (size_t) j * m, i0, m,
								   &ps.users[j]);
		}
		for (j = 0; j < nu; j++)
			count[u0 + j] = product_user_finish(ix, X + (size_t) (u0 + j) * f,
												filters ? &filters[u0 + j] : NULL,
												k, &ps.users[j],
												idx + (size_t) (u0 + j) * k,
												score + (size_t) (u0 + j) * k);
	}
}

/* ---------- batch: through the first pass ---------- */

/* Bytes of a first-pass batch's scratch: SCAN_USERS queries'. */
static size_t
first_pass_scratch_size(const WalsScoreIndex *ix, int k)
{
	return SCAN_USERS * query_scratch_layout(ix, k, NULL, NULL);
}

#if defined(SCORE_X86) || defined(SCORE_NEON)

/*
 * The batch where byte products are in vectors: SCAN_USERS queries share
 * each block of the first pass, which then costs arithmetic rather than
 * memory traffic.
 */
static void
batch_first_pass(const WalsScoreIndex *ix, const float *X, int64_t lo,
				 int64_t hi, const WalsScoreFilter *filters, int k,
				 int32_t *idx, float *score, int *count,
				 unsigned char *scratch)
{
	size_t		per_user = query_scratch_layout(ix, k, NULL, NULL);
	int			f = ix->f;
	int64_t		u0;

	for (u0 = lo; u0 < hi; u0 += SCAN_USERS)
	{
		int			nu = hi - u0 < SCAN_USERS ? (int) (hi - u0) : SCAN_USERS;
		Query		q[SCAN_USERS];
		Cursor		c[SCAN_USERS];
		Scan		st[SCAN_USERS];
		int64_t		who[SCAN_USERS];
		int			active = 0;
		int			j;

		for (j = 0; j < nu; j++)
		{
			int64_t		u = u0 + j;
			const WalsScoreFilter *filter = filters ? &filters[u] : NULL;
			QueryScratch qs;

			query_scratch_layout(ix, k, scratch + j * per_user, &qs);
			if (query_begin(ix, X + (size_t) u * f, filter, k, &qs,
							&q[active], &c[active], &st[active]))
				who[active++] = u;
			else
				count[u] = exact_topk(ix, X + (size_t) u * f, filter, k,
									  idx + (size_t) u * k, score + (size_t) u * k);
		}
		if (active)
			score_path()->scan(ix, q, c, st, active);
		for (j = 0; j < active; j++)
			count[who[j]] = rescore(ix, X + (size_t) who[j] * f, &st[j], k,
									idx + (size_t) who[j] * k,
									score + (size_t) who[j] * k);
	}
}

#endif

/* ---------- dispatch ---------- */

static const ScorePath portable_path = {
	"portable", scan_portable, bounds_portable, batch_product
};

#ifdef SCORE_X86
static const ScorePath vnni_path = {
	"avx512vnni", scan_vnni, bounds_vnni, batch_first_pass
};

static const ScorePath avx2_path = {
	"avx2", scan_avx2, bounds_avx2, batch_first_pass
};
#endif

#ifdef SCORE_NEON
static const ScorePath neon_path = {
	"neon", scan_neon, bounds_neon, batch_first_pass
};
#endif

#ifdef SCORE_DOTPROD
static const ScorePath dotprod_path = {
	"neon-dotprod", scan_dotprod, bounds_dotprod, batch_first_pass
};
#endif

/*
 * The path of the kernel family in use, so that wals_kernels_use (the
 * server's wals.kernels) moves scoring along with the solvers, and tests
 * and benchmarks reach every path through it.  Asking again each time
 * costs a switch and a look at the CPU's features, which never change, so
 * no choice is cached that a later wals_kernels_use would leave stale.
 */
static const ScorePath *
score_path(void)
{
	switch (wals_kernels()->isa)
	{
#ifdef SCORE_X86
		case WALS_ISA_AVX512:
			if (wals_cpu_feature(WALS_CPU_VNNI))
				return &vnni_path;
			return &avx2_path;
		case WALS_ISA_AVX2:
			return &avx2_path;
#endif
#ifdef SCORE_NEON
		case WALS_ISA_NEON:
#ifdef SCORE_DOTPROD
			if (wals_cpu_feature(WALS_CPU_DOTPROD))
				return &dotprod_path;
#endif
			return &neon_path;
#endif
		default:
			return &portable_path;
	}
}

const char *
wals_score_path(void)
{
	return score_path()->name;
}

/* ---------- entry points ---------- */

size_t
wals_score_scratch_size(const WalsScoreIndex *ix, int k)
{
	return WALS_ALIGN + query_scratch_layout(ix, k, NULL, NULL);
}

int
wals_score_topk(const WalsScoreIndex *ix, const float *x,
				const WalsScoreFilter *filter, int k, int32_t *idx,
				float *score, void *scratch)
{
	QueryScratch qs;
	Query		q;
	Scan		st;
	Cursor		c;

	if (k < 1)
		return 0;
	query_scratch_layout(ix, k, align_ptr(scratch), &qs);
	if (!query_begin(ix, x, filter, k, &qs, &q, &c, &st))
		return exact_topk(ix, x, filter, k, idx, score);
	score_path()->scan(ix, &q, &c, &st, 1);
	return rescore(ix, x, &st, k, idx, score);
}

int
wals_score_bounds(const WalsScoreIndex *ix, const float *x, float *lower,
				  float *upper, void *scratch)
{
	QueryScratch qs;
	Query		q;

	query_scratch_layout(ix, 1, align_ptr(scratch), &qs);
	if (!prepare_query(ix, x, &qs, &q))
		return 0;
	score_path()->bounds(ix, &q, lower, upper);
	return 1;
}

/* Either batch may run: wals_kernels_use may change the path in between. */
size_t
wals_score_batch_scratch_size(const WalsScoreIndex *ix, int k)
{
	size_t		product = product_scratch_layout(ix, k, NULL, NULL);
	size_t		first_pass = first_pass_scratch_size(ix, k);

	return WALS_ALIGN + (product > first_pass ? product : first_pass);
}

void
wals_score_topk_batch(const WalsScoreIndex *ix, const float *X,
					  int64_t lo, int64_t hi, const WalsScoreFilter *filters,
					  int k, int32_t *idx, float *score, int *count,
					  void *scratch)
{
	int64_t		u;

	if (k < 1)
	{
		for (u = lo; u < hi; u++)
			count[u] = 0;
		return;
	}
	score_path()->batch(ix, X, lo, hi, filters, k, idx, score, count,
						align_ptr(scratch));
}
