#!/bin/bash
# The in-database half of the acceleration benchmark; accel.sh runs it
# inside `pg_virtualenv -t` (lib.sh's $PG_VIRTUALENV).
#
#   accel_db.sh RESULT_DIR SET=DATA...
#
# DATA is the path of a data set without ".csv".  Writes RESULT_DIR/accel.csv:
# one line per iteration of every run (set, f, method, iteration, loss,
# cumulative seconds, step, and on the last line of a run precision@10 and
# ndcg@10), after a header line with the CPU, the kernels and the versions.
set -euo pipefail

RES=$1
shift
BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

FACTORS=${ACCEL_FACTORS:-64 256 1024}
CHOLESKY_FACTORS=${ACCEL_CHOLESKY_FACTORS-64 512}
ITERATIONS=${ACCEL_ITERATIONS:-15}
OUT=$RES/accel.csv

say() { echo "  $*" >&2; }

sql "CREATE EXTENSION wals"
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
kernels=$(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")
echo "# cpu: $cpu; kernels: $kernels; $(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")" > "$OUT"
echo "set,factors,method,iteration,loss,seconds,step,precision,ndcg" >> "$OUT"
say "cpu: $cpu; kernels: $kernels"

# run SET PREFIX F METHOD ARGS: train, append the log, score the last model.
run() {
	set=$1 prefix=$2 f=$3 method=$4
	shift 4
	say "$set f=$f $method"
	sql "SELECT wals_drop_model(model) FROM wals_models WHERE model = 'bench'" > /dev/null
	sql "SET client_min_messages = warning;
		SELECT 1 FROM wals_train('${prefix}_ratings', 'user_id', 'item_id', 'rating',
			model => 'bench', factors => $f, iterations => $ITERATIONS, workers => 1 $*)" > /dev/null
	rank=$(ranking_json bench "$prefix" ref_wals)
	sql "SELECT '$set', $f, '$method', l.iteration, l.loss,
			sum(l.seconds) OVER (ORDER BY l.iteration), l.step,
			CASE WHEN l.iteration = m.iterations THEN ('$rank'::json->>'precision@10') END,
			CASE WHEN l.iteration = m.iterations THEN ('$rank'::json->>'ndcg@10') END
		FROM wals_training_log l JOIN wals_models m USING (schema, model, version)
		WHERE m.model = 'bench' ORDER BY l.iteration" | tr '|' ',' >> "$OUT"
	tail -1 "$OUT" | sed 's/^/    /' >&2
}

for arg in "$@"; do
	set=${arg%%=*}
	data=${arg#*=}
	prefix=s_$set
	say "loading $set"
	load "${prefix}_ratings" "$data.csv"
	load "${prefix}_test" "$data.test.csv"
	known "$prefix"
	for f in $FACTORS; do
		run "$set" "$prefix" "$f" cg
		run "$set" "$prefix" "$f" cg+ncg ", accelerate => 'ncg'"
		run "$set" "$prefix" "$f" subspace ", solver => 'subspace'"
		run "$set" "$prefix" "$f" subspace+ncg ", solver => 'subspace', accelerate => 'ncg'"
	done
	for f in $CHOLESKY_FACTORS; do
		run "$set" "$prefix" "$f" cholesky ", solver => 'cholesky'"
		case " $FACTORS " in
		*" $f "*) ;;
		*)
			run "$set" "$prefix" "$f" cg
			run "$set" "$prefix" "$f" subspace ", solver => 'subspace'"
			;;
		esac
	done
done
