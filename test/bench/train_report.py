#!/usr/bin/python3
"""Prints the training benchmark from the files train_db.sh wrote.

    train_report.py RESULT_DIR --data TEXT --commit TEXT --elapsed SECONDS
                    --load-before "1MIN 5MIN 15MIN"

The targets are those of doc/performance.md for the 2-core machine; the
peer figures are the implicit library's, measured on the same machine kind.
"""
import argparse
import datetime
import json
import os
import re
import statistics

MB = 1024.0 * 1024.0
UNITS = {"bytes": 1.0, "kB": 1024.0, "MB": MB, "GB": 1024.0 * MB, "TB": 1024.0 * 1024.0 * MB}
FACTORS = 64

# The runs of train_db.sh: name, column title.
RUNS = [("cg_w0", "cg w=0"), ("cg_w1", "cg w=1"), ("cg_w2", "cg w=2"),
        ("cholesky_w1", "chol w=1"), ("cg_w1_reg200", "cg l=200")]
SCALING = ["cg_1m", "cg_5m", "cg_w1"]

CG_ITERATION_S = 1.4
CHOLESKY_ITERATION_S = 5.0
END_TO_END_S = 42.9
INGEST_RATIO = 1.5
STORE_S = 1.0
PEAK_RATIO = 2.0
PRECISION = 0.100
NDCG = 0.080


def json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_run(res, name):
    summary, log = json_lines(os.path.join(res, name + ".json"))
    run = dict(summary)
    run["workers_launched"] = log.get("workers_launched")
    seconds = log["log_seconds"] or []
    run["iter_mean"] = statistics.mean(seconds) if seconds else None
    run["iter_median"] = statistics.median(seconds) if seconds else None
    # The estimate is in the training's first NOTICE (or its DETAIL line), in
    # the unit pg_size_pretty would choose.
    with open(os.path.join(res, name + ".notices")) as f:
        notices = f.read()
    m = re.search(r"about ([0-9.]+) (bytes|kB|MB|GB|TB)\b", notices)
    run["estimate_mb"] = float(m.group(1)) * UNITS[m.group(2)] / MB if m else None
    # The same DETAIL gives the seconds spent reading, before the matrices
    # are built: what the ingest target compares with sum(rating).
    m = re.search(r"Read in ([0-9.]+) s", notices)
    run["read_s"] = float(m.group(1)) if m else None
    mem_path = os.path.join(res, name + ".mem")
    mem = json_lines(mem_path)[0] if os.path.getsize(mem_path) else {}
    run["peak_mb"] = mem.get("peak_kb", 0) / 1024.0 or None
    run["start_mb"] = mem.get("first_kb", 0) / 1024.0 or None
    run["processes"] = mem.get("processes")
    parts = [os.path.join(res, f"{name}.rank{i}") for i in (0, 1)]
    if all(os.path.exists(p) for p in parts):
        ranks = [json_lines(p)[0] for p in parts]
        # Scored as implicit scores (train_db.sh), so the halves add up through
        # their sums for the micro precision, and by their users for ndcg.
        assert all(r["definition"] == "implicit" for r in ranks), ranks
        users = sum(r["test_users"] for r in ranks)
        run["test_users"] = users
        run["precision@10"] = sum(r["hits"] for r in ranks) / sum(r["relevant"] for r in ranks)
        run["ndcg@10"] = sum(r["ndcg@10"] * r["test_users"] for r in ranks) / users
    return run


def fmt(value, spec):
    if value is None:
        return "-"
    return format(value, spec)


def verdict(ok):
    return "ok" if ok else "MISS"


def core_bytes(run):
    """CSR + CSC + factors: the matrices in both orders and X, Y."""
    rows = run["users"] + run["items"]
    return run["ratings"] * 16 + (rows + 2) * 16 + rows * run["factors"] * 4


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    return f"{os.cpu_count()} CPUs, {cpu}, {kb / 1048576:.1f} GiB memory"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("res")
    ap.add_argument("--data", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--elapsed", type=int, required=True)
    ap.add_argument("--load-before", required=True)
    a = ap.parse_args()

    server = json_lines(os.path.join(a.res, "server.json"))[0]
    data = json_lines(os.path.join(a.res, "data.json"))[0]
    runs = {name: load_run(a.res, name) for name, _ in RUNS}
    scaling = {name: runs.get(name) or load_run(a.res, name) for name in SCALING}
    cg, chol, tuned = runs["cg_w1"], runs["cholesky_w1"], runs["cg_w1_reg200"]
    core_mb = core_bytes(cg) / MB
    peak_limit = PEAK_RATIO * core_mb
    sum_s = data["sum_s"]

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    s = server["settings"]
    out = []
    p = out.append
    p(f"wals training benchmark, {now}")
    p(f"machine: {machine()}")
    p(f"PostgreSQL: {server['server_version'].split(' on ')[0]}; shared_buffers "
      f"{int(s['shared_buffers']) * 8 // 1024} MB, max_worker_processes {s['max_worker_processes']}, "
      f"max_parallel_workers {s['max_parallel_workers']}, "
      f"max_parallel_maintenance_workers {s['max_parallel_maintenance_workers']}, "
      f"max_parallel_workers_per_gather {s['max_parallel_workers_per_gather']}")
    p(f"wals: {server['wals_version']}, {a.commit}; kernels: {server.get('kernels', '?')}")
    p(f"data: {a.data}")
    p(f"  -> {data['ratings']:,} training ratings ({cg['users']:,} users, {cg['items']:,} items), "
      f"{data['test_rows']:,} held out ({data['known_rows']:,} with a known user and item, "
      f"{fmt(cg.get('test_users'), ',')} test users)")
    p("ranking metrics: as implicit.evaluation.ranking_metrics_at_k (implicit 0.7.3), the peer's:")
    p("  precision@10 = sum of hits / sum of min(10, held-out items) over the test users (micro),")
    p("  ndcg@10 averaged over the test users; all held-out rows, 10 recommendations excluding")
    p("  the user's training items; they depend on the regularization from about 30 up")
    p("  (test/bench/regularization.sh), not below")
    p(f"ingest baseline: {data['sum_query']}: {sum_s:.3f} s, best of 3 warm runs timed in the "
      f"server (parallel workers planned: {data['sum_workers_planned']})")
    p(f"CSR + CSC + factors at f={FACTORS}: nnz*16 + (users+items+2)*16 + (users+items)*f*4 "
      f"= {core_mb:.1f} MB; peak target {PEAK_RATIO:g}x = {peak_limit:.1f} MB")
    p("")

    # Every run, with the target beside each figure.
    p(f"implicit, f={FACTORS}, 15 iterations, CG 3 steps; w = workers => (processes: 1 + w)")
    rows = [
        ("workers launched", "workers_launched", "d", "wals_models.workers"),
        ("read s", "read_s", ".2f", "reading the rows (DETAIL of the first NOTICE)"),
        ("read / sum(rating)", "read_ratio", ".2f", f"<= {INGEST_RATIO:g}x"),
        ("ingest s (load_s)", "load_s", ".2f", "reading and building both matrices"),
        ("ingest / sum(rating)", "ingest_ratio", ".2f", ""),
        ("s/iteration, mean", "iter_mean", ".3f", ""),
        ("s/iteration, median", "iter_median", ".3f",
         f"cg <= {CG_ITERATION_S:g} (implicit 2.84), chol <= {CHOLESKY_ITERATION_S:g} (implicit 11.3 at 15M)"),
        ("speedup over w=0", "speedup", ".2f", "median s/iteration of w=0 / of w"),
        ("train s", "train_s", ".2f", ""),
        ("store s", "store_s", ".2f", f"<= {STORE_S:g}"),
        ("total s (wals_train)", "total_s", ".2f", f"cg <= {END_TO_END_S:g} (implicit fit() alone)"),
        ("final loss", "loss", ",.0f", ""),
        ("memory estimate MB", "estimate_mb", ".1f", "NOTICE of wals_train"),
        ("peak MB, leader+workers", "peak_mb", ".1f", f"<= {peak_limit:.1f}"),
        ("  of which at start MB", "start_mb", ".1f", "first sample: the backend before training"),
        ("processes sampled", "processes", "d", "most in one sample"),
        ("precision@10", "precision@10", ".4f", f">= {PRECISION:.3f} (implicit 0.1007)"),
        ("ndcg@10", "ndcg@10", ".4f", f">= {NDCG:.3f} (implicit 0.0801)"),
    ]
    base = runs["cg_w0"]["iter_median"]
    for run in runs.values():
        run["ingest_ratio"] = run["load_s"] / sum_s if sum_s else None
        run["read_ratio"] = run["read_s"] / sum_s if sum_s and run["read_s"] else None
        run["speedup"] = None
        if run["model"].startswith("cg") and base and run["iter_median"]:
            run["speedup"] = base / run["iter_median"]
    width = 24
    p(f"{'':{width}}" + "".join(f"{title:>12}" for _, title in RUNS) + "  target")
    for label, key, spec, target in rows:
        cells = "".join(f"{fmt(runs[name].get(key), spec):>12}" for name, _ in RUNS)
        p(f"{label:{width}}{cells}  {target}".rstrip())
    p("")

    # The headline figures: leader + 1 worker, the two cores.
    p("targets, workers => 1 (leader + 1 worker on 2 cores):")
    peak = max(r["peak_mb"] or 0 for r in runs.values())
    checks = [
        ("CG iteration (median)", cg["iter_median"], "s", ".3f", f"<= {CG_ITERATION_S:g} s",
         cg["iter_median"] is not None and cg["iter_median"] <= CG_ITERATION_S),
        ("Cholesky iteration (median)", chol["iter_median"], "s", ".3f",
         f"<= {CHOLESKY_ITERATION_S:g} s",
         chol["iter_median"] is not None and chol["iter_median"] <= CHOLESKY_ITERATION_S),
        ("wals_train end to end (CG)", cg["total_s"], "s", ".2f", f"<= {END_TO_END_S:g} s",
         cg["total_s"] <= END_TO_END_S),
        ("read / sum(rating) (CG)", cg["read_ratio"], "x", ".2f", f"<= {INGEST_RATIO:g}x",
         cg["read_ratio"] is not None and cg["read_ratio"] <= INGEST_RATIO),
        ("store (CG)", cg["store_s"], "s", ".2f", f"<= {STORE_S:g} s", cg["store_s"] <= STORE_S),
        ("peak memory (largest run)", peak, "MB", ".1f", f"<= {peak_limit:.1f} MB",
         0 < peak <= peak_limit),
        ("precision@10 (CG)", cg.get("precision@10"), "", ".4f", f">= {PRECISION:.3f}",
         (cg.get("precision@10") or 0) >= PRECISION),
        ("ndcg@10 (CG)", cg.get("ndcg@10"), "", ".4f", f">= {NDCG:.3f}",
         (cg.get("ndcg@10") or 0) >= NDCG),
        ("precision@10 (Cholesky)", chol.get("precision@10"), "", ".4f", f">= {PRECISION:.3f}",
         (chol.get("precision@10") or 0) >= PRECISION),
        ("ndcg@10 (Cholesky)", chol.get("ndcg@10"), "", ".4f", f">= {NDCG:.3f}",
         (chol.get("ndcg@10") or 0) >= NDCG),
        ("precision@10 (CG, l=200)", tuned.get("precision@10"), "", ".4f", f">= {PRECISION:.3f}",
         (tuned.get("precision@10") or 0) >= PRECISION),
        ("ndcg@10 (CG, l=200)", tuned.get("ndcg@10"), "", ".4f", f">= {NDCG:.3f}",
         (tuned.get("ndcg@10") or 0) >= NDCG),
    ]
    for label, value, unit, spec, target, ok in checks:
        figure = f"{fmt(value, spec)} {unit}".rstrip()
        p(f"  {label:30}{figure:>14}   {target:14}{verdict(ok)}")
    p("")

    # Cost per iteration against the number of ratings.
    p(f"scaling: CG 3 steps, f={FACTORS}, workers => 1; 1M and 5M: TABLESAMPLE BERNOULLI "
      "samples of the training table, 5 iterations; full: the cg w=1 run")
    p("  (marginal: the extra seconds per extra million ratings over the row above, which")
    p("  leaves out the cost per user and item row that the smallest sample is dominated by)")
    p(f"  {'ratings':>12}{'users':>10}{'items':>8}{'s/iteration':>14}{'s per M ratings':>18}"
      f"{'marginal':>10}")
    previous = None
    for name in SCALING:
        r = scaling[name]
        median = r["iter_median"]
        per_m = marginal = None
        if median is not None:
            per_m = median / (r["ratings"] / 1e6)
            if (previous and previous["iter_median"] is not None
                    and r["ratings"] != previous["ratings"]):
                marginal = ((median - previous["iter_median"])
                            / ((r["ratings"] - previous["ratings"]) / 1e6))
        p(f"  {r['ratings']:>12,}{r['users']:>10,}{r['items']:>8,}{fmt(median, '.3f'):>14}"
          f"{fmt(per_m, '.3f'):>18}{fmt(marginal, '.3f'):>10}")
        previous = r
    p("")

    # The same table with each family of kernels (wals.kernels).
    families_path = os.path.join(a.res, "families")
    families = open(families_path).read().split() if os.path.exists(families_path) else []
    if families:
        p(f"kernels: each family this CPU runs, forced with wals.kernels; workers => 1, "
          f"5 iterations; ratio to the first (widest) family; loss: relative difference")
        p("  of the final loss from generic's")
        p(f"  {'kernels':10}{'CG s/it':>10}{'ratio':>8}{'loss':>10}{'chol s/it':>12}{'ratio':>8}{'loss':>10}")
        fam = {f: (load_run(a.res, f"kernels_cg_{f}"), load_run(a.res, f"kernels_cholesky_{f}"))
               for f in families}
        first = fam[families[0]]
        generic = fam.get("generic")
        for f in families:
            cells = ""
            for k in (0, 1):
                run = fam[f][k]
                ratio = run["iter_median"] / first[k]["iter_median"]
                diff = (abs(run["loss"] - generic[k]["loss"]) / generic[k]["loss"]
                        if generic else None)
                cells += (f"{fmt(run['iter_median'], '.3f'):>{10 if k == 0 else 12}}"
                          f"{ratio:>8.2f}{fmt(diff, '.1e'):>10}")
            p(f"  {f:10}{cells}")
        p("")
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    p(f"benchmark run time: {a.elapsed // 60} min {a.elapsed % 60} s; load average (1, 5, 15 min) "
      f"before: {a.load_before}, after: {load_after}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
