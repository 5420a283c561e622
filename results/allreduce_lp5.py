"""Allreduce: LP (5) of paper 002 App. G next to the reduce-scatter + allgather tree schedule.

Run from the repository root: PYTHONPATH=. python3 results/allreduce_lp5.py > results/allreduce_lp5.md
τ in M/B (B = node bandwidth: a node's summed link capacity); the tree schedule is validated.
"""

import os
import random
import time

from topofinder.model.files import read_topology
from topofinder.families.build import load_topology
from topofinder.model.topology import Topology
from topofinder.scoring.tree_collectives import allreduce_trees

HERE = os.path.dirname(os.path.abspath(__file__))


def two_boxes():
    """Two 4-GPU boxes: all-to-all links of capacity 10 inside, GPU i of box 0 ↔ GPU i of box 1
    at capacity 1 (heterogeneous)."""
    src, dst, cap = [], [], []
    for box in (0, 4):
        for a in range(4):
            for b in range(4):
                if a != b:
                    src.append(box + a); dst.append(box + b); cap.append(10)
    for i in range(4):
        src += [i, 4 + i]; dst += [4 + i, i]; cap += [1, 1]
    return Topology(8, src, dst, expr="two boxes K4(10) + rail(1)", capacity=cap)


def random_hetero(seed, n=10):
    rng = random.Random(seed)
    src, dst, cap = [], [], []
    for i in range(n):                                   # a ring keeps it strongly connected
        src.append(i); dst.append((i + 1) % n); cap.append(rng.randint(1, 4))
    for _ in range(2 * n):
        a, b = rng.sample(range(n), 2)
        src.append(a); dst.append(b); cap.append(rng.randint(1, 4))
    return Topology(n, src, dst, expr=f"random digraph N={n} caps 1..4 (seed {seed})", capacity=cap)


def main():
    cases = [load_topology(e) for e in ("UniRing(1,8)", "BiRing(2,8)", "K(6)", "Hypercube(4)",
                                        "Torus(4,4)", "Pi(2,12)", "Pi(4,64)", "Kautz(2,4)",
                                        "L^2(C(16,{3,4}))", "DBJ(2,5)")]
    cases += [two_boxes(), random_hetero(1), random_hetero(2),
              read_topology(os.path.join(HERE, "..", "tests", "data", "mi250_1.edges"))]
    print("| topology | N | B | hetero. or self-loops | LP (5) τ_AR | RS + AG trees τ | ratio | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for topo in cases:
        t0 = time.process_time()
        ar = allreduce_trees(topo)
        secs = time.process_time() - t0
        tau = ar.tau()
        name = os.path.relpath(topo.expr, os.path.join(HERE, "..")) if os.path.isfile(topo.expr) \
            else topo.expr
        print(f"| {name} | {topo.n} | {topo.node_bandwidth} {topo.capacity_unit or 'b'} | "
              f"{'yes' if topo.heterogeneous or topo.self_loops else 'no'} | {ar.lp.tau:.6f} | "
              f"{tau.numerator}/{tau.denominator} = {float(tau):.6f} | "
              f"{float(tau) / ar.lp.tau:.4f} | {secs:.1f} |")


if __name__ == "__main__":
    main()
