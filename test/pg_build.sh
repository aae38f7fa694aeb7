#!/bin/sh
# Builds PostgreSQL MAJOR from Debian's source package into a private prefix,
# ${WALS_PG_CACHE:-/var/cache/wals}/pgMAJOR-FLAVOUR, and prints that prefix;
# a prefix whose binaries are there is reused as it is.
#
#   ./test/pg_build.sh 15 cassert    assertions on (CLOBBER_FREED_MEMORY and
#                                    MEMORY_CONTEXT_CHECKING come with them),
#                                    debug symbols, -Og (half the compiler's
#                                    time of -O2; wals itself is built with
#                                    -O2 all the same), the TAP modules for
#                                    PGXS's prove_installcheck, contrib's
#                                    postgres_fdw (t/012_shards.pl), zlib
#                                    (t/003's pg_dump -Fc compresses, as on
#                                    Debian's), no ICU or readline, which no
#                                    test needs: what `make test-cassert`
#                                    runs the suites on
#   ./test/pg_build.sh 18 release    the same without assertions or debug
#                                    symbols, with -O2: what `make test-pg18` runs
#                                    the suites on (`make test-pg17` runs
#                                    them on 17 cassert)
#   ./test/pg_build.sh 15 portable   no optional library (no ICU, readline,
#                                    zlib or LLVM), so that it needs only the
#                                    C library: what test/gpu/lent/prepare.sh
#                                    carries to a machine without PostgreSQL
#
# The majors and the Debian suites whose source packages carry them: 15
# bookworm, 17 trixie, 18 sid.
#
# Only the upstream tarball of the source package is built: Debian's patches
# move the libraries to /usr/lib/postgresql/MAJOR and the sockets to
# /var/run/postgresql, where a private prefix must not reach.  The server is
# installed into a staging folder and renamed into place at the end, so an
# interrupted build leaves nothing that looks complete.  Run as root: it
# installs the build's packages (test/install_deps.sh --pg-build) and, where
# apt has no deb-src line for the major's Debian suite, adds one for the
# archive the machine already uses.
set -eu
# The prefix is the one answer on standard output (pg_test.sh reads it
# through $(...)); everything else, apt's and the build's lines included,
# goes to standard error whatever prints it.
exec 3>&1 >&2
answer() { echo "$1" >&3; }
say() { echo "pg_build.sh: $*"; }

if [ $# -ne 2 ]; then
	say "usage: $0 MAJOR cassert|release|portable"
	exit 2
fi
major=$1
flavour=$2
case $flavour in
cassert)
	configure_opts="--enable-cassert --enable-debug --enable-tap-tests --without-icu --without-readline CFLAGS=-Og"
	minutes=7
	;;
release)
	configure_opts="--enable-tap-tests --without-icu --without-readline"
	minutes=5
	;;
portable)
	configure_opts="--without-icu --without-readline --without-zlib --without-llvm CFLAGS=-O2"
	minutes=5
	;;
*)
	say "unknown flavour \"$flavour\" (cassert, release or portable)"
	exit 2
	;;
esac
case $major in
15) suite=bookworm ;;
17) suite=trixie ;;
18) suite=sid ;;
*)
	say "no Debian suite is known for PostgreSQL $major"
	exit 2
	;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${WALS_PG_CACHE:-/var/cache/wals}
prefix=$cache/pg$major-$flavour
if [ -x "$prefix/bin/postgres" ] && [ -x "$prefix/bin/pg_config" ]; then
	answer "$prefix"
	exit 0
fi

mkdir -p "$cache"
# Two builds of one prefix at once would both rename into it: the second
# waits here, on the cache folder, and then finds the first one's.
exec 9<"$cache"
flock 9
if [ -x "$prefix/bin/postgres" ] && [ -x "$prefix/bin/pg_config" ]; then
	answer "$prefix"
	exit 0
fi

"$root/test/install_deps.sh" --pg-build

# Whether some deb-src stanza of /etc/apt/sources.list.d names the suite.
# The files are awk's arguments, not one stream: a file that does not end
# in a blank line would run its last stanza into the next file's first.
has_deb_src() {
	awk -v suite="$1" '
		BEGIN { RS = "" }
		{
			n = split($0, line, "\n")
			types = ""
			suites = ""
			for (i = 1; i <= n; i++) {
				if (line[i] ~ /^Types:/)
					types = " " substr(line[i], 7) " "
				if (line[i] ~ /^Suites:/)
					suites = " " substr(line[i], 8) " "
			}
			gsub(/[ \t]+/, " ", types)
			gsub(/[ \t]+/, " ", suites)
			if (types ~ / deb-src / && index(suites, " " suite " "))
				found = 1
		}
		END { exit !found }' /etc/apt/sources.list.d/*.sources 2>/dev/null
}
if ! has_deb_src "$suite"; then
	uri=$("$root/test/archive_uri.sh")
	say "adding the source packages of $suite ($uri) to apt"
	cat >"/etc/apt/sources.list.d/wals-$suite-src.sources" <<SRC
Types: deb-src
URIs: $uri
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	apt-get update -qq
fi

say "building PostgreSQL $major ($flavour) from Debian's source into $prefix (about $minutes minutes on 2 cores)"
started=$(date +%s)
work=$(mktemp -d "$cache/build-pg$major-$flavour.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/build.log
# Each step's output goes to the log, shown only when the step fails.
quiet() {
	if ! "$@" >>"$log" 2>&1; then
		tail -n 60 "$log"
		say "failed: $*"
		exit 1
	fi
}
# The source package of the major's own suite, where another suite that apt
# knows may carry the same package at another version.  A mirror's pool may
# lack the version its Sources index names (the index is ahead of the pool,
# or the pool already dropped it): then the previous point releases with
# the same Debian revision (17.11-0+deb13u1 for 17.12-0+deb13u1) are looked
# for in the same pool directory.  Such a .dsc is not covered by the
# archive's signed index, so its own signature is checked against the
# keyrings of Debian's developers and maintainers (debian-keyring), and the
# upstream tarball against the SHA-256 the signed .dsc gives for it.
fetch_source() {
	if apt-get source --download-only "postgresql-$major/$suite" >source.log 2>&1; then
		cat source.log >>"$log"
		return
	fi
	cat source.log >>"$log"
	rm -f postgresql-"$major"_*
	# 'URI' NAME SIZE SHA256:... for each file; the .dsc's names the pool
	# directory and the version.
	uri=$(apt-get source --print-uris -qq "postgresql-$major/$suite" 2>>"$log" |
		awk '$2 ~ /\.dsc$/ { gsub("\047", "", $1); print $1 }')
	dsc=${uri##*/}
	pool=${uri%/*}
	version=${dsc#postgresql-"$major"_}
	version=$(printf '%s' "${version%.dsc}" | sed 's/%2[bB]/+/g')
	upstream=${version%%-*}
	revision=${version#"$upstream"}
	minor=${upstream#"$major".}
	case $minor in
	'' | *[!0-9]*)
		grep -E '^(E|Err):' source.log
		say "apt-get source postgresql-$major/$suite failed, and apt names no version $major.N of it (\"$version\") to look before"
		exit 1
		;;
	esac
	tried=""
	while [ "$minor" -gt 0 ]; do
		minor=$((minor - 1))
		upstream=$major.$minor
		dsc=postgresql-${major}_$upstream$revision.dsc
		tried="$tried $upstream$revision"
		# shellcheck disable=SC2001  # sed: every +, not one
		if /usr/lib/apt/apt-helper download-file "$pool/$(echo "$dsc" | sed 's/+/%2b/g')" "$dsc" >>"$log" 2>&1; then
			break
		fi
		dsc=""
	done
	if [ -z "$dsc" ]; then
		grep -E '^(E|Err):' source.log
		say "apt-get source postgresql-$major/$suite ($version) failed, and $pool has none of$tried"
		exit 1
	fi
	say "postgresql-$major $version, which $suite's index names, is not in $pool: building $upstream$revision from there instead, whose .dsc the archive's signed index does not cover (its signature is checked against debian-keyring, the tarball against its SHA-256)"
	if ! gpgv --keyring /usr/share/keyrings/debian-keyring.gpg \
		--keyring /usr/share/keyrings/debian-maintainers.gpg \
		--output "$dsc.signed" "$dsc" >>"$log" 2>&1; then
		tail -n 20 "$log"
		say "$pool/$dsc: no good signature of a Debian developer or maintainer (debian-keyring); not building it"
		exit 1
	fi
	# Checksums-Sha256's line for the tarball (not its .asc): SHA256 SIZE NAME.
	sum=$(awk -v name="postgresql-${major}_$upstream.orig.tar." '
		/^[^ ]/ { field = $1 }
		field == "Checksums-Sha256:" && index($3, name) == 1 && $3 !~ /\.asc$/ { print $1, $3; exit }
	' "$dsc.signed")
	sha=${sum%% *}
	tarball=${sum#* }
	if [ -z "$sum" ]; then
		say "$pool/$dsc names no upstream tarball in Checksums-Sha256"
		exit 1
	fi
	quiet /usr/lib/apt/apt-helper download-file "$pool/$tarball" "$tarball"
	if ! echo "$sha  $tarball" | sha256sum -c --quiet >>"$log" 2>&1; then
		say "$pool/$tarball does not have the SHA-256 that $dsc gives for it; not building it"
		exit 1
	fi
}
# Run from `make test-cassert`, make's variables would reach this build:
# at a MAKELEVEL above 0 PostgreSQL's makefiles leave its generated headers
# to a top level that is not there.
unset MAKELEVEL MAKEFLAGS MFLAGS
cd "$work"
fetch_source
# The tarball, not its signature (.asc) beside it.
for tarball in postgresql-"$major"_*.orig.tar.*; do
	case $tarball in
	*.asc) ;;
	*) quiet tar -xf "$tarball" ;;
	esac
done
cd postgresql-"$major".*/
# shellcheck disable=SC2086  # $configure_opts is a word list
quiet ./configure --prefix="$prefix" $configure_opts
# Only what the suites use is built and installed, directory by directory
# in the order of src/Makefile (which builds its own one at a time too):
# the server with its conversions, snowball dictionaries and replication
# modules, the timezone data, libpq, PL/pgSQL, the programs that
# test/installcheck.sh, test/bin/pg_virtualenv, the TAP tests and
# PostgreSQL::Test::Cluster run (initdb, pg_ctl, psql, pg_dump with
# pg_restore and pg_dumpall, createdb and vacuumdb of src/bin/scripts,
# pg_basebackup for t/010_hostile.pl's standby, pg_upgrade with the
# pg_controldata and pg_resetwal it asks for, pg_config), and what PGXS
# reads: the headers, its makefiles, pg_regress and the TAP modules.  Not
# ecpg, pgbench, pg_rewind, pg_waldump or the other programs no test runs,
# nor the isolation tester.
dirs="src/common src/port src/timezone src/backend
	src/backend/utils/mb/conversion_procs src/backend/snowball src/include
	src/interfaces/libpq src/backend/replication/libpqwalreceiver
	src/backend/replication/pgoutput src/fe_utils src/bin/initdb
	src/bin/pg_ctl src/bin/psql src/bin/pg_dump src/bin/scripts
	src/bin/pg_basebackup src/bin/pg_upgrade src/bin/pg_controldata
	src/bin/pg_resetwal src/bin/pg_config src/pl/plpgsql src/makefiles
	src/test/regress"
if [ "$flavour" != portable ]; then
	dirs="$dirs src/test/perl contrib/postgres_fdw"
fi
for dir in $dirs; do
	quiet make -C "$dir" -j"$(nproc)"
done
stage=$work/stage
for dir in $dirs; do
	quiet make -C "$dir" install DESTDIR="$stage"
done
# PGXS's Makefile.global and its kin, and config/'s install-sh and missing.
quiet make -C src install-local DESTDIR="$stage"
quiet make -C config install DESTDIR="$stage"
rm -rf "$prefix"
mv "$stage$prefix" "$prefix"
say "built $("$prefix/bin/pg_config" --version) into $prefix in $(( ($(date +%s) - started + 30) / 60 )) minutes"
answer "$prefix"
