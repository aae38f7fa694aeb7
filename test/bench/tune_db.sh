#!/bin/bash
# The in-database half of tune.sh: runs inside pg_virtualenv with the data
# set's path (without .csv) and the budget as its arguments.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

data=$1
budget=$2

sql "CREATE EXTENSION wals"
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
echo "kernels: $(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"
load r "$data.csv"
load t "$data.test.csv"
echo "data: $(sql "SELECT count(*) FROM r") training rows, $(sql "SELECT count(*) FROM t") test rows; budget $budget"

$PSQL -q > /dev/null <<SQL
SET client_min_messages = warning;
SELECT 1 FROM wals_train('r', 'user_id', 'item_id', 'rating', model => 'defaults', factors => 64);
SQL
echo "trials (ndcg@20 on the validation share):"
$PSQL -At -F ' ' <<SQL
SET client_min_messages = warning;
SELECT trial, round(score::numeric, 4), iterations, round(seconds::numeric, 1), parameters
FROM wals_tune('r', 'user_id', 'item_id', 'rating', model => 'tuned', budget => '$budget');
SQL
echo "on the test split:"
$PSQL -At -F ' ' <<SQL
SELECT m, metric, round(value::numeric, 4)
FROM (VALUES ('defaults'), ('tuned')) v(m), wals_evaluate(m, 't', 'user_id', 'item_id', k => 10)
WHERE metric IN ('precision@10', 'recall@10', 'ndcg@10') ORDER BY metric, m;
SELECT 'ndcg@10 tuned / defaults: ' ||
       round(((SELECT value FROM wals_evaluate('tuned', 't', 'user_id', 'item_id', k => 10) WHERE metric = 'ndcg@10') /
              (SELECT value FROM wals_evaluate('defaults', 't', 'user_id', 'item_id', k => 10) WHERE metric = 'ndcg@10'))::numeric, 3);
SQL
