#!/bin/sh
# Install, from Debian's packages, everything wals needs to build and test:
# the PostgreSQL 15 server and its headers, the single-threaded OpenBLAS, the
# Perl modules of the TAP tests, and pg_cron, which the scheduling test
# drives.  Does nothing when all are present.
set -e
PACKAGES="postgresql-15 postgresql-server-dev-15 postgresql-common
	libopenblas-serial-dev libopenblas0-serial libipc-run-perl make gcc
	postgresql-15-cron"
missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "wals: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "wals: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
