/*
 * devices.c
 *	  Loading the CUDA engine, choosing the device, and wals_devices().
 *
 * wals.so never links CUDA.  The first time a GPU is considered, the library
 * named by wals.cuda_library is opened with dlopen and its one symbol,
 * wals_cuda_init, fills a table of functions, in the manner of PostgreSQL's
 * JIT provider.  A failure is remembered with its reason, so that a machine
 * without a GPU pays for the attempt once per backend and every NOTICE or
 * error can say why no GPU is used.
 */
#include "postgres.h"

#include <dlfcn.h>
#include <sys/stat.h>


#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "wals_train.h"
#include "wals_cuda.h"

PG_FUNCTION_INFO_V1(wals_devices);

char	   *wals_cuda_library = NULL;
int			wals_gpu_min_ratings = WALS_DEFAULT_GPU_MIN_RATINGS;

/* The outcome of the last attempt to load the library, per backend. */
static char *loaded_path = NULL;
static bool loaded = false;
static WalsCudaApi cuda;
static char load_error[512];

/* wals.cuda_library as a path: a bare name lives in $libdir. */
static char *
library_path(void)
{
	const char *name = wals_cuda_library != NULL && wals_cuda_library[0] != '\0' ?
		wals_cuda_library : "wals_cuda";

	if (first_dir_separator(name) != NULL)
		return pstrdup(name);
	return psprintf("%s/%s%s", pkglib_path, name, DLSUFFIX);
}

/*
 * Open the library once per value of wals.cuda_library; on failure,
 * load_error says why.
 */
static bool
load_cuda(void)
{
	char	   *path = library_path();
	struct stat st;
	void	   *handle;
	WalsCudaInit init;

	if (loaded_path != NULL && strcmp(loaded_path, path) == 0)
		return loaded;
	if (loaded_path != NULL)
		pfree(loaded_path);
	loaded_path = MemoryContextStrdup(TopMemoryContext, path);
	loaded = false;

	if (stat(path, &st) != 0)
	{
		snprintf(load_error, sizeof(load_error),
				 "the CUDA engine \"%s\" is not installed", path);
		return false;
	}

	/*
	 * wals's own engine links cuBLAS and cuSOLVER, which take a third of a
	 * second to load, and runs nowhere without the NVIDIA driver: where the
	 * driver is missing, say so without loading them.  Another library (a
	 * stand-in that runs on the host) is loaded whatever the machine.
	 */
	if (strcmp(wals_cuda_library, WALS_CUDA_ENGINE) == 0 &&
		dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == NULL)
	{
		snprintf(load_error, sizeof(load_error),
				 "no NVIDIA driver is installed (libcuda.so.1 was not found)");
		return false;
	}
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL)
	{
		snprintf(load_error, sizeof(load_error), "could not load \"%s\": %s", path, dlerror());
		return false;
	}
	init = (WalsCudaInit) dlsym(handle, "wals_cuda_init");
	if (init == NULL || init(&cuda) != 0 || cuda.abi_version != WALS_CUDA_ABI_VERSION)
	{
		snprintf(load_error, sizeof(load_error),
				 "\"%s\" is not a CUDA engine of this version of wals", path);
		dlclose(handle);
		return false;
	}
	loaded = true;
	return true;
}

/*
 * Number of usable GPUs; 0 with *why set when there is none, or when the
 * engine cannot be loaded.
 */
static int
usable_gpus(const char **why)
{
	static char msg[512];
	int			n;

	if (!load_cuda())
	{
		*why = load_error;
		return 0;
	}
	msg[0] = '\0';
	n = cuda.device_count(msg, sizeof(msg));
	if (n <= 0)
		*why = msg[0] != '\0' ? msg : "no CUDA device is visible to the server";
	return n > 0 ? n : 0;
}

/*
 * The compute capabilities of the devices on which the CUDA engine has
 * passed check_train (make gpu-check: every shape, solver and operation
 * held to src/core at every iteration).  'auto' chooses only a GPU of one
 * of them: elsewhere the engine runs code no check has seen (a newer
 * device runs the PTX its driver compiles from this build's; an older one
 * cannot run this build's kernels at all), and a default should not be
 * where a failure is first met.  A capability is added here once make
 * gpu-check has passed on a device of it (DEVELOPERS.md, "On a GPU").
 */
static const struct
{
	int			major;
	int			minor;
}			checked_capabilities[] = {
	{9, 0},						/* H100, 2026-11-27: 73 checks */
};

static bool
capability_checked(const WalsCudaDevice *dev)
{
	for (int i = 0; i < lengthof(checked_capabilities); i++)
		if (checked_capabilities[i].major == dev->cc_major &&
			checked_capabilities[i].minor == dev->cc_minor)
			return true;
	return false;
}

/*
 * Why 'auto' does not choose device dev, or NULL when it may: its compute
 * capability is not one the engine was checked on.
 */
static char *
unchecked_reason(const WalsCudaDevice *dev)
{
	StringInfoData checked;

	if (capability_checked(dev))
		return NULL;
	initStringInfo(&checked);
	for (int i = 0; i < lengthof(checked_capabilities); i++)
		appendStringInfo(&checked, "%s%d.%d", i > 0 ? ", " : "",
						 checked_capabilities[i].major, checked_capabilities[i].minor);
	return psprintf("the GPU engine has not passed its checks on compute capability %d.%d (%s), only on %s",
					dev->cc_major, dev->cc_minor, dev->name, checked.data);
}

/*
 * Settle a training asked for device 'gpu' before the ratings are read: an
 * error naming the reason where no GPU is usable.
 */
void
wals_device_check(const WalsTrainArgs *args)
{
	const char *why = NULL;

	if (args->device == WALS_DEVICE_GPU && usable_gpus(&why) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("\"device\" is 'gpu' but no GPU is usable: %s", why),
				 errhint("Install the NVIDIA driver and build wals where nvcc is found (make install puts wals_cuda.so beside wals.so), or pass device => 'cpu' or 'auto'.")));
}

/*
 * The device of a training of nratings ratings, CPU or GPU: 'auto' takes a
 * usable GPU from wals.gpu_min_ratings ratings up, below which the CPU is
 * faster, if the engine was checked on its kind (the server trains on
 * device 0), and says in a NOTICE why it trains on the CPU otherwise.
 */
WalsDevice
wals_device_choose(const WalsTrainArgs *args, int64 nratings)
{
	const char *why = NULL;
	WalsCudaDevice dev;
	char		msg[512];

	if (args->device == WALS_DEVICE_GPU)
		return WALS_DEVICE_GPU;
	if (args->device == WALS_DEVICE_CPU || nratings < wals_gpu_min_ratings)
		return WALS_DEVICE_CPU;
	if (usable_gpus(&why) == 0)
	{
		ereport(NOTICE,
				(errmsg("model \"%s\" trains on the CPU: no GPU is usable: %s",
						args->model_display, why)));
		return WALS_DEVICE_CPU;
	}
	if (cuda.device_info(0, &dev, msg, sizeof(msg)) != 0)
	{
		ereport(NOTICE,
				(errmsg("model \"%s\" trains on the CPU: the GPU cannot be described: %s",
						args->model_display, msg)));
		return WALS_DEVICE_CPU;
	}
	if ((why = unchecked_reason(&dev)) != NULL)
	{
		ereport(NOTICE,
				(errmsg("model \"%s\" trains on the CPU: %s", args->model_display, why),
				 errhint("Pass device => 'gpu' to train on it all the same.")));
		return WALS_DEVICE_CPU;
	}
	return WALS_DEVICE_GPU;
}

/* The engine's functions, once wals_device_check or _choose picked a GPU. */
const WalsCudaApi *
wals_cuda_api(void)
{
	Assert(loaded);
	return &cuda;
}

/* The first "model name" of /proc/cpuinfo, or NULL. */
static char *
cpu_name(void)
{
	FILE	   *f = AllocateFile("/proc/cpuinfo", "r");
	char		line[512];
	char	   *name = NULL;

	if (f == NULL)
		return NULL;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) != 0 || colon == NULL)
			continue;
		name = pstrdup(colon + 2);
		name[strcspn(name, "\n")] = '\0';
		break;
	}
	FreeFile(f);
	return name;
}

#define DEVICE_COLUMNS 12

static void
put_text(Datum *values, bool *nulls, int col, const char *s)
{
	nulls[col] = (s == NULL);
	if (s != NULL)
		values[col] = CStringGetTextDatum(s);
}

/*
 * The CPU row's BLAS and its threads, loading it: OpenBLAS says both, and
 * another BLAS neither (NULL).
 */
static void
blas_config(Datum *values, bool *nulls)
{
	char	   *(*config) (void);
	int			(*threads) (void);

	wals_load_blas();
	*(void **) &config = dlsym(RTLD_DEFAULT, "openblas_get_config");
	*(void **) &threads = dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
	put_text(values, nulls, 8, config != NULL ? config() : NULL);
	nulls[9] = threads == NULL;
	if (threads != NULL)
		values[9] = Int32GetDatum(threads());
}

/*
 * wals_devices() RETURNS TABLE(device text, usable bool, name text,
 *	 memory_total bigint, memory_free bigint, compute_capability text,
 *	 driver_version text, runtime_version text, blas text, threads int,
 *	 kernels text, reason text)
 *
 * The CPU with its BLAS and vector kernels, then each GPU, or one row saying
 * why no GPU is usable.
 */
Datum
wals_devices(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[DEVICE_COLUMNS];
	bool		nulls[DEVICE_COLUMNS];
	const char *why = NULL;
	int			n;

	InitMaterializedSRF(fcinfo, 0);

	memset(nulls, true, sizeof(nulls));
	put_text(values, nulls, 0, "cpu");
	values[1] = BoolGetDatum(true);
	nulls[1] = false;
	put_text(values, nulls, 2, cpu_name());
	blas_config(values, nulls);
	put_text(values, nulls, 10, wals_kernels_name());
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);

	n = usable_gpus(&why);
	if (n == 0)
	{
		memset(nulls, true, sizeof(nulls));
		put_text(values, nulls, 0, "gpu");
		values[1] = BoolGetDatum(false);
		nulls[1] = false;
		put_text(values, nulls, 11, why);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	for (int i = 0; i < n; i++)
	{
		WalsCudaDevice dev;
		char		msg[512];
		bool		ok = cuda.device_info(i, &dev, msg, sizeof(msg)) == 0;

		memset(nulls, true, sizeof(nulls));
		put_text(values, nulls, 0, psprintf("gpu%d", i));
		values[1] = BoolGetDatum(ok);
		nulls[1] = false;
		if (ok)
		{
			put_text(values, nulls, 2, dev.name);
			values[3] = Int64GetDatum((int64) dev.memory_total);
			nulls[3] = false;
			values[4] = Int64GetDatum((int64) dev.memory_free);
			nulls[4] = false;
			put_text(values, nulls, 5, psprintf("%d.%d", dev.cc_major, dev.cc_minor));
			put_text(values, nulls, 6, psprintf("%d.%d", dev.driver_version / 1000,
												 (dev.driver_version % 1000) / 10));
			put_text(values, nulls, 7, psprintf("%d.%d", dev.runtime_version / 1000,
												 (dev.runtime_version % 1000) / 10));
		}
		else
			put_text(values, nulls, 11, msg);
		/* a usable device that 'auto' leaves alone says why */
		if (ok)
			put_text(values, nulls, 11, unchecked_reason(&dev));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
