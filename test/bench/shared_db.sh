#!/bin/bash
# The in-database half of shared.sh: runs inside pg_virtualenv with the
# ratings CSV's path as its argument.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

data=$1
factors=${SHARED_FACTORS:-256}
iterations=${SHARED_ITERATIONS:-4}
connections=${SHARED_CONNECTIONS:-40}
work=$(mktemp -d)
chmod 777 "$work"
trap 'rm -rf "$work"' EXIT

sql "CREATE EXTENSION wals"
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
echo "kernels: $(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"
echo "pages: huge_pages = $(sql 'SHOW huge_pages'), $(awk '/^HugePages_(Total|Free):/ { printf "%s %s ", $1, $2 }' /proc/meminfo);" \
	"/dev/shm huge=$(awk '$2 == "/dev/shm" { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] ~ /^huge=/) h = substr(o[i], 6) } END { print (h == "" ? "never" : h) }' /proc/mounts)"

load_file r "$data"
sql "SET client_min_messages = warning;
	SELECT 1 FROM wals_train('r', 'user_id', 'item_id', model => 'm', factors => $factors,
							 iterations => $iterations)" > /dev/null
users=$(sql "SELECT max(user_id) FROM m_user_factors")
# pgbench runs from before the retraining (slower than the training was,
# beside 4 clients) to after its commit
duration=$(sql "SELECT 3 * ceil(total_s)::int + 10 FROM wals_models WHERE model = 'm'")
echo "model: $(sql "SELECT users || ' users, ' || items || ' items, f = ' || factors FROM wals_models WHERE model = 'm'")"

# percentile P of the numbers on standard input
pct() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int(p * NR + 0.999); if (i < 1) i = 1; printf "%.2f", v[i] }'; }

for mode in on off; do
	echo "wals.shared_items = $mode"

	: > "$work/first"
	: > "$work/load"
	for i in $(seq 1 "$connections"); do
		u=$(( (i * 7919) % users + 1 ))
		times=$($PSQL -At -c "SET wals.shared_items = $mode" -c '\timing on' -c "LOAD 'wals'" \
			-c "SELECT count(*) FROM wals_recommend($u, 10, 'm')" |
			sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
		echo "$times" | head -1 >> "$work/load"
		echo "$times" | tail -1 >> "$work/first"
	done
	echo "  loading wals in a new backend: p50 $(pct 0.5 < "$work/load") ms, p99 $(pct 0.99 < "$work/load") ms ($connections connections)"
	echo "  first call of a new backend (wals loaded): p50 $(pct 0.5 < "$work/first") ms, p99 $(pct 0.99 < "$work/first") ms, max $(pct 1 < "$work/first") ms"

	# /proc of the backend, read by this script (root, on the server's host)
	mem=$($PSQL -At <<SQL
SET wals.shared_items = $mode;
LOAD 'wals';
SELECT pg_backend_pid() AS pid \gset
\setenv WALS_PID :pid
\! awk '/^(RssAnon|RssShmem):/ { printf "%s ", \$2 }' /proc/\$WALS_PID/status
SELECT count(*) FROM generate_series(1, 50) u, wals_recommend(u, 10, 'm');
\! awk '/^(RssAnon|RssShmem):/ { printf "%s ", \$2 }' /proc/\$WALS_PID/status
SQL
)
	set -- $mem
	echo "  memory a serving backend adds: $(( $4 - $1 )) kB private (RssAnon), $(( $5 - $2 )) kB of shared memory mapped (RssShmem)"

	printf '\\set u random(1, %s)\nSELECT count(*) FROM wals_recommend(:u, 10, '"'"'m'"'"');\n' "$users" > "$work/call.sql"
	rm -f "$work"/pgbench_log.*
	(cd "$work" && PGOPTIONS="-c wals.shared_items=$mode" pgbench -n -c 4 -j 2 -T "$duration" \
		-M prepared -f call.sql -l --log-prefix=pgbench_log > "$work/pgbench.out" 2>&1) &
	bench=$!
	sleep 4
	sql "SET client_min_messages = warning; SELECT 1 FROM wals_retrain('m')" > /dev/null
	committed=$(date +%s%6N)
	wait "$bench"
	# client transaction latency(us) script epoch(s) us, less each client's
	# first call (a new connection's)
	cat "$work"/pgbench_log.* | awk '$2 > 0' > "$work/all"
	tps=$(sed -n 's/^tps = \([0-9]*\).*/\1/p' "$work/pgbench.out" | head -1)
	after=$(awk -v c="$committed" '{ t = $5 * 1000000 + $6; if (t >= c && t < c + 2000000) print $3 / 1000 }' "$work/all")
	echo "  4 clients (calls after their first) while a retraining runs and commits: $tps calls/s," \
		"slowest $(awk '{ print $3 / 1000 }' "$work/all" | pct 1) ms, p99 $(awk '{ print $3 / 1000 }' "$work/all" | pct 0.99) ms;" \
		"in the 2 s after the commit: $(echo "$after" | grep -c .) calls, slowest $(echo "$after" | pct 1) ms"
done
