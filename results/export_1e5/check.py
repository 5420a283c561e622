"""Read the N = 10^5 exports back the way a consumer does (results/export_1e5/README.md).

    python3 results/export_1e5/check.py SCHEDULE.npz PLAN.csv RANKS.csv [SAMPLES]

1. np.load: the arrays and their dtypes; 2. the project's reader (load_npz) and the replay by
symmetry of the whole schedule; 3. an independent replay of SAMPLES (default 8) random sources
in full: their rows are the representative's sends mapped by the group element g^j taking it
to the source (a cyclic group: one generator), replayed with the ordinary validator;
4. the patch-panel plan with the csv module and the project's parser: every arc of the
schedule's topology has its fibre (k fibres for a k-fold arc); 5. the rank file: ranks 0..N-1.
"""

import csv
import sys
import time
from collections import Counter

import numpy as np

from topofinder.cabling.patch_panel import read_plan
from topofinder.export.npz import load_npz
from topofinder.model.schedule import StepSchedule, validate_sources
from topofinder.model.symmetric import replay_by_symmetry


def power(g: np.ndarray, j: int) -> np.ndarray:
    """g^j by repeated squaring (permutation composition)."""
    out, sq = np.arange(g.size), g
    while j:
        if j & 1:
            out = sq[out]
        sq, j = sq[sq], j >> 1
    return out


def sampled_replay(orbit, samples: int, rng) -> list[int]:
    """Replay `samples` random sources' broadcasts in full (their own rows, the ordinary
    replay), the sources' rows being g^j applied to their representative's rows."""
    (g,) = orbit.generators
    s, n = orbit.sends, orbit.topology.n
    reps = np.unique(s[:, 1])
    rows, chosen = [], []
    for _ in range(samples):
        r = int(rng.choice(reps))
        j = int(rng.integers(0, n // reps.size))
        p = power(g, j)
        mine = s[s[:, 1] == r]
        rows.append(np.stack([mine[:, 0], p[mine[:, 1]], mine[:, 2], mine[:, 3], p[mine[:, 4]],
                              p[mine[:, 5]]], axis=1))
        chosen.append(int(p[r]))
    assert len(set(chosen)) == len(chosen), "pick distinct sources"
    validate_sources(StepSchedule(orbit.topology, orbit.shard_chunks, np.concatenate(rows)),
                     chosen)
    return chosen


def main(npz, plan_csv, ranks_csv, samples=8):
    t0 = time.perf_counter()
    with np.load(npz, allow_pickle=False) as z:
        shapes = {k: (z[k].shape, str(z[k].dtype)) for k in z.files}
    print("np.load:", shapes)
    orbit = load_npz(npz)
    replay_by_symmetry(orbit)
    topo = orbit.topology
    print(f"load_npz + replay by symmetry: {topo.expr} N={topo.n} T_L={orbit.num_steps} "
          f"tau={orbit.tau} P={orbit.shard_chunks} ({time.perf_counter() - t0:.1f} s)")
    t1 = time.perf_counter()
    chosen = sampled_replay(orbit, int(samples), np.random.default_rng(2026))
    print(f"full replay of sources {chosen}: ok ({time.perf_counter() - t1:.1f} s)")
    t2 = time.perf_counter()
    with open(plan_csv, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    fibres = Counter()
    for r in rows:
        u, w = int(r["src_node"]), int(r["dst_node"])
        fibres[u, w] += 1
        if r["kind"] == "duplex":
            fibres[w, u] += 1
    need = Counter(zip(topo.src.tolist(), topo.dst.tolist()))
    missing = [a for a, k in need.items() if fibres[a] < k]
    plan = read_plan(plan_csv, topo.n)
    assert not missing, f"arcs without a fibre: {missing[:5]}"
    assert plan.num_rows == len(rows)
    print(f"patch plan: {len(rows)} rows (csv module and read_plan), every one of the "
          f"{topo.num_arcs} arcs cabled ({time.perf_counter() - t2:.1f} s)")
    with open(ranks_csv, newline="", encoding="utf-8") as fh:
        ranks = [int(r["rank"]) for r in csv.DictReader(fh)]
    assert ranks == list(range(topo.n)), "ranks 0..N-1 in order"
    print(f"rank file: {len(ranks)} ranks 0..{topo.n - 1}")


if __name__ == "__main__":
    main(*sys.argv[1:])
