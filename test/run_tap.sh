#!/bin/sh
# Run the TAP tests of wals (test/t/*.pl) against the installed extension,
# the way PGXS's prove_installcheck does.
#
#   ./test/run_tap.sh                  all of test/t/*.pl
#   ./test/run_tap.sh 001_cancel.pl    only the tests named
#
# PostgreSQL::Test::Cluster refuses to run initdb as root, so when started as
# root (as `make test` does) the tests run as the "postgres" system user (or
# $WALS_TAP_USER), from a temporary directory that user owns and into which
# test/t is copied: the checkout itself may not be readable by that user.
# The temporary directory is removed when every test passes (unless
# WALS_TAP_KEEP is set); when one fails the end of its logs (tmp_check/log)
# is printed and the directory is kept.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
run_user=${WALS_TAP_USER:-postgres}

# The Perl module IPC::Run (Debian's libipc-run-perl) drives psql and the
# server from the tests.
if ! perl -MIPC::Run -e 1 2>/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "run_tap.sh: the Perl module IPC::Run is missing: install libipc-run-perl (as root)" >&2
		exit 1
	fi
	echo "run_tap.sh: installing libipc-run-perl"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libipc-run-perl
fi

bindir=$("$PG_CONFIG" --bindir)
pkglibdir=$("$PG_CONFIG" --pkglibdir)
perl_lib="$pkglibdir/pgxs/src/test/perl"
pg_regress="$pkglibdir/pgxs/src/test/regress/pg_regress"
for f in "$perl_lib/PostgreSQL/Test/Cluster.pm" "$pg_regress" "$bindir/initdb"; do
	if [ ! -e "$f" ]; then
		echo "run_tap.sh: $f not found (is postgresql-server-dev-15 installed?)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/wals_tap.XXXXXX")
cp -R "$here/t" "$tmp/t"
# The host stand-in for the CUDA engine (make gpu-check builds it), copied
# where the server's user can read it.
engine=""
if [ -f "$here/gpu/host_engine.so" ]; then
	cp "$here/gpu/host_engine.so" "$tmp/host_engine.so"
	engine="$tmp/host_engine.so"
fi
if [ "$(id -u)" -eq 0 ]; then
	if ! id "$run_user" >/dev/null 2>&1; then
		echo "run_tap.sh: user \"$run_user\" does not exist; set WALS_TAP_USER to an unprivileged user" >&2
		exit 1
	fi
	chown -R "$run_user" "$tmp"
	as_user="runuser -u $run_user --"
else
	as_user=""
fi

if [ $# -gt 0 ]; then
	tests=""
	for t in "$@"; do
		tests="$tests t/$(basename "$t")"
	done
else
	tests=$(cd "$tmp" && ls t/*.pl)
fi

cd "$tmp"
set +e
# shellcheck disable=SC2086  # $as_user and $tests are word lists
$as_user env PATH="$bindir:$PATH" HOME="$tmp" TESTDIR="$tmp" PG_REGRESS="$pg_regress" \
	WALS_HOST_ENGINE="$engine" \
	prove -I "$perl_lib" $tests 2>&1 | tee "$tmp/prove.out"
status=$(sed -n 's/^Result: //p' "$tmp/prove.out")
set -e

if [ "$status" = "PASS" ] && [ -z "${WALS_TAP_KEEP:-}" ]; then
	cd /
	rm -rf "$tmp"
	exit 0
fi

if [ "$status" = "PASS" ]; then
	echo "run_tap.sh: logs kept in $tmp/tmp_check/log (WALS_TAP_KEEP is set)"
	exit 0
fi

# Print the logs of the tests that failed: prove names them in its summary
# ("t/001_cancel.pl (Wstat: ...)"); with no summary, print them all.
failed=$(sed -n 's|^\(t/[^ ]*\.pl\) .*(Wstat.*|\1|p' "$tmp/prove.out")
[ -n "$failed" ] || failed=$tests
for t in $failed; do
	name=$(basename "$t" .pl)
	for log in "$tmp/tmp_check/log/regress_log_$name" "$tmp/tmp_check/log/${name}"_*.log; do
		[ -f "$log" ] || continue
		echo
		echo "======== $log (last 150 lines) ========"
		tail -n 150 "$log"
	done
done
echo
echo "run_tap.sh: TAP tests failed; full logs kept in $tmp/tmp_check/log" >&2
exit 1
