#!/bin/sh
# The pg_regress suite and the TAP tests through PGXS's own target, `make
# installcheck` (REGRESS, and TAP_TESTS with prove_installcheck), against a
# throwaway cluster from pg_virtualenv.  The extension must be installed.
#
#   ./test/installcheck.sh                          both suites
#   ./test/installcheck.sh REGRESS=edges PROVE_TESTS=test/t/001_cancel.pl
#                                                   make variables, for fewer
#   PG_CONFIG=/var/cache/wals/pg15-cassert/bin/pg_config ./test/installcheck.sh
#                                                   another server's
#   WALS_TAP_JOBS=1 ./test/installcheck.sh          one TAP test at a time
#                                                   (as many as cores by default)
#   WALS_UPGRADE_FROM=/var/cache/wals/pg15-cassert PG_CONFIG=.../pg18-release/bin/pg_config \
#     ./test/installcheck.sh                        t/021_pg_upgrade.pl upgrades
#                                                   from that older installation
#                                                   (wals installed in both)
#
# postgresql-common's pg_virtualenv runs only Debian's own servers; for any
# other (a private prefix of test/pg_build.sh) test/bin/pg_virtualenv stands
# in, with that server's binaries, and the TAP tests find them through
# PGXS, whose prove_installcheck puts PG_CONFIG's bindir first on the PATH.
#
# PostgreSQL refuses to run initdb or a server as root, and the TAP tests
# start clusters of their own, so as root (as `make test` runs) the suites
# run as the "postgres" system user (or $WALS_TEST_USER) from a copy of the
# tree that user owns: the checkout itself may not be readable by it.  The
# copy is removed when both suites pass; when one fails, the differences of
# pg_regress and the end of the failed TAP tests' logs are printed and the
# copy is kept.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. test/lib.sh
version=$PG_MAJOR
virtualenv=$PG_VIRTUALENV
run_user=${WALS_TEST_USER:-postgres}

dir=$root
as_user=""
if [ "$(id -u)" -eq 0 ]; then
	if ! id "$run_user" >/dev/null 2>&1; then
		echo "installcheck.sh: user \"$run_user\" does not exist; set WALS_TEST_USER to an unprivileged user" >&2
		exit 1
	fi
	dir=$(mktemp -d "${TMPDIR:-/tmp}/wals_installcheck.XXXXXX")
	wals_copy_tree "$dir"
	chown -R "$run_user" "$dir"
	as_user="runuser -u $run_user --"
fi

# The host stand-in for the CUDA engine (make gpu-check builds it) drives
# the GPU side of training in t/005_gpu_engine.pl, and the kernels of gpu/
# on the emulated device (make test-gpu-emu builds them) t/011_gpu_emulated.pl.
engine=""
if [ -f "$dir/test/gpu/host_engine.so" ]; then
	engine="$dir/test/gpu/host_engine.so"
fi
emu_engine=""
if [ -f "$dir/test/gpu/wals_cuda_emu.so" ]; then
	emu_engine="$dir/test/gpu/wals_cuda_emu.so"
fi

# As many TAP tests at once as there are cores: one at a time leaves a
# core idle while a test waits (for pg_cron's minute, for a poll, for a
# server to start), 45% of the time on 2 cores; two at once took 311 s
# where one took 450 s, with a core idle 10% of the time.  The Makefile
# lists the longest first.  PROVE_FLAGS given on the command line wins.
tap_jobs=${WALS_TAP_JOBS:-$(nproc 2>/dev/null || echo 1)}

# PostgreSQL::Test::Cluster copies the data directory that INITDB_TEMPLATE
# names where it would run initdb (for a cluster initdb gets no options
# for), from 17 on by itself and on 15 through test/t/InitdbTemplate.pm:
# one initdb for the thirty-odd clusters of the TAP tests.
template=$(mktemp -d "${TMPDIR:-/tmp}/wals_initdb.XXXXXX")

# The TAP clusters run without JIT (TEMP_CONFIG, which Cluster.pm appends
# to each one's postgresql.conf, after the caller's own): on a server built
# with LLVM (Debian's 15) it compiled the big generate_series of the tests'
# set-up, 10 to 15% of that suite's time.  pg_regress keeps the server's
# default, so that wals is still tested under JIT.
{
	[ -z "${TEMP_CONFIG:-}" ] || cat "$TEMP_CONFIG"
	echo "jit = off"
} >"$template/temp.conf"
[ -z "$as_user" ] || chown -R "$run_user" "$template"
$as_user "$("$PG_CONFIG" --bindir)/initdb" -A trust -N -D "$template/data" >/dev/null

cd "$dir"
status=0
# shellcheck disable=SC2086  # $as_user and $virtualenv are word lists
$as_user env WALS_HOST_ENGINE="$engine" WALS_EMU_ENGINE="$emu_engine" \
	WALS_UPGRADE_FROM="${WALS_UPGRADE_FROM:-}" INITDB_TEMPLATE="$template/data" \
	TEMP_CONFIG="$template/temp.conf" \
	PG_CONFIG="$PG_CONFIG" PGVE_LOG="$dir/results/server.log" \
	$virtualenv make -s installcheck PG_CONFIG="$PG_CONFIG" PROVE_FLAGS="-j$tap_jobs" "$@" || status=$?
rm -rf "$template"

# A server that failed an assertion or crashed fails the run even where no
# test noticed (a backend that died after its test had its answer): on the
# assert-enabled server of `make test-cassert` a freed pointer read is such
# a crash.  t/004_parallel.pl kills a worker with signal 9 on purpose.
crash='TRAP: |terminated by signal (4|6|7|8|11):'
for log in results/server.log tmp_check/log/*.log; do
	[ -f "$log" ] || continue
	grep -Eq "$crash" "$log" || continue
	echo
	echo "======== $log: a server process failed ========"
	grep -E -B 3 -A 20 "$crash" "$log" | head -n 80
	status=1
done

if [ "$status" -eq 0 ]; then
	if [ "$dir" != "$root" ]; then
		cd /
		rm -rf "$dir"
	fi
	exit 0
fi

if [ -f regression.diffs ]; then
	cat regression.diffs
fi
for test_log in tmp_check/log/regress_log_*; do
	[ -f "$test_log" ] || continue
	grep -q 'Failed test' "$test_log" || continue
	name=${test_log#tmp_check/log/regress_log_}
	for log in "$test_log" tmp_check/log/"$name"_*.log; do
		[ -f "$log" ] || continue
		echo
		echo "======== $log (last 150 lines) ========"
		tail -n 150 "$log"
	done
done
echo "installcheck.sh: failed; everything is kept in $dir" >&2
exit "$status"
