#!/bin/bash
# The in-database half of the training benchmark; train.sh runs it inside
# `pg_virtualenv -t` (lib.sh's $PG_VIRTUALENV), which provides PGHOST/PGPORT/PGUSER/PGPASSWORD.
#
#   train_db.sh DATA RESULT_DIR
#
# DATA is the path of the data set without ".csv" (DATA.csv is the training
# split, DATA.test.csv the held-out one).  Every figure goes to a file of
# RESULT_DIR, which train_report.py reads:
#   server.json, data.json       versions, row counts, the sum(rating) timing
#   <run>.json                   the wals_train summary row, then the
#                                per-iteration log (loss and seconds arrays)
#   <run>.notices                what the server said during the training
#   <run>.mem                    mem_sampler.py's peak of leader + workers
#   <run>.rank0, <run>.rank1     ranking metrics over even / odd test users
set -euo pipefail

DATA=$1
RES=$2
BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

FACTORS=64
ITERATIONS=15
SCALING_ITERATIONS=5

say() { echo "  $*" >&2; }

now() { date +%s.%N; }

since() { awk -v t0="$1" -v t1="$(now)" 'BEGIN { printf "%.1f", t1 - t0 }'; }

progress() {
	awk '/^NOTICE:/ { if (n != "") print "    " n; n = substr($0, 10); fflush(); next }
		/^DETAIL:/ { print "    " n " " substr($0, 10); n = ""; fflush(); next }
		{ print "    " $0; fflush() }
		END { if (n != "") print "    " n }' >&2
}

SAMPLER=""
stop_sampler() {
	if [ -n "$SAMPLER" ]; then
		kill -TERM "$SAMPLER" 2>/dev/null || true
		wait "$SAMPLER" || true
		SAMPLER=""
	fi
}
trap stop_sampler EXIT

# train RUN TABLE ARGS...: one wals_train call in a session of its own (so
# that its memory starts from a fresh backend), sampled by mem_sampler.py.
train() {
	run=$1
	table=$2
	shift 2
	args=$*
	t0=$(now)
	rm -f "$RES/$run.pid"
	$PY "$BENCH/mem_sampler.py" "$RES/$run.pid" > "$RES/$run.mem" &
	SAMPLER=$!
	# The NOTICEs (the memory estimate, one per iteration) are kept for the
	# report and shown as they come, each with its DETAIL on one line, as
	# progress through trainings of minutes.
	if ! $PSQL -At > "$RES/$run.json" 2> >(tee "$RES/$run.notices" | progress) <<EOF
SELECT pg_backend_pid() \g $RES/$run.pid
SELECT row_to_json(t) FROM wals_train('$table', 'user_id', 'item_id', 'rating',
	model => '$run', $args) t;
SELECT json_build_object(
		'log_loss', array_agg(l.loss ORDER BY l.iteration),
		'log_seconds', array_agg(l.seconds ORDER BY l.iteration),
		'workers_launched', max(m.workers))
	FROM wals_training_log l JOIN wals_models m
		ON m.model = l.model AND m.schema = l.schema AND m.version = l.version
	WHERE m.model = '$run';
EOF
	then
		echo "train_db.sh: wals_train failed for $run ($args)" >&2
		exit 1
	fi
	stop_sampler
	say "$run: $(since "$t0") s"
}

# quality RUN: precision@10 and ndcg@10 of RUN on the held-out split, scored
# in two concurrent sessions (even and odd users), one per core, defined as
# implicit's ranking_metrics_at_k defines them (ranking_json in lib.sh):
# the peer figures the report prints beside ours are implicit's.
quality() {
	t0=$(now)
	ranking_json "$1" r20m implicit "user_id % 2 = 0" > "$RES/$1.rank0" &
	even=$!
	ranking_json "$1" r20m implicit "user_id % 2 = 1" > "$RES/$1.rank1"
	wait "$even"
	say "$1 ranked: $(since "$t0") s"
}

sql "CREATE EXTENSION wals"
sql "SELECT json_build_object('server_version', version(),
		'wals_version', (SELECT extversion FROM pg_extension WHERE extname = 'wals'),
		'kernels', (SELECT kernels FROM wals_devices() WHERE device = 'cpu'),
		'settings', (SELECT json_object_agg(name, setting) FROM pg_settings
			WHERE name IN ('shared_buffers', 'max_worker_processes', 'max_parallel_workers',
				'max_parallel_maintenance_workers', 'max_parallel_workers_per_gather')))" \
	> "$RES/server.json"

t0=$(now)
load r20m_ratings "$DATA.csv"
load r20m_test "$DATA.test.csv"
# VACUUM sets the hint bits and the visibility map once, so that neither the
# sum(rating) baseline nor the first training pays for them.
sql "VACUUM ANALYZE r20m_ratings"
sql "VACUUM ANALYZE r20m_test"
known r20m
say "loaded: $(since "$t0") s"

# The ingest baseline: the server's own time for a plain scan and sum of the
# same table, warm, best of 3, with whatever parallel plan the server picks.
sql "CREATE FUNCTION bench_seconds(query text) RETURNS float8 LANGUAGE plpgsql AS \$\$
	DECLARE t0 timestamptz := clock_timestamp();
	BEGIN
		EXECUTE query;
		RETURN extract(epoch FROM clock_timestamp() - t0);
	END \$\$"
sql "CREATE FUNCTION bench_workers_planned(query text) RETURNS int LANGUAGE plpgsql AS \$\$
	DECLARE plan text;
	BEGIN
		EXECUTE 'EXPLAIN (FORMAT JSON) ' || query INTO plan;
		RETURN coalesce(substring(plan FROM '\"Workers Planned\": ([0-9]+)')::int, 0);
	END \$\$"
SUM_QUERY="SELECT sum(rating) FROM r20m_ratings"
sql "SELECT bench_seconds('$SUM_QUERY')" > /dev/null
sql "SELECT json_build_object(
		'ratings', (SELECT count(*) FROM r20m_ratings),
		'test_rows', (SELECT count(*) FROM r20m_test),
		'known_rows', (SELECT count(*) FROM r20m_known),
		'sum_query', '$SUM_QUERY',
		'sum_s', (SELECT min(bench_seconds('$SUM_QUERY')) FROM generate_series(1, 3)),
		'sum_workers_planned', bench_workers_planned('$SUM_QUERY'))" \
	> "$RES/data.json"

COMMON="factors => $FACTORS, device => 'cpu', feedback => 'implicit'"
CG="$COMMON, solver => 'cg', cg_steps => 3"
for workers in 0 1 2; do
	train cg_w$workers r20m_ratings "$CG, iterations => $ITERATIONS, workers => $workers"
done
train cholesky_w1 r20m_ratings "$COMMON, solver => 'cholesky', iterations => $ITERATIONS, workers => 1"
# The default regularization (0.1) is negligible beside confidences of
# 1 + r summed over thousands of ratings; regularization.sh shows held-out
# quality rising up to about 300 and collapsing past 500.
train cg_w1_reg200 r20m_ratings "$CG, iterations => $ITERATIONS, workers => 1, regularization => 200"

quality cg_w1
quality cholesky_w1
quality cg_w1_reg200

# Scaling: samples of the training table; the full table's point is cg_w1.
for m in 1 5; do
	sql "CREATE TABLE r${m}m_ratings AS SELECT * FROM r20m_ratings
		TABLESAMPLE BERNOULLI (least(100, $m * 100.0 * 1000000 / (SELECT count(*) FROM r20m_ratings)))
		REPEATABLE (1)"
	sql "VACUUM ANALYZE r${m}m_ratings"
	train cg_${m}m r${m}m_ratings "$CG, iterations => $SCALING_ITERATIONS, workers => 1"
done

# Every family of kernels this CPU runs, forced with wals.kernels (in the
# leader and its parallel worker alike): CG and Cholesky, workers => 1,
# KERNEL_ITERATIONS iterations each, on the full training table.
KERNEL_ITERATIONS=5
families=$(kernel_families)
echo "${families# }" > "$RES/families"
for family in $families; do
	PGOPTIONS="-c wals.kernels=$family" train "kernels_cg_$family" r20m_ratings \
		"$CG, iterations => $KERNEL_ITERATIONS, workers => 1"
	PGOPTIONS="-c wals.kernels=$family" train "kernels_cholesky_$family" r20m_ratings \
		"$COMMON, solver => 'cholesky', iterations => $KERNEL_ITERATIONS, workers => 1"
done
