#!/bin/bash
# The in-database half of validation.sh: runs inside pg_virtualenv with the
# ratings CSV's path as its argument.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

data=$1
iterations=${VALIDATION_ITERATIONS:-12}
factors=${VALIDATION_FACTORS:-128}

sql "CREATE EXTENSION wals"
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
echo "kernels: $(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"

load_file r "$data"
echo "data: $(sql "SELECT count(*) FROM r") rows, $(sql "SELECT count(DISTINCT user_id) FROM r") users," \
	"$(sql "SELECT count(DISTINCT item_id) FROM r") items; f = $factors, $iterations iterations"

# train NAME WORKERS VALIDATION: one training with the kernels of $kernels;
# prints its line.
train() {
	if [ "$3" = 0 ]; then
		extra=""
	else
		extra=", validation => $3, patience => $iterations, validation_metric => 'recall@20'"
	fi
	sql "SET client_min_messages = warning; SET wals.kernels = '$kernels';
		SELECT 1 FROM wals_train('r', 'user_id', 'item_id', model => '$1', factors => $factors,
								 iterations => $iterations, workers => $2 $extra)" > /dev/null
	sql "SELECT format('  %-18s workers %s  %s  median %s s an iteration (min %s, max %s), %s of %s scored, train_s %s',
				'$1', $2, CASE WHEN $3 = 0 THEN 'no validation  ' ELSE 'validation $3' END,
				round((percentile_cont(0.5) WITHIN GROUP (ORDER BY l.seconds))::numeric, 3),
				round(min(l.seconds)::numeric, 3), round(max(l.seconds)::numeric, 3),
				count(l.validation_score), count(*), round(max(m.train_s)::numeric, 2))
		FROM wals_training_log l JOIN wals_models m USING (model) WHERE l.model = '$1'"
}

# The kernel families to time: VALIDATION_KERNELS, or every one this CPU
# runs but generic.
families=${VALIDATION_KERNELS:-$(kernel_families | sed 's/generic//')}
for kernels in $families; do
	echo "wals.kernels = $kernels"
	for workers in ${VALIDATION_WORKERS:-2 0}; do
		train "plain_${kernels}_$workers" "$workers" 0
		train "valid_${kernels}_$workers" "$workers" 0.1
		sql "SELECT format('  workers %s: an iteration with validation takes %sx one without (medians)', $workers,
					round(((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FROM wals_training_log WHERE model = 'valid_${kernels}_$workers') /
						   (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FROM wals_training_log WHERE model = 'plain_${kernels}_$workers'))::numeric, 2))"
	done
done
