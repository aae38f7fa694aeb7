/*
 * score_index.c
 *	  The scoring engine's index of the item factors: their bytes, scales,
 *	  error norms and norms, in blocks of 16 items ordered by norm, which
 *	  the first pass reads instead of the float rows.  Its layout, and why
 *	  the items go by norm, are told at the head of score_query.c (Layout,
 *	  Order).
 */
#include <math.h>
#include <string.h>

#include "score_internal.h"

/*
 * Sums of f products of a byte and a signed byte stay inside int32, from
 * the byte offset's correction on: f (128 + 255) 127 < 2^31.
 */
#define SCORE_MAX_F 32768

/* Bytes of an index's blocks, then of each of its two position maps. */
static size_t
index_blocks_size(int64_t n, int f)
{
	return (size_t) block_count(n) * block_bytes((f + 3) / 4);
}

static size_t
index_map_size(int64_t n)
{
	return wals_align_size(sizeof(int32_t) * (size_t) n);
}

size_t
wals_score_index_size(int64_t n, int f)
{
	if (n < 0 || f < 1 || f > SCORE_MAX_F)
		return 0;
	return index_blocks_size(n, f) + 2 * index_map_size(n) + WALS_ALIGN;
}

void
wals_score_index_remap(WalsScoreIndex *ix, const float *Y, const void *blocks)
{
	const unsigned char *p = blocks;
	size_t		bytes = index_blocks_size(ix->n, ix->f);

	ix->Y = Y;
	ix->blocks = p;
	ix->item = (const int32_t *) (p + bytes);
	ix->position = (const int32_t *) (p + bytes + index_map_size(ix->n));
}

/*
 * The norm |y| an item's lane stores, rounded up, as the bits of a
 * nonnegative float, which order as the floats do; 0 where y holds a
 * non-finite value, which leaves the index unusable (*usable cleared).
 * Four partial sums keep the loop from waiting on one addition; their
 * rounding is far inside SLACK_DOUBLE.
 */
static uint32_t
item_norm_bits(const float *y, int f, int *usable)
{
	double		s0 = 0.0,
				s1 = 0.0,
				s2 = 0.0,
				s3 = 0.0;
	float		norm;
	uint32_t	bits;
	int			j;

	for (j = 0; j + 4 <= f; j += 4)
	{
		s0 += (double) y[j] * y[j];
		s1 += (double) y[j + 1] * y[j + 1];
		s2 += (double) y[j + 2] * y[j + 2];
		s3 += (double) y[j + 3] * y[j + 3];
	}
	for (; j < f; j++)
		s0 += (double) y[j] * y[j];
	if (!isfinite((s0 + s1) + (s2 + s3)))
	{
		*usable = 0;
		return 0;
	}
	norm = float_up(sqrt((s0 + s1) + (s2 + s3)) * (1.0 + SLACK_DOUBLE));
	memcpy(&bits, &norm, sizeof(bits));
	return bits;
}

/*
 * The items tmp[0..n) (in increasing order) into out by norm, largest
 * first, ties by item: a stable radix sort on three 11-bit digits of
 * their norm's bits, complemented so that the largest comes first.  tmp
 * is scratch then.
 */
static void
order_by_norm(const uint32_t *bits, int64_t n, int32_t *out, int32_t *tmp)
{
	int32_t    *src = tmp;
	int32_t    *dst = out;
	int			shift;
	int64_t		i;

	for (shift = 0; shift < 33; shift += 11)
	{
		int64_t		count[2049] = {0};
		int32_t    *swap;
		int			d;

		for (i = 0; i < n; i++)
			count[((~bits[src[i]] >> shift) & 0x7ff) + 1]++;
		for (d = 0; d < 2048; d++)
			count[d + 1] += count[d];
		for (i = 0; i < n; i++)
			dst[count[(~bits[src[i]] >> shift) & 0x7ff]++] = src[i];
		swap = src;
		src = dst;
		dst = swap;
		/* a scatter to random places: tens of ns an item */
		wals_poll((int64_t) 128 * n);
	}
	if (src != out)
		memcpy(out, src, sizeof(int32_t) * (size_t) n);
}

/*
 * The byte of y_j scaled by inv, into the block, and its error's square
 * into e2.
 */
static inline void
quantise_factor(const float *y, int j, double inv, float s, unsigned char *bytes,
				double *e2)
{
	int			q = clamp_byte(y[j] * inv);
	double		e = y[j] - (double) s * q;

	bytes[64 * (j / 4) + j % 4] = (unsigned char) (q + 128);
	*e2 += e * e;
}

/*
 * Item y's lane of a block, whose norm norm_bits gave.  The error's four
 * partial sums, as the norm's, keep the loop from waiting on one addition.
 */
static void
quantise_item(const float *y, int f, uint32_t norm_bits, unsigned char *blk,
			  int groups, int lane)
{
	float	   *meta = (float *) (blk + 64 * (size_t) groups);
	unsigned char *bytes = blk + 4 * lane;
	double		e0 = 0.0,
				e1 = 0.0,
				e2 = 0.0,
				e3 = 0.0;
	float		m = 0.0f;
	double		inv;
	float		s;
	int			j;

	for (j = 0; j < f; j++)
		m = fabsf(y[j]) > m ? fabsf(y[j]) : m;
	s = (float) (m / 127.0);
	inv = s > 0.0f ? 1.0 / s : 0.0;
	for (j = 0; j + 4 <= f; j += 4)
	{
		quantise_factor(y, j, inv, s, bytes, &e0);
		quantise_factor(y, j + 1, inv, s, bytes, &e1);
		quantise_factor(y, j + 2, inv, s, bytes, &e2);
		quantise_factor(y, j + 3, inv, s, bytes, &e3);
	}
	for (; j < f; j++)
		quantise_factor(y, j, inv, s, bytes, &e0);
	meta[lane] = s;
	meta[BLOCK + lane] = float_up(sqrt((e0 + e1) + (e2 + e3)) *
								  (1.0 + SLACK_DOUBLE));
	memcpy(&meta[2 * BLOCK + lane], &norm_bits, sizeof(float));
}

/*
 * The rows of Y are read in the order of their norms, not of memory, which
 * the hardware's prefetching cannot guess: asking for the row this many
 * items ahead took a build at f = 128 from 22 ms to 16.
 */
#define PREFETCH_ITEMS 4

static inline void
prefetch_row(const float *y, int f)
{
	size_t		o;

	for (o = 0; o < sizeof(float) * (size_t) f; o += 64)
		SCORE_PREFETCH((const char *) y + o);
}

/* ix, for n rows of Y of f factors, pointed at buffer. */
static void
frame_index(WalsScoreIndex *ix, const float *Y, int64_t n, int f, void *buffer)
{
	ix->n = n;
	ix->f = f;
	ix->groups = (f + 3) / 4;
	wals_score_index_remap(ix, Y, wals_align_ptr(buffer));
}

/*
 * The blocks [lo, hi) of ix cleared to padding: q = 0 with zero scale and
 * norms, so that a lane not written adds nothing to a sum.
 */
static void
clear_blocks(const WalsScoreIndex *ix, int64_t lo, int64_t hi)
{
	size_t		bb = block_bytes(ix->groups);
	unsigned char *blocks = (unsigned char *) ix->blocks;
	int64_t		b;

	for (b = lo; b < hi; b++)
	{
		memset(blocks + (size_t) b * bb, 128, 64 * (size_t) ix->groups);
		memset(blocks + (size_t) b * bb + 64 * (size_t) ix->groups, 0, 3 * 64);
		/* the first touch of the buffer's pages (wals_fill_floats) */
		wals_poll((int64_t) bb / sizeof(float) * WALS_TOUCH_WORK);
	}
}

/*
 * The norms go first into the position map, which the sort needs by item
 * and the blocks by position, and the sort's second array into the
 * blocks, which are written after it: they hold at least 16 bytes an
 * item.  An index with a non-finite factor keeps the items in order: no
 * query reads its bounds, and its blocks are left unwritten.
 */
WalsStatus
wals_score_index_begin(WalsScoreIndex *ix, const float *Y, int64_t n, int f,
					   void *buffer)
{
	int32_t    *item;
	uint32_t   *bits;
	int			usable = 1;
	int64_t		i;

	if (n < 0 || f < 1 || f > SCORE_MAX_F)
		return WALS_EINVAL;
	frame_index(ix, Y, n, f, buffer);
	item = (int32_t *) ix->item;
	bits = (uint32_t *) ix->position;
	for (i = 0; i < n; i++)
	{
		bits[i] = item_norm_bits(Y + (size_t) i * f, f, &usable);
		wals_poll(2 * (int64_t) f + 64);
	}
	if (usable)
	{
		int32_t    *tmp = (int32_t *) ix->blocks;

		for (i = 0; i < n; i++)
			tmp[i] = (int32_t) i;
		order_by_norm(bits, n, item, tmp);
	}
	else
		for (i = 0; i < n; i++)
			item[i] = (int32_t) i;
	ix->usable = usable;
	ix->max_norm = 0.0f;
	if (n > 0 && usable)
		memcpy(&ix->max_norm, &bits[item[0]], sizeof(float));
	return WALS_OK;
}

/*
 * Padding lanes and factors hold q = 0 with zero scale and norms, so they
 * add nothing to a sum; the scan masks padding items out anyway.
 */
void
wals_score_index_fill(const WalsScoreIndex *ix, int64_t lo, int64_t hi)
{
	size_t		bb = block_bytes(ix->groups);
	unsigned char *blocks = (unsigned char *) ix->blocks;
	const uint32_t *bits = (const uint32_t *) ix->position;
	int			f = ix->f;
	int64_t		i;

	if (!ix->usable)
		return;
	clear_blocks(ix, lo, hi);
	for (i = lo * BLOCK; i < hi * BLOCK && i < ix->n; i++)
	{
		if (i + PREFETCH_ITEMS < ix->n)
			prefetch_row(ix->Y + (size_t) ix->item[i + PREFETCH_ITEMS] * f, f);
		quantise_item(ix->Y + (size_t) ix->item[i] * f, f, bits[ix->item[i]],
					  blocks + (size_t) (i / BLOCK) * bb, ix->groups,
					  (int) (i % BLOCK));
		/*
		 * two passes over the row, a rounding and an error an entry, and
		 * the row read out of order
		 */
		wals_poll((int64_t) 8 * f + 256);
	}
}

void
wals_score_index_end(const WalsScoreIndex *ix)
{
	int32_t    *position = (int32_t *) ix->position;
	int64_t		i;

	for (i = 0; i < ix->n; i++)
		position[ix->item[i]] = (int32_t) i;
}

/*
 * Lane lane of block blk copied from lane from of block src: the bytes of
 * every group, then its scale, error norm and norm.
 */
static void
copy_lane(unsigned char *blk, int lane, const unsigned char *src, int from, int groups)
{
	float	   *meta = (float *) (blk + 64 * (size_t) groups);
	const float *smeta = (const float *) (src + 64 * (size_t) groups);
	int			g;

	for (g = 0; g < groups; g++)
		memcpy(blk + 64 * (size_t) g + 4 * lane, src + 64 * (size_t) g + 4 * from, 4);
	meta[lane] = smeta[from];
	meta[BLOCK + lane] = smeta[BLOCK + from];
	meta[2 * BLOCK + lane] = smeta[2 * BLOCK + from];
}

/* The norm bits old's lane at position p stores. */
static uint32_t
stored_norm_bits(const WalsScoreIndex *old, int64_t p)
{
	const unsigned char *blk = old->blocks + (size_t) (p / BLOCK) * block_bytes(old->groups);
	uint32_t	bits;

	memcpy(&bits, (const float *) (blk + 64 * (size_t) old->groups) + 2 * BLOCK + p % BLOCK,
		   sizeof(bits));
	return bits;
}

/*
 * A row's lane is a function of the row alone, and the order one of the
 * norms and the items' order: so the rows old indexed, copied unchanged
 * and in the same order among themselves, keep their bytes and their
 * order, and only the others are quantised and sorted, then merged in.
 * The position map holds the norms by item until the end, as in begin;
 * the blocks, at least 16 bytes an item, hold the sort's scratch and the
 * old order first (8 bytes an item at most).
 */
WalsStatus
wals_score_index_patch(WalsScoreIndex *ix, const float *Y, int64_t n, int f, void *buffer,
					   const WalsScoreIndex *old, const int32_t *was, const int32_t *now)
{
	uint32_t   *bits;
	int32_t    *item;
	int32_t    *fresh;
	int32_t    *sorted;
	int32_t    *kept;
	int64_t		nfresh = 0;
	int64_t		nkept = 0;
	int64_t		a = 0;
	int64_t		b = 0;
	int64_t		i;
	int			usable = 1;
	size_t		bb;

	if (n < 0 || f < 1 || f > SCORE_MAX_F)
		return WALS_EINVAL;
	if (!old->usable || old->f != f)
		return wals_score_index_build(ix, Y, n, f, buffer);
	frame_index(ix, Y, n, f, buffer);
	bits = (uint32_t *) ix->position;
	item = (int32_t *) ix->item;
	fresh = (int32_t *) ix->blocks;
	for (i = 0; i < n; i++)
	{
		if (was[i] >= 0)
		{
			bits[i] = stored_norm_bits(old, old->position[was[i]]);
			wals_poll(16);
		}
		else
		{
			bits[i] = item_norm_bits(Y + (size_t) i * f, f, &usable);
			fresh[nfresh++] = (int32_t) i;
			wals_poll(2 * (int64_t) f + 64);
		}
	}
	if (!usable)
		return wals_score_index_build(ix, Y, n, f, buffer);
	sorted = fresh + nfresh;
	order_by_norm(bits, nfresh, sorted, fresh);
	kept = sorted + nfresh;
	for (i = 0; i < old->n; i++)
	{
		int32_t		x = now[old->item[i]];

		if (x >= 0)
			kept[nkept++] = x;
		wals_poll(8);
	}
	for (i = 0; i < n; i++)
	{
		int			take_kept = a < nkept &&
			(b >= nfresh || bits[kept[a]] > bits[sorted[b]] ||
			 (bits[kept[a]] == bits[sorted[b]] && kept[a] < sorted[b]));

		item[i] = take_kept ? kept[a++] : sorted[b++];
		wals_poll(8);
	}
	ix->usable = 1;
	ix->max_norm = 0.0f;
	if (n > 0)
		memcpy(&ix->max_norm, &bits[item[0]], sizeof(float));

	bb = block_bytes(ix->groups);
	clear_blocks(ix, 0, block_count(n));
	for (i = 0; i < n; i++)
	{
		unsigned char *blk = (unsigned char *) ix->blocks + (size_t) (i / BLOCK) * bb;
		int32_t		x = item[i];

		if (was[x] >= 0)
		{
			int64_t		p = old->position[was[x]];

			copy_lane(blk, (int) (i % BLOCK), old->blocks + (size_t) (p / BLOCK) * bb,
					  (int) (p % BLOCK), ix->groups);
			wals_poll((int64_t) ix->groups + 16);
		}
		else
		{
			quantise_item(Y + (size_t) x * f, f, bits[x], blk, ix->groups, (int) (i % BLOCK));
			wals_poll((int64_t) 8 * f + 256);
		}
	}
	wals_score_index_end(ix);
	return WALS_OK;
}

WalsStatus
wals_score_index_build(WalsScoreIndex *ix, const float *Y, int64_t n, int f,
					   void *buffer)
{
	WalsStatus	st = wals_score_index_begin(ix, Y, n, f, buffer);

	if (st != WALS_OK)
		return st;
	wals_score_index_fill(ix, 0, block_count(n));
	wals_score_index_end(ix);
	return WALS_OK;
}

int64_t
wals_score_index_blocks(const WalsScoreIndex *ix)
{
	return block_count(ix->n);
}
