#!/bin/sh
# Build the Debian packages of wals (debian/: postgresql-N-wals for each
# version debian/pgversions selects among the postgresql-server-dev-N the
# build root has) with dpkg-buildpackage and pg_buildext, in a build root
# of their own: a Debian root of this machine's release, made once with
# debootstrap (minbase) and the build's packages, and kept outside the
# clone in WALS_DEB_ROOTS (default /var/cache/wals) as test/pg_build.sh
# keeps its servers.  So the machine that runs `make deb`, a database host
# say, gets no build package and no upgrade of its postgresql-common from
# it: only debootstrap (test/install_deps.sh --deb).  The tree is copied
# into the root afresh each time, and the .deb, .buildinfo and .changes
# files land in build/deb/.  As root (debootstrap, chroot).  Prints the
# packages it made.
#
# The copy holds what git tracks and what it would (untracked, not
# ignored), so uncommitted changes are built too; outside a git checkout,
# everything but build/.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

say() { echo "deb_build.sh: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	say "run as root: it builds in a Debian root of its own (debootstrap, chroot)"
	exit 1
fi
version=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog)
out=$root/build/deb
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
roots=${WALS_DEB_ROOTS:-/var/cache/wals}
buildroot=$roots/deb-root-$codename
# what debian/control's Build-Depends asks for, and build-essential, which
# every Debian build may assume
BUILD_PACKAGES="build-essential debhelper dpkg-dev postgresql-server-dev-all
	postgresql-common libopenblas-serial-dev pkgconf"
packages=$(echo $BUILD_PACKAGES)

mkdir -p "$out" "$roots"
rm -f "$out"/postgresql-*-wals*_"$version"_*.deb "$out"/wals_"$version"_*.buildinfo \
	"$out"/wals_"$version"_*.changes

# The root is kept, and a later build only copies the tree in; the
# packages are installed again when their list changed, after finishing
# what an earlier install left unconfigured.  A root left half made (an
# interrupted debootstrap) is made again.  The commands in the root run
# without the caller's TMPDIR, a folder the root does not have.
log=$roots/deb-root-$codename.log
if [ ! -f "$buildroot/.wals-debootstrap" ]; then
	mirror=$(./test/archive_uri.sh)
	say "making the build root $buildroot ($codename from $mirror; a few minutes, once)"
	rm -rf "$buildroot"
	if ! debootstrap --variant=minbase "$codename" "$buildroot" "$mirror" >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		say "debootstrap failed; its log is $log"
		exit 1
	fi
	touch "$buildroot/.wals-debootstrap"
fi
if [ "$(cat "$buildroot/.wals-packages" 2>/dev/null)" != "$packages" ]; then
	cp /etc/resolv.conf "$buildroot/etc/resolv.conf" 2>/dev/null || true
	if ! env -u TMPDIR chroot "$buildroot" /bin/sh -c "export DEBIAN_FRONTEND=noninteractive;
		dpkg --configure -a && apt-get update &&
		apt-get install -y --no-install-recommends $packages" \
		>>"$log" 2>&1; then
		tail -n 30 "$log" >&2
		say "the build's packages could not be installed in the root; its log is $log"
		exit 1
	fi
	echo "$packages" >"$buildroot/.wals-packages"
fi

src=/build/wals-$version
rm -rf "$buildroot/build"
mkdir -p "$buildroot$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# --ignore-failed-read: a tracked file deleted in the work tree is left out.
	git ls-files -z --cached --others --exclude-standard |
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$buildroot$src" -xf -
else
	tar --exclude=./build --exclude=./.git -cf - . | tar -C "$buildroot$src" -xf -
fi

mount -t proc proc "$buildroot/proc"
trap 'umount "$buildroot/proc"' EXIT
start=$(date +%s)
# debian/control for the server versions of the root (pg_buildext
# checkcontrol, which the build runs, refuses a stale one); -b: binary
# packages only; -us -uc: unsigned; -j: make -j for each build.
if ! env -u TMPDIR chroot "$buildroot" /bin/sh -c "cd $src && pg_buildext updatecontrol &&
	dpkg-buildpackage -us -uc -b -j$(nproc)" >"$out/build.log" 2>&1; then
	tail -n 60 "$out/build.log"
	say "dpkg-buildpackage failed; its log is $out/build.log"
	exit 1
fi
cp "$buildroot"/build/postgresql-*-wals*_"$version"_*.deb \
	"$buildroot"/build/wals_"$version"_*.buildinfo "$buildroot"/build/wals_"$version"_*.changes "$out"/
rm -rf "$buildroot/build"
cd "$out"
echo "wals: built in $(($(date +%s) - start)) s in $buildroot (log: build/deb/build.log):"
for deb in postgresql-*-wals_"$version"_*.deb; do
	echo "  build/deb/$deb"
done
