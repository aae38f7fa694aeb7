#!/bin/bash
# The in-database half of regularization.sh, run inside `pg_virtualenv -t -v
# 15`, which provides PGHOST/PGPORT/PGUSER/PGPASSWORD.
#
#   regularization_db.sh DATA "REGULARIZATION ..." TABLE
#
# DATA is the path of the data set without ".csv", as for train_db.sh.
# Writes the table, one line per value, to the file TABLE.
set -euo pipefail

DATA=$1
VALUES=$2
TABLE=$3
BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

RES=$(mktemp -d -t wals-regularization.XXXXXX)
trap 'rm -rf "$RES"' EXIT

sql "CREATE EXTENSION wals"
load r20m_ratings "$DATA.csv"
load r20m_test "$DATA.test.csv"
sql "VACUUM ANALYZE r20m_ratings"

printf '%16s%14s%14s%10s%12s%10s\n' regularization loss precision@10 ndcg@10 test_users train_s > "$TABLE"
n=0
for reg in $VALUES; do
	n=$((n + 1))
	model=reg$n
	summary=$(sql "SET client_min_messages = warning;
		SELECT json_build_object('loss', loss, 'train_s', train_s)
		FROM wals_train('r20m_ratings', 'user_id', 'item_id', 'rating', model => '$model',
			factors => 64, iterations => 15, regularization => $reg, feedback => 'implicit',
			alpha => 1, solver => 'cg', cg_steps => 3, device => 'cpu', workers => 1)")
	# Two concurrent sessions, one per core, as train_db.sh scores.
	ranking_json "$model" r20m implicit "user_id % 2 = 0" > "$RES/$model.rank0" &
	even=$!
	ranking_json "$model" r20m implicit "user_id % 2 = 1" > "$RES/$model.rank1"
	wait "$even"
	# The halves add up through their sums: hits / relevant for the micro
	# precision, ndcg weighted by each half's test users.
	$PY - "$reg" "$summary" "$RES/$model.rank0" "$RES/$model.rank1" >> "$TABLE" <<'EOF'
import json, sys
reg, summary = sys.argv[1], json.loads(sys.argv[2])
parts = [json.load(open(p)) for p in sys.argv[3:]]
users = sum(p["test_users"] for p in parts)
precision = sum(p["hits"] for p in parts) / sum(p["relevant"] for p in parts)
ndcg = sum(p["ndcg@10"] * p["test_users"] for p in parts) / users
print(f"{reg:>16}{summary['loss']:>14,.0f}{precision:>14.4f}{ndcg:>10.4f}{users:>12,}{summary['train_s']:>10.1f}")
EOF
	echo "  $(tail -n 1 "$TABLE")"
	sql "SELECT wals_drop_model('$model')" > /dev/null
done
