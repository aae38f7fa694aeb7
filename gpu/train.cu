/*
 * train.cu
 *	  Whole trainings on a CUDA device: both matrices uploaded once, every
 *	  half-sweep and the loss on the device, the factors downloaded once.
 *
 * This file is the host side; the kernels are a file an operation
 * (kernels.h: cg.cu, loss.cu, vectors.cu), and the Cholesky and subspace
 * solvers cholesky.cu.
 *
 * Where the cells of both matrices (8 bytes each) do not fit on the device
 * beside the rest, and the caller allows it, they stay in host memory:
 * pinned where they lie and mapped into the device's address space, so
 * that every kernel reads them over the bus as it goes, rows in order, as
 * it would read device memory; the rest (the row starts, the factors and
 * everything else above) is on the device as always, and the kernels are
 * the same.  A half-sweep then streams its matrix's cells from host
 * memory once per pass over them, which costs bus bandwidth rather than
 * the training: the alternative is not to train on the device at all.
 *
 * The objective and the conjugate gradient steps are those of src/core
 * (solve.c): row u solves
 *
 *	  (w0 G + sum_i (c_i - w0) y_i y_i^T + lambda s_u I) x_u = sum_i c_i p_i y_i
 *
 * with cg_steps steps warm started from the current x_u, G = Y^T Y computed
 * once per half-sweep with cuBLAS.  One thread block solves one row: its
 * threads share the f-vectors of the row in shared memory, and each warp
 * takes cells of the row in turn for the dot products y_i.v.  A row of
 * more than WALS_CUDA_LONG_ROW cells (a popular item has 67,000 in the
 * 20M set) would keep one block busy long after the others: its products
 * with A are split over blocks of WALS_CUDA_CHUNK cells, with its CG steps
 * between them, one launch each (long_*), while cg_rows solves the rest;
 * the loss and the line cut it into pieces of WALS_CUDA_LONG_ROW cells,
 * a block each.  The Cholesky and subspace solvers (cholesky.cu) solve the same
 * systems exactly, or a block of dimensions at a time, forming them a
 * batch of rows at a time.
 *
 * A training that keeps spare vectors (ALS-NCG) adds operations on
 * vectors of the size of all factors, the factors (X then Y, one buffer)
 * being vector 0: linear combinations and dot products, grid-stride over
 * the whole vector; and the quartic of the loss along a line, per row over
 * the cells like the loss, and for the unobserved cells the Grams and cross
 * products of both sides along the line (cuBLAS, into their own buffers),
 * reduced on the device.  The Grams of the factors, GX and GY, are read
 * only by the sweeps and the loss of an iteration, which forms each from
 * the factors it starts from; the Gram of Y that the loss formed serves
 * the next iteration's user sweep, as on the CPU, unless a combination
 * wrote the factors since.
 */
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels.h"

/*
 * What cuBLAS and cuSOLVER take of device memory beside ours: cuBLAS's
 * workspace (32 MiB on Hopper), cuSOLVER's for a factorization, and their
 * handles' state, rounded up.
 */
#define WALS_CUDA_LIBRARY_BYTES		((size_t) 64 << 20)

/* What a kernel may take of dynamic shared memory without asking. */
#define WALS_CUDA_SHARED_DEFAULT	(48 * 1024)

/* One sparse matrix on the device. */
struct DeviceCsr
{
	long long	nrows;
	long long	ncols;			/* the other side's rows */
	long long  *indptr;
	int		   *indices;
	float	   *values;
	const void *pinned[2];		/* the host cells mapped, or NULL: uploaded */
	LongRows	long_rows;		/* CG: the rows split across blocks */
	Pieces		pieces;			/* the loss's and the line's */
};

/*
 * A training on the device.  X and Y are one buffer, vector 0, and spare
 * vector k (1 to prob.vectors) another of the same size at V[k].
 */
struct Training
{
	WalsCudaProblem prob;
	Weights		weights;
	cublasHandle_t blas;
	DeviceCsr	by_user;
	DeviceCsr	by_item;
	float	   *X;				/* nusers x f, then Y */
	float	   *Y;				/* nitems x f, in X's buffer */
	float	   *V[WALS_CUDA_MAX_VECTORS + 1];
	float	   *GX;
	float	   *GY;
	float	   *products[4];	/* with spares: f x f each, for train_line */
	double	   *parts;			/* a row's loss, or its terms of a line */
	double	   *sums;			/* the reductions' partial sums */
	unsigned long long *bad;
	CholeskySolver *cholesky;	/* with the Cholesky and subspace solvers */
	bool		gy_fresh;		/* GY is the Gram of Y as it is */
	bool		cells_on_host;	/* the cells are read from host memory */
};

/*
 * Pin bytes of host memory at p where they lie and map them into the
 * device's address space, at *mapped; *pinned says what to unpin.
 */
static int
map_host(const void *p, size_t bytes, const void **pinned, void **mapped, WalsCudaError *err)
{
	const char *what = "mapping a matrix's cells from host memory";

	CUDA_TRY(cudaHostRegister(const_cast<void *>(p), bytes, cudaHostRegisterMapped), what);
	*pinned = p;
	CUDA_TRY(cudaHostGetDevicePointer(mapped, const_cast<void *>(p), 0), what);
	return 0;
}

/*
 * The matrix on the device: its row starts uploaded, its cells uploaded
 * too, or, on_host, mapped where they lie.
 */
static int
upload_csr(DeviceCsr *d, long long nrows, const int64_t *indptr, const int32_t *indices,
		   const float *values, bool on_host, WalsCudaError *err)
{
	long long	nnz = indptr[nrows];

	d->nrows = nrows;
	CUDA_TRY(cudaMalloc(&d->indptr, sizeof(long long) * (nrows + 1)), "allocating a matrix");
	CUDA_TRY(cudaMemcpy(d->indptr, indptr, sizeof(long long) * (nrows + 1),
						cudaMemcpyHostToDevice), "uploading a matrix");
	if (on_host && nnz > 0)
	{
		if (map_host(indices, sizeof(int) * nnz, &d->pinned[0], (void **) &d->indices,
					 err) != 0 ||
			map_host(values, sizeof(float) * nnz, &d->pinned[1], (void **) &d->values,
					 err) != 0)
			return err->code;
		return 0;
	}
	CUDA_TRY(cudaMalloc(&d->indices, sizeof(int) * (nnz > 0 ? nnz : 1)), "allocating a matrix");
	CUDA_TRY(cudaMalloc(&d->values, sizeof(float) * (nnz > 0 ? nnz : 1)), "allocating a matrix");
	CUDA_TRY(cudaMemcpy(d->indices, indices, sizeof(int) * nnz, cudaMemcpyHostToDevice),
			 "uploading a matrix");
	CUDA_TRY(cudaMemcpy(d->values, values, sizeof(float) * nnz, cudaMemcpyHostToDevice),
			 "uploading a matrix");
	return 0;
}

static int
upload_long_arrays(LongRows *L, const long long *rows, const int *chunk_slot,
				   const long long *chunk_start, const int *first_chunk, int f,
				   WalsCudaError *err)
{
	const char *what = "allocating the long rows";

	CUDA_TRY(cudaMalloc(&L->rows, sizeof(long long) * L->n), what);
	CUDA_TRY(cudaMalloc(&L->chunk_slot, sizeof(int) * L->chunks), what);
	CUDA_TRY(cudaMalloc(&L->chunk_start, sizeof(long long) * L->chunks), what);
	CUDA_TRY(cudaMalloc(&L->first_chunk, sizeof(int) * (L->n + 1)), what);
	CUDA_TRY(cudaMalloc(&L->vec, 4 * sizeof(float) * f * L->n), what);
	CUDA_TRY(cudaMalloc(&L->partial, sizeof(float) * f * L->chunks), what);
	CUDA_TRY(cudaMalloc(&L->rsold, sizeof(float) * L->n), what);
	CUDA_TRY(cudaMalloc(&L->state, sizeof(int) * L->n), what);
	CUDA_TRY(cudaMemcpy(L->rows, rows, sizeof(long long) * L->n, cudaMemcpyHostToDevice),
			 what);
	CUDA_TRY(cudaMemcpy(L->chunk_slot, chunk_slot, sizeof(int) * L->chunks,
						cudaMemcpyHostToDevice), what);
	CUDA_TRY(cudaMemcpy(L->chunk_start, chunk_start, sizeof(long long) * L->chunks,
						cudaMemcpyHostToDevice), what);
	CUDA_TRY(cudaMemcpy(L->first_chunk, first_chunk, sizeof(int) * (L->n + 1),
						cudaMemcpyHostToDevice), what);
	return 0;
}

static void
free_long(LongRows *L)
{
	cudaFree(L->rows);
	cudaFree(L->chunk_slot);
	cudaFree(L->chunk_start);
	cudaFree(L->first_chunk);
	cudaFree(L->vec);
	cudaFree(L->partial);
	cudaFree(L->rsold);
	cudaFree(L->state);
}

/* The long rows of a matrix of nrows rows (host indptr) and their chunks. */
static void
count_long(const int64_t *indptr, long long nrows, long long *n, long long *chunks)
{
	*n = 0;
	*chunks = 0;
	for (long long u = 0; u < nrows; u++)
	{
		long long	nnz = indptr[u + 1] - indptr[u];

		if (nnz > WALS_CUDA_LONG_ROW)
		{
			(*n)++;
			*chunks += (nnz + WALS_CUDA_CHUNK - 1) / WALS_CUDA_CHUNK;
		}
	}
}

static size_t
long_bytes(const int64_t *indptr, long long nrows, int f)
{
	long long	n;
	long long	chunks;

	count_long(indptr, nrows, &n, &chunks);
	return (size_t) n * (sizeof(long long) + 4 * sizeof(float) * f + sizeof(float) +
						 2 * sizeof(int)) + sizeof(int) +
		(size_t) chunks * (sizeof(int) + sizeof(long long) + sizeof(float) * f);
}

/* The long rows of d, from the host's indptr, on the device. */
static int
upload_long(DeviceCsr *d, const int64_t *indptr, int f, WalsCudaError *err)
{
	LongRows   *L = &d->long_rows;
	const char *what = "allocating the long rows";
	long long  *rows;
	int		   *chunk_slot;
	long long  *chunk_start;
	int		   *first_chunk;
	long long	c = 0;
	long long	j = 0;
	int			rc = 0;

	count_long(indptr, d->nrows, &L->n, &L->chunks);
	if (L->n == 0)
		return 0;
	rows = new (std::nothrow) long long[L->n];
	chunk_slot = new (std::nothrow) int[L->chunks];
	chunk_start = new (std::nothrow) long long[L->chunks];
	first_chunk = new (std::nothrow) int[L->n + 1];
	if (rows == NULL || chunk_slot == NULL || chunk_start == NULL || first_chunk == NULL)
		rc = fail(err, WALS_CUDA_ENOMEM, what, "out of host memory");
	for (long long u = 0; rc == 0 && u < d->nrows; u++)
		if (indptr[u + 1] - indptr[u] > WALS_CUDA_LONG_ROW)
		{
			rows[j] = u;
			first_chunk[j] = (int) c;
			for (long long at = indptr[u]; at < indptr[u + 1]; at += WALS_CUDA_CHUNK)
			{
				chunk_slot[c] = (int) j;
				chunk_start[c++] = at;
			}
			j++;
		}
	if (rc == 0)
	{
		first_chunk[L->n] = (int) c;
		rc = upload_long_arrays(L, rows, chunk_slot, chunk_start, first_chunk, f, err);
	}
	delete[] rows;
	delete[] chunk_slot;
	delete[] chunk_start;
	delete[] first_chunk;
	return rc;
}

/* Pieces past the first of each row of a matrix of nrows rows (host indptr). */
static long long
count_pieces(const int64_t *indptr, long long nrows)
{
	long long	extra = 0;

	for (long long u = 0; u < nrows; u++)
		if (indptr[u + 1] - indptr[u] > WALS_CUDA_LONG_ROW)
			extra += (indptr[u + 1] - indptr[u] - 1) / WALS_CUDA_LONG_ROW;
	return extra;
}

/*
 * The slots of per-piece sums a training needs: the pieces of the side
 * with the most (each side's loss and line go through them in turn).
 */
static long long
piece_slots(const WalsCudaProblem *p)
{
	long long	users = p->nusers + count_pieces(p->user_indptr, p->nusers);
	long long	items = p->nitems + count_pieces(p->item_indptr, p->nitems);

	return users > items ? users : items;
}

static int
upload_piece_arrays(Pieces *P, const long long *row, const long long *start,
					WalsCudaError *err)
{
	const char *what = "allocating the long rows";

	CUDA_TRY(cudaMalloc(&P->row, sizeof(long long) * P->extra), what);
	CUDA_TRY(cudaMalloc(&P->start, sizeof(long long) * P->extra), what);
	CUDA_TRY(cudaMemcpy(P->row, row, sizeof(long long) * P->extra, cudaMemcpyHostToDevice),
			 what);
	CUDA_TRY(cudaMemcpy(P->start, start, sizeof(long long) * P->extra,
						cudaMemcpyHostToDevice), what);
	return 0;
}

/* The pieces of d past its rows' first, from the host's indptr, on the device. */
static int
upload_pieces(DeviceCsr *d, const int64_t *indptr, WalsCudaError *err)
{
	Pieces	   *P = &d->pieces;
	long long  *row;
	long long  *start;
	long long	j = 0;
	int			rc;

	P->extra = count_pieces(indptr, d->nrows);
	if (P->extra == 0)
		return 0;
	row = new (std::nothrow) long long[P->extra];
	start = new (std::nothrow) long long[P->extra];
	if (row == NULL || start == NULL)
		rc = fail(err, WALS_CUDA_ENOMEM, "allocating the long rows", "out of host memory");
	else
	{
		for (long long u = 0; u < d->nrows; u++)
			for (long long at = indptr[u] + WALS_CUDA_LONG_ROW; at < indptr[u + 1];
				 at += WALS_CUDA_LONG_ROW)
			{
				row[j] = u;
				start[j++] = at;
			}
		rc = upload_piece_arrays(P, row, start, err);
	}
	delete[] row;
	delete[] start;
	return rc;
}

/* Free d's row starts and its cells, or unpin them. */
static void
free_csr(DeviceCsr *d)
{
	cudaFree(d->indptr);
	if (d->pinned[0] != NULL)
		cudaHostUnregister(const_cast<void *>(d->pinned[0]));
	else
		cudaFree(d->indices);
	if (d->pinned[1] != NULL)
		cudaHostUnregister(const_cast<void *>(d->pinned[1]));
	else
		cudaFree(d->values);
}

static void
release(Training *t)
{
	free_csr(&t->by_user);
	free_csr(&t->by_item);
	free_long(&t->by_user.long_rows);
	free_long(&t->by_item.long_rows);
	cudaFree(t->by_user.pieces.row);
	cudaFree(t->by_user.pieces.start);
	cudaFree(t->by_item.pieces.row);
	cudaFree(t->by_item.pieces.start);
	cudaFree(t->X);
	for (int k = 1; k <= WALS_CUDA_MAX_VECTORS; k++)
		cudaFree(t->V[k]);
	cudaFree(t->GX);
	cudaFree(t->GY);
	for (int k = 0; k < 4; k++)
		cudaFree(t->products[k]);
	cudaFree(t->parts);
	cudaFree(t->sums);
	cudaFree(t->bad);
	wals_cuda_cholesky_end(t->cholesky);
	if (t->blas != NULL)
		cublasDestroy(t->blas);
	delete t;
}

/*
 * C = A^T B (f x f, row-major) for row-major A and B of n rows: they are
 * column-major f x n, and C^T = B^T A is what cuBLAS leaves column-major.
 */
static int
cross(Training *t, const float *A, const float *B, long long n, float *C, WalsCudaError *err)
{
	const float one = 1.0f;
	const float zero = 0.0f;
	int			f = t->prob.factors;

	BLAS_TRY(cublasSgemm(t->blas, CUBLAS_OP_N, CUBLAS_OP_T, f, f, (int) n, &one, B, f, A, f,
						 &zero, C, f), "computing a Gram matrix");
	return 0;
}

/* G = Y^T Y, symmetric. */
static int
gram(Training *t, const float *Y, long long n, float *G, WalsCudaError *err)
{
	return cross(t, Y, Y, n, G, err);
}

/*
 * Dynamic shared memory of a kernel past the 48 KiB it may take without
 * asking (cg_rows from f ~ 3000 on); the device allows 227 KiB.
 */
static int
allow_shared(const void *kernel, size_t bytes, WalsCudaError *err)
{
	if (bytes > WALS_CUDA_SHARED_DEFAULT)
		CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
									  (int) bytes), "allowing a kernel its shared memory");
	return 0;
}

static size_t
cg_shared(int f)
{
	return sizeof(float) * (4 * (size_t) f + 32 + WALS_CUDA_WARPS);
}

/*
 * The long rows of R, which cg_rows leaves: the residual pass and the
 * start, then each step's pass along p and the step, then the factors.
 */
static int
long_sweep(Training *t, const DeviceCsr *R, const float *Y, const float *G, float *X,
		   const char *what, WalsCudaError *err)
{
	const LongRows *L = &R->long_rows;
	int			f = t->prob.factors;
	RowScale	rs = wals_cuda_row_scale(&t->prob, R->ncols);

	if (L->n == 0)
		return 0;
	WALS_LAUNCH(long_load, (unsigned int) L->n, WALS_CUDA_THREADS, 0)(*L, X, f);
	WALS_LAUNCH(long_pass, (unsigned int) L->chunks, WALS_CUDA_THREADS, 0)
		(t->weights, *L, R->indptr, R->indices, R->values, Y, f, true);
	WALS_LAUNCH(long_start, (unsigned int) L->n, WALS_CUDA_THREADS, 0)
		(t->weights, rs, *L, R->indptr, G, f, t->prob.cg_steps);
	for (int step = 0; step < t->prob.cg_steps; step++)
	{
		WALS_LAUNCH(long_pass, (unsigned int) L->chunks, WALS_CUDA_THREADS, 0)
			(t->weights, *L, R->indptr, R->indices, R->values, Y, f, false);
		WALS_LAUNCH(long_step, (unsigned int) L->n, WALS_CUDA_THREADS, 0)
			(t->weights, rs, *L, R->indptr, G, f, step == t->prob.cg_steps - 1);
	}
	WALS_LAUNCH(long_store, (unsigned int) L->n, WALS_CUDA_THREADS, 0)(*L, X, f, t->bad);
	CUDA_TRY(cudaGetLastError(), what);
	return 0;
}

static int
half_sweep(Training *t, const DeviceCsr *R, const float *Y, const float *G, float *X,
		   int side, WalsCudaError *err)
{
	int			f = t->prob.factors;
	unsigned long long bad = ~0ULL;
	const char *what = side == WALS_CUDA_USERS ? "solving user factors" : "solving item factors";

	if (R->nrows == 0)
		return 0;
	if (t->cholesky != NULL)
		return wals_cuda_cholesky_solve(t->cholesky, R->nrows, R->ncols, R->indptr, R->indices,
										R->values, Y, G, X, side, what, err);
	CUDA_TRY(cudaMemset(t->bad, 0xff, sizeof(*t->bad)), what);
	WALS_LAUNCH(cg_rows, (unsigned int) R->nrows, WALS_CUDA_THREADS, cg_shared(f))
		(t->weights, wals_cuda_row_scale(&t->prob, R->ncols), t->prob.cg_steps, R->indptr,
		 R->indices, R->values, Y, G, X, R->nrows, f, t->bad);
	CUDA_TRY(cudaGetLastError(), what);
	if (long_sweep(t, R, Y, G, X, what, err) != 0)
		return err->code;
	CUDA_TRY(cudaMemcpy(&bad, t->bad, sizeof(bad), cudaMemcpyDeviceToHost), what);
	if (bad != ~0ULL)
		return fail_row(err, WALS_CUDA_ENONFINITE, side, (long long) bad, what);
	return 0;
}

/* Partial sums of a reduction (terms of each block) onto total. */
static int
add_sums(Training *t, int terms, double *total, const char *what, WalsCudaError *err)
{
	double		parts[WALS_CUDA_ACC_BLOCKS * WALS_CUDA_ACC_TERMS];

	CUDA_TRY(cudaMemcpy(parts, t->sums, sizeof(parts), cudaMemcpyDeviceToHost), what);
	for (int b = 0; b < WALS_CUDA_ACC_BLOCKS; b++)
		for (int j = 0; j < terms; j++)
			total[j] += parts[WALS_CUDA_ACC_TERMS * b + j];
	return 0;
}

/* Add the terms of n rows, terms doubles a row in t->parts, onto total. */
static int
add_parts(Training *t, long long n, int terms, double *total, const char *what,
		  WalsCudaError *err)
{
	WALS_LAUNCH(row_sums, WALS_CUDA_ACC_BLOCKS, WALS_CUDA_ACC_THREADS, 0)
		(t->parts, n, terms, t->sums);
	CUDA_TRY(cudaGetLastError(), what);
	return add_sums(t, terms, total, what, err);
}

static int
sum_parts(Training *t, const DeviceCsr *R, bool cells, const float *X, const float *Y,
		  double *total, WalsCudaError *err)
{
	long long	n = R->nrows + (cells ? R->pieces.extra : 0);

	if (R->nrows == 0)
		return 0;
	WALS_LAUNCH(loss_rows, (unsigned int) n, WALS_CUDA_THREADS, 0)
		(t->weights, wals_cuda_row_scale(&t->prob, R->ncols), cells, R->pieces, R->indptr,
		 R->indices, R->values, X, Y, R->nrows, t->prob.factors, t->parts);
	CUDA_TRY(cudaGetLastError(), "computing the loss");
	return add_parts(t, n, 1, total, "computing the loss", err);
}

/* w0 sum_ab GX_ab GY_ab, the loss of every unobserved cell at once. */
static int
unobserved(Training *t, double *total, WalsCudaError *err)
{
	double		sum = 0.0;

	if (t->weights.w0 == 0.0f)
		return 0;
	WALS_LAUNCH(dot_floats, WALS_CUDA_ACC_BLOCKS, WALS_CUDA_ACC_THREADS, 0)
		(t->GX, t->GY, (size_t) t->prob.factors * t->prob.factors, t->sums);
	CUDA_TRY(cudaGetLastError(), "computing the loss");
	if (add_sums(t, 1, &sum, "computing the loss", err) != 0)
		return err->code;
	*total += t->weights.w0 * sum;
	return 0;
}

/*
 * Device memory of a training: both matrices, the factors and the spare
 * vectors, the two Grams, the per-row loss (or terms of a line) and, with
 * spares, the line's four f x f products and the partial sums; for the
 * exact solvers one row's system (the batch grows into what is left); and
 * the libraries' workspaces.  Checked against what is free before anything
 * is uploaded.
 */
static size_t
cells_bytes(const WalsCudaProblem *p)
{
	return 2 * (size_t) p->user_indptr[p->nusers] * (sizeof(int) + sizeof(float));
}

static size_t
needed_bytes(const WalsCudaProblem *p)
{
	size_t		rows = (size_t) (p->nusers + p->nitems);
	size_t		slots = (size_t) piece_slots(p);
	size_t		pieces = (size_t) (count_pieces(p->user_indptr, p->nusers) +
								   count_pieces(p->item_indptr, p->nitems));
	size_t		f = (size_t) p->factors;
	size_t		vectors = (size_t) p->vectors;
	size_t		exact = p->solver != WALS_CUDA_CG ? wals_cuda_cholesky_bytes(p, 1) : 0;
	size_t		spare = vectors > 0 ? 4 * f * f * sizeof(float) : 0;
	size_t		sums = WALS_CUDA_ACC_BLOCKS * WALS_CUDA_ACC_TERMS * sizeof(double);
	size_t		split = p->solver == WALS_CUDA_CG ?
		long_bytes(p->user_indptr, p->nusers, p->factors) +
		long_bytes(p->item_indptr, p->nitems, p->factors) : 0;

	return cells_bytes(p) + (rows + 2) * sizeof(long long) +
		(1 + vectors) * rows * f * sizeof(float) + 2 * f * f * sizeof(float) +
		slots * (vectors > 0 ? WALS_CUDA_LINE_TERMS : 1) * sizeof(double) +
		pieces * 2 * sizeof(long long) + sums + spare + exact + split +
		WALS_CUDA_LIBRARY_BYTES;
}

/* Why this engine cannot train p, or NULL. */
static const char *
unsupported(const WalsCudaProblem *p)
{
	if (p->device < 0)
		return "device out of range";
	if (p->factors < 1 || p->factors > WALS_CUDA_MAX_FACTORS)
		return "factors out of range";
	if (p->solver != WALS_CUDA_CG && p->solver != WALS_CUDA_CHOLESKY &&
		p->solver != WALS_CUDA_SUBSPACE)
		return "unknown solver";
	if (p->solver == WALS_CUDA_SUBSPACE && p->block_size < 1)
		return "block size out of range";
	if (p->vectors < 0 || p->vectors > WALS_CUDA_MAX_VECTORS)
		return "spare vectors out of range";
	return NULL;
}

/* Everything a training holds on the device, uploaded; 0 or err's code. */
static int
allocate(Training *t, long long batch, WalsCudaError *err)
{
	const WalsCudaProblem *p = &t->prob;
	int			f = p->factors;
	size_t		xs = sizeof(float) * (size_t) p->nusers * f;
	size_t		ys = sizeof(float) * (size_t) p->nitems * f;
	long long	slots = piece_slots(p);
	size_t		terms = p->vectors > 0 ? WALS_CUDA_LINE_TERMS : 1;
	const char *what = "allocating the factors";

	BLAS_TRY(cublasCreate(&t->blas), "starting cuBLAS");
	if (upload_csr(&t->by_user, p->nusers, p->user_indptr, p->user_indices,
				   p->user_values, t->cells_on_host, err) != 0 ||
		upload_csr(&t->by_item, p->nitems, p->item_indptr, p->item_indices,
				   p->item_values, t->cells_on_host, err) != 0)
		return err->code;
	t->by_user.ncols = p->nitems;
	t->by_item.ncols = p->nusers;
	if (upload_pieces(&t->by_user, p->user_indptr, err) != 0 ||
		upload_pieces(&t->by_item, p->item_indptr, err) != 0)
		return err->code;
	if (p->solver == WALS_CUDA_CG &&
		(upload_long(&t->by_user, p->user_indptr, f, err) != 0 ||
		 upload_long(&t->by_item, p->item_indptr, f, err) != 0))
		return err->code;
	CUDA_TRY(cudaMalloc(&t->X, xs + ys > 0 ? xs + ys : 1), what);
	t->Y = t->X + (size_t) p->nusers * f;
	for (int k = 1; k <= p->vectors; k++)
		CUDA_TRY(cudaMalloc(&t->V[k], xs + ys > 0 ? xs + ys : 1), what);
	CUDA_TRY(cudaMalloc(&t->GX, sizeof(float) * f * f), what);
	CUDA_TRY(cudaMalloc(&t->GY, sizeof(float) * f * f), what);
	for (int k = 0; k < 4 && p->vectors > 0; k++)
		CUDA_TRY(cudaMalloc(&t->products[k], sizeof(float) * f * f), what);
	CUDA_TRY(cudaMalloc(&t->sums, sizeof(double) * WALS_CUDA_ACC_BLOCKS * WALS_CUDA_ACC_TERMS),
			 what);
	CUDA_TRY(cudaMalloc(&t->parts, sizeof(double) * terms * (slots > 0 ? slots : 1)),
			 "allocating the loss");
	CUDA_TRY(cudaMalloc(&t->bad, sizeof(*t->bad)), what);
	CUDA_TRY(cudaMemcpy(t->X, p->X, xs, cudaMemcpyHostToDevice), "uploading the factors");
	CUDA_TRY(cudaMemcpy(t->Y, p->Y, ys, cudaMemcpyHostToDevice), "uploading the factors");
	if (p->solver == WALS_CUDA_CG &&
		allow_shared((const void *) cg_rows, cg_shared(f), err) != 0)
		return err->code;
	if (p->solver != WALS_CUDA_CG)
		return wals_cuda_cholesky_begin(p, t->blas, batch, &t->cholesky, err);
	return 0;
}

/*
 * Select the problem's device and check that the training fits in the
 * memory free there, before anything is uploaded, its cells on the device
 * or else, where the problem allows it, left in host memory (*on_host);
 * *batch gets the rows of an exact solver's batch, which grow into what is
 * left.
 */
static int
check_device(const WalsCudaProblem *p, long long *batch, bool *on_host, WalsCudaError *err)
{
	size_t		free_bytes = 0;
	size_t		total_bytes = 0;
	size_t		need = needed_bytes(p);
	size_t		cells = cells_bytes(p);
	long long	most = p->nusers > p->nitems ? p->nusers : p->nitems;

	CUDA_TRY(cudaSetDevice(p->device), "selecting the device");
	CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes), "asking the free device memory");
	*on_host = need > free_bytes && p->may_map_cells && cells > 0;
	if (*on_host)
		need -= cells;
	if (need > free_bytes)
	{
		char		why[160];

		snprintf(why, sizeof(why), "it needs %zu bytes of device memory%s, %zu are free",
				 need, *on_host ? " beside its ratings, which host memory would hold" : "",
				 free_bytes);
		return fail(err, WALS_CUDA_ENOMEM, "starting a GPU training", why);
	}
	*batch = p->solver != WALS_CUDA_CG ? wals_cuda_cholesky_rows(p, most, free_bytes - need) : 0;
	return 0;
}

static int
train_begin(const WalsCudaProblem *p, void **state, WalsCudaError *err)
{
	Training   *t;
	long long	batch = 0;
	bool		on_host = false;
	const char *why_not = unsupported(p);
	int			rc;

	*state = NULL;
	if (why_not != NULL)
		return fail(err, WALS_CUDA_EINVAL, "starting a GPU training", why_not);
	if (check_device(p, &batch, &on_host, err) != 0)
		return err->code;
	t = new (std::nothrow) Training();
	if (t == NULL)
		return fail(err, WALS_CUDA_ENOMEM, "starting a GPU training", "out of host memory");
	t->prob = *p;
	t->weights = wals_cuda_weights(p);
	t->cells_on_host = on_host;
	rc = allocate(t, batch, err);
	if (rc != 0)
	{
		release(t);
		return rc;
	}
	*state = t;
	return 0;
}

static int
iterate(Training *t, double *loss, WalsCudaError *err)
{
	double		total = 0.0;
	bool		fresh = t->gy_fresh;

	t->gy_fresh = false;
	if ((!fresh && gram(t, t->Y, t->prob.nitems, t->GY, err) != 0) ||
		half_sweep(t, &t->by_user, t->Y, t->GY, t->X, WALS_CUDA_USERS, err) != 0 ||
		gram(t, t->X, t->prob.nusers, t->GX, err) != 0 ||
		half_sweep(t, &t->by_item, t->X, t->GX, t->Y, WALS_CUDA_ITEMS, err) != 0 ||
		gram(t, t->Y, t->prob.nitems, t->GY, err) != 0)
		return err->code;
	t->gy_fresh = true;
	if (sum_parts(t, &t->by_user, true, t->X, t->Y, &total, err) != 0 ||
		sum_parts(t, &t->by_item, false, t->Y, t->X, &total, err) != 0 ||
		unobserved(t, &total, err) != 0)
		return err->code;
	*loss = total;
	return 0;
}

static int
train_iterate(void *state, double *loss, WalsCudaError *err)
{
	return iterate((Training *) state, loss, err);
}

/*
 * 0 when vector k is one the training keeps, the factors (0) to its last
 * spare; else WALS_CUDA_EINVAL.
 */
static int
check_vector(const Training *t, int k, const char *what, WalsCudaError *err)
{
	char		why[96];

	if (t->prob.vectors <= 0)
		return fail(err, WALS_CUDA_EINVAL, what, "the training keeps no spare vectors");
	if (k >= 0 && k <= t->prob.vectors)
		return 0;
	snprintf(why, sizeof(why), "vector %d is not one of 0 to %d", k, t->prob.vectors);
	return fail(err, WALS_CUDA_EINVAL, what, why);
}

/* Vector k: the factors (X then Y) or a spare. */
static float *
vector_of(Training *t, int k)
{
	return k == 0 ? t->X : t->V[k];
}

/* Floats of a vector: all factors. */
static size_t
vector_size(const Training *t)
{
	return (size_t) (t->prob.nusers + t->prob.nitems) * t->prob.factors;
}

static int
combine(Training *t, int dst, double a, int x, double b, int y, WalsCudaError *err)
{
	const char *what = "combining factor vectors";
	size_t		n = vector_size(t);
	size_t		blocks = (n + 255) / 256;

	if (check_vector(t, dst, what, err) != 0 ||
		(a != 0.0 && check_vector(t, x, what, err) != 0) ||
		(b != 0.0 && check_vector(t, y, what, err) != 0))
		return err->code;
	if (dst == 0)
		t->gy_fresh = false;
	if (n > 0)
		WALS_LAUNCH(combine_floats, (unsigned int) (blocks < 4096 ? blocks : 4096), 256, 0)
			(vector_of(t, dst), a, a != 0.0 ? vector_of(t, x) : NULL, b,
			 b != 0.0 ? vector_of(t, y) : NULL, n);
	CUDA_TRY(cudaGetLastError(), what);
	CUDA_TRY(cudaDeviceSynchronize(), what);
	return 0;
}

static int
train_combine(void *state, int dst, double a, int x, double b, int y, WalsCudaError *err)
{
	return combine((Training *) state, dst, a, x, b, y, err);
}

static int
dot(Training *t, int x, int y, double *out, WalsCudaError *err)
{
	const char *what = "multiplying factor vectors";
	double		total = 0.0;

	if (check_vector(t, x, what, err) != 0 || check_vector(t, y, what, err) != 0)
		return err->code;
	WALS_LAUNCH(dot_floats, WALS_CUDA_ACC_BLOCKS, WALS_CUDA_ACC_THREADS, 0)
		(vector_of(t, x), vector_of(t, y), vector_size(t), t->sums);
	CUDA_TRY(cudaGetLastError(), what);
	if (add_sums(t, 1, &total, what, err) != 0)
		return err->code;
	*out = total;
	return 0;
}

static int
train_dot(void *state, int x, int y, double *out, WalsCudaError *err)
{
	return dot((Training *) state, x, y, out, err);
}

/*
 * The unobserved term along the line, w0 trace(GX(t) GY(t)) with GX(t) =
 * GX + t (CX + CX^T) + t^2 GDX (the Gram of BX + t DX: CX = BX^T DX, GDX =
 * DX^T DX) and GY(t) alike.  The three products of X's side stay while
 * each of Y's is formed in turn; for symmetric G and any C, G.(C + C^T) =
 * 2 G.C, and (CX + CX^T).(CY + CY^T) = 2 CX.CY + 2 CX.CY^T.
 */
static int
line_unobserved(Training *t, const float *BX, const float *DX, const float *BY,
				const float *DY, double coef[WALS_CUDA_LINE_TERMS], WalsCudaError *err)
{
	const char *what = "computing the loss along a line";
	long long	nu = t->prob.nusers;
	long long	ni = t->prob.nitems;
	float	   *GBX = t->products[0];
	float	   *CX = t->products[1];
	float	   *GDX = t->products[2];
	float	   *Q = t->products[3];
	double		s[3][WALS_CUDA_PAIR_TERMS] = {};
	double		w0 = t->weights.w0;

	if (cross(t, BX, BX, nu, GBX, err) != 0 || cross(t, BX, DX, nu, CX, err) != 0 ||
		cross(t, DX, DX, nu, GDX, err) != 0)
		return err->code;
	for (int q = 0; q < 3; q++)
	{
		const float *A = q == 2 ? DY : BY;
		const float *B = q == 0 ? BY : DY;

		if (cross(t, A, B, ni, Q, err) != 0)
			return err->code;
		WALS_LAUNCH(pair_sums, WALS_CUDA_ACC_BLOCKS, WALS_CUDA_ACC_THREADS, 0)
			(GBX, CX, GDX, Q, t->prob.factors, t->sums);
		CUDA_TRY(cudaGetLastError(), what);
		if (add_sums(t, WALS_CUDA_PAIR_TERMS, s[q], what, err) != 0)
			return err->code;
	}
	coef[0] += w0 * s[0][0];
	coef[1] += w0 * 2.0 * (s[1][0] + s[0][1]);
	coef[2] += w0 * (s[2][0] + 2.0 * s[1][1] + 2.0 * s[1][3] + s[0][2]);
	coef[3] += w0 * 2.0 * (s[2][1] + s[1][2]);
	coef[4] += w0 * s[2][2];
	return 0;
}

/* The terms of a line from each row of R (cells or only regularisation). */
static int
line_side(Training *t, const DeviceCsr *R, bool cells, const float *X, const float *DX,
		  const float *Y, const float *DY, double coef[WALS_CUDA_LINE_TERMS],
		  WalsCudaError *err)
{
	const char *what = "computing the loss along a line";
	long long	n = R->nrows + (cells ? R->pieces.extra : 0);

	if (R->nrows == 0)
		return 0;
	WALS_LAUNCH(line_rows, (unsigned int) n, WALS_CUDA_THREADS, 0)
		(t->weights, wals_cuda_row_scale(&t->prob, R->ncols), cells, R->pieces, R->indptr,
		 R->indices, R->values, X, DX, Y, DY, R->nrows, t->prob.factors, t->parts);
	CUDA_TRY(cudaGetLastError(), what);
	return add_parts(t, n, WALS_CUDA_LINE_TERMS, coef, what, err);
}

static int
line(Training *t, int base, int dir, double coef[WALS_CUDA_LINE_TERMS], WalsCudaError *err)
{
	const char *what = "computing the loss along a line";
	size_t		xs = (size_t) t->prob.nusers * t->prob.factors;
	double		total[WALS_CUDA_LINE_TERMS] = {};
	const float *BX;
	const float *DX;

	if (check_vector(t, base, what, err) != 0 || check_vector(t, dir, what, err) != 0)
		return err->code;
	BX = vector_of(t, base);
	DX = vector_of(t, dir);
	if (line_side(t, &t->by_user, true, BX, DX, BX + xs, DX + xs, total, err) != 0 ||
		line_side(t, &t->by_item, false, BX + xs, DX + xs, BX, DX, total, err) != 0 ||
		(t->weights.w0 != 0.0f &&
		 line_unobserved(t, BX, DX, BX + xs, DX + xs, total, err) != 0))
		return err->code;
	for (int k = 0; k < WALS_CUDA_LINE_TERMS; k++)
		coef[k] = total[k];
	return 0;
}

static int
train_line(void *state, int base, int dir, double coef[WALS_CUDA_LINE_TERMS],
		   WalsCudaError *err)
{
	return line((Training *) state, base, dir, coef, err);
}

static int
train_download(void *state, float *X, float *Y, WalsCudaError *err)
{
	Training   *t = (Training *) state;

	CUDA_TRY(cudaMemcpy(X, t->X, sizeof(float) * t->prob.nusers * t->prob.factors,
						cudaMemcpyDeviceToHost), "downloading the factors");
	CUDA_TRY(cudaMemcpy(Y, t->Y, sizeof(float) * t->prob.nitems * t->prob.factors,
						cudaMemcpyDeviceToHost), "downloading the factors");
	return 0;
}

static int
train_cells_on_host(void *state)
{
	return ((Training *) state)->cells_on_host ? 1 : 0;
}

static int
train_end(void *state, float *X, float *Y, WalsCudaError *err)
{
	Training   *t = (Training *) state;
	int			rc = 0;

	if (t == NULL)
		return 0;
	if (X != NULL && Y != NULL)
		rc = train_download(state, X, Y, err);
	release(t);
	return rc;
}

/* The training entries of the table that wals_cuda_init fills. */
void
wals_cuda_train_api(WalsCudaApi *api)
{
	api->train_begin = train_begin;
	api->train_iterate = train_iterate;
	api->train_end = train_end;
	api->train_download = train_download;
	api->train_cells_on_host = train_cells_on_host;
	api->train_combine = train_combine;
	api->train_dot = train_dot;
	api->train_line = train_line;
}
