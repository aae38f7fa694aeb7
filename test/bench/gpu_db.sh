#!/bin/sh
# The in-database half of gpu.sh, run by pg_virtualenv:
#   gpu_db.sh RESULTS_DIR ENGINE_OR_EMPTY SIZE=CSV...
# Writes RESULTS_DIR/skip (the reason) when no GPU is usable, else
# RESULTS_DIR/device and one line per training to RESULTS_DIR/results.tsv:
# size, ratings, device, solver, median s/iteration, load_s, train_s,
# store_s, total_s, upload_s, download_s, and the loss of the last
# iteration, which the CPU and the GPU must give alike.
set -eu
RES=$1
ENGINE=$2
shift 2
PSQL="psql -X -q -v ON_ERROR_STOP=1"
sql() { $PSQL -At -c "$1"; }
TAB=$(printf '\t')

sql "CREATE EXTENSION wals"
if [ -n "$ENGINE" ]; then
	# the setting is wals.so's: load it before naming the setting
	$PSQL -c "LOAD 'wals'" -c "ALTER SYSTEM SET wals.cuda_library = '$ENGINE'"
	sql "SELECT pg_reload_conf()" >/dev/null
fi
usable=$(sql "SELECT usable FROM wals_devices() WHERE device <> 'cpu' ORDER BY device LIMIT 1")
if [ "$usable" != "t" ]; then
	sql "SELECT coalesce(reason, 'unknown') FROM wals_devices() WHERE device <> 'cpu' LIMIT 1" >"$RES/skip"
	exit 0
fi
sql "SELECT name || ', ' || pg_size_pretty(memory_total) || ', compute capability ' ||
	compute_capability || ', driver ' || driver_version || ', runtime ' || runtime_version
	FROM wals_devices() WHERE device = 'gpu0'" >"$RES/device"
sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'" >"$RES/kernels"
# the CPU trainings use every core: the leader and one worker per other core
workers=$(($(nproc) - 1))

for arg in "$@"; do
	size=${arg%%=*}
	csv=${arg#*=}
	echo "gpu_db.sh: loading $size" >&2
	$PSQL <<SQL
CREATE TABLE r_$size (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
\copy r_$size FROM '$csv' WITH (FORMAT csv)
VACUUM ANALYZE r_$size;
SQL
	for device in cpu gpu; do
		for solver in cg cholesky; do
			echo "gpu_db.sh: $size, $device, $solver" >&2
			summary=$($PSQL -At -F "$TAB" -c "SET client_min_messages = notice" -c "
				SELECT ratings, load_s, train_s, store_s, total_s
				FROM wals_train('r_$size', 'user_id', 'item_id', 'rating', model => 'm_$size',
					factors => 64, iterations => 5, solver => '$solver', device => '$device',
					workers => $workers)" 2>"$RES/notices" | tail -1)
			upload=$(sed -n 's/.*Uploaded in \([0-9.]*\) s.*/\1/p' "$RES/notices")
			download=$(sed -n 's/.*downloaded in \([0-9.]*\) s.*/\1/p' "$RES/notices")
			per_it=$(sql "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l.seconds)
				FROM wals_training_log l JOIN wals_models m ON m.model = l.model AND m.schema = l.schema AND m.version = l.version
				WHERE l.model = 'm_$size' AND l.iteration > 1")
			loss=$(sql "SELECT l.loss FROM wals_training_log l
				JOIN wals_models m ON m.model = l.model AND m.schema = l.schema AND m.version = l.version
				WHERE l.model = 'm_$size' ORDER BY l.iteration DESC LIMIT 1")
			echo "$summary" | awk -F"$TAB" -v s="$size" -v d="$device" -v so="$solver" -v p="$per_it" \
				-v u="${upload:-0}" -v dl="${download:-0}" -v lo="$loss" \
				'{ printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s, $1, d, so, p, $2, $3, $4, $5, u, dl, lo }' \
				>>"$RES/results.tsv"
		done
	done
	sql "SELECT wals_drop_model('m_$size')" >/dev/null
	sql "DROP TABLE r_$size"
done
