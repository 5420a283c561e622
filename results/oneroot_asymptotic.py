import sys
sys.path.insert(0, "tests")
from test_oneroot import fig1, random_platform
from topofinder.scoring.oneroot.steady import throughput
from topofinder.scoring.oneroot.structures import weighted_trees
from topofinder.scoring.oneroot.periodic import periodic_schedule
from topofinder.scoring.oneroot.summary import asymptotic_rows, oneroot_schedule
from topofinder.families.build import load_topology
rows=[]
def add(name, pl):
    r=throughput(pl); rows.extend(asymptotic_rows(name, periodic_schedule(pl, weighted_trees(pl, r.rates, r.value)), (10, 100, 1000, 10000)))
add("003 Figure 1", fig1()); add("003 Figure 1", fig1("multi")); add("003 Figure 1 (B=1)", fig1("node",1))
for s in (1,8,18): add(f"random heterogeneous #{s}", random_platform(s))
add("random heterogeneous #101 (B=5/2)", random_platform(101,"node",__import__('fractions').Fraction(5,2)))
for ex in ("C(8,{1,3})","Pi(3,24)"):
    rows.extend(asymptotic_rows(ex, oneroot_schedule(load_topology(ex)), (10, 100, 1000, 10000)))
print("| platform | port model | TP | period | K | T(K) | K/TP | T(K)·TP/K |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['platform']} | {r['port_model']} | {r['TP']} | {r['period']} | {r['K']} | {r['T_K']} | {r['K_over_TP']} | {r['ratio']:.4f} |")
