/*
 * kernels.h
 *	  The kernels of a training on the device, a file an operation: the
 *	  conjugate gradient solve of rows (cg.cu), the loss and the line of
 *	  ALS-NCG (loss.cu), and the operations on whole vectors with their
 *	  reductions (vectors.cu); train.cu, the host side, launches them.
 *	  Each kernel and device function is defined in one file alone, so
 *	  that the files compile apart without relocatable device code.
 */
#ifndef WALS_CUDA_KERNELS_H
#define WALS_CUDA_KERNELS_H

#include "engine.h"

#define WALS_CUDA_THREADS	128

/*
 * A row of more cells than WALS_CUDA_LONG_ROW is not one block's work but
 * many's: its products with A are split into chunks of WALS_CUDA_CHUNK
 * cells, a block each, and its CG steps run between them (long_*).
 */
#define WALS_CUDA_LONG_ROW	2048
#define WALS_CUDA_CHUNK		512
#define WALS_CUDA_WARPS		(WALS_CUDA_THREADS / 32)
#define WALS_CUDA_CG_TINY	1e-20f

/*
 * The grid of the reductions over a whole vector or a Gram, fixed so that
 * their partial sums add up in the same order every time.
 */
#define WALS_CUDA_ACC_BLOCKS	256
#define WALS_CUDA_ACC_THREADS	256
#define WALS_CUDA_ACC_TERMS		5
#define WALS_CUDA_PAIR_TERMS	4

/*
 * The rows of one side longer than WALS_CUDA_LONG_ROW, solved by CG as
 * cg_rows solves the others, with the same steps and tests, each product
 * with A split over chunks of the row's cells, a block each: a chunk's
 * partial sum goes to its own slot, and the row's block adds its chunks'
 * slots in order, so the sums are the same every time.  Slot j of the
 * long rows keeps x, r, p and Ap (4 f floats), rsold, and its state:
 * LONG_RUNNING, LONG_DONE (converged, or no curvature left), LONG_FAILED
 * (a residual or a curvature not finite).
 */
#define LONG_RUNNING	0
#define LONG_DONE		1
#define LONG_FAILED		2

struct LongRows
{
	long long	n;				/* long rows */
	long long	chunks;			/* their chunks, all rows' in turn */
	long long  *rows;			/* the row of each slot */
	int		   *chunk_slot;		/* the slot of each chunk */
	long long  *chunk_start;	/* the first cell of each chunk */
	int		   *first_chunk;	/* n + 1: each slot's chunks */
	float	   *vec;			/* n x 4 f: x, r, p, Ap */
	float	   *partial;		/* chunks x f */
	float	   *rsold;			/* n */
	int		   *state;			/* n */
};

/*
 * The rows of one side cut into pieces for the loss and the line, which
 * sum over a row's cells: piece u < nrows is row u's first
 * WALS_CUDA_LONG_ROW cells (all of a short row's), and each further piece,
 * nrows + j, the next WALS_CUDA_LONG_ROW cells of a long row, so that a
 * row with 67,000 cells is 33 blocks' work and not one's.  Each piece sums
 * into its own slot and row_sums adds the slots in order, so the sum is
 * the same every time.
 */
struct Pieces
{
	long long	extra;			/* pieces past the rows' first */
	long long  *row;			/* extra: the row of each */
	long long  *start;			/* extra: its first cell */
};

/* cg.cu */
__global__ void
cg_rows(Weights w, RowScale rs, int cg_steps, const long long *__restrict__ indptr,
		const int *__restrict__ indices, const float *__restrict__ values,
		const float *__restrict__ Y, const float *__restrict__ G, float *X,
		long long nrows, int f, unsigned long long *bad);
__global__ void
long_pass(Weights w, LongRows L, const long long *__restrict__ indptr,
		  const int *__restrict__ indices, const float *__restrict__ values,
		  const float *__restrict__ Y, int f, bool residual);
__global__ void
long_load(LongRows L, const float *__restrict__ X, int f);
__global__ void
long_start(Weights w, RowScale rs, LongRows L, const long long *__restrict__ indptr,
		   const float *__restrict__ G, int f, int cg_steps);
__global__ void
long_step(Weights w, RowScale rs, LongRows L, const long long *__restrict__ indptr,
		  const float *__restrict__ G, int f, bool last);
__global__ void
long_store(LongRows L, float *X, int f, unsigned long long *bad);

/* loss.cu */
__global__ void
loss_rows(Weights w, RowScale rs, bool cells, Pieces P, const long long *__restrict__ indptr,
		  const int *__restrict__ indices, const float *__restrict__ values,
		  const float *__restrict__ X, const float *__restrict__ Y,
		  long long nrows, int f, double *out);
__global__ void
line_rows(Weights w, RowScale rs, bool cells, Pieces P, const long long *__restrict__ indptr,
		  const int *__restrict__ indices, const float *__restrict__ values,
		  const float *__restrict__ X, const float *__restrict__ DX,
		  const float *__restrict__ Y, const float *__restrict__ DY,
		  long long nrows, int f, double *out);

/* vectors.cu */
__global__ void
combine_floats(float *dst, double a, const float *x, double b, const float *y, size_t n);
__global__ void
dot_floats(const float *__restrict__ x, const float *__restrict__ y, size_t n, double *parts);
__global__ void
pair_sums(const float *__restrict__ P0, const float *__restrict__ P1,
		  const float *__restrict__ P2, const float *__restrict__ Q, int f, double *parts);
__global__ void
row_sums(const double *__restrict__ rows, long long nrows, int terms, double *parts);

#endif							/* WALS_CUDA_KERNELS_H */
