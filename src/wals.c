/*
 * wals.c
 *	  Module initialisation and the settings of wals.
 *
 * The module needs no shared_preload_libraries: it is loaded by the first
 * call of one of its functions, and every setting can be changed per session.
 *
 * It also gives src/core its poll hook, CHECK_FOR_INTERRUPTS: the core's
 * long loops call it every few milliseconds of arithmetic, so that a
 * cancel or statement_timeout is answered in the middle of a Cholesky row
 * or a Gram at any f (DESIGN section 6, rule 14).  _PG_init runs in every
 * process that loads the library, parallel workers included.
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "wals.h"

PG_MODULE_MAGIC;

char	   *wals_default_model = NULL;
int			wals_device = WALS_DEVICE_AUTO;
int			wals_max_memory = 0;
int			wals_shard_message_size = WALS_DEFAULT_SHARD_MESSAGE_KB;
bool		wals_shared_items = true;
static char *wals_kernels_setting = NULL;

static const struct config_enum_entry wals_device_options[] = {
	{"auto", WALS_DEVICE_AUTO, false},
	{"cpu", WALS_DEVICE_CPU, false},
	{"gpu", WALS_DEVICE_GPU, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/*
 * A family the CPU cannot run is refused, except when the value is only
 * being stored for later sessions (ALTER DATABASE ... SET), which may run
 * on another machine, such as a standby; a session there that cannot run
 * it keeps the kernels it had, with the warning of a failed setting.
 */
static bool
check_kernels(char **newval, void **extra, GucSource source)
{
	int			usable = wals_kernels_check(*newval);

	if (usable < 0)
	{
		GUC_check_errdetail("Kernels are one of auto, avx512, avx2, neon or generic.");
		return false;
	}
	if (usable == 0 && source != PGC_S_TEST)
	{
		GUC_check_errcode(ERRCODE_FEATURE_NOT_SUPPORTED);
		GUC_check_errdetail("This CPU runs the kernels %s.", wals_kernels_available());
		return false;
	}
	return true;
}

static void
assign_kernels(const char *newval, void *extra)
{
	wals_kernels_use(newval);
}

/*
 * The core's poll hook.  A pending cancel, timeout or termination raises
 * its error here and longjmps out through the core's frames, which hold
 * nothing to release (wals_set_poll_hook); nothing is raised where
 * interrupts are held off (a critical section, an LWLock held).
 */
static void
poll_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/*
 * The core's loader of BLAS and LAPACK (src/core/blas.c): wals.so is not
 * linked to them, whose thousands of symbols would cost every backend that
 * loads wals milliseconds to resolve, though serving never calls them.
 * The module wals_blas (src/blas/wals_blas.c) is linked to them, and
 * loading it loads them for every library of the backend.
 */
void
wals_load_blas(void)
{
	if (wals_blas_bind())
		return;
	load_file("$libdir/wals_blas", false);
	if (!wals_blas_bind())
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("BLAS and LAPACK are not available to wals"),
				 errdetail("The module wals_blas was loaded, but one of cblas_sgemm, cblas_ssyrk, cblas_strsm, spotrf_ and spotrs_ is missing from what it loaded."),
				 errhint("Install wals again, built against OpenBLAS.")));
}

void
_PG_init(void)
{
	wals_set_poll_hook(poll_interrupts);
	wals_set_blas_loader(wals_load_blas);

	DefineCustomStringVariable("wals.default_model",
							   gettext_noop("Model used by the serving functions when they are given none and more than one model exists."),
							   NULL,
							   &wals_default_model,
							   NULL,
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("wals.shared_items",
							 gettext_noop("Serves a model version from the one copy of its items built for every backend of the server."),
							 gettext_noop("Off, a backend reads the item factors itself, at its first call of each version, and sees edits made to the table since the training."),
							 &wals_shared_items,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("wals.device",
							 gettext_noop("Device that trains when wals_train is given none."),
							 gettext_noop("auto picks a GPU when one is usable, else the CPU."),
							 &wals_device,
							 WALS_DEVICE_AUTO,
							 wals_device_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("wals.max_memory",
							gettext_noop("Largest memory a training may use, leader and workers together."),
							gettext_noop("Ratings beyond it go to temporary files; a training whose factors and scratch alone exceed it is refused before it allocates anything. 0 means no limit."),
							&wals_max_memory,
							0,
							0,
							INT_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wals.gpu_min_ratings",
							gettext_noop("Fewest ratings for which device auto trains on a GPU."),
							gettext_noop("Smaller trainings end sooner on the CPU than starting the GPU takes."),
							&wals_gpu_min_ratings,
							WALS_DEFAULT_GPU_MIN_RATINGS,
							0,
							INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wals.shard_message_size",
							gettext_noop("Most bytes one message of a sharded training carries."),
							gettext_noop("A side's factors or ids that are larger go to and from the shards in pages."),
							&wals_shard_message_size,
							WALS_DEFAULT_SHARD_MESSAGE_KB,
							1,
							WALS_MAX_SHARD_MESSAGE_KB,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomStringVariable("wals.kernels",
							   gettext_noop("Vector kernels of training and scoring on the CPU."),
							   gettext_noop("auto picks the widest this CPU runs; avx512, avx2, neon or generic force one, to compare or test them."),
							   &wals_kernels_setting,
							   "auto",
							   PGC_USERSET,
							   0,
							   check_kernels, assign_kernels, NULL);

	DefineCustomStringVariable("wals.cuda_library",
							   gettext_noop("The CUDA engine wals loads when a GPU is considered."),
							   gettext_noop("A name in the package library directory, or an absolute path."),
							   &wals_cuda_library,
							   WALS_CUDA_ENGINE,
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);

	MarkGUCPrefixReserved("wals");
}
