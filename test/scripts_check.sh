#!/bin/sh
# The helpers whose standard output another script reads through $(...)
# print their answer there and nothing else, on a machine where the
# packages they install are still missing: test/install_deps.sh answers
# nothing, and test/pg_build.sh only the server's prefix.  apt-get,
# dpkg-query and dpkg are stand-ins on PATH that say every package is
# missing and chatter on standard output as apt does, so nothing is
# installed and no server is built.  Needs no server; prints one line per
# check and "N passed, N failed".  `make test` and `make scripts-check`
# run it.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/wals_scripts.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
# check WHAT EXPECTED FOUND
check() {
	if [ "$2" = "$3" ]; then
		echo "ok: $1"
		passed=$((passed + 1))
	else
		echo "fail: $1: standard output was \"$3\", not \"$2\""
		failed=$((failed + 1))
	fi
}

mkdir "$work/bin"
for tool in apt-get dpkg; do
	cat >"$work/bin/$tool" <<STUB
#!/bin/sh
echo "$tool: Reading package lists... Done"
echo "$tool: \$*"
case "\$*" in
*install*) exit 100 ;;
esac
exit 0
STUB
	chmod +x "$work/bin/$tool"
done
printf '#!/bin/sh\necho "dpkg-query: no packages found matching $*" >&2\nexit 1\n' \
	>"$work/bin/dpkg-query"
chmod +x "$work/bin/dpkg-query"
stubbed="$work/bin:$PATH"

for set in "" --arm64 --pg-build --deb --bench --ci-fresh; do
	out=$(PATH=$stubbed "$root/test/install_deps.sh" $set 2>"$work/err")
	status=$?
	check "install_deps.sh ${set:-(build)} prints nothing on standard output (exit $status)" "" "$out"
done
if grep -q 'wals: ' "$work/err"; then
	echo "ok: install_deps.sh says what is missing on standard error"
	passed=$((passed + 1))
else
	echo "fail: install_deps.sh said nothing on standard error: $(cat "$work/err")"
	failed=$((failed + 1))
fi

# A cached server: the prefix alone.
cache=$work/cache
mkdir -p "$cache/pg15-cassert/bin"
for exe in postgres pg_config; do
	printf '#!/bin/sh\n' >"$cache/pg15-cassert/bin/$exe"
	chmod +x "$cache/pg15-cassert/bin/$exe"
done
out=$(WALS_PG_CACHE=$cache PATH=$stubbed "$root/test/pg_build.sh" 15 cassert 2>/dev/null)
check "pg_build.sh prints only the prefix of a cached server" "$cache/pg15-cassert" "$out"

# A server to build, whose packages are missing: the installer's and apt's
# lines, and the failure, go to standard error.
out=$(WALS_PG_CACHE=$cache PATH=$stubbed "$root/test/pg_build.sh" 17 release 2>"$work/err")
status=$?
check "pg_build.sh prints nothing on standard output when its packages cannot be installed" "" "$out"
check "pg_build.sh fails when its packages cannot be installed" 1 "$([ $status -ne 0 ] && echo 1)"
out=$(WALS_PG_CACHE=$cache PATH=$stubbed "$root/test/pg_build.sh" 17 nonesuch 2>/dev/null)
check "pg_build.sh prints nothing on standard output for a flavour it does not know" "" "$out"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
