#!/bin/sh
# Dislikes (negative implicit ratings) of wals_train against ref_wals.py, on
# a small set from the same starting factors; see negative_ref.py.
#
#   ./test/bench/negative_ref.sh     (from the repository root, as root, with
#                                     the extension built and installed)
#
# Environment: WALS_TOOLS, the folder of ref_wals.py (default ../shared/tools).
set -eu

cd "$(dirname "$0")/../.."

say() { echo "negative_ref.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare ref_wals.py
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
$PG_VIRTUALENV -t "$PY" "$BENCH/negative_ref.py" "$TOOLS"
