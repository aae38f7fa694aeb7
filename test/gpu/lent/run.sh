#!/bin/bash
# On a lent GPU machine, from the repository's root, with .lent carried
# (test/gpu/lent/prepare.sh makes it): the facts of the machine, check_train
# against the CUDA engine on the device, make bench-gpu's benchmark, and the
# pg_regress suite, each under a time limit of its own so that one that
# hangs leaves the others their time.  Everything it prints also goes to
# $OUT/log.txt, the reports beside it.
#
#   LENT_SIZES      the benchmark's sizes (default 100k 300k 1m 2m 5m 20m)
#   LENT_STEPS      which steps (default "check bench regress")
exec > >(tee -a "${OUT:-/tmp}/log.txt") 2>&1
set -u
root=$(pwd)
OUT=${OUT:-/tmp}
t0=$SECONDS
step() { echo "=== [$((SECONDS - t0)) s] $*"; }
wants() { case " ${LENT_STEPS:-check bench regress} " in *" $1 "*) return 0 ;; esac; return 1; }

step "the machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
grep -m1 "model name" /proc/cpuinfo
echo "$(nproc) cores, $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release)"

# the server's files where its user can read them, the libraries on the path
mkdir -p /opt/wals-lent
tar -C /opt/wals-lent -xJf .lent/libs.tar.xz
rm -rf /opt/wals-lent/pg
cp -a .lent/pg /opt/wals-lent/pg
chmod -R a+rX /opt/wals-lent
export LD_LIBRARY_PATH=/opt/wals-lent/lib:/opt/wals-lent/pg/lib
export PATH=/opt/wals-lent/pg/bin:$root/test/bin:$root/test/gpu/lent/bin:$PATH
export PG_CONFIG=/opt/wals-lent/pg/bin/pg_config
id postgres >/dev/null 2>&1 || useradd -M -r -s /bin/sh postgres
engine=/opt/wals-lent/pg/lib/postgresql/wals_cuda.so
if ldd "$engine" | grep -q "not found"; then
	cublas=$(find / -name libcublas.so.13 -not -path '/proc/*' 2>/dev/null | head -1)
	export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$cublas")
	ldd "$engine" | grep "not found"
fi
for py in $(command -v python3) /usr/bin/python3; do
	"$py" -c 'import numpy, scipy' 2>/dev/null && break
done
export WALS_PYTHON=$py WALS_TOOLS=$root/.lent/tools

# the benchmark's data, generated while check_train runs, with gpu.sh's names
sizes=${LENT_SIZES:-100k 300k 1m 2m 5m 20m}
cache=$root/test/bench/cache
mkdir -p "$cache"
gen() {
	name=$1
	shift
	[ -f "$cache/$name.csv" ] && return 0
	"$py" .lent/tools/gen_ratings.py "$@" --seed 42 --out "$cache/tmp-$name.csv" >/dev/null || return 1
	[ ! -f "$cache/tmp-$name.test.csv" ] || mv "$cache/tmp-$name.test.csv" "$cache/$name.test.csv"
	mv "$cache/tmp-$name.csv" "$cache/$name.csv"
}
pids=()
if wants bench; then
	for size in $sizes; do
		case $size in
		100k) gen implicit-u5000-i2000-n100000-s42 --users 5000 --items 2000 --nnz 100000 & ;;
		300k) gen implicit-u14000-i3500-n300000-s42 --users 14000 --items 3500 --nnz 300000 & ;;
		1m) gen implicit-u30000-i6000-n1000000-s42 --users 30000 --items 6000 --nnz 1000000 & ;;
		2m) gen implicit-u42000-i8500-n2000000-s42 --users 42000 --items 8500 --nnz 2000000 & ;;
		5m) gen implicit-u69000-i13500-n5000000-s42 --users 69000 --items 13500 --nnz 5000000 & ;;
		20m) gen implicit-u138000-i27000-n20000000-s42 --users 138000 --items 27000 \
			--nnz 20000000 --test-fraction 0.02 & ;;
		esac
		pids+=($!)
	done
fi

if wants check; then
	step "check_train against the CUDA engine"
	timeout -k 5 "${LENT_CHECK_LIMIT:-200}" .lent/bin/check_train "$engine" >"$OUT/check_train.txt" 2>&1
	echo "check_train: exit $?"
	grep -v "^ok" "$OUT/check_train.txt" | tail -40
fi
if wants bench; then
	step "bench-gpu"
	wait "${pids[@]}"
	PGVE_LOG=$OUT/bench_server.log WALS_BENCH_SIZES="$sizes" \
		timeout -k 5 "${LENT_BENCH_LIMIT:-240}" ./test/bench/gpu.sh
	echo "gpu.sh: exit $?"
	cp test/bench/out/gpu.txt test/bench/out/gpu.tsv "$OUT/" 2>/dev/null
fi
if wants regress; then
	step "pg_regress"
	timeout -k 5 "${LENT_REGRESS_LIMIT:-90}" ./test/installcheck.sh TAP_TESTS= >"$OUT/regress.txt" 2>&1
	echo "installcheck.sh: exit $?"
	tail -25 "$OUT/regress.txt"
fi
step done
