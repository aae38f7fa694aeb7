#!/bin/sh
# The in-database half of the quality benchmark; quality.sh runs it inside
# `pg_virtualenv -t` (lib.sh's $PG_VIRTUALENV), which provides PGHOST/PGPORT/PGUSER/PGPASSWORD.
#
#   quality_db.sh CACHE_DIR RESULT_DIR IMPLICIT_BASE EXPLICIT_BASE SPEED_BASE \
#                 FACTORS ITERATIONS REGULARIZATION ALPHA SEEDS
#
# *_BASE are data file names without ".csv" in CACHE_DIR (the quality sets
# also have BASE.test.csv).  Every training writes RESULT_DIR/<model>.json:
# JSON lines (the wals_train summary row, the per-iteration log, and the
# held-out metrics) that compare.py merges and prints.
#
# Metrics are computed in SQL, with the definitions of ref_wals.py:
#   - test rows count only when their user and their item both occur in the
#     training table (known, lib.sh);
#   - precision@10 and ndcg@10 as ranking_json in lib.sh computes them with
#     its definition ref_wals (macro precision);
#   - RMSE (explicit) over all such test rows, of wals_predict(user, item)
#     against the held-out rating.
set -eu

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

CACHE=$1
RES=$2
IMP=$3
EXP=$4
SPD=$5
FACTORS=$6
ITERATIONS=$7
REG=$8
ALPHA=$9
SEEDS=${10}

now() { date +%s.%N; }

# train MODEL TABLE ARGS...: one wals_train call, its summary row and log.
train() {
	model=$1
	table=$2
	shift 2
	args=$*
	sql "SELECT row_to_json(t) FROM wals_train('$table', 'user_id', 'item_id', 'rating',
		model => '$model', $args) t" > "$RES/$model.json"
	sql "SELECT json_build_object(
			'log_loss', array_agg(l.loss ORDER BY l.iteration),
			'log_seconds', array_agg(l.seconds ORDER BY l.iteration))
		FROM wals_training_log l JOIN wals_models m
			ON m.model = l.model AND m.schema = l.schema AND m.version = l.version
		WHERE m.model = '$model'" >> "$RES/$model.json"
}

# ranking MODEL PREFIX: precision@10 and ndcg@10 on PREFIX_known, defined as
# ref_wals.py defines them.
ranking() {
	t0=$(now)
	ranking_json "$1" "$2" ref_wals >> "$RES/$1.json"
	t1=$(now)
	echo "{\"ranking_s\": $(awk "BEGIN { print $t1 - $t0 }")}" >> "$RES/$1.json"
}

# rmse MODEL PREFIX: held-out RMSE on PREFIX_known through wals_predict.
rmse() {
	sql "SELECT json_build_object(
			'rmse', sqrt(avg((wals_predict(user_id, item_id, '$1')::float8 - rating::float8) ^ 2)),
			'rmse_rows', count(*),
			'rmse_null', count(*) FILTER (WHERE wals_predict(user_id, item_id, '$1') IS NULL))
		FROM $2_known" >> "$RES/$1.json"
}

sql "CREATE EXTENSION wals"
sql "SELECT json_build_object('server_version', version(),
		'wals_version', (SELECT extversion FROM pg_extension WHERE extname = 'wals'))" \
	> "$RES/server.json"

load imp_ratings "$CACHE/$IMP.csv"
load imp_test "$CACHE/$IMP.test.csv"
load exp_ratings "$CACHE/$EXP.csv"
load exp_test "$CACHE/$EXP.test.csv"
load spd_ratings "$CACHE/$SPD.csv"
known imp
known exp

# Single process on the CPU everywhere: the figures do not depend on the
# machine's core count or on a GPU being present.
COMMON="iterations => $ITERATIONS, regularization => $REG, device => 'cpu', workers => 0"

# The quality runs: both solvers, each with the seeds in SEEDS (the first is
# the headline figure, the others measure how much the start matters).
echo "  implicit quality (f=$FACTORS, $ITERATIONS iterations, both solvers, seeds $SEEDS)" >&2
for solver in cholesky cg; do
	for seed in $SEEDS; do
		train imp_${solver}_s$seed imp_ratings "factors => $FACTORS, $COMMON, feedback => 'implicit',
			alpha => $ALPHA, solver => '$solver', cg_steps => 3, seed => $seed"
		ranking imp_${solver}_s$seed imp
	done
done

echo "  explicit quality (f=$FACTORS, $ITERATIONS iterations, both solvers, seeds $SEEDS)" >&2
for solver in cholesky cg; do
	for seed in $SEEDS; do
		train exp_${solver}_s$seed exp_ratings "factors => $FACTORS, $COMMON, feedback => 'explicit',
			solver => '$solver', cg_steps => 3, seed => $seed"
		rmse exp_${solver}_s$seed exp
	done
done

echo "  speed (~1M ratings, f=64 and f=32, both solvers, single process)" >&2
# Speed: at f=64 and f=32 whatever the quality runs' factors.
for f in 64 32; do
	for solver in cg cholesky; do
		train spd_${solver}_f$f spd_ratings "factors => $f, $COMMON, feedback => 'implicit',
			alpha => $ALPHA, solver => '$solver', cg_steps => 3"
	done
done
