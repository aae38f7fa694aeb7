/*
 * cholesky.cu
 *	  The exact row solves of a training on a CUDA device, a batch of rows
 *	  at a time: the Cholesky solver, and the subspace solver (iALS++)
 *	  that solves blocks of a row's dimensions exactly in turn.
 *
 * Row u of the side being solved has the system src/core's Cholesky solver
 * forms (solve.c):
 *
 *	  A_u = w0 G + sum_i (c_i - w0) y_i y_i^T + lambda s_u I,	b_u = sum_i c_i p_i y_i
 *
 * A batch goes through three steps: one thread block per row builds A_u and
 * b_u in global memory, cuSOLVER's batched potrf and potrs factor and solve
 * every system of the batch, and one block per row copies x_u into the
 * factors.  The batch's buffers and the pointer arrays cuSOLVER takes are
 * allocated once per training and reused by every batch of every
 * half-sweep, so a sweep allocates nothing; the batch is sized from the
 * device memory that is free when the training starts.
 *
 * The subspace solver (Rendle et al., arXiv:2110.14044) takes the
 * dimensions of x_u a block B of block_size at a time, warm started from
 * the current x_u, and solves the block's part of the same system exactly
 * with the rest of x_u fixed:
 *
 *	  (A_u)_BB dx = sum_i (c_i p_i - (c_i - w0) yhat_i) y_iB - w0 (G x_u)_B - lambda s_u x_B
 *
 * then x_B += dx, yhat_i += dx.y_iB and G x_u += G_:B dx, where yhat_i =
 * x_u.y_i is kept for every cell of the side and G x_u for every row of
 * the batch.  A batch goes through the blocks in order, each the three
 * steps above (the system, potrf and potrs, the update) and a cuBLAS gemm
 * for G x_u, so a sweep costs O(nnz f block_size + n f^2) instead of
 * O(nnz f^2 + n f^3).  With block_size >= f it is the Cholesky solver.
 *
 * A_u (or its block) is written whole, both triangles, each entry computed
 * once: it is then the same matrix read row- or column-major, and which
 * triangle cuSOLVER reads cannot matter.  A row whose system is not
 * positive definite, or whose solution is not finite, is reported by its
 * index, the least one of the half-sweep, which is the row src/core stops
 * at.
 */
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <new>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "engine.h"

/*
 * The block that builds a system: 256 threads, each accumulating a 4 x 4
 * block of a 64 x 64 tile of A_u in registers, from the row's cells staged
 * 32 at a time in shared memory (16 KiB), so that a factor row is read
 * from global memory once per tile rather than once per entry.
 */
#define CHOL_THREADS	256
#define CHOL_SIDE		16
#define CHOL_TILE		64
#define CHOL_SUB		(CHOL_TILE / CHOL_SIDE)
#define CHOL_CHUNK		32
#define CHOL_STORE_THREADS	128

static_assert(CHOL_SIDE * CHOL_SIDE == CHOL_THREADS, "one thread per 4 x 4 block of a tile");
static_assert(CHOL_CHUNK <= CHOL_THREADS, "one thread stages each cell of a chunk");

/*
 * Past a few thousand systems in flight every SM is busy, and a larger
 * batch only saves launches while taking memory other trainings on the
 * device could use.  The bound on rows also keeps every grid of a batch,
 * ours and cuSOLVER's, far inside the launch limits.
 */
#define CHOL_BATCH_BYTES	((size_t) 1 << 30)
#define CHOL_BATCH_ROWS		32768

/*
 * cuSOLVER's batched potrf and potrs are meant for many small systems;
 * past this many unknowns one system is work enough for the whole device,
 * and each is factored and solved on its own with the unbatched calls.
 */
#define CHOL_BATCHED_DIM	1024

/* A row without ratings: A = I and b = 0 (chol_build). */
static __device__ void
chol_identity(float *Au, float *bu, int nb, int dim)
{
	for (size_t e = threadIdx.x; e < (size_t) nb * nb; e += blockDim.x)
	{
		size_t		col = e / nb;
		size_t		row = e % nb;

		Au[col * dim + row] = row == col ? 1.0f : 0.0f;
	}
	for (int k = threadIdx.x; k < nb; k += blockDim.x)
		bu[k] = 0.0f;
}

/* The right-hand side of row u's system (chol_build), a thread an entry. */
static __device__ void
chol_rhs(Weights w, long long u, long long start, int nnz, const int *__restrict__ indices,
		 const float *__restrict__ values, const float *__restrict__ Y, int f, int b0,
		 int nb, float s, const float *__restrict__ yhat, const float *__restrict__ gx,
		 const float *__restrict__ X, float *__restrict__ bu)
{
	for (int k = threadIdx.x; k < nb; k += blockDim.x)
	{
		float		acc = 0.0f;

		for (int i = 0; i < nnz; i++)
		{
			float		c;
			float		p;
			float		t;

			cell_weights(w, values[start + i], &c, &p);
			t = c * p;
			if (yhat != NULL)
				t -= (c - w.w0) * yhat[start + i];
			acc += t * Y[(size_t) indices[start + i] * f + b0 + k];
		}
		if (yhat != NULL)
		{
			acc -= w.lambda * s * X[(size_t) u * f + b0 + k];
			if (w.w0 != 0.0f)
				acc -= w.w0 * gx[(size_t) blockIdx.x * f + b0 + k];
		}
		bu[k] = acc;
	}
}

/*
 * Stage the chunk of cells [first, first + n) of a row for the tile in
 * block row ta and block column tc: each cell's weighted y in the tile's
 * rows, its y in the tile's columns.  The barrier before lets the previous
 * chunk be consumed; the one after makes this one visible.
 */
static __device__ void
chol_stage(Weights w, long long start, int first, int n, const int *__restrict__ indices,
		   const float *__restrict__ values, const float *__restrict__ Y, int f, int b0,
		   int nb, int ta, int tc, int *chunk_cell, float *chunk_weight,
		   float (*tile_rows)[CHOL_TILE], float (*tile_cols)[CHOL_TILE])
{
	__syncthreads();
	if (threadIdx.x < n)
	{
		float		c;
		float		p;

		cell_weights(w, values[start + first + threadIdx.x], &c, &p);
		chunk_cell[threadIdx.x] = indices[start + first + threadIdx.x];
		chunk_weight[threadIdx.x] = c - w.w0;
	}
	__syncthreads();
	for (int e = threadIdx.x; e < n * CHOL_TILE; e += blockDim.x)
	{
		int			i = e / CHOL_TILE;
		int			k = e % CHOL_TILE;
		int			row = ta * CHOL_TILE + k;
		int			col = tc * CHOL_TILE + k;
		const float *y = Y + (size_t) chunk_cell[i] * f + b0;

		tile_rows[i][k] = row < nb ? chunk_weight[i] * y[row] : 0.0f;
		tile_cols[i][k] = col < nb ? y[col] : 0.0f;
	}
	__syncthreads();
}

/*
 * The system of the dimensions [b0, b0 + nb) of row lo + blockIdx.x into
 * slot blockIdx.x of the batch, column-major with leading dimension dim
 * (the slots' stride, nb <= dim).  Cholesky (yhat NULL): the whole system,
 * b0 = 0 and nb = dim = f, with b = sum_i c_i p_i y_i.  Subspace: that
 * block of A_u, and the block's residual with the rest of x_u fixed, from
 * yhat (x_u.y_i, indexed as the cells), gx (G x_u, f floats a row of the
 * batch; not read when w0 is 0) and X.
 *
 * Only the tiles on or below the diagonal are accumulated, and in a
 * diagonal tile only the entries on or below it, each written to both
 * triangles, so that every entry has one writer.  A row without ratings
 * gets A = I and b = 0: its solution (or step) is then exactly the zero
 * vector src/core gives it, and the factorization never reads a stale
 * system.
 */
static __global__ void __launch_bounds__(CHOL_THREADS)
chol_build(Weights w, RowScale rs, const long long *__restrict__ indptr,
		   const int *__restrict__ indices, const float *__restrict__ values,
		   const float *__restrict__ Y, const float *__restrict__ G, long long lo,
		   int f, int b0, int nb, int dim, const float *__restrict__ yhat,
		   const float *__restrict__ gx, const float *__restrict__ X,
		   float *__restrict__ A, float *__restrict__ b)
{
	__shared__ float tile_rows[CHOL_CHUNK][CHOL_TILE];
	__shared__ float tile_cols[CHOL_CHUNK][CHOL_TILE];
	__shared__ int chunk_cell[CHOL_CHUNK];
	__shared__ float chunk_weight[CHOL_CHUNK];
	long long	u = lo + blockIdx.x;
	long long	start = indptr[u];
	int			nnz = (int) (indptr[u + 1] - start);
	float	   *Au = A + (size_t) blockIdx.x * dim * dim;
	float	   *bu = b + (size_t) blockIdx.x * dim;
	int			tx = threadIdx.x % CHOL_SIDE;
	int			ty = threadIdx.x / CHOL_SIDE;
	int			tiles = (nb + CHOL_TILE - 1) / CHOL_TILE;
	float		s = (float) row_scale(rs, nnz);

	if (nnz == 0)
	{
		chol_identity(Au, bu, nb, dim);
		return;
	}
	chol_rhs(w, u, start, nnz, indices, values, Y, f, b0, nb, s, yhat, gx, X, bu);

	for (int ta = 0; ta < tiles; ta++)
		for (int tc = 0; tc <= ta; tc++)
		{
			float		acc[CHOL_SUB][CHOL_SUB] = {};

			for (int first = 0; first < nnz; first += CHOL_CHUNK)
			{
				int			n = min(CHOL_CHUNK, nnz - first);

				chol_stage(w, start, first, n, indices, values, Y, f, b0, nb, ta, tc,
						   chunk_cell, chunk_weight, tile_rows, tile_cols);
				for (int i = 0; i < n; i++)
					for (int bi = 0; bi < CHOL_SUB; bi++)
						for (int bj = 0; bj < CHOL_SUB; bj++)
							acc[bi][bj] += tile_rows[i][ty + CHOL_SIDE * bi] *
								tile_cols[i][tx + CHOL_SIDE * bj];
			}

			for (int bi = 0; bi < CHOL_SUB; bi++)
				for (int bj = 0; bj < CHOL_SUB; bj++)
				{
					int			row = ta * CHOL_TILE + ty + CHOL_SIDE * bi;
					int			col = tc * CHOL_TILE + tx + CHOL_SIDE * bj;
					float		v = acc[bi][bj];

					if (row >= nb || col >= nb || (ta == tc && row < col))
						continue;
					/* as src/core, G is not read when w0 is 0 */
					if (w.w0 != 0.0f)
						v += w.w0 * G[(size_t) (b0 + row) * f + b0 + col];
					if (row == col)
						v += w.lambda * s;
					Au[(size_t) col * dim + row] = v;
					Au[(size_t) row * dim + col] = v;
				}
		}
}

/*
 * Whether the factorization of slot blockIdx.x (nb unknowns) is refused:
 * potrf says so, or a pivot is NaN or infinite (the factor's diagonal is
 * their square roots), which src/core refuses (wals_pivot_ok) and potrf's
 * test of pivot <= 0 may let through.  Every thread gets the answer.
 */
static __device__ bool
factor_refused(const float *__restrict__ A, const int *__restrict__ info, int nb, int dim)
{
	__shared__ int refused;
	const float *L = A + (size_t) blockIdx.x * dim * dim;
	bool		result;

	if (threadIdx.x == 0)
		refused = info[blockIdx.x] != 0;
	__syncthreads();
	for (int k = threadIdx.x; k < nb; k += blockDim.x)
		if (!(L[(size_t) k * dim + k] > 0.0f && L[(size_t) k * dim + k] <= FLT_MAX))
			refused = 1;
	__syncthreads();
	result = refused != 0;
	/* refused is read by every thread before a later call sets it again */
	__syncthreads();
	return result;
}

/*
 * x_u, left in slot blockIdx.x of b by potrs, into row lo + blockIdx.x of
 * X.  *bad keeps the least 2 u + 1 over rows whose solution is not finite
 * and 2 u over rows whose system is refused (factor_refused); those keep
 * their old factors.
 */
static __global__ void
chol_store(const float *__restrict__ A, const float *__restrict__ b,
		   const int *__restrict__ info, long long lo, int f, float *__restrict__ X,
		   unsigned long long *bad)
{
	long long	u = lo + blockIdx.x;
	const float *x = b + (size_t) blockIdx.x * f;

	if (factor_refused(A, info, f, f))
	{
		if (threadIdx.x == 0)
			atomicMin(bad, 2 * (unsigned long long) u);
		return;
	}
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		if (!isfinite(x[k]))
			atomicMin(bad, 2 * (unsigned long long) u + 1);
		X[(size_t) u * f + k] = x[k];
	}
}

/*
 * Before the subspace solver's first block of a batch: yhat_i = x_u.y_i
 * for every cell of row lo + blockIdx.x, one warp a cell; a row without
 * ratings gets x_u = 0 (its blocks then step by 0).
 */
static __global__ void
sub_start(const long long *__restrict__ indptr, const int *__restrict__ indices,
		  const float *__restrict__ Y, long long lo, int f, float *__restrict__ X,
		  float *__restrict__ yhat)
{
	long long	u = lo + blockIdx.x;
	long long	start = indptr[u];
	int			nnz = (int) (indptr[u + 1] - start);
	float	   *x = X + (size_t) u * f;
	int			lane = threadIdx.x & 31;

	if (nnz == 0)
	{
		for (int k = threadIdx.x; k < f; k += blockDim.x)
			x[k] = 0.0f;
		return;
	}
	for (int i = threadIdx.x >> 5; i < nnz; i += blockDim.x >> 5)
	{
		float		d = wals_cuda_warp_dot(x, Y + (size_t) indices[start + i] * f, f, lane);

		if (lane == 0)
			yhat[start + i] = d;
	}
}

/*
 * After a block's potrs: the step dx of row lo + blockIdx.x (slot
 * blockIdx.x of b) onto x_B, and dx.y_iB onto yhat_i, one warp a cell.  A
 * row whose block's factorization is refused (factor_refused) lowers *bad to 2 u
 * and takes no step (dx is zeroed, so that the gemm after leaves its G x
 * alone); one whose x_B is no longer finite lowers it to 2 u + 1.
 */
static __global__ void
sub_update(const long long *__restrict__ indptr, const int *__restrict__ indices,
		   const float *__restrict__ Y, const float *__restrict__ A,
		   const int *__restrict__ info, long long lo, int f, int b0, int nb, int dim,
		   float *__restrict__ b, float *__restrict__ X, float *__restrict__ yhat,
		   unsigned long long *bad)
{
	long long	u = lo + blockIdx.x;
	long long	start = indptr[u];
	int			nnz = (int) (indptr[u + 1] - start);
	float	   *dx = b + (size_t) blockIdx.x * dim;
	float	   *x = X + (size_t) u * f + b0;
	int			lane = threadIdx.x & 31;

	if (factor_refused(A, info, nb, dim))
	{
		for (int k = threadIdx.x; k < nb; k += blockDim.x)
			dx[k] = 0.0f;
		if (threadIdx.x == 0)
			atomicMin(bad, 2 * (unsigned long long) u);
		return;
	}
	for (int k = threadIdx.x; k < nb; k += blockDim.x)
	{
		x[k] += dx[k];
		if (!isfinite(x[k]))
			atomicMin(bad, 2 * (unsigned long long) u + 1);
	}
	for (int i = threadIdx.x >> 5; i < nnz; i += blockDim.x >> 5)
	{
		float		d = wals_cuda_warp_dot(Y + (size_t) indices[start + i] * f + b0, dx, nb, lane);

		if (lane == 0)
			yhat[start + i] += d;
	}
}

/* cuSOLVER's batched calls take a device array of pointers to the systems. */
static __global__ void
chol_pointers(float *A, float *b, int dim, long long rows, float **Aptr, float **bptr)
{
	long long	j = (long long) blockIdx.x * blockDim.x + threadIdx.x;

	if (j < rows)
	{
		Aptr[j] = A + (size_t) j * dim * dim;
		bptr[j] = b + (size_t) j * dim;
	}
}

/*
 * The batch: rows systems of dim unknowns, reused by every half-sweep.
 * dim is f, or the subspace solver's block_size when it is less; the
 * subspace solver keeps G x_u for the rows of a batch and x_u.y_i for the
 * cells of a side.
 */
struct CholeskySolver
{
	Weights params;
	RowScale	scale;			/* of the side being solved */
	int			f;
	int			dim;
	long long	rows;
	cusolverDnHandle_t handle;
	cublasHandle_t blas;		/* the training's, for G x_u */
	float	   *A;				/* rows x dim x dim */
	float	   *b;				/* rows x dim, then the solutions */
	float	  **Aptr;
	float	  **bptr;
	int		   *info;			/* potrf's rows entries, then potrs's */
	unsigned long long *bad;
	float	   *work;			/* potrf's workspace, past CHOL_BATCHED_DIM */
	int			lwork;
	float	   *gx;				/* subspace: rows x f */
	float	   *yhat;			/* subspace: one a cell */
};

/* cuSOLVER has no cublasGetStatusString: the statuses its calls here return. */
static const char *
solver_status(cusolverStatus_t st)
{
	switch (st)
	{
		case CUSOLVER_STATUS_NOT_INITIALIZED:
			return "CUSOLVER_STATUS_NOT_INITIALIZED";
		case CUSOLVER_STATUS_ALLOC_FAILED:
			return "CUSOLVER_STATUS_ALLOC_FAILED";
		case CUSOLVER_STATUS_INVALID_VALUE:
			return "CUSOLVER_STATUS_INVALID_VALUE";
		case CUSOLVER_STATUS_EXECUTION_FAILED:
			return "CUSOLVER_STATUS_EXECUTION_FAILED";
		default:
			return "a cuSOLVER status";
	}
}

#define SOLVER_TRY(call, what) \
	do { \
		cusolverStatus_t st_ = (call); \
		if (st_ != CUSOLVER_STATUS_SUCCESS) \
		{ \
			char		why_[64]; \
			snprintf(why_, sizeof(why_), "%s (%d)", solver_status(st_), (int) st_); \
			return fail(err, st_ == CUSOLVER_STATUS_ALLOC_FAILED ? WALS_CUDA_ENOMEM : \
						WALS_CUDA_EDEVICE, (what), why_); \
		} \
	} while (0)

/*
 * Device memory of a batch of rows systems: A and b, the two pointer
 * arrays, potrf's and potrs's info, and the failing row; for the subspace
 * solver G x_u of each row and x_u.y_i of every cell.  potrf's workspace
 * past CHOL_BATCHED_DIM is not counted: it is a few panels of the one
 * system it factors.
 */
size_t
wals_cuda_cholesky_bytes(const WalsCudaProblem *p, long long rows)
{
	size_t		f = (size_t) p->factors;
	size_t		dim = (size_t) wals_cuda_block_dim(p);
	bool		subspace = dim < f;
	size_t		per_row = sizeof(float) * (dim * dim + dim + (subspace ? f : 0)) +
		2 * sizeof(float *) + 2 * sizeof(int);
	size_t		cells = subspace ? (size_t) p->user_indptr[p->nusers] : 0;

	return (size_t) rows * per_row + sizeof(float) * (cells + 1) +
		sizeof(unsigned long long);
}

/*
 * Rows per batch given spare bytes of device memory beyond what the rest of
 * the training, one row's system included, needs: further rows take at
 * most half of them, leaving the rest to cuSOLVER's workspace and to other
 * processes, and no more than the larger side has.  At f = 4096 a row's
 * system is 64 MiB, and a batch at most 17 rows.
 */
long long
wals_cuda_cholesky_rows(const WalsCudaProblem *p, long long most, size_t spare)
{
	size_t		room = spare / 2 < CHOL_BATCH_BYTES ? spare / 2 : CHOL_BATCH_BYTES;
	size_t		per_row = wals_cuda_cholesky_bytes(p, 2) - wals_cuda_cholesky_bytes(p, 1);
	long long	rows = 1 + (long long) (room / per_row);

	if (rows > CHOL_BATCH_ROWS)
		rows = CHOL_BATCH_ROWS;
	if (rows > most)
		rows = most;
	return rows > 1 ? rows : 1;
}

void
wals_cuda_cholesky_end(CholeskySolver *c)
{
	if (c == NULL)
		return;
	cudaFree(c->A);
	cudaFree(c->b);
	cudaFree(c->Aptr);
	cudaFree(c->bptr);
	cudaFree(c->info);
	cudaFree(c->bad);
	cudaFree(c->work);
	cudaFree(c->gx);
	cudaFree(c->yhat);
	if (c->handle != NULL)
		cusolverDnDestroy(c->handle);
	delete c;
}

static int
allocate(CholeskySolver *c, size_t cells, WalsCudaError *err)
{
	const char *what = "allocating the Cholesky systems";
	size_t		rows = (size_t) c->rows;
	size_t		dim = (size_t) c->dim;

	SOLVER_TRY(cusolverDnCreate(&c->handle), "starting cuSOLVER");
	CUDA_TRY(cudaMalloc(&c->A, sizeof(float) * rows * dim * dim), what);
	CUDA_TRY(cudaMalloc(&c->b, sizeof(float) * rows * dim), what);
	CUDA_TRY(cudaMalloc(&c->Aptr, sizeof(float *) * rows), what);
	CUDA_TRY(cudaMalloc(&c->bptr, sizeof(float *) * rows), what);
	CUDA_TRY(cudaMalloc(&c->info, sizeof(int) * 2 * rows), what);
	CUDA_TRY(cudaMalloc(&c->bad, sizeof(*c->bad)), what);
	if (c->dim < c->f)
	{
		CUDA_TRY(cudaMalloc(&c->gx, sizeof(float) * rows * c->f), what);
		CUDA_TRY(cudaMalloc(&c->yhat, sizeof(float) * (cells + 1)), what);
	}
	if (c->dim > CHOL_BATCHED_DIM)
	{
		SOLVER_TRY(cusolverDnSpotrf_bufferSize(c->handle, CUBLAS_FILL_MODE_LOWER, c->dim,
											   c->A, c->dim, &c->lwork), what);
		CUDA_TRY(cudaMalloc(&c->work, sizeof(float) * (c->lwork > 0 ? c->lwork : 1)), what);
	}
	WALS_LAUNCH(chol_pointers, (unsigned int) ((rows + 255) / 256), 256, 0)
		(c->A, c->b, c->dim, c->rows, c->Aptr, c->bptr);
	CUDA_TRY(cudaGetLastError(), what);
	return 0;
}

/*
 * The solver for problem p, batches of the given number of rows (at least
 * 1), the training's cuBLAS handle for the subspace solver's products; 0,
 * or the code of err, which it fills, with nothing left allocated.
 */
int
wals_cuda_cholesky_begin(const WalsCudaProblem *p, cublasHandle_t blas, long long rows,
						 CholeskySolver **out, WalsCudaError *err)
{
	CholeskySolver *c = new (std::nothrow) CholeskySolver();
	int			rc;

	*out = NULL;
	if (c == NULL)
		return fail(err, WALS_CUDA_ENOMEM, "starting the Cholesky solver", "out of host memory");
	c->params = wals_cuda_weights(p);
	c->scale = wals_cuda_row_scale(p, 0);
	c->f = p->factors;
	c->dim = wals_cuda_block_dim(p);
	c->rows = rows;
	c->blas = blas;
	rc = allocate(c, (size_t) p->user_indptr[p->nusers], err);
	if (rc != 0)
	{
		wals_cuda_cholesky_end(c);
		return rc;
	}
	*out = c;
	return 0;
}

/*
 * Factor and solve the first m systems of the batch, of nb unknowns each
 * (nb <= dim): cuSOLVER's batched calls up to CHOL_BATCHED_DIM, one
 * potrf and potrs a system past it, where a system is work enough for the
 * whole device and the batched calls are meant for small ones.  potrf's
 * info of system j lands in info[j] either way.
 */
static int
factor_and_solve(CholeskySolver *c, int nb, int m, const char *what, WalsCudaError *err)
{
	/* a stale failure of an earlier batch must never read as this one's */
	CUDA_TRY(cudaMemsetAsync(c->info, 0, sizeof(int) * (size_t) m), what);
	if (c->dim <= CHOL_BATCHED_DIM)
	{
		SOLVER_TRY(cusolverDnSpotrfBatched(c->handle, CUBLAS_FILL_MODE_LOWER, nb, c->Aptr,
										   c->dim, c->info, m), what);
		SOLVER_TRY(cusolverDnSpotrsBatched(c->handle, CUBLAS_FILL_MODE_LOWER, nb, 1, c->Aptr,
										   c->dim, c->bptr, c->dim, c->info + c->rows, m),
				   what);
		return 0;
	}
	for (int j = 0; j < m; j++)
	{
		float	   *A = c->A + (size_t) j * c->dim * c->dim;
		float	   *b = c->b + (size_t) j * c->dim;
		int			lwork = 0;

		SOLVER_TRY(cusolverDnSpotrf_bufferSize(c->handle, CUBLAS_FILL_MODE_LOWER, nb, A,
											   c->dim, &lwork), what);
		if (lwork > c->lwork)
			return fail(err, WALS_CUDA_EDEVICE, what,
						"cuSOLVER asks a larger workspace for a smaller system");
		SOLVER_TRY(cusolverDnSpotrf(c->handle, CUBLAS_FILL_MODE_LOWER, nb, A, c->dim,
									c->work, c->lwork, c->info + j), what);
		SOLVER_TRY(cusolverDnSpotrs(c->handle, CUBLAS_FILL_MODE_LOWER, nb, 1, A, c->dim,
									b, c->dim, c->info + c->rows + j), what);
	}
	return 0;
}

/* The Cholesky solver's batch of m rows from lo. */
static int
cholesky_batch(CholeskySolver *c, long long lo, int m, const long long *indptr,
			   const int *indices, const float *values, const float *Y, const float *G,
			   float *X, const char *what, WalsCudaError *err)
{
	int			f = c->f;

	WALS_LAUNCH(chol_build, (unsigned int) m, CHOL_THREADS, 0)
		(c->params, c->scale, indptr, indices, values, Y, G, lo, f, 0, f, f, NULL, NULL, NULL,
		 c->A, c->b);
	CUDA_TRY(cudaGetLastError(), what);
	if (factor_and_solve(c, f, m, what, err) != 0)
		return err->code;
	WALS_LAUNCH(chol_store, (unsigned int) m, CHOL_STORE_THREADS, 0)
		(c->A, c->b, c->info, lo, f, X, c->bad);
	CUDA_TRY(cudaGetLastError(), what);
	return 0;
}

/*
 * The subspace solver's batch of m rows from lo: yhat and G x_u from the
 * current factors, then each block in turn: its systems, their solutions,
 * the steps onto x_B and yhat, and G_:B dx onto G x_u (column-major, G x_u
 * of a row of the batch is a column of f).  G, and so G x_u, is not read
 * when w0 is 0.
 */
static int
subspace_batch(CholeskySolver *c, long long lo, int m, const long long *indptr,
			   const int *indices, const float *values, const float *Y, const float *G,
			   float *X, const char *what, WalsCudaError *err)
{
	const float one = 1.0f;
	const float zero = 0.0f;
	int			f = c->f;
	int			dim = c->dim;
	bool		gram = c->params.w0 != 0.0f;

	WALS_LAUNCH(sub_start, (unsigned int) m, CHOL_STORE_THREADS, 0)
		(indptr, indices, Y, lo, f, X, c->yhat);
	CUDA_TRY(cudaGetLastError(), what);
	if (gram)
		BLAS_TRY(cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, f, m, f, &one, G, f,
							 X + (size_t) lo * f, f, &zero, c->gx, f), what);
	for (int b0 = 0; b0 < f; b0 += dim)
	{
		int			nb = f - b0 < dim ? f - b0 : dim;

		WALS_LAUNCH(chol_build, (unsigned int) m, CHOL_THREADS, 0)
			(c->params, c->scale, indptr, indices, values, Y, G, lo, f, b0, nb, dim, c->yhat,
			 c->gx, X, c->A, c->b);
		CUDA_TRY(cudaGetLastError(), what);
		if (factor_and_solve(c, nb, m, what, err) != 0)
			return err->code;
		WALS_LAUNCH(sub_update, (unsigned int) m, CHOL_STORE_THREADS, 0)
			(indptr, indices, Y, c->A, c->info, lo, f, b0, nb, dim, c->b, X, c->yhat, c->bad);
		CUDA_TRY(cudaGetLastError(), what);
		if (gram)
			BLAS_TRY(cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, f, m, nb, &one,
								 G + (size_t) b0 * f, f, c->b, dim, &one, c->gx, f), what);
	}
	return 0;
}

/*
 * Solve every row of the CSR (indptr, indices, values) of nrows rows into
 * X, given the other side Y and its Gram G.  Every step of every batch is
 * queued on the default stream, behind the Gram that cuBLAS computes
 * there, and the host waits once, for the failing row.
 */
int
wals_cuda_cholesky_solve(CholeskySolver *c, long long nrows, long long ncols,
						 const long long *indptr,
						 const int *indices, const float *values, const float *Y,
						 const float *G, float *X, int side, const char *what,
						 WalsCudaError *err)
{
	unsigned long long bad = 0;

	c->scale.ncols = ncols;
	CUDA_TRY(cudaMemset(c->bad, 0xff, sizeof(*c->bad)), what);
	for (long long lo = 0; lo < nrows; lo += c->rows)
	{
		int			m = (int) (nrows - lo < c->rows ? nrows - lo : c->rows);
		int			rc = c->dim < c->f ?
			subspace_batch(c, lo, m, indptr, indices, values, Y, G, X, what, err) :
			cholesky_batch(c, lo, m, indptr, indices, values, Y, G, X, what, err);

		if (rc != 0)
			return rc;
	}
	CUDA_TRY(cudaMemcpy(&bad, c->bad, sizeof(bad), cudaMemcpyDeviceToHost), what);
	if (bad != ~0ULL)
		return fail_row(err, bad % 2 == 0 ? WALS_CUDA_ESINGULAR : WALS_CUDA_ENONFINITE, side,
						(long long) (bad / 2), what);
	return 0;
}
