#!/bin/bash
# Two builds of wals.so side by side on the training benchmark's data set:
# for a change that must not slow anything down (a restructuring, a
# compiler flag), train with each build in turn, in one throw-away cluster
# and on the same table, several rounds, alternating, so that neither build
# gets the quieter minutes.
#
#   ./test/bench/ab.sh OLD/wals.so NEW/wals.so [rounds]
#
# Run as root from the repository's root with the extension installed (the
# SQL objects must be the same in both builds); each run copies a build
# over $pkglibdir/wals.so, and the second build is left installed.  Each
# training is f=64, 15 iterations, workers => 1, CG (3 steps) and
# Cholesky, from the same seed; the figures are those of wals_train's
# summary row: load_s (reading and building), train_s / iterations,
# store_s, and the final loss, which must be the same for both builds.
set -euo pipefail

cd "$(dirname "$0")/../.."
say() { echo "ab.sh: $*" >&2; }
[ $# -ge 2 ] || { say "usage: $0 OLD/wals.so NEW/wals.so [rounds]"; exit 2; }
A=$(readlink -f "$1")
B=$(readlink -f "$2")
ROUNDS=${3:-3}

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh
bench_prepare gen_ratings.py
gen_20m

LIBDIR=$("$PG_CONFIG" --pkglibdir)
RES=$(mktemp -d -t wals-ab.XXXXXX)
trap 'rm -rf "$RES"' EXIT
chmod 755 "$RES"

cat > "$RES/db.sh" <<INNER
set -euo pipefail
PSQL="psql -X -v ON_ERROR_STOP=1 -q"
. "$BENCH/lib.sh"
load ab_ratings "$CACHE/$DATA.csv" >/dev/null
\$PSQL -c "VACUUM ANALYZE ab_ratings"
\$PSQL -c "CREATE EXTENSION wals"
for round in \$(seq 1 $ROUNDS); do
	for build in A B; do
		lib=\$([ \$build = A ] && echo "$A" || echo "$B")
		install -m 755 "\$lib" "$LIBDIR/wals.so"
		for solver in cg cholesky; do
			\$PSQL -At -F ' ' -c "SET client_min_messages = warning;
				SELECT '\$build', '\$solver', round(load_s::numeric, 3),
				       round((train_s / iterations)::numeric, 3), round(store_s::numeric, 3),
				       round(loss::numeric)
				FROM wals_train('ab_ratings', 'user_id', 'item_id', 'rating', model => 'ab',
				                factors => 64, iterations => 15, solver => '\$solver',
				                workers => 1, seed => 42)"
		done
	done
done > "$RES/runs"
\$PSQL -At -c "SELECT kernels FROM wals_devices() WHERE device = 'cpu'" > "$RES/kernels"
INNER

say "$ROUNDS rounds of A and B in a throw-away cluster"
$PG_VIRTUALENV -t -o shared_buffers=1GB -o max_worker_processes=16 \
	-o max_parallel_workers=8 bash "$RES/db.sh" >&2

echo "A: $A"
echo "B: $B"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1); kernels: $(cat "$RES/kernels")"
echo "data: $DATA, f=64, 15 iterations, workers => 1; median of $ROUNDS rounds (min .. max)"
printf '%-6s %-9s %-22s %-22s %-22s %s\n' build solver "load s" "s/iteration" "store s" "final loss"
for build in A B; do
	for solver in cg cholesky; do
		awk -v b=$build -v s=$solver '$1 == b && $2 == s' "$RES/runs" > "$RES/sel"
		col() { cut -d' ' -f"$1" "$RES/sel" | sort -g | awk '{v[NR] = $1} END {printf "%.3f (%.3f .. %.3f)", v[int((NR + 1) / 2)], v[1], v[NR]}'; }
		printf '%-6s %-9s %-22s %-22s %-22s %s\n' $build $solver "$(col 3)" "$(col 4)" "$(col 5)" \
			"$(cut -d' ' -f6 "$RES/sel" | sort -u | tr '\n' ' ')"
	done
done
