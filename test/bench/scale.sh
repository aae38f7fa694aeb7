#!/bin/bash
# A hundred million ratings and more: what a training costs as its ratings
# grow past what the caches hold, against the targets of the billion
# ratings (at most 16 bytes a rating, leader and workers together; an
# iteration's cost per rating at 100M within 1.2x of its cost at 15.5M;
# the factors stored in at most 3 s at 100M; reading at most 1.5x a sum()
# over the same table).
#
#   ./test/bench/scale.sh       (from the repository root, as root, with
#                                the extension built and installed; or
#                                `make bench-scale`, which does both)
#
# 1. in a throw-away cluster makes the ratings in SQL: SCALE_RATINGS rows
#    (default 100,000,000) of SCALE_USERS users (default 666,666), each
#    rating about as many items, among SCALE_ITEMS items (default 100,000)
#    whose popularity falls as a power of their rank, a rating of 1 to 5;
#    vacuums the table and writes its pages out (sync), so that it is read
#    at rest, as a nightly training reads one;
# 2. times sum() over the table with SCALE_WORKERS parallel workers
#    (default: one less than the cores) and without, and with them again
#    at the end, the trainings' writes synced and the table read once
#    first as at the start (it has come out slower in every run so far);
# 3. trains SCALE_FACTORS factors (default 64), SCALE_ITERATIONS CG
#    iterations (default 3) with SCALE_WORKERS workers, sampling the memory
#    the training allocates (mem_sampler.py --own: the private memory of
#    the leader and its workers and the dynamic shared memory segments,
#    from counters the kernel keeps, so that the sampling takes little of
#    the CPU it times);
# 4. prints the CPU, the kernels, the sizes and the figures (the seconds to
#    read, build, iterate and store, the load against sum() with the
#    same workers; bytes a rating), also written to
#    test/bench/out/scale.txt;
# 5. loads the same rows of factors by COPY into new tables and builds
#    their primary keys, and prints those seconds beside the store's;
# 6. with SCALE_OUT_OF_CORE=1, trains again out of core, wals.max_memory at
#    half of what the training in memory allocated, with the same figures,
#    the peak of its temporary files and the factor rows that differ; with
#    SCALE_CGROUP_MB as well, a third time with the server in a memory
#    cgroup of that many MB (the page cache charged to it, so that the
#    files must stream from disk), and the cgroup's counts;
# 7. retrains the first model into its own tables, one iteration, as a
#    nightly schedule would, and prints that store's seconds beside those
#    of COPY doing the same to the tables of step 5 (every row deleted and
#    loaded again, the primary keys kept), each after a checkpoint.
#
# With SCALE_MIN_DSM (say 3GB), the cluster starts with that
# min_dynamic_shared_memory and huge_pages = try: the training's segments
# are carved from the main shared memory, whose pages the first training
# faults in and the next ones reuse, on 2 MB pages where vm.nr_hugepages
# reserves enough for it and shared_buffers (1 GB) together.  The memory
# sampler sees only segments in /dev/shm, so it says so instead of a
# figure, and SCALE_OUT_OF_CORE, which halves that figure, is left out.
# Run it twice, without and with, to compare on one machine.
#
# Nothing is asserted.  At 100M: a 4.9 GB table, about 5 minutes on 2
# cores, 1.3 GB of memory for the training; a billion
# (SCALE_RATINGS=1000000000 SCALE_USERS=6666666) needs 49 GB of disk, 13
# GB of memory and about 25 minutes.
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "scale.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare

say "training on many ratings in a throw-away PostgreSQL cluster"
POOL=()
if [ -n "${SCALE_MIN_DSM:-}" ]; then
	POOL=(-o "min_dynamic_shared_memory=$SCALE_MIN_DSM" -o huge_pages=try)
fi
if ! $PG_VIRTUALENV -t "${POOL[@]}" -o shared_buffers=1GB -o max_wal_size=20GB -o maintenance_work_mem=1GB \
	-o max_worker_processes=16 -o max_parallel_workers=16 \
	bash ${SCALE_TRACE:+-x} "$BENCH/scale_db.sh" | tee "$OUTDIR/scale.txt"; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi
say "written to $OUTDIR/scale.txt"
