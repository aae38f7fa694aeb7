#!/bin/sh
# The Debian package on this machine, as a user would have it: `make deb`'s
# postgresql-N-wals (N: the major of PG_CONFIG, Debian's server) installed
# with dpkg -i, its files checked against the package (dpkg -V) and its
# dependencies (the serial OpenBLAS, libpq; no CUDA engine), then in a
# throwaway cluster of pg_virtualenv (run by the postgres user, never as
# root): CREATE EXTENSION wals at the package's version, a model trained,
# served and described by wals_devices(), and the extension dropped.  Then
# dpkg -r, and every file of the package's paths that was there before
# (a `make install` of a checkout, say) put back as it was, checked byte
# for byte, so the server's directories end as they began.
#
# As root (dpkg).  The whole of it holds /tmp/wals-install.lock
# (WALS_INSTALL_LOCK), the lock every install into the server's folders
# and every test run against them takes; WALS_INSTALL_LOCK= for a caller
# that holds it already.  Prints ok/fail lines and "N passed, N failed".
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "$(id -u)" -ne 0 ]; then
	echo "deb_test.sh: installs a package with dpkg: run it as root" >&2
	exit 1
fi
. test/lib.sh
major=$PG_MAJOR
if [ "$PG_DEBIAN" != yes ]; then
	echo "deb_test.sh: $PG_CONFIG is not Debian's PostgreSQL $major: the package is for Debian's servers" >&2
	exit 1
fi
version=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog)
package=postgresql-$major-wals
deb=$root/build/deb/${package}_${version}_$(dpkg --print-architecture).deb
if [ ! -f "$deb" ]; then
	echo "deb_test.sh: $deb not found: run make deb" >&2
	exit 1
fi
if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed"; then
	echo "deb_test.sh: $package is installed on this machine already; the test would replace it" >&2
	exit 1
fi

lock=${WALS_INSTALL_LOCK-/tmp/wals-install.lock}
if [ -n "$lock" ]; then
	exec 9>>"$lock"
	echo "wals: waiting for $lock"
	flock 9
fi

start=$(date +%s)
passed=0
failed=0
ok() {
	echo "ok: $1"
	passed=$((passed + 1))
}
fail() {
	echo "fail: $1"
	failed=$((failed + 1))
}
expect() {
	# expect WHAT FOUND WANTED
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got \"$2\", expected \"$3\""; fi
}

# What the server's directories hold at the package's paths now, kept to be
# put back after dpkg -r.
work=$(mktemp -d "${TMPDIR:-/tmp}/wals_deb_test.XXXXXX")
chmod 755 "$work"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./|/|' >"$work/files"
: >"$work/kept"
while read -r f; do
	if [ -e "$f" ]; then
		mkdir -p "$work/before$(dirname "$f")"
		cp -a "$f" "$work/before$f"
		echo "$f" >>"$work/kept"
	fi
done <"$work/files"

installed=""
restore() {
	status=$?
	if [ -n "$installed" ]; then
		dpkg --purge "$package" >/dev/null 2>&1 || true
	fi
	while read -r f; do
		mkdir -p "$(dirname "$f")"
		cp -a "$work/before$f" "$f"
	done <"$work/kept"
	rm -rf "$work"
	exit "$status"
}
trap restore EXIT
trap 'exit 1' INT TERM HUP

echo "wals: dpkg -i $(basename "$deb") ($(wc -l <"$work/kept") of its $(wc -l <"$work/files") files are there now, kept to be put back)"
# From here on the package is removed on the way out, even where dpkg -i
# left it half installed (a dependency missing).
installed=1
if dpkg -i "$deb" >"$work/dpkg.log" 2>&1; then
	ok "dpkg -i $(basename "$deb")"
else
	cat "$work/dpkg.log"
	fail "dpkg -i $(basename "$deb")"
	echo "$passed passed, $failed failed"
	exit 1
fi
if dpkg -V "$package" >"$work/verify" 2>&1 && [ ! -s "$work/verify" ]; then
	ok "the installed files are the package's (dpkg -V)"
else
	fail "dpkg -V $package: $(cat "$work/verify")"
fi
libdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
expect "wals.so, wals_blas.so and the control file at $libdir and $sharedir/extension" \
	"$(dpkg -L "$package" | grep -cxF -e "$libdir/wals.so" -e "$libdir/wals_blas.so" \
		-e "$sharedir/extension/wals.control")" 3
expect "no CUDA engine in the package" "$(dpkg -L "$package" | grep -c 'wals_cuda' || true)" 0
expect "the update script to $version in the package" \
	"$(dpkg -L "$package" | grep -c "/wals--[0-9.]*--$version\.sql\$")" 1
depends=$(dpkg-query -W -f='${Depends}' "$package")
case "$depends" in
*libopenblas0-serial*libpq5*) ok "depends on the serial OpenBLAS and libpq: $depends" ;;
*) fail "depends on the serial OpenBLAS and libpq: $depends" ;;
esac
# README.md and doc/ beside it, uncompressed: every doc/*.md README links
# to is there under the same name.
docs=/usr/share/doc/$package
broken=0
for link in $(grep -o '](doc/[a-z_]*\.md' README.md | sed 's/^](//' | sort -u); do
	[ -f "$docs/$link" ] || { broken=$((broken + 1)); echo "wals: not in the package: $docs/$link"; }
done
expect "README.md in $docs, uncompressed" "$([ -f "$docs/README.md" ] && echo yes)" yes
expect "every doc/*.md README.md links to in $docs/doc" "$broken" 0
expect "as many doc/*.md as the tree has" "$(ls "$docs"/doc/*.md 2>/dev/null | wc -l)" \
	"$(ls doc/*.md | wc -l)"
missing=$(ldd "$libdir/wals.so" "$libdir/wals_blas.so" | grep -c 'not found' || true)
expect "every library wals.so and wals_blas.so need is found (ldd)" "$missing" 0
expect "wals_blas.so loads the serial OpenBLAS, and wals.so does not" \
	"$(ldd "$libdir/wals_blas.so" | grep -c 'openblas-serial/libopenblas' || true)/$(ldd "$libdir/wals.so" | grep -c 'libopenblas' || true)" 1/0

# In a throwaway cluster of Debian's server, as the postgres user.
cat >"$work/try.sql" <<'SQL'
\set ON_ERROR_STOP on
CREATE EXTENSION wals;
SELECT 'version=' || extversion FROM pg_extension WHERE extname = 'wals';
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 300 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 500) u, generate_series(1, 12) g;
SELECT 'trained=' || model || ',' || users || ',' || items || ',' || device
FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm', factors => 8,
                iterations => 5);
SELECT 'recommended=' || count(*) || ',' || count(DISTINCT item_id)
FROM wals_recommend(1, 5, 'm');
SELECT 'similar=' || count(*) FROM wals_similar_items(1, 3, 'm');
SELECT 'blas=' || (blas LIKE 'OpenBLAS%') || ',' || threads FROM wals_devices() WHERE device = 'cpu';
DROP EXTENSION wals CASCADE;
SELECT 'dropped=' || count(*) FROM pg_extension WHERE extname = 'wals';
SQL
chmod 644 "$work/try.sql"
if (cd "$work" && pg_virtualenv -t -v "$major" psql -X -At -q -f "$work/try.sql") \
	>"$work/try.out" 2>&1; then
	ok "a throwaway cluster of PostgreSQL $major ran the package's wals"
else
	cat "$work/try.out"
	fail "a throwaway cluster of PostgreSQL $major ran the package's wals"
fi
line() { sed -n "s/^$1=//p" "$work/try.out"; }
expect "CREATE EXTENSION wals installs $version" "$(line version)" "$version"
expect "wals_train trains a model of 500 users and 300 items on the CPU" "$(line trained)" "m,500,300,cpu"
expect "wals_recommend serves 5 distinct items" "$(line recommended)" "5,5"
expect "wals_similar_items serves 3 items" "$(line similar)" 3
expect "wals_devices(): OpenBLAS, one thread" "$(line blas)" "true,1"
expect "DROP EXTENSION wals CASCADE drops it" "$(line dropped)" 0

# Removed: none of the package's files is left, and what was there before
# is put back.
if dpkg -r "$package" >"$work/dpkg.log" 2>&1; then
	installed=""
	ok "dpkg -r $package"
else
	cat "$work/dpkg.log"
	fail "dpkg -r $package"
fi
left=0
while read -r f; do
	[ -e "$f" ] && left=$((left + 1))
done <"$work/files"
expect "dpkg -r leaves none of the package's files" "$left" 0
while read -r f; do
	mkdir -p "$(dirname "$f")"
	cp -a "$work/before$f" "$f"
done <"$work/kept"
differ=0
while read -r f; do
	cmp -s "$work/before$f" "$f" || differ=$((differ + 1))
done <"$work/kept"
expect "the $(wc -l <"$work/kept") files that were there before are back, unchanged" "$differ" 0

echo "wals: the package test took $(($(date +%s) - start)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
