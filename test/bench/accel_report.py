#!/usr/bin/python3
"""Report of the acceleration benchmark (accel.sh): reads accel.csv, prints
one line per run, and draws the loss against seconds of every run as an SVG
(no plotting library needed).

    accel_report.py accel.csv accel.svg
"""
import csv
import sys
from collections import OrderedDict

TOL = 1.001  # within 0.1% of plain CG's last loss


def read(path):
    header = ""
    lines = []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                header = header or line[2:].strip()
            else:
                lines.append(line)
    runs = OrderedDict()
    for row in csv.DictReader(lines):
        key = (row["set"], int(row["factors"]), row["method"])
        runs.setdefault(key, []).append(row)
    return header, runs


def fnum(x):
    return float(x) if x not in (None, "") else None


def main():
    header, runs = read(sys.argv[1])
    print(header)
    print("target: within 0.1%% of plain CG's loss after its last iteration (x %.3f)" % TOL)
    print("%-4s %5s %-13s %8s %11s %9s %14s %8s %8s %s" % (
        "set", "f", "method", "s/iter", "iters->tgt", "s->tgt", "final loss",
        "p@10", "ndcg@10", "ncg steps"))
    cg64 = {}
    for (s, f, m), rows in runs.items():
        if m == "cg" and f == 64:
            cg64[s] = fnum(rows[-1]["seconds"]) / len(rows)
    for (s, f, m), rows in runs.items():
        cg = runs.get((s, f, "cg"))
        target = fnum(cg[-1]["loss"]) * TOL if cg else None
        hit = next((r for r in rows if target and fnum(r["loss"]) <= target), None)
        per = fnum(rows[-1]["seconds"]) / len(rows)
        ratio = " (%.1fx a CG f=64 iteration)" % (per / cg64[s]) if s in cg64 and f != 64 else ""
        print("%-4s %5d %-13s %8.3f %11s %9s %14.6g %8s %8s %d%s" % (
            s, f, m, per,
            hit["iteration"] if hit else "-",
            "%.2f" % fnum(hit["seconds"]) if hit else "-",
            fnum(rows[-1]["loss"]),
            "%.4f" % fnum(rows[-1]["precision"]) if rows[-1]["precision"] else "-",
            "%.4f" % fnum(rows[-1]["ndcg"]) if rows[-1]["ndcg"] else "-",
            sum(1 for r in rows if r["step"] == "ncg"), ratio))
    if len(sys.argv) > 2:
        svg(runs, sys.argv[2], header)


COLORS = {"cg": "#1f77b4", "cg+ncg": "#d62728", "subspace": "#2ca02c",
          "subspace+ncg": "#ff7f0e", "cholesky": "#7f7f7f"}


def svg(runs, path, header):
    panels = sorted({(s, f) for (s, f, m) in runs if (s, f, "cg") in runs})
    w, h, pad = 360, 240, 48
    cols = 3
    rows_n = (len(panels) + cols - 1) // cols
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (cols * w, rows_n * h + 40),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="8" y="16">%s</text>' % header.replace("&", "&amp;").replace("<", "&lt;"),
           '<text x="8" y="32">loss / (plain CG loss after its last iteration), '
           'against training seconds</text>']
    for k, (s, f) in enumerate(panels):
        ox, oy = (k % cols) * w, 40 + (k // cols) * h
        ref = fnum(runs[(s, f, "cg")][-1]["loss"])
        series = [(m, [(fnum(r["seconds"]), fnum(r["loss"]) / ref) for r in rows])
                  for (s2, f2, m), rows in runs.items() if (s2, f2) == (s, f)]
        tmax = max(p[0] for _, pts in series for p in pts)
        ylo, yhi = 0.995, 1.05
        X = lambda t: ox + pad + (w - pad - 10) * t / tmax
        Y = lambda y: oy + h - pad + 10 - (h - pad - 10) * (min(max(y, ylo), yhi) - ylo) / (yhi - ylo)
        out.append('<text x="%d" y="%d">%s, f = %d</text>' % (ox + pad, oy + 12, s, f))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (
            ox + pad, oy + 20, w - pad - 10, h - pad - 10 - 10))
        for y in (1.0, 1.001, 1.01, 1.03):
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (
                X(0), Y(y), X(tmax), Y(y)))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%.3f</text>' % (ox + pad - 3, Y(y) + 4, y))
        out.append('<text x="%.1f" y="%d" text-anchor="end">%.0f s</text>' % (X(tmax), oy + h - 22, tmax))
        for j, (m, pts) in enumerate(series):
            c = COLORS.get(m, "black")
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (
                c, " ".join("%.1f,%.1f" % (X(t), Y(y)) for t, y in pts)))
            out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (ox + w - 90, oy + 34 + 12 * j, c, m))
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
