#!/bin/bash
# GPU training benchmark: seconds per iteration on the GPU and on 2 CPU
# cores at 100k, 1M, 5M and 20M ratings (f = 64, CG and Cholesky), the
# speedup at each size and the crossover, the end-to-end split of each GPU
# training (load / upload / train / download / store), and a plot of
# seconds per iteration against ratings for both devices.
#
#   ./test/bench/gpu.sh        (from the repository root, as root, with the
#                               extension and its CUDA engine installed; or
#                               make bench-gpu, which does both first)
#
# Without a usable GPU it says why and stops with status 0.
#   WALS_BENCH_ENGINE=path     run against another engine than the installed
#                              one, to try the script where no GPU exists:
#                              test/gpu/host_engine.so (its "gpu" figures are
#                              then src/core's, one core) or
#                              test/gpu/wals_cuda_emu.so (gpu/'s kernels on
#                              the emulated device, far slower than either)
#   WALS_BENCH_SIZES="100k 1m" the sizes to run (default: 100k 300k 1m 2m 5m 20m)
#   WALS_TOOLS                 the folder of gen_ratings.py
# The report goes to test/bench/out/gpu.txt, the plot to gpu.png beside it
# when gnuplot is installed (as root the script installs gnuplot-nox).
set -euo pipefail

cd "$(dirname "$0")/../.."
START=$(date +%s)

say() { echo "gpu.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

# The data set of each size, generated once; the users and items grow with
# the square root of the ratings, as in the 20M set.
sized() {
	case $1 in
	100k) DATA=implicit-u5000-i2000-n100000-s$SEED
		gen "$DATA" --users 5000 --items 2000 --nnz 100000 ;;
	300k) DATA=implicit-u14000-i3500-n300000-s$SEED
		gen "$DATA" --users 14000 --items 3500 --nnz 300000 ;;
	1m) DATA=implicit-u30000-i6000-n1000000-s$SEED
		gen "$DATA" --users 30000 --items 6000 --nnz 1000000 ;;
	2m) DATA=implicit-u42000-i8500-n2000000-s$SEED
		gen "$DATA" --users 42000 --items 8500 --nnz 2000000 ;;
	5m) DATA=implicit-u69000-i13500-n5000000-s$SEED
		gen "$DATA" --users 69000 --items 13500 --nnz 5000000 ;;
	20m) gen_20m ;;
	*) say "unknown size $1 (100k, 300k, 1m, 2m, 5m or 20m)"; exit 1 ;;
	esac
}

RES=$(mktemp -d -t wals-gpu.XXXXXX)
trap 'rm -rf "$RES"' EXIT
chmod 755 "$RES"
ENGINE=""
if [ -n "${WALS_BENCH_ENGINE:-}" ]; then
	# where the server's user can read it
	cp "$WALS_BENCH_ENGINE" "$RES/engine.so"
	chmod 644 "$RES/engine.so"
	ENGINE=$RES/engine.so
fi

ARGS=()
for size in ${WALS_BENCH_SIZES:-100k 300k 1m 2m 5m 20m}; do
	sized "$size"
	ARGS+=("$size=$CACHE/$DATA.csv")
done

say "training in a throw-away PostgreSQL 15 cluster"
if ! $PG_VIRTUALENV -t -o shared_buffers=1GB -o max_worker_processes=$(($(nproc) + 8)) \
	-o max_parallel_workers=$(nproc) \
	bash "$BENCH/gpu_db.sh" "$RES" "$ENGINE" "${ARGS[@]}" >&2; then
	say "failed (the end of the server log, if any, is above)"
	exit 1
fi
if [ -f "$RES/skip" ]; then
	say "skipped: no usable GPU: $(cat "$RES/skip")"
	exit 0
fi

OUT=$OUTDIR/gpu.txt
{
	echo "wals GPU training benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "GPU: $(cat "$RES/device")"
	echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) cores (workers => $(($(nproc) - 1))), kernels: $(cat "$RES/kernels")"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "f = 64, implicit, CG 3 steps and Cholesky, 5 iterations; seconds per iteration"
	echo "are the median of iterations 2 to 5 (wals_training_log); loss differs is"
	echo "|cpu - gpu| / cpu of the loss after the last iteration"
	echo
	printf '%-6s %10s %-9s %12s %12s %9s %12s\n' size ratings solver "cpu s/it" "gpu s/it" speedup "loss differs"
	awk -F'\t' '$3 == "cpu" { cpu[$1 "\t" $4] = $5; n[$1] = $2; cl[$1 "\t" $4] = $12 }
		$3 == "gpu" { gpu[$1 "\t" $4] = $5; gl[$1 "\t" $4] = $12 }
		END {
			for (k in cpu) if (k in gpu) {
				split(k, p, "\t")
				d = cl[k] - gl[k]
				if (d < 0) d = -d
				printf "%-6s %10d %-9s %12.6f %12.6f %8.1fx %12.1e\n", p[1], n[p[1]], p[2], cpu[k], gpu[k], cpu[k] / gpu[k], d / cl[k]
			}
		}' "$RES/results.tsv" | sort -k3,3 -k2,2n
	echo
	echo "crossover (the fewest ratings from which the GPU is faster), by the seconds"
	echo "of an iteration and by the whole training's train_s (5 iterations, the"
	echo "GPU's upload, start and download included):"
	for solver in cg cholesky; do
		for col in 5 7; do
			awk -F'\t' -v s="$solver" -v col=$col '$4 == s { t[$2 "\t" $3] = $col; r[$2] = 1 }
				END {
					c = "none of the sizes run"
					for (x in r) if (t[x "\tgpu"] < t[x "\tcpu"] && (c == "none of the sizes run" || x + 0 < c + 0)) c = x
					printf "  %-9s %-10s %s\n", s, col == 5 ? "iteration:" : "training:", c
				}' "$RES/results.tsv"
		done
	done
	echo
	echo "end to end (seconds; train = upload + iterations + download, the upload and"
	echo "download as the GPU training's NOTICE gives them):"
	printf '%-6s %-9s %-4s %8s %8s %8s %9s %8s %8s\n' size solver dev load upload train download store total
	awk -F'\t' '{ printf "%-6s %-9s %-4s %8.3f %8.3f %8.3f %9.3f %8.3f %8.3f\n", $1, $4, $3, $6, $10, $7, $11, $8, $9 }' \
		"$RES/results.tsv"
	echo
	echo "run time: $(($(date +%s) - START)) s"
} | tee "$OUT"
cp "$RES/results.tsv" "$OUTDIR/gpu.tsv"

if ! command -v gnuplot >/dev/null && [ "$(id -u)" -eq 0 ]; then
	say "installing gnuplot-nox for the plot"
	./test/install_deps.sh --bench >/dev/null || true
fi
if command -v gnuplot >/dev/null; then
	for d in cpu gpu; do
		for s in cg cholesky; do
			awk -F'\t' -v d=$d -v s=$s '$3 == d && $4 == s { print $2, $5 }' "$RES/results.tsv" |
				sort -n >"$RES/$d-$s.dat"
		done
	done
	gnuplot <<EOF
set terminal pngcairo size 900,600
set output '$OUTDIR/gpu.png'
set logscale xy
set xlabel 'ratings'
set ylabel 'seconds per iteration (f = 64)'
set key top left
set grid
plot '$RES/cpu-cg.dat' with linespoints title 'CPU, CG', \
     '$RES/cpu-cholesky.dat' with linespoints title 'CPU, Cholesky', \
     '$RES/gpu-cg.dat' with linespoints title 'GPU, CG', \
     '$RES/gpu-cholesky.dat' with linespoints title 'GPU, Cholesky'
EOF
	say "plot: $OUTDIR/gpu.png"
else
	say "gnuplot not found: no plot"
fi
