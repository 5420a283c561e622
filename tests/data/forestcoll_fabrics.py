"""Writes the six ForestColl example fabrics (paper 002 §6.2) as topofinder edge lists.

DGX A100 box (paper 002 §6.2.2): 8 GPUs on one NVSwitch at 300 GB/s per GPU and direction;
with more than one box every GPU also has its own 25 GB/s IB NIC, and the NICs of even and
odd GPUs hang off two IB switches shared by all boxes (rail network).
MI250 box (paper 002 §6.2.1, Fig. 9): 16 GPUs, Infinity Fabric links of 50 GB/s each
(XGMI below gives the link count between two GPUs, 3–4 neighbours and 7 links per GPU);
with more than one box every GPU has 16 GB/s to one IB switch shared by all boxes.
Run from the repository root: python3 tests/data/forestcoll_fabrics.py
"""

import os

XGMI = {  # GPU pair -> number of 50 GB/s Infinity Fabric links (one MI250 box)
    (0, 1): 4, (0, 4): 2, (0, 8): 1, (1, 5): 1, (1, 9): 1, (1, 10): 1, (2, 3): 4,
    (2, 6): 1, (2, 9): 1, (2, 10): 1, (3, 7): 2, (3, 11): 1, (4, 5): 4, (4, 6): 1,
    (5, 6): 1, (5, 7): 1, (6, 7): 4, (8, 9): 4, (8, 12): 2, (9, 13): 1, (10, 11): 4,
    (10, 14): 1, (11, 15): 2, (12, 13): 4, (12, 14): 1, (13, 14): 1, (13, 15): 1,
    (14, 15): 4,
}


def a100(boxes):
    links, switches = [], []
    for a in range(boxes):
        nvs = f"nvs{a}"
        switches.append(nvs)
        for g in range(8):
            links.append((f"gpu{a}_{g}", nvs, "300GB/s"))
            if boxes > 1:
                nic = f"nic{a}_{g}"
                switches.append(nic)
                links.append((f"gpu{a}_{g}", nic, "25GB/s"))
                links.append((nic, f"ib{g % 2}", "25GB/s"))
    if boxes > 1:
        switches += ["ib0", "ib1"]
    return links, switches


def mi250(boxes):
    links, switches = [], []
    for a in range(boxes):
        for (x, y), count in XGMI.items():
            links.append((f"gpu{a}_{x}", f"gpu{a}_{y}", f"{50 * count}GB/s"))
        if boxes > 1:
            links += [(f"gpu{a}_{g}", "ib", "16GB/s") for g in range(16)]
    if boxes > 1:
        switches.append("ib")
    return links, switches


def write(name, links, switches):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.edges")
    with open(path, "w") as fh:
        fh.write(f"# {name}: ForestColl example fabric (paper 002 §6.2); duplex links as "
                 "two arcs\n")
        if switches:
            fh.write("switch " + " ".join(switches) + "\n")
        for u, w, c in links:
            fh.write(f"{u} {w} {c}\n{w} {u} {c}\n")


if __name__ == "__main__":
    for boxes in (1, 2, 4):
        write(f"a100_{boxes}", *a100(boxes))
        write(f"mi250_{boxes}", *mi250(boxes))
