#!/bin/bash
# The in-database half of tune.sh: runs inside pg_virtualenv with the
# training and test CSVs' paths, the budget and the metric as arguments.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

train=$1
test=$2
budget=$3
metric=$4
call=${TUNE_CALL:-function}
case $call in
function) fn=wals_tune ;;
procedure) fn=wals_tune_concurrently ;;
*) echo "tune_db.sh: unknown TUNE_CALL $call (function or procedure)" >&2; exit 1 ;;
esac
k=${metric#*@}
case $k in ''|*[!0-9]*) k=20 ;; esac

sql "CREATE EXTENSION wals"
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
echo "kernels: $(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"
load_file r "$train"
load_file t "$test"
echo "data: $(sql "SELECT count(*) FROM r") training rows ($(sql "SELECT count(DISTINCT user_id) FROM r") users," \
	"$(sql "SELECT count(DISTINCT item_id) FROM r") items), $(sql "SELECT count(*) FROM t") test rows;" \
	"budget $budget, metric $metric, $fn"

$PSQL -q > /dev/null <<SQL
SET client_min_messages = warning;
SELECT 1 FROM wals_train('r', 'user_id', 'item_id', model => 'defaults');
SQL
echo "trials ($metric on the validation share; iterations; seconds):"
notices=$(mktemp)
began=$(date +%s.%N)
if [ "$call" = procedure ]; then
	$PSQL -q -At 2> "$notices" <<SQL
CALL wals_tune_concurrently('r', 'user_id', 'item_id', model => 'tuned', budget => '$budget',
                            metric => '$metric');
SQL
else
	$PSQL -At -F ' ' 2> "$notices" > /dev/null <<SQL
SELECT 1 FROM wals_tune('r', 'user_id', 'item_id', model => 'tuned', budget => '$budget',
                        metric => '$metric');
SQL
fi
ended=$(date +%s.%N)
$PSQL -At -F ' ' <<SQL
SELECT trial, round(value::numeric, 4), iterations, round(seconds::numeric, 1), parameters
FROM wals_tuning_log WHERE model = 'tuned' ORDER BY trial;
SQL
budget_s=$(sql "SELECT extract(epoch FROM interval '$budget')")
awk -v b="$began" -v e="$ended" -v s="$budget_s" -v f="$fn" 'BEGIN {
	printf "%s took %.1f s of its %.0f s budget (%+.1f%%), its final training included\n",
		   f, e - b, s, 100 * (e - b - s) / s }'
echo "chosen: $(sql "SELECT parameters FROM wals_tuning_log WHERE model = 'tuned' AND chosen")"
# The trials' NOTICEs say how much of each trial was spent on its validation.
sed -n 's/.*wals_tune trial [0-9]*: .* in \([0-9.]*\) s (\([0-9.]*\) s of it.*/\1 \2/p' "$notices" |
	awk '{ n++; total += $1; valid += $2 }
		END { printf "trials: %d in the budget, %.1f s training them, %.1f s of it (%.0f%%) scoring their validation\n",
					 n, total, valid, (total > 0 ? 100 * valid / total : 0) }'
rm -f "$notices"
echo "on the test split (wals_evaluate, k = $k):"
$PSQL -At -F ' ' <<SQL
SELECT m, metric, round(value::numeric, 4)
FROM (VALUES ('defaults'), ('tuned')) v(m), wals_evaluate(m, 't', 'user_id', 'item_id', k => $k)
WHERE metric IN ('precision@$k', 'recall@$k', 'ndcg@$k') ORDER BY metric, m;
SQL
