#!/usr/bin/python3
"""Dislikes against ref_wals.py: wals_train and the reference on the same
small implicit set with negative ratings, from the same starting factors.

  negative_ref.py TOOLS_DIR     (inside a cluster with wals installed:
                                 test/bench/negative_ref.sh starts one)

The set: 400 users x 250 items, about 8,000 rows of ratings 1 to 5, a
quarter of them negated, and a tenth of the pairs repeated with a rating of
either sign, so that merged sums of both signs (and some zeros) occur.  ref_wals.py's
solve_side and loss take per-cell confidences C and targets P; here they
get the model of doc/training.md (Dislikes): the rows of a pair summed
first, then C = 1 + alpha |r| and P = (r >= 0).  wals_train runs the
Cholesky solver, one process, from the factors it draws for seed 42, and
the reference starts from the very same factors (ref_from_our_init.py's
wals_init), so that the two follow one trajectory up to float32 against
float64.  Prints, per iteration, both losses and their relative
difference, then the relative Frobenius difference of the final X and Y.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_from_our_init import GAMMA, wals_init  # noqa: E402

USERS, ITEMS, ROWS = 400, 250, 8000
FACTORS, ITERATIONS, REG, ALPHA, SEED = 8, 10, 0.1, 2.0, 42
PSQL = ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]


def make_rows(rng):
    u = rng.integers(0, USERS, ROWS)
    i = rng.integers(0, ITEMS, ROWS)
    r = rng.integers(1, 6, ROWS).astype(np.float64)
    r[rng.random(ROWS) < 0.25] *= -1
    again = rng.random(ROWS) < 0.1
    ru = u[again]
    ri = i[again]
    rr = rng.integers(-5, 6, again.sum()).astype(np.float64)
    return np.concatenate([u, ru]) + 1, np.concatenate([i, ri]) + 1, np.concatenate([r, rr])


def psql(sql, stdin=None):
    return subprocess.run(PSQL + ["-c", sql], input=stdin, capture_output=True, text=True,
                          check=True).stdout


def ours(u, i, r):
    csv = "".join(f"{a},{b},{c:g}\n" for a, b, c in zip(u, i, r))
    psql("CREATE EXTENSION IF NOT EXISTS wals")
    psql("DROP TABLE IF EXISTS dislikes; CREATE TABLE dislikes (user_id int, item_id int, rating real)")
    psql("\\copy dislikes FROM STDIN WITH (FORMAT csv)", stdin=csv)
    psql(f"SELECT * FROM wals_train('dislikes', 'user_id', 'item_id', 'rating', model => 'dislikes', "
         f"factors => {FACTORS}, iterations => {ITERATIONS}, regularization => {REG}, "
         f"alpha => {ALPHA}, solver => 'cholesky', workers => 0, seed => {SEED}, replace => true)")
    losses = [float(x) for x in psql(
        "SELECT loss FROM wals_training_log WHERE model = 'public.dislikes' OR model = 'dislikes' "
        "ORDER BY version DESC, iteration LIMIT %d" % ITERATIONS).split()]

    def factors(side):
        rows = psql(f"SELECT {side}_id, array_to_json(factors) FROM dislikes_{side}_factors ORDER BY 1")
        ids, vals = [], []
        for line in rows.split("\n"):
            if line:
                a, b = line.split("|", 1)
                ids.append(int(a))
                vals.append(json.loads(b))
        return np.array(ids), np.array(vals, dtype=np.float64)

    return losses, factors("user"), factors("item")


def reference(tools, u, i, r):
    sys.path.insert(0, tools)
    import ref_wals

    uids, uix = np.unique(u, return_inverse=True)
    iids, iix = np.unique(i, return_inverse=True)
    m, n = uids.size, iids.size
    M = sp.coo_matrix((r, (uix, iix)), shape=(m, n)).tocsr()
    M.sum_duplicates()
    Rt = M.T.tocsr()

    def weights(S):
        return 1.0 + ALPHA * np.abs(S.data), (S.data >= 0).astype(np.float64)

    Cu, Pu = weights(M)
    Ci, Pi = weights(Rt)
    su, si = np.ones(m), np.ones(n)
    seed_x = np.uint64(SEED)
    X = wals_init(uids, FACTORS, seed_x)
    Y = wals_init(iids, FACTORS, seed_x ^ GAMMA)
    losses = []
    for _ in range(ITERATIONS):
        X = ref_wals.solve_side(M, Cu, Pu, Y, 1.0, REG, su)
        Y = ref_wals.solve_side(Rt, Ci, Pi, X, 1.0, REG, si)
        losses.append(ref_wals.loss(M, Cu, Pu, X, Y, 1.0, REG, su, si))
    merged = M.data
    return losses, (uids, X), (iids, Y), merged


def rel_frobenius(ours_side, ref_side):
    oid, o = ours_side
    rid, x = ref_side
    assert np.array_equal(oid, rid), "different ids"
    return float(np.linalg.norm(o - x) / np.linalg.norm(x))


def main():
    tools = sys.argv[1]
    u, i, r = make_rows(np.random.default_rng(SEED))
    ref_losses, ref_x, ref_y, merged = reference(tools, u, i, r)
    our_losses, our_x, our_y = ours(u, i, r)
    print(f"data: {USERS} x {ITEMS} drawn, {u.size} rows, {merged.size} merged pairs: "
          f"{(merged > 0).sum()} likes, {(merged == 0).sum()} zero sums, {(merged < 0).sum()} dislikes")
    print(f"model: implicit, f {FACTORS}, alpha {ALPHA}, lambda {REG}, w0 1, cholesky, seed {SEED}")
    print("iteration  wals (float32)      ref_wals (float64)  rel. diff")
    worst = 0.0
    for k, (a, b) in enumerate(zip(our_losses, ref_losses), 1):
        d = (a - b) / b
        worst = max(worst, abs(d))
        print(f"{k:9d}  {a:18.6f}  {b:18.6f}  {d:+.2e}")
    print(f"largest relative loss difference: {worst:.2e}")
    print(f"final factors, relative Frobenius difference: X {rel_frobenius(our_x, ref_x):.2e}, "
          f"Y {rel_frobenius(our_y, ref_y):.2e}")


if __name__ == "__main__":
    main()
