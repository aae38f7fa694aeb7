#!/bin/sh
# `make ci-fresh`: .ci/run as CI runs it on a machine that has never run
# it.  A new Debian 12 root is made with debootstrap (minbase, with the
# compilers, make and git that a new machine of ours has, and nothing of
# what the project's own scripts install), the apt sources and settings of
# this machine are copied in so that it installs from the same archive,
# and /usr/local/cuda is mounted in read-only where this machine has one,
# as on CI's.  A clean clone of HEAD goes to /work/main there, and .ci/run
# runs in the root with an empty server cache (/var/cache/wals of the new
# root) and a bare environment.  Prints the time of each step: the root,
# the clone, .ci/run and the whole.
#
#   make ci-fresh                       as root
#   WALS_CI_FRESH=/srv/ci make ci-fresh another folder for the root
#
# The root and the log of the run (ci.log) stay in the folder
# (/var/tmp/wals-ci-fresh) until the next run, which removes them first;
# nothing is left mounted.  Only what is committed is tested.
set -eu
say() { echo "ci_fresh.sh: $*" >&2; }
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${WALS_CI_FRESH:-/var/tmp/wals-ci-fresh}
target=$dir/root
if [ "$(id -u)" -ne 0 ]; then
	say "run as root: it makes a Debian root with debootstrap and runs .ci/run in it"
	exit 1
fi
case $dir in
/*/*) ;;
*)
	say "WALS_CI_FRESH must be an absolute path below a folder of /, not \"$dir\""
	exit 1
	;;
esac

# Every mount below the root, deepest first.
unmount_all() {
	awk -v t="$target" '$2 == t || index($2, t "/") == 1 { print $2 }' /proc/self/mounts |
		sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
}
trap unmount_all EXIT
began=$(date +%s)
minutes() {
	s=$(($(date +%s) - $1))
	echo "$((s / 60)) min $((s % 60)) s"
}
summary=""
timed() {
	summary="$summary$1: $2
"
	say "$1: $2"
}

unmount_all
# --one-file-system: were anything still mounted below, it stays untouched.
rm -rf --one-file-system "$target" "$dir/ci.log" "$dir/status"
mkdir -p "$target"

started=$(date +%s)
mirror=$("$root/test/archive_uri.sh")
say "making a Debian 12 root in $target from $mirror"
if ! debootstrap --variant=minbase --include=gcc,g++,make,git,ca-certificates \
	bookworm "$target" "$mirror" >"$dir/debootstrap.log" 2>&1; then
	tail -n 30 "$dir/debootstrap.log" >&2
	say "debootstrap failed; its log is $dir/debootstrap.log"
	exit 1
fi
rm -f "$target/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
	/etc/apt/sources.list.d/*.sources /etc/apt/apt.conf.d/*; do
	[ -f "$f" ] && cp "$f" "$target$f"
done
cp /etc/resolv.conf /etc/hosts "$target/etc/"
timed "Debian 12 root" "$(minutes "$started")"

started=$(date +%s)
mkdir -p "$target/work"
git clone --quiet --no-hardlinks "$root" "$target/work/main"
timed "clean clone of $(git -C "$root" rev-parse --short HEAD)" "$(minutes "$started")"

mount -t proc proc "$target/proc"
mount -t sysfs sysfs "$target/sys"
mount --rbind /dev "$target/dev"
mount --make-rslave "$target/dev"
cuda=$(readlink -f /usr/local/cuda 2>/dev/null || true)
if [ -n "$cuda" ] && [ -x "$cuda/bin/nvcc" ]; then
	mkdir -p "$target/usr/local/cuda"
	mount --bind "$cuda" "$target/usr/local/cuda"
	mount -o remount,bind,ro "$target/usr/local/cuda"
fi

started=$(date +%s)
say "running .ci/run in the root (its output: $dir/ci.log)"
{
	status=0
	chroot "$target" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		sh -c 'cd /work/main && exec .ci/run' || status=$?
	echo "$status" >"$dir/status"
} 2>&1 | tee "$dir/ci.log"
status=$(cat "$dir/status")
timed ".ci/run" "$(minutes "$started") (exit $status)"
timed "in all" "$(minutes "$began")"
echo "ci-fresh on $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo):"
printf '%s' "$summary" | sed 's/^/  /'
[ "$status" -eq 0 ]
