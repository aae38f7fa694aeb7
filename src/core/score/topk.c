/*
 * topk.c
 *	  The k best scores, for recommendation queries.
 *
 * A min-heap of k entries keeps the worst kept pair at the root, so most
 * scores are rejected after one comparison, and O(n log k) is the worst
 * case against O(n log n) for a sort.  Ties go to the lower index so that
 * results are stable between calls and between the CPU and GPU paths.
 */
#include <math.h>
#include <string.h>

#include "wals_core.h"

/* Scores compared four at a time with GCC's vector extension (-1: true). */
typedef float TopkScores __attribute__((vector_size(16)));
typedef int32_t TopkFlags __attribute__((vector_size(16)));

/* True when (sa, ia) ranks below (sb, ib). */
static inline int
worse(float sa, int32_t ia, float sb, int32_t ib)
{
	return sa < sb || (sa == sb && ia > ib);
}

static inline void
swap_entries(WalsTopK *heap, int a, int b)
{
	int32_t		ti = heap->idx[a];
	float		ts = heap->score[a];

	heap->idx[a] = heap->idx[b];
	heap->score[a] = heap->score[b];
	heap->idx[b] = ti;
	heap->score[b] = ts;
}

/* Restore the heap below slot i, the worst entry rising to the top. */
static void
sift_down(WalsTopK *heap, int i, int size)
{
	for (;;)
	{
		int			l = 2 * i + 1;
		int			m = i;

		if (l < size && worse(heap->score[l], heap->idx[l],
							  heap->score[m], heap->idx[m]))
			m = l;
		if (l + 1 < size && worse(heap->score[l + 1], heap->idx[l + 1],
								  heap->score[m], heap->idx[m]))
			m = l + 1;
		if (m == i)
			return;
		swap_entries(heap, i, m);
		i = m;
	}
}

/* A k below 1 keeps nothing rather than being an error: callers check k. */
void
wals_topk_init(WalsTopK *heap, int k, int32_t *idx, float *score)
{
	heap->k = k > 0 ? k : 0;
	heap->size = 0;
	heap->idx = idx;
	heap->score = score;
}

/*
 * NaN compares false with everything, so it would sit in the heap forever
 * or never; it is dropped up front instead.
 */
void
wals_topk_push(WalsTopK *heap, int32_t idx, float score)
{
	int			i;

	if (isnan(score))
		return;
	if (heap->size < heap->k)
	{
		i = heap->size++;
		heap->idx[i] = idx;
		heap->score[i] = score;
		while (i > 0 && worse(heap->score[i], heap->idx[i],
							  heap->score[(i - 1) / 2], heap->idx[(i - 1) / 2]))
		{
			swap_entries(heap, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
		return;
	}
	if (heap->k == 0 || !worse(heap->score[0], heap->idx[0], score, idx))
		return;
	heap->idx[0] = idx;
	heap->score[0] = score;
	sift_down(heap, 0, heap->size);
}

/*
 * Heapsort in place: popping the worst to the end each time leaves the best
 * first.  The heap is spent afterwards; pushing again needs a new init.
 */
int
wals_topk_finish(WalsTopK *heap)
{
	int			n;

	for (n = heap->size; n > 1; n--)
	{
		swap_entries(heap, 0, n - 1);
		sift_down(heap, 0, n - 1);
	}
	return heap->size;
}

/*
 * skip is sorted, so one pointer walking beside the item index excludes the
 * rated items in O(n + nskip) with no lookup per item; duplicates in skip
 * are harmless.  Once the heap is full, an item must score above its worst
 * to enter (an equal score has a higher index, and NaN fails the test), so
 * most items cost that one comparison, and the pointer moves only for the
 * others.
 */
int
wals_topk_select(const float *scores, int64_t n,
				 const int32_t *skip, int64_t nskip,
				 int k, int32_t *idx, float *score)
{
	WalsTopK	heap;
	int64_t		s = 0;
	int64_t		j;

	wals_topk_init(&heap, k, idx, score);
	if (heap.k == 0)
		return 0;
	for (j = 0; j < n; j++)
	{
		if (heap.size == heap.k)
		{
			/* four at a time past the floor, which nearly every item is below */
			TopkScores	floor = {heap.score[0], heap.score[0], heap.score[0], heap.score[0]};

			for (; j + 4 <= n; j += 4)
			{
				TopkScores	x;
				TopkFlags	above;

				memcpy(&x, scores + j, sizeof(x));
				above = (TopkFlags) (x > floor);
				if (above[0] | above[1] | above[2] | above[3])
					break;
			}
			if (j == n || !(scores[j] > heap.score[0]))
				continue;
		}
		while (s < nskip && skip[s] < j)
			s++;
		if (s < nskip && skip[s] == j)
			continue;
		wals_topk_push(&heap, (int32_t) j, scores[j]);
	}
	return wals_topk_finish(&heap);
}
