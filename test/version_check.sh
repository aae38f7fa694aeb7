#!/bin/sh
# One version number: the Makefile's EXTVERSION, from which the library's
# WALS_VERSION is compiled, and every other place that states the version
# of the release, held to it: wals.control's default_version, META.json
# (the distribution and the extension it provides), debian/changelog's
# latest entry (less a Debian revision), CHANGELOG.md's latest heading,
# README's Install and doc/operations.md's Upgrading, the update script to
# it, and the update path t/008_upgrade.pl expects.  Needs no server and no build; prints one line
# per check and "N passed, N failed".  `make test` and `make version-check`
# run it.
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0
failed=0
check() {
	# check WHAT FOUND
	if [ "$2" = "$version" ]; then
		echo "ok: $1 is $version"
		passed=$((passed + 1))
	else
		echo "fail: $1 is \"$2\", the Makefile's EXTVERSION $version"
		failed=$((failed + 1))
	fi
}
present() {
	# present WHAT FILE...: each file exists
	if [ -e "$2" ]; then
		echo "ok: $1"
		passed=$((passed + 1))
	else
		echo "fail: $1: $2 not found"
		failed=$((failed + 1))
	fi
}

version=$(sed -n 's/^EXTVERSION[ 	]*=[ 	]*\([^ 	]*\)[ 	]*$/\1/p' Makefile)
if [ -z "$version" ]; then
	echo "fail: no EXTVERSION = line in the Makefile"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "the Makefile's EXTVERSION: $version"

check "wals.control's default_version" \
	"$(sed -n "s/^default_version[ 	]*=[ 	]*'\([^']*\)'.*/\1/p" wals.control)"
check "META.json's version" \
	"$(perl -MJSON::PP -e 'local $/; print JSON::PP->new->decode(<STDIN>)->{version} // ""' <META.json 2>&1)"
check "META.json's provides.wals.version" \
	"$(perl -MJSON::PP -e 'local $/; print JSON::PP->new->decode(<STDIN>)->{provides}{wals}{version} // ""' <META.json 2>&1)"
# "wals (0.5.0) unstable; ..." or "wals (0.5.0-1) ...": the upstream part.
check "debian/changelog's latest entry" \
	"$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog | sed 's/-[^-]*$//')"
check "CHANGELOG.md's latest heading" \
	"$(sed -n 's/^## \([0-9][^ ]*\).*/\1/p' CHANGELOG.md | head -n 1)"
check "README's current version" \
	"$(sed -n 's/^The current version is \([0-9][0-9.]*[0-9]\)\..*/\1/p' README.md | head -n 1)"
check "doc/operations.md's current version (Upgrading)" \
	"$(sed -n 's/^The current version is \([0-9][0-9.]*[0-9]\)\..*/\1/p' doc/operations.md | head -n 1)"

# The update script to this version, from the one before it in CHANGELOG.
previous=$(sed -n 's/^## \([0-9][^ ]*\).*/\1/p' CHANGELOG.md | sed -n 2p)
present "the update script from $previous to $version" "sql/wals--$previous--$version.sql"
# t/008_upgrade.pl expects the update from 0.1.0 to end with this step.
path=$(sed -n "s/.*'\(0\.1\.0--[0-9.-]*\)'.*/\1/p" test/t/008_upgrade.pl | head -n 1)
check "the last step of t/008_upgrade.pl's update path" "${path##*--}"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
