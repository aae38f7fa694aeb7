#!/bin/sh
# Build the Debian packages of wals (debian/: postgresql-N-wals for each
# version debian/pgversions selects among the installed
# postgresql-server-dev-N) with dpkg-buildpackage and pg_buildext, in a
# copy of the tree, so that the checkout gets no build output: the copy is
# build/deb/wals-VERSION/ (made afresh each time), and the .deb, .buildinfo
# and .changes files land beside it in build/deb/.  `make deb` runs it
# after test/install_deps.sh --deb.  Prints the packages it made.
#
# The copy holds what git tracks and what it would (untracked, not
# ignored), so uncommitted changes are built too; outside a git checkout,
# everything but build/.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog)
out=$root/build/deb
src=$out/wals-$version

rm -rf "$src"
mkdir -p "$src"
rm -f "$out"/postgresql-*-wals*_"$version"_*.deb "$out"/wals_"$version"_*.buildinfo \
	"$out"/wals_"$version"_*.changes
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# --ignore-failed-read: a tracked file deleted in the work tree is left out.
	git ls-files -z --cached --others --exclude-standard |
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$src" -xf -
else
	tar --exclude=./build --exclude=./.git -cf - . | tar -C "$src" -xf -
fi

cd "$src"
# debian/control for the server versions installed here (pg_buildext
# checkcontrol, which the build runs, refuses a stale one).
pg_buildext updatecontrol
start=$(date +%s)
# -b: binary packages only; -us -uc: unsigned; -j: make -j for each build.
dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$out/build.log" 2>&1 || {
	tail -n 60 "$out/build.log"
	echo "deb_build.sh: dpkg-buildpackage failed; its log is $out/build.log" >&2
	exit 1
}
cd "$out"
echo "wals: built in $(($(date +%s) - start)) s (log: build/deb/build.log):"
for deb in postgresql-*-wals_"$version"_*.deb; do
	echo "  build/deb/$deb"
done
