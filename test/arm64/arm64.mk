# arm64.mk
#	The aarch64 build and unit tests of wals, included by the Makefile
#	(make build-arm64, unit-arm64, test-arm64; part of make test on
#	x86-64).

# aarch64 without an Arm machine: Debian's cross compiler builds wals.so
# (every object with the flags PGXS uses here, against the server headers,
# checked by test/arm64/pg_abi.c) and the unit tests, which run under
# qemu-user twice: every suite on a CPU with every feature qemu knows
# (dotprod, SVE), and on a Cortex-A57, which has no dotprod, the suites
# whose kernels are chosen by it at run time (ARM64_SUITES_cortex-a57: the
# int8 scoring, the one kernel that SDOT changes), with the neon family
# alone (ARM64_ENV_cortex-a57: the generic family is the same code on
# both CPUs, and took half of the A57's minute).  The arm64 serial
# OpenBLAS comes through multiarch.  qemu runs the arm64 loader and C
# library of libc6:arm64 (installed with OpenBLAS), not those of the cross
# sysroot (qemu -L), whose point release may differ.
ARM64_MULTIARCH = aarch64-linux-gnu
ARM64_CC = $(ARM64_MULTIARCH)-gcc
ARM64_BLAS_INC = /usr/include/$(ARM64_MULTIARCH)/openblas-serial
ARM64_BLAS_LIB = /usr/lib/$(ARM64_MULTIARCH)/openblas-serial
ARM64_BLAS_LDFLAGS = -L$(ARM64_BLAS_LIB) -Wl,-rpath,$(ARM64_BLAS_LIB) -lopenblas -lm
ARM64_QEMU = qemu-aarch64
ARM64_QEMU_CPUS = max cortex-a57
ARM64_SUITES_cortex-a57 = score
ARM64_ENV_cortex-a57 = WALS_UNIT_KERNELS=neon
ARM64_DIR = build/arm64
ARM64_OBJS = $(addprefix $(ARM64_DIR)/,$(OBJS))
# PGXS's own flags (its CFLAGS already carry CFLAGS_SL and PG_CFLAGS), less
# any x86 -m option, with the arm64 OpenBLAS headers for the x86 ones.
ARM64_CFLAGS = $(filter-out -m%,$(CFLAGS))
ARM64_CPPFLAGS = $(subst $(BLAS_CFLAGS),-I$(ARM64_BLAS_INC),$(CPPFLAGS))
EXTRA_CLEAN += test/unit/wals_unit_arm64 $(ARM64_DIR)

$(ARM64_DIR)/%.o: %.c $(WALS_HDRS)
	@mkdir -p $(@D)
	$(ARM64_CC) $(ARM64_CFLAGS) $(ARM64_CPPFLAGS) -c -o $@ $<

$(ARM64_DIR)/wals$(DLSUFFIX): $(ARM64_OBJS) $(ARM64_DIR)/test/arm64/pg_abi.o
	$(ARM64_CC) $(ARM64_CFLAGS) -shared -o $@ $(ARM64_OBJS) \
		-Wl,-z,relro -Wl,-z,now -Wl,--as-needed $(ARM64_BLAS_LDFLAGS)

# The unit tests link src/core's objects of wals.so: what they test on
# aarch64 is the code the server runs there, which finds BLAS among the
# libraries loaded (src/core/blas.c); --no-as-needed keeps OpenBLAS among
# the program's needs, though nothing calls it by name.
ARM64_UNIT_OBJS = $(UNIT_SRCS:%.c=$(ARM64_DIR)/%.o)
$(ARM64_UNIT_OBJS): $(ARM64_DIR)/%.o: %.c $(CORE_HDRS) $(wildcard test/unit/*.h)
	@mkdir -p $(@D)
	$(ARM64_CC) -std=c99 -D_POSIX_C_SOURCE=200809L -g $(OPTFLAGS) -Wall -Wextra $(WERROR) \
		-Isrc/core -Itest/unit -I$(ARM64_BLAS_INC) -c -o $@ $<

test/unit/wals_unit_arm64: $(CORE_SRCS:%.c=$(ARM64_DIR)/%.o) $(ARM64_UNIT_OBJS)
	$(ARM64_CC) -g -o $@ $^ -Wl,--no-as-needed $(ARM64_BLAS_LDFLAGS)

.PHONY: deps-arm64 build-arm64 unit-arm64 test-arm64
# After deps: the two must not run apt-get at once under make -j.
deps-arm64: deps
	./test/install_deps.sh --arm64

build-arm64: $(ARM64_DIR)/wals$(DLSUFFIX) test/unit/wals_unit_arm64
	@if $(ARM64_MULTIARCH)-readelf -h $(ARM64_DIR)/wals$(DLSUFFIX) | grep -q AArch64; then \
		echo "wals: built $(ARM64_DIR)/wals$(DLSUFFIX) for AArch64"; \
	else echo "wals: $(ARM64_DIR)/wals$(DLSUFFIX) is not an AArch64 object" >&2; exit 1; fi

# The runs go side by side (one core each); then each prints its output
# and summary, and the last line adds them up.  A run that exits non-zero
# without counting a failure (a crash, qemu missing) counts as one.
unit-arm64: test/unit/wals_unit_arm64
	@mkdir -p $(ARM64_DIR)
	@$(foreach cpu,$(ARM64_QEMU_CPUS), \
		( QEMU_CPU=$(cpu) $(ARM64_ENV_$(cpu)) $(ARM64_QEMU) ./test/unit/wals_unit_arm64 $(ARM64_SUITES_$(cpu)) \
			> $(ARM64_DIR)/unit-$(cpu).log 2>&1; \
		  echo $$? > $(ARM64_DIR)/unit-$(cpu).rc ) & ) \
	wait; \
	passed=0; failed=0; \
	for cpu in $(ARM64_QEMU_CPUS); do \
		echo "wals: unit tests on aarch64 under qemu, cpu $$cpu:"; \
		cat $(ARM64_DIR)/unit-$$cpu.log; rc=$$(cat $(ARM64_DIR)/unit-$$cpu.rc); \
		sum=$$(grep -E '^[0-9]+ passed, [0-9]+ failed$$' $(ARM64_DIR)/unit-$$cpu.log | tail -n 1); \
		p=$${sum%% passed*}; f=$${sum#*passed, }; f=$${f%% failed}; \
		[ -n "$$sum" ] || { p=0; f=0; }; \
		if [ "$$rc" != 0 ] && [ "$$f" -eq 0 ]; then \
			echo "wals: cpu $$cpu: exit status $$rc"; f=1; \
		fi; \
		passed=$$((passed + p)); failed=$$((failed + f)); \
	done; \
	echo "$$passed passed, $$failed failed"; \
	[ $$failed -eq 0 ]

test-arm64: deps-arm64
	$(MAKE) build-arm64
	$(MAKE) unit-arm64
