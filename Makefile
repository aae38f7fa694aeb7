# wals: Weighted Alternating Least Squares inside PostgreSQL (PGXS build).
#
#   make demo    install what is needed, build, install, train a sample model
#   make test    unit tests of src/core, the kernels of gpu/ on an emulated
#                device, on x86-64 the aarch64 build and unit tests
#                (test-arm64), then pg_regress and TAP (and gpu/ on a GPU
#                with nvcc)
#   make test-cassert  pg_regress and TAP on PostgreSQL 15 built with
#                assertions, in a private prefix built the first time
#   make unit    only the unit tests of src/core (no server)
#   make deb     the Debian package postgresql-15-wals, into build/deb/
#   make test-deb  install that package on this machine, try it, remove it
#
# PG_CONFIG=<path> builds and tests against another server: every target,
# and every script a target runs, uses that pg_config.  Packages are
# installed only by test/install_deps.sh, which the targets that need them
# call (as root on Debian).

EXTENSION = wals
# The version of the release, stated here only: the library is compiled
# with it (WALS_VERSION), and test/version_check.sh (make version-check,
# part of make test) holds wals.control, META.json, debian/changelog,
# CHANGELOG.md, README and the update scripts to it.
EXTVERSION = 0.7.0

MODULE_big = wals
# src/core: the algorithms, pure C with no server (kernels/: the SIMD
# kernel families; score/: top-k scoring); src/catalog, src/train
# and src/serve: the server's side, one header each (wals_*.h), over the
# shared src/wals.h; src/train/shard: the sharded training, inside training.
CORE_SRCS = $(sort $(wildcard src/core/*.c src/core/kernels/*.c src/core/score/*.c))
CORE_OBJS = $(CORE_SRCS:.c=.o)
SUBSYSTEMS = catalog train train/shard serve
OBJS = $(CORE_OBJS) $(patsubst %.c,%.o,$(sort $(wildcard src/*.c $(SUBSYSTEMS:%=src/%/*.c))))
HEADERS_wals =

# The base script and every update from it: a new installation runs
# wals--0.1.0.sql and then each update script in turn, so an upgraded
# database and a fresh one get the same objects.
DATA = sql/wals--0.1.0.sql $(wildcard sql/wals--*--*.sql)
# The pg_regress suite: test/sql/*.sql against test/expected/*.out.
REGRESS = $(sort $(basename $(notdir $(wildcard test/sql/*.sql))))
REGRESS_OPTS = --inputdir=test --load-extension=wals
# The TAP tests, test/t/*.pl, through PGXS's prove_installcheck: `make
# installcheck` runs both suites (test/installcheck.sh gives them a
# throwaway server, and a user other than root).
TAP_TESTS = 1
# The longest first, so that the last to end is a short one when
# test/installcheck.sh runs them side by side; with them the two that wait
# for pg_cron's next minute (up to 60 s), so that the wait is spent beside
# another test's work rather than at the end.
TAP_SLOWEST = test/t/010_hostile.pl test/t/012_shards.pl test/t/017_recipes.pl \
	test/t/009_cron.pl test/t/011_gpu_emulated.pl test/t/016_reentry.pl \
	test/t/021_pg_upgrade.pl test/t/001_cancel.pl test/t/023_cancel_wide.pl \
	test/t/019_dump_schema.pl test/t/003_dump_restore.pl test/t/005_gpu_engine.pl
PROVE_TESTS = $(TAP_SLOWEST) $(filter-out $(TAP_SLOWEST),$(sort $(wildcard test/t/*.pl)))
EXTRA_CLEAN = test/unit/wals_unit test/bench/solver_bench test/bench/score_bench test/bench/csr_bench test/bench/poll_bench test/gpu/check_train test/gpu/host_engine.so test/gpu/wals_cuda_emu.so gpu/wals_cuda.so results regression.diffs regression.out

MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
# OpenBLAS, which carries LAPACK (spotrf_, spotrs_) as well, found through
# pkg-config.  On Debian, the serial variant: one thread per process, so
# parallel workers never oversubscribe the cores.  Its own openblas.pc is
# asked before the one Debian's alternatives give `pkg-config openblas` for
# other programs, after any in PKG_CONFIG_PATH (an OpenBLAS of your own,
# built with USE_THREAD=0 for the same reason); elsewhere, whatever
# openblas.pc pkg-config finds; where pkg-config knows none, Debian's
# paths.  wals.so gets a run path to the library's folder, so that it loads
# the OpenBLAS it was built with.  BLAS_CFLAGS and BLAS_LDFLAGS on the
# command line override all this.
PKG_CONFIG ?= pkg-config
comma = ,
BLAS_SERIAL_PC = /usr/lib/$(MULTIARCH)/openblas-serial/pkgconfig
BLAS_PC = $(if $(wildcard $(BLAS_SERIAL_PC)/openblas.pc),PKG_CONFIG_PATH=$(if $(PKG_CONFIG_PATH),$(PKG_CONFIG_PATH):)$(BLAS_SERIAL_PC)) $(PKG_CONFIG)
BLAS_PC_LIBS := $(patsubst %/,%,$(shell $(BLAS_PC) --libs openblas 2>/dev/null))
ifneq ($(BLAS_PC_LIBS),)
BLAS_PC_CFLAGS := $(patsubst %/,%,$(shell $(BLAS_PC) --cflags openblas 2>/dev/null))
BLAS_CFLAGS ?= $(BLAS_PC_CFLAGS)
BLAS_LDFLAGS ?= $(BLAS_PC_LIBS) $(patsubst -L%,-Wl$(comma)-rpath$(comma)%,$(filter -L%,$(BLAS_PC_LIBS))) -lm
else
BLAS_CFLAGS ?= -I/usr/include/$(MULTIARCH)/openblas-serial
BLAS_LDFLAGS ?= -L/usr/lib/$(MULTIARCH)/openblas-serial -Wl,-rpath,/usr/lib/$(MULTIARCH)/openblas-serial -lopenblas -lm
endif

# Warnings stop the build only under `make test` (and so in CI), which sets
# WERROR: a user's newer compiler may warn where ours does not.
WERROR ?=
WARNFLAGS = -Wall -Wextra $(WERROR) -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers
OPTFLAGS = -O2
PG_CPPFLAGS = -I$(srcdir)/src -I$(srcdir)/src/core $(SUBSYSTEMS:%=-I$(srcdir)/src/%) -I$(srcdir)/gpu $(BLAS_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -DWALS_VERSION=\"$(EXTVERSION)\"
PG_CFLAGS = $(WARNFLAGS) $(OPTFLAGS)
# libpq: a sharded training calls its shards on postgres_fdw's connections,
# or on its own to the nodes of a Citus distributed table.  -Bsymbolic:
# wals.so's calls of its own functions bind within it, so that at LOAD the
# dynamic linker looks up only the symbols it takes from elsewhere (a new
# backend's LOAD 'wals' took 1.75 ms, 1.45 with it, on the Xeon).
SHLIB_LINK = -lpq -Wl,-Bsymbolic

PG_CONFIG ?= pg_config
# The scripts the targets run (test/installcheck.sh, test/demo.sh, the
# benchmarks) read it from the environment.
export PG_CONFIG
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# Without PGXS only the targets that install it first (deps, demo, test and
# the benchmarks run test/install_deps.sh, then make again) can go on;
# anything else would build a partial tree or install to the wrong place.
BOOTSTRAP_GOALS = deps deps-arm64 deps-bench deps-deb deb test-deb demo test test-arm64 test-cassert bench bench-serve bench-gpu bench-accel bench-evaluate bench-shared bench-validation bench-negative bench-tune bench-shards bench-shard-load bench-refresh bench-refresh-quality bench-catalog bench-scale test-citus test-pg17 test-pg18 ci-fresh
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
# Every TAP test copies test/installcheck.sh's initdb template, on 15 too
# (test/t/InitdbTemplate.pm).
PROVE := PERL5LIB='$(abspath $(srcdir)/test/t)'$${PERL5LIB:+:$$PERL5LIB} PERL5OPT=-MInitdbTemplate $(PROVE)
else ifneq ($(filter-out $(BOOTSTRAP_GOALS),$(or $(MAKECMDGOALS),all)),)
$(error wals: PGXS not found: "$(PG_CONFIG) --pgxs" gave nothing. Install postgresql-server-dev-15 (make deps does, as root) or set PG_CONFIG to the pg_config of your server)
endif

# The CUDA engine, gpu/wals_cuda.so, is built and installed beside wals.so
# when nvcc is found; wals.so opens it at run time and never links CUDA.
# The runtime is linked statically; cuBLAS, which CUDA ships only as a
# shared library, is found through the library's run path.
NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_LIB = $(abspath $(dir $(NVCC))../lib64)
# Native code for Hopper, and PTX that newer devices compile at load.
NVCC_ARCH = -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
GPU_SRCS = gpu/device.cu gpu/train.cu gpu/cg.cu gpu/loss.cu gpu/vectors.cu gpu/cholesky.cu
ifneq ($(NVCC),)
GPU_LIB = gpu/wals_cuda$(DLSUFFIX)
all: $(GPU_LIB)
$(GPU_LIB): $(GPU_SRCS) gpu/wals_cuda.h gpu/engine.h gpu/kernels.h
	$(NVCC) -O2 $(NVCC_ARCH) -Xcompiler -fPIC,-fvisibility=hidden -shared -Igpu -o $@ $(GPU_SRCS) \
		-L$(CUDA_LIB) -Xlinker -rpath,$(CUDA_LIB) -lcublas -lcusolver
install: install-gpu
.PHONY: install-gpu
install-gpu: $(GPU_LIB)
	$(INSTALL_SHLIB) $(GPU_LIB) '$(DESTDIR)$(pkglibdir)/wals_cuda$(DLSUFFIX)'
else
all: no-gpu
.PHONY: no-gpu
no-gpu:
	@echo "wals: nvcc not found: building without the CUDA engine (gpu/wals_cuda$(DLSUFFIX))"
endif

# wals.so is not linked to OpenBLAS, whose fifteen thousand symbols would
# cost every backend that loads wals milliseconds to resolve: the module
# wals_blas, linked to it and to nothing of wals, is loaded where the core
# first needs BLAS (src/core/blas.c).  --no-as-needed keeps OpenBLAS among
# its needs although it calls nothing of it.
BLAS_MODULE = src/blas/wals_blas$(DLSUFFIX)
all: $(BLAS_MODULE)
$(BLAS_MODULE): src/blas/wals_blas.o
	$(CC) $(CFLAGS) -shared -o $@ $< $(LDFLAGS) $(LDFLAGS_SL) -Wl,--no-as-needed $(BLAS_LDFLAGS)
install: install-blas
.PHONY: install-blas
install-blas: $(BLAS_MODULE)
	$(INSTALL_SHLIB) $(BLAS_MODULE) '$(DESTDIR)$(pkglibdir)/wals_blas$(DLSUFFIX)'
uninstall: uninstall-blas
.PHONY: uninstall-blas
uninstall-blas:
	rm -f '$(DESTDIR)$(pkglibdir)/wals_blas$(DLSUFFIX)'
EXTRA_CLEAN += src/blas/wals_blas.o $(BLAS_MODULE)

# The portable kernels pass 32-byte vectors between functions compiled for
# the same instruction set; clang warns about the ABI when it emits the
# bitcode for JIT inlining, which has no bearing on how they are called.
src/core/kernels/kernels_generic.bc: BITCODE_CFLAGS += -Wno-psabi

# PGXS tracks no header dependencies: rebuild every object when a shared
# header changes, or a stale object would read structs of the old layout.
WALS_HDRS = $(wildcard src/*.h src/*/*.h gpu/*.h)
$(OBJS): $(WALS_HDRS)
# Nor does it know that WALS_VERSION comes from EXTVERSION: the objects
# that use it are rebuilt when the Makefile changes.
$(patsubst %.c,%.o,$(shell grep -l WALS_VERSION $(OBJS:.o=.c) 2>/dev/null)): Makefile

CORE_HDRS = $(wildcard src/core/*.h src/core/kernels/*.h src/core/score/*.h)
UNIT_SRCS = $(sort $(wildcard test/unit/*.c))

# The programs built from src/core without the server: its unit tests, its
# benchmarks and the GPU checks, in C99 with the same warnings.
HOST_CC = $(CC) -std=c99 -D_POSIX_C_SOURCE=200809L -DWALS_BLAS_LINKED -g $(OPTFLAGS) -Wall \
	-Wextra $(WERROR) -Isrc/core -Igpu -Itest/unit $(BLAS_CFLAGS)

# Each source is compiled once, into build/host, for every program that
# links it: position-independent for host_engine.so, and hidden, so that
# host_engine.so exports only the table it is loaded for.
HOST_DIR = build/host
HOST_CORE_OBJS = $(CORE_SRCS:%.c=$(HOST_DIR)/%.o)
HOST_HDRS = $(CORE_HDRS) $(wildcard test/unit/*.h test/gpu/*.h test/bench/*.h) gpu/wals_cuda.h
EXTRA_CLEAN += $(HOST_DIR)

$(HOST_DIR)/%.o: %.c $(HOST_HDRS)
	@mkdir -p $(@D)
	$(HOST_CC) $(HOST_OBJ_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

test/unit/wals_unit: $(HOST_CORE_OBJS) $(UNIT_SRCS:%.c=$(HOST_DIR)/%.o)
	$(HOST_CC) -o $@ $^ $(BLAS_LDFLAGS)

# The benchmarks of src/core, no server:
#   solver_bench: seconds per iteration of the solvers on synthetic data,
#     ./test/bench/solver_bench [users items nnz f cg|cholesky|subspace steps|block_size iterations kernels]
#   score_bench: microseconds per top-k query and batch throughput of the
#     scoring engine on synthetic item factors,
#     ./test/bench/score_bench [items f k queries users]
#   csr_bench: seconds of each pass of the matrix build, one level against
#     two, on synthetic ratings,
#     ./test/bench/csr_bench [users items draws sorted|user|random huge|4k reps]
#   poll_bench: the longest stretch between two polls for a cancel of each
#     operation whose work grows as f^2 or f^3, and the Gram in pieces
#     against one ssyrk, ./test/bench/poll_bench [f ...]
BENCH_PROGS = test/bench/solver_bench test/bench/score_bench test/bench/csr_bench \
	test/bench/poll_bench
$(BENCH_PROGS): test/bench/%: $(HOST_DIR)/test/bench/%.o $(HOST_CORE_OBJS)
	$(HOST_CC) -o $@ $^ $(BLAS_LDFLAGS)

solver-bench: test/bench/solver_bench
score-bench: test/bench/score_bench
csr-bench: test/bench/csr_bench
poll-bench: test/bench/poll_bench

# The GPU engine against src/core; it skips, saying why, where the engine
# was not built or the machine has no GPU (no device, no driver), and fails
# where CUDA is there but broken (a driver too old, a library that does not
# load).
test/gpu/check_train: $(HOST_DIR)/test/gpu/check_train.o $(HOST_DIR)/test/gpu/check_emu.o \
		$(HOST_CORE_OBJS)
	$(HOST_CC) -o $@ $^ $(BLAS_LDFLAGS) -ldl

# The table of gpu/wals_cuda.h filled by src/core on the host: the TAP tests
# drive the server's side of GPU training with it where no GPU exists, and
# check_train runs against it to show that the checker catches nothing amiss
# in an engine that is right by construction.
$(HOST_DIR)/test/gpu/host_engine.o: HOST_OBJ_CFLAGS = -Wno-unused-parameter
test/gpu/host_engine$(DLSUFFIX): $(HOST_DIR)/test/gpu/host_engine.o $(HOST_CORE_OBJS)
	$(HOST_CC) -shared -o $@ $^ $(BLAS_LDFLAGS)

# The sources of gpu/ compiled by the host's C++ compiler against an
# emulated device (test/gpu/emu): every kernel runs on the CPU, thread by
# thread, with the same table as wals_cuda.so, so that check_train holds
# them to src/core, and injects faults, without a GPU or nvcc.
EMU_LIB = test/gpu/wals_cuda_emu$(DLSUFFIX)
$(EMU_LIB): $(GPU_SRCS) gpu/wals_cuda.h gpu/engine.h gpu/kernels.h $(wildcard test/gpu/emu/*)
	$(CXX) -std=c++17 -g -O2 -Wall -Wextra -Wno-sign-compare $(WERROR) -fPIC -fvisibility=hidden \
		-shared -Itest/gpu/emu -Igpu $(BLAS_CFLAGS) -o $@ -x c++ $(GPU_SRCS) -x none \
		test/gpu/emu/emu.cc $(BLAS_LDFLAGS)

.PHONY: unit sql-texts version-check names-check scripts-check gpu-check test-gpu-emu deps demo test bench solver-bench score-bench csr-bench poll-bench
gpu-check: test/gpu/check_train test/gpu/host_engine$(DLSUFFIX)
	./test/gpu/check_train $(abspath test/gpu/host_engine$(DLSUFFIX))
	./test/gpu/check_train $(abspath gpu/wals_cuda$(DLSUFFIX))

test-gpu-emu: test/gpu/check_train $(EMU_LIB)
	./test/gpu/check_train $(abspath $(EMU_LIB))

unit: test/unit/wals_unit
	./test/unit/wals_unit

# Every SQL text of src/ independent of the caller's search_path, and SPI
# called only through src/catalog/spi.c, which pins it.
sql-texts:
	perl test/sql_texts.pl src

# The one version number, EXTVERSION, stated alike everywhere else.
version-check:
	./test/version_check.sh

# Every link of README.md, DEVELOPERS.md and doc/ leads to a file and a
# heading that exist, and every file a comment or document names exists.
names-check:
	perl test/names_check.pl

# The helpers another script reads through $(...) answer alone on standard
# output, on a machine still missing their packages (apt stood in for).
scripts-check:
	./test/scripts_check.sh

deps:
	./test/install_deps.sh

demo: deps
	$(MAKE) all
	$(MAKE) install
	./test/demo.sh

# Everything is built first, on every core; then the checks that need no
# server run side by side, each printing its output whole when it ends
# (--output-sync), and the suites that need one come last.  On x86-64 the
# aarch64 build and unit tests (test-arm64) are among the first.
NPROC := $(shell nproc 2>/dev/null || echo 1)
TEST_PROGRAMS = test/unit/wals_unit test/gpu/check_train test/gpu/host_engine$(DLSUFFIX) $(EMU_LIB)
TEST_CHECKS = unit sql-texts version-check names-check scripts-check gpu-check test-gpu-emu
ifeq ($(MULTIARCH),x86_64-linux-gnu)
TEST_DEPS = deps-arm64
TEST_PROGRAMS += $(ARM64_DIR)/wals$(DLSUFFIX) test/unit/wals_unit_arm64
TEST_CHECKS += build-arm64 unit-arm64
else
TEST_DEPS = deps
endif

# wals.so is built and installed here without the LLVM bitcode that PGXS
# adds where the server has JIT (Debian's 15 does): clang compiling every
# source a second time doubled the build (67 s against 33 s on two cores),
# and no test reads it.  `make install` and the package (make deb) build
# and ship it; the bitcode of an earlier install is removed first, so that
# JIT never inlines another build's code into this one's.
#
# The suites run in a make started once the packages are in: on a new
# machine this one read the Makefile before make deps installed PGXS, and
# so has none of its variables (DLSUFFIX, bitcodedir).
test: $(TEST_DEPS)
	$(MAKE) test-run

.PHONY: test-run
test-run:
	$(MAKE) -j$(NPROC) all $(TEST_PROGRAMS) WERROR=-Werror with_llvm=no
	rm -rf '$(DESTDIR)$(bitcodedir)/$(MODULE_big)' '$(DESTDIR)$(bitcodedir)/$(MODULE_big).index.bc'
	$(MAKE) install with_llvm=no
	$(MAKE) -j$(NPROC) --output-sync=target $(TEST_CHECKS) WERROR=-Werror
	./test/installcheck.sh

# pg_regress and every TAP test on PostgreSQL 15 built from Debian's source
# with assertions (CLOBBER_FREED_MEMORY and MEMORY_CONTEXT_CHECKING with
# them), so that a freed pointer that a test reads crashes the server.  The
# server goes into a private prefix under /var/cache/wals (test/pg_build.sh),
# built by the first run and reused after; wals is built against it in a
# copy of the tree (test/pg_test.sh), leaving this one's objects to Debian's
# server.
.PHONY: test-cassert
test-cassert: deps
	./test/pg_test.sh 15 cassert

# The same on the later majors wals supports, each from the source package
# of the Debian suite that carries it (test/pg_build.sh): 17 with
# assertions, 18 without, built as PostgreSQL's releases are.  What differs
# between the majors is in src/pg_compat.h.
.PHONY: test-pg17 test-pg18 test-citus
test-pg17: deps
	./test/pg_test.sh 17 cassert

test-pg18: deps
	./test/pg_test.sh 18 release

# Citus from a source tree of your own (CITUS_SRC), built once into the
# servers' cache; .ci/run runs it from that cache where a build is there,
# its machines having no Citus package and no network to fetch one.
test-citus: deps
	$(MAKE) install
	CITUS_SRC='$(CITUS_SRC)' ./test/citus_test.sh

# .ci/run from a clean clone of HEAD inside a new Debian 12 root made by
# debootstrap (gcc, make and git in it, nothing else of this machine's but
# /usr/local/cuda where there is one), with an empty server cache: what CI
# does on a machine that has never run it, each step timed
# (test/ci_fresh.sh).  As root; the root is left in /var/tmp/wals-ci-fresh.
.PHONY: ci-fresh
ci-fresh:
	./test/install_deps.sh --ci-fresh
	./test/ci_fresh.sh

# The aarch64 build and its unit tests under qemu.
include test/arm64/arm64.mk

# numpy and scipy for the benchmarks' data and scores, gnuplot for their
# plots; after deps, so that the two never run apt-get at once.
.PHONY: deps-bench
deps-bench: deps
	./test/install_deps.sh --bench

bench: deps-bench
	$(MAKE) all
	$(MAKE) install
	./test/bench/quality.sh
	./test/bench/train.sh
	./test/bench/serve.sh

# The benchmarks: each builds and installs the extension, then runs the
# script of test/bench/ named for it (or BENCH_SCRIPT_ of its name, where
# the two differ):
#   bench-serve            serving alone: latency, throughput, the batch and
#                          the plain-SQL agreement at MovieLens-20M size, with
#                          pgvector beside it where installed
#   bench-gpu              the GPU against 2 CPU cores from 100k to 20M
#                          ratings; without a usable GPU it says why and stops
#   bench-evaluate         wals_evaluate's milliseconds per test user at 41,000
#                          items, f = 128, with 0, 1 and 2 parallel workers
#   bench-shared           a new backend's first call, a serving backend's
#                          memory and the slowest call while a retraining
#                          commits, with the items shared by every backend and
#                          without
#   bench-validation       the seconds of an iteration with a validation share
#                          against one without (RATINGS, VALIDATION_WORKERS,
#                          VALIDATION_FACTORS, VALIDATION_ITERATIONS)
#   bench-negative         dislikes (negative implicit ratings) against
#                          ref_wals.py on a small set, from the same starting
#                          factors: the loss of each iteration and the final
#                          factors, relative differences
#   bench-tune             held-out quality of the defaults against wals_tune
#                          (TUNE_BUDGET, TUNE_METRIC, TUNE_SET, or RATINGS and
#                          TEST: CSVs of your own)
#   bench-accel            plain ALS-CG against ALS-NCG and the subspace
#                          solver, to the loss of 15 CG iterations, on the 5M
#                          and 20M sets (ACCEL_SETS, ACCEL_FACTORS)
#   bench-refresh          wals_refresh against a full wals_retrain on the 20M
#                          set's 15.5M ratings, with 1% and 0.1% of them new
#                          (REFRESH_FRACTIONS), and wals_refresh_items on 100
#                          items
#   bench-refresh-quality  a model kept fresh by wals_refresh against one
#                          retrained, on ratings replayed in time order:
#                          MovieLens 100K's u.data where ML100K names it, a
#                          synthetic set with synthetic times otherwise
#   bench-catalog          exact serving over 10,000,000 items at f = 64
#                          (CATALOG_ITEMS, CATALOG_FACTORS): warm calls, new
#                          connections' first, agreement with plain SQL
#   bench-scale            a training of 100,000,000 ratings made in SQL
#                          (SCALE_RATINGS, SCALE_WORKERS): seconds to read,
#                          build, iterate and store, bytes a rating
#   bench-shards           one server against 1, 2 and 3 local shards
#                          (postgres_fdw partitions by user) on the 20M set:
#                          seconds per iteration, bytes moved, memory per shard;
#                          and Citus on 1, 2 and 3 worker nodes, where the
#                          server has Citus (make test-citus CITUS_SRC=...)
BENCHES = bench-serve bench-gpu bench-evaluate bench-shared bench-validation bench-negative \
	bench-tune bench-accel bench-refresh bench-refresh-quality bench-shards bench-catalog \
	bench-scale
BENCH_SCRIPT_negative = negative_ref
BENCH_SCRIPT_refresh-quality = refresh_quality

.PHONY: $(BENCHES)
$(BENCHES): bench-%: deps-bench
	$(MAKE) all
	$(MAKE) install
	./test/bench/$(or $(BENCH_SCRIPT_$*),$*).sh

# The ratings of a sharded source loaded straight into two postgres_fdw
# shards (the recipe of examples/postgres_fdw) against through the
# coordinator's partitioned table: seconds of each way.  No wals needed.
.PHONY: bench-shard-load
bench-shard-load: deps
	./test/bench/shard_load.sh

# The Debian package, postgresql-15-wals (and one per other server version
# whose postgresql-server-dev-N is installed): debian/ built by
# dpkg-buildpackage and pg_buildext in a copy of the tree, so that this one
# stays as it is; the .deb files land in build/deb/ (test/deb_build.sh).
# Debian's servers only: pg_buildext uses each version's own pg_config.
.PHONY: deps-deb deb test-deb
deps-deb:
	./test/install_deps.sh --deb

deb: deps-deb
	./test/deb_build.sh

# The package installed on this machine (dpkg -i, as root), the extension
# created in a throwaway cluster, a model trained and served, the package
# removed and the files it replaced put back (test/deb_test.sh).
test-deb: deb
	./test/deb_test.sh
