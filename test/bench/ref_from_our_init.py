#!/usr/bin/python3
"""ref_wals.py, unchanged, started from the initial factors wals draws.

  ref_from_our_init.py TOOLS_DIR SEED ref_wals.py-arguments...

ref_wals.py draws X and Y from np.random.default_rng(seed).normal(0, 0.01);
wals draws each entry from a hash of (seed, id, k) (src/core/init.c, scale
WALS_INIT_SCALE = 0.01f in src/wals.h).  Different starts leave different
factors after a finite number of sweeps, so ref_wals's figures differ from
ours by an amount that says nothing about correctness.  Here ref_wals.py's
own main() runs with default_rng replaced by a generator whose two normal()
calls return wals's starting X and Y for the same ids: then ours and the
reference follow the same trajectory, up to float32 against float64, and any
gap left is a difference of objective or solver.  Prints ref_wals.py's JSON.
"""
import sys

import numpy as np

GAMMA = np.uint64(0x9E3779B97F4A7C15)
SCALE = float(np.float32(0.01))  # WALS_INIT_SCALE is a float constant


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hash3(seed, ids, k):
    h = mix64(np.full(ids.shape, seed, dtype=np.uint64) + GAMMA)
    h = mix64(h ^ (ids + GAMMA))
    return mix64(h ^ (k + GAMMA))


def wals_init(ids, f, seed):
    """wals_init_rows: rows in the order of ids, float32 values."""
    ids = np.asarray(ids, dtype=np.int64).astype(np.uint64)[:, None]
    k = np.arange(f, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        a = hash3(seed, ids, np.uint64(2) * k)
        b = hash3(seed, ids, np.uint64(2) * k + np.uint64(1))
    u1 = ((a >> np.uint64(11)).astype(np.float64) + 1.0) / 9007199254740992.0
    u2 = (b >> np.uint64(11)).astype(np.float64) / 9007199254740992.0
    x = SCALE * np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586476925 * u2)
    return x.astype(np.float32).astype(np.float64)


def main():
    tools, seed = sys.argv[1], int(sys.argv[2])
    args = sys.argv[3:]
    sys.path.insert(0, tools)
    import ref_wals

    train = args[args.index("--train") + 1]
    f = int(args[args.index("--factors") + 1])
    u, i, _ = ref_wals.load(train)
    uids, iids = np.unique(u), np.unique(i)  # ref_wals's row order
    seed_x = np.uint64(seed & 0xFFFFFFFFFFFFFFFF)  # (uint64) of an int32, as train.c
    seed_y = seed_x ^ GAMMA
    starts = [wals_init(uids, f, seed_x), wals_init(iids, f, seed_y)]

    class Start:
        def normal(self, loc, scale, shape):
            x = starts.pop(0)
            assert x.shape == tuple(shape), (x.shape, shape)
            return x

    ref_wals.np.random.default_rng = lambda *a, **k: Start()
    sys.argv = ["ref_wals.py"] + args
    ref_wals.main()


if __name__ == "__main__":
    main()
