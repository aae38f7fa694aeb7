#!/bin/sh
# Install, from Debian's packages, everything wals needs to build and test:
# the PostgreSQL 15 server and its headers, the single-threaded OpenBLAS, the
# Perl modules of the TAP tests, and pg_cron, which the scheduling test
# drives.  With --arm64, what `make test-arm64` needs instead: the aarch64
# cross compiler and C library, qemu's user-mode emulator, and the arm64
# serial OpenBLAS through multiarch (dpkg --add-architecture arm64), which
# lands in /usr/lib/aarch64-linux-gnu/openblas-serial beside the x86 one.
# With --pg-build, what test/pg_build.sh needs to build PostgreSQL from its
# source: the compiler, bzip2 for the tarball, zlib's headers, Perl with
# IPC::Run for the TAP modules, bison and flex, whose output the tarballs
# of PostgreSQL 17 and later no longer carry, and debian-keyring, against
# which it checks a source package that the archive's signed index does
# not cover.  With --deb, what `make deb` needs on this machine to build
# the Debian package: debootstrap alone, since it builds in a Debian root
# of its own (test/deb_build.sh), which holds the build's packages.  With
# --bench, what the benchmarks need besides the build: numpy and scipy for
# the data and scores, gnuplot for the plots.  Does nothing when all are present.  This
# is the only place anything is installed: the Makefile's targets that need
# packages (deps, demo, test, deb, the benchmarks) call it.  With
# --ci-fresh, what `make ci-fresh` needs to make a Debian root: debootstrap.
#
# It answers nothing: everything it and apt print goes to standard error,
# so that a script that reads another's answer through $(...) (pg_build.sh's
# prefix, read by pg_test.sh) gets that answer alone on a machine where the
# packages are still missing.
set -e
exec >&2
if [ "${1:-}" = "--arm64" ]; then
	PACKAGES="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
		libopenblas-serial-dev:arm64 libopenblas0-serial:arm64"
elif [ "${1:-}" = "--pg-build" ]; then
	PACKAGES="gcc libc6-dev make bzip2 zlib1g-dev perl libipc-run-perl bison flex
		debian-keyring"
elif [ "${1:-}" = "--deb" ]; then
	PACKAGES="debootstrap"
elif [ "${1:-}" = "--ci-fresh" ]; then
	PACKAGES="debootstrap git"
elif [ "${1:-}" = "--bench" ]; then
	PACKAGES="python3-numpy python3-scipy gnuplot-nox"
else
	PACKAGES="postgresql-15 postgresql-server-dev-15 postgresql-common
		libopenblas-serial-dev libopenblas0-serial pkgconf libipc-run-perl
		make gcc postgresql-15-cron"
fi
missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "wals: missing packages:$missing (run as root to install them)"
	exit 1
fi
echo "wals: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# Debian's mirrors carry arm64 under the same sources; a source limited by
# an Architectures: line to amd64 is simply not asked for arm64.
if [ "${1:-}" = "--arm64" ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	dpkg --add-architecture arm64
fi
# Another apt-get (a second worker's make deps) may hold dpkg's lock: wait
# for it rather than fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
# shellcheck disable=SC2086  # $missing is a list of packages
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $missing
