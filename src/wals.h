/*
 * wals.h
 *	  What every part of the PostgreSQL glue of wals shares: the limits of
 *	  the arguments, the settings, the one error layer and the memory limit.
 *
 * The glue is three subsystems over src/core, each with its own header:
 * the catalog (src/catalog/wals_catalog.h: models, factor tables, roles),
 * training (src/train/wals_train.h) and serving (src/serve/wals_serve.h).
 * Training and serving both build on the catalog and never on each other.
 */
#ifndef WALS_H
#define WALS_H

#include "postgres.h"

#include <math.h>

#include "pg_compat.h"

#include "fmgr.h"
#include "portability/instr_time.h"
#include "wals_core.h"

/* Limits of the arguments of wals_train, as MIN/MAX pairs. */
#define WALS_MIN_FACTORS			1
#define WALS_MAX_FACTORS			4096
#define WALS_MIN_ITERATIONS			1
#define WALS_MAX_ITERATIONS			10000
#define WALS_MIN_CG_STEPS			1
#define WALS_MAX_CG_STEPS			1000
#define WALS_MIN_WORKERS			0
#define WALS_MAX_WORKERS			1024
#define WALS_MAX_K					1000000

/*
 * regularization, alpha and unobserved_weight: beyond this the systems
 * solved lose every digit of the data to the regularization or overflow.
 */
#define WALS_MAX_REAL_PARAM			1e6f

/*
 * regularization_exponent: the published optimum is 1 (Rendle et al.); at
 * 2, (n + w0 N)^nu of a billion cells times the largest regularization
 * still fits a float.
 */
#define WALS_MAX_REG_EXPONENT		2.0f

/*
 * validation: the held-out cells are scored by this metric unless
 * validation_metric names another (at k up to WALS_MAX_VALIDATION_K), on
 * at most WALS_VALIDATION_USERS of their users (evenly spread), after every
 * iteration; patience is the iterations without a better score before a
 * training stops.
 */
#define WALS_DEFAULT_VALIDATION_METRIC	"ndcg@20"
#define WALS_MAX_VALIDATION_K		1000
#define WALS_VALIDATION_USERS		5000
#define WALS_MAX_VALIDATION			0.5f
#define WALS_DEFAULT_PATIENCE		2

/* init_std: the starting factors' standard deviation is init_std / sqrt(f). */
#define WALS_MAX_INIT_STD			100.0f

/*
 * Dimensions per block of solver 'subspace' unless block_size is given (or
 * f, when smaller): see doc/training.md, "Acceleration", for the measurements.
 */
#define WALS_DEFAULT_BLOCK_SIZE		16

/*
 * Below this many ratings, device => 'auto' trains on the CPU: the measured
 * crossover of a whole training (15 iterations, in a new connection, which
 * pays for starting CUDA) between an H100 and 16 Xeon cores, doc/training.md
 * "Devices".
 */
#define WALS_DEFAULT_GPU_MIN_RATINGS	2000000

/* wals.cuda_library's default: the engine gpu/ builds, in $libdir. */
#define WALS_CUDA_ENGINE	"wals_cuda"

/*
 * wals.shard_message_size: the most one message of a sharded training
 * carries, in kB; a value (a side's factors or ids) that is larger goes in
 * pages.  Below the 1 GB a bytea may hold.
 */
#define WALS_DEFAULT_SHARD_MESSAGE_KB	(256 * 1024)
#define WALS_MAX_SHARD_MESSAGE_KB		(512 * 1024)

/* Factor tables are named <model>_user_factors and <model>_item_factors. */
#define WALS_USER_SUFFIX			"_user_factors"
#define WALS_ITEM_SUFFIX			"_item_factors"
#define WALS_MAX_MODEL_NAME			(NAMEDATALEN - 1 - (int) strlen(WALS_USER_SUFFIX))

/* The values of wals.device and of wals_train's device argument. */
typedef enum WalsDevice
{
	WALS_DEVICE_AUTO,
	WALS_DEVICE_CPU,
	WALS_DEVICE_GPU
} WalsDevice;

/* Settings (wals.c, and devices.c for the GPU's). */
extern char *wals_default_model;
extern int	wals_device;
extern int	wals_max_memory;	/* kB; 0 means no limit */
extern char *wals_cuda_library;
extern int	wals_gpu_min_ratings;
extern int	wals_shard_message_size;	/* kB */
extern bool wals_shared_items;

/* Whose row a failure concerns. */
typedef enum WalsSide
{
	WALS_SIDE_NONE = -1,
	WALS_SIDE_USERS,
	WALS_SIDE_ITEMS
} WalsSide;

/*
 * A failure of the core or of a training engine, on any device, as
 * errors.c reports it: the status, the dense row that failed (-1 when
 * none) of side, and the engine's own words, or "" for the status's.
 */
typedef struct WalsFailure
{
	WalsStatus	status;
	WalsSide	side;
	int64		row;
	char		detail[512];
} WalsFailure;

/* errors.c */
extern void wals_report_failure(const WalsFailure *failure, const char *what,
								const int64 *user_ids, const int64 *item_ids);
extern void wals_report_core_status(WalsStatus status, const char *what);

/* wals.c: BLAS and LAPACK loaded and bound, or an error */
extern void wals_load_blas(void);

/* pages.c */
extern void wals_advise_huge_pages(void *p, size_t bytes);
extern void *wals_alloc_huge(MemoryContext cxt, size_t bytes);
extern void wals_prefault(void *p, size_t bytes);
extern void wals_prefault_read(const void *p, size_t bytes);
extern void wals_release_shared(void *p, size_t bytes);

/* memory.c */
extern char *wals_pretty_bytes(double bytes);
extern void wals_memory_check(double bytes, const char *what);
extern double wals_shared_free(void);

/*
 * An area shared with parallel workers is laid out by offsets from its
 * start, since each process maps it at its own address: the offset of a
 * section of bytes placed at *off or after, on a cache line, *off moved
 * past it.  An empty section still takes a byte, so that no two share an
 * offset.
 */
#define WALS_AREA_ALIGN 64

static inline Size
wals_area_section(Size *off, Size bytes)
{
	Size		at = TYPEALIGN(WALS_AREA_ALIGN, *off);

	*off = at + Max(bytes, 1);
	return at;
}

/*
 * What wals_progress shows of the work under way in this backend
 * (work_progress.c): the outermost training, tuning or refresh, and the
 * phase, iteration, rows and trial of whatever runs inside it.
 */
typedef enum WalsWork
{
	WALS_WORK_TRAIN = 1,
	WALS_WORK_TUNE,
	WALS_WORK_REFRESH
} WalsWork;

typedef enum WalsPhase
{
	WALS_PHASE_STARTING = 1,
	WALS_PHASE_READING,
	WALS_PHASE_BUILDING,
	WALS_PHASE_SOLVING_USERS,
	WALS_PHASE_SOLVING_ITEMS,
	WALS_PHASE_LOSS,
	WALS_PHASE_VALIDATION,
	WALS_PHASE_LINE_SEARCH,
	WALS_PHASE_GPU_UPLOAD,
	WALS_PHASE_GPU_SWEEP,
	WALS_PHASE_STORING,
	WALS_PHASE_READING_CHANGES,
	WALS_PHASE_READING_USERS
} WalsPhase;

extern void wals_work_begin(WalsWork work, Oid schema, const char *model);
extern void wals_work_end(void);
extern void wals_work_phase(WalsPhase phase, int64 rows_total);
extern void wals_work_rows(int64 done);
extern void wals_work_iteration(int it, int iterations);
extern void wals_work_trial(int trial, int trials, double budget_s);

/* calls.c: the wals calls running in this backend */
extern Datum wals_call(PGFunction impl, FunctionCallInfo fcinfo, const char *fn, bool writes);
extern int	wals_call_depth(void);
extern void wals_call_allow_write(void);
extern void wals_call_from_c(void (*impl) (void *arg), void *arg, const char *fn, bool writes);
extern void wals_call_new_snapshot(void);
extern int	wals_call_notice_level(void);

/* Seconds elapsed since start, for the timings of a call. */
static inline double
wals_seconds_since(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_DOUBLE(now);
}

/*
 * Seconds as a result row or the catalog shows them: to the microsecond,
 * so that they print as 0.096545 rather than 0.09654460899999999, the
 * digits a clock's nanoseconds leave in a double.
 */
static inline Datum
wals_seconds_datum(double seconds)
{
	return Float8GetDatum(rint(seconds * 1e6) / 1e6);
}

#endif							/* WALS_H */
