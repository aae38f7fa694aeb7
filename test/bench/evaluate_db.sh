#!/bin/bash
# The in-database half of evaluate.sh: runs inside pg_virtualenv with
# the data set's path (without .csv) as its argument.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

RUNS=${EVAL_RUNS:-3}
FACTORS=${EVAL_FACTORS:-128}
data=$1

sql "CREATE EXTENSION wals"
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
echo "kernels: $(sql "SET wals.kernels = '${EVAL_KERNELS:-auto}'; SELECT kernels FROM wals_devices() WHERE device = 'cpu'" | tail -1)"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"

$PSQL -q > /dev/null <<SQL
CREATE TABLE r (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
\copy r FROM '$data.csv' WITH (FORMAT csv)
CREATE TABLE t (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
\copy t FROM '$data.test.csv' WITH (FORMAT csv)
ANALYZE r;
ANALYZE t;
SET client_min_messages = warning;
SELECT 1 FROM wals_train('r', 'user_id', 'item_id', 'rating', model => 'm', factors => $FACTORS,
                         iterations => 10);
SQL

echo "data: $(sql "SELECT count(*) FROM r") training rows, $(sql "SELECT count(*) FROM t") test rows," \
	"$(sql "SELECT count(DISTINCT user_id) FROM t") test users," \
	"$(sql "SELECT items FROM wals_models WHERE model = 'm'") items; f = $FACTORS"

# run LABEL WORKERS: one wals_evaluate with that many parallel workers at
# most, timed inside the server.
run() {
	sql "SET max_parallel_maintenance_workers = $2; SET wals.kernels = '${EVAL_KERNELS:-auto}';
		CREATE TEMP TABLE clock AS SELECT clock_timestamp() AS t0;
		CREATE TEMP TABLE metrics AS SELECT * FROM wals_evaluate('m', 't', 'user_id', 'item_id');
		SELECT format('%-12s %s s, %s ms a test user', '$1', round(s::numeric, 2),
					  round((1000 * s / u)::numeric, 3))
		FROM (SELECT extract(epoch FROM clock_timestamp() - t0)::float8 AS s FROM clock) c,
			 (SELECT count(DISTINCT user_id) AS u FROM t) n;" | tail -1
}

for workers in ${EVAL_WORKERS:-0 1 2}; do
	for i in $(seq "$RUNS"); do run "workers $workers" "$workers"; done
done
$PSQL -At -F ' ' -c "SELECT metric, round(value::numeric, 4) FROM wals_evaluate('m', 't', 'user_id', 'item_id')"
