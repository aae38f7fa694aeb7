#!/bin/sh
# Builds PostgreSQL MAJOR from Debian's source package into a private prefix,
# ${WALS_PG_CACHE:-/var/cache/wals}/pgMAJOR-FLAVOUR, and prints that prefix;
# a prefix whose binaries are there is reused as it is.
#
#   ./test/pg_build.sh 15 cassert    assertions on (CLOBBER_FREED_MEMORY and
#                                    MEMORY_CONTEXT_CHECKING come with them),
#                                    debug symbols, the TAP modules for PGXS's
#                                    prove_installcheck, contrib's
#                                    postgres_fdw (t/012_shards.pl), zlib
#                                    (t/003's pg_dump -Fc compresses, as on
#                                    Debian's), no ICU or readline, which no
#                                    test needs: what `make test-cassert`
#                                    runs the suites on
#   ./test/pg_build.sh 18 release    the same without assertions or debug
#                                    symbols: what `make test-pg18` runs
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
say() { echo "pg_build.sh: $*" >&2; }

if [ $# -ne 2 ]; then
	say "usage: $0 MAJOR cassert|release|portable"
	exit 2
fi
major=$1
flavour=$2
case $flavour in
cassert)
	configure_opts="--enable-cassert --enable-debug --enable-tap-tests --without-icu --without-readline"
	minutes=10
	;;
release)
	configure_opts="--enable-tap-tests --without-icu --without-readline"
	minutes=10
	;;
portable)
	configure_opts="--without-icu --without-readline --without-zlib --without-llvm CFLAGS=-O2"
	minutes=8
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
	echo "$prefix"
	exit 0
fi

mkdir -p "$cache"
# Two builds of one prefix at once would both rename into it: the second
# waits here, on the cache folder, and then finds the first one's.
exec 9<"$cache"
flock 9
if [ -x "$prefix/bin/postgres" ] && [ -x "$prefix/bin/pg_config" ]; then
	echo "$prefix"
	exit 0
fi

"$root/test/install_deps.sh" --pg-build

# Whether some deb-src stanza of /etc/apt/sources.list.d names the suite.
has_deb_src() {
	cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v suite="$1" '
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
		END { exit !found }'
}
# The URI of the Debian archive the machine installs its own release from.
archive_uri() {
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v suite="$codename" '
		BEGIN { RS = "" }
		{
			n = split($0, line, "\n")
			uris = ""
			suites = ""
			for (i = 1; i <= n; i++) {
				if (line[i] ~ /^URIs:/)
					uris = substr(line[i], 6)
				if (line[i] ~ /^Suites:/)
					suites = " " substr(line[i], 8) " "
			}
			gsub(/[ \t]+/, " ", suites)
			if (index(suites, " " suite " ")) {
				split(uris, uri, " ")
				print uri[1]
				exit
			}
		}'
}
if ! has_deb_src "$suite"; then
	uri=$(archive_uri)
	uri=${uri:-http://deb.debian.org/debian}
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
work=$(mktemp -d "$cache/build-pg$major-$flavour.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/build.log
# Each step's output goes to the log, shown only when the step fails.
quiet() {
	if ! "$@" >>"$log" 2>&1; then
		tail -n 60 "$log" >&2
		say "failed: $*"
		exit 1
	fi
}
# Run from `make test-cassert`, make's variables would reach this build:
# at a MAKELEVEL above 0 PostgreSQL's makefiles leave its generated headers
# to a top level that is not there.
unset MAKELEVEL MAKEFLAGS MFLAGS
cd "$work"
# From the major's own suite, where another one that apt knows may carry
# the same package at another version.
quiet apt-get source --download-only "postgresql-$major/$suite"
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
quiet make -j"$(nproc)"
stage=$work/stage
quiet make install DESTDIR="$stage"
if [ "$flavour" != portable ]; then
	quiet make -C contrib/postgres_fdw install DESTDIR="$stage"
fi
rm -rf "$prefix"
mv "$stage$prefix" "$prefix"
say "built $("$prefix/bin/pg_config" --version) into $prefix"
echo "$prefix"
