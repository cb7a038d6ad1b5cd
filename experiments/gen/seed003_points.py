#!/usr/bin/env python3
"""Prints the `design.scenarios` lists of experiments/seed003.yaml.

Seed 003's designs tie the paths' parameters together (homogeneous paths are equal; the
heterogeneous designs split a total bandwidth and RTT by balances or weights), which the
lab's independent per-path dimensions cannot express, so its file lists the points. This
script makes them: homogeneous 2-path, a grid over seed 003's Table 1 ranges (2.5-100
Mbit/s, 5-100 ms, both paths equal); heterogeneous 2-path, a grid of bandwidth and RTT
balances 0.1-0.9 over 100 Mbit/s and 200 ms (Table 2: path 0 gets b and r of them, path 1
the rest); 3-path, 12 draws of six weights uniform in [0.1, 0.9] (random.Random(3)) over
100 Mbit/s and 300 ms (Table 3: each path gets its weight's share). Every queue is 1.5 x the
path's bandwidth-delay product, i.e. 1.5 x its RTT in time.

Usage: python3 experiments/gen/seed003_points.py > /tmp/points.yaml (then paste).
"""
import random


def rate(mbit):
    return f"{round(mbit * 1000)}kbit"


def ms(x):
    return f"{x:.3f}ms"


def path(i, mbit, rtt):
    return f"path{i}.rate: {rate(mbit)}, path{i}.rtt: {ms(rtt)}, path{i}.queue: {ms(1.5 * rtt)}"


def main():
    print("# homogeneous-2path")
    # Fastest first: the short form (`--limit 1`, CI) runs 100 Mbit/s, not a 160 s download.
    for bw in (100, 50, 25, 10, 2.5):
        for rtt in (5, 20, 50, 100):
            print(f"        - {{{path(0, bw, rtt)}, {path(1, bw, rtt)}}}")
    print("# heterogeneous-2path")
    for b in (0.1, 0.3, 0.5, 0.7, 0.9):
        for r in (0.1, 0.3, 0.5, 0.7, 0.9):
            print(f"        - {{{path(0, 100 * b, 200 * r)}, {path(1, 100 * (1 - b), 200 * (1 - r))}}}")
    print("# heterogeneous-3path")
    rng = random.Random(3)
    for _ in range(12):
        wb = [rng.uniform(0.1, 0.9) for _ in range(3)]
        wr = [rng.uniform(0.1, 0.9) for _ in range(3)]
        parts = [path(i, 100 * wb[i] / sum(wb), 300 * wr[i] / sum(wr)) for i in range(3)]
        print("        - {" + ", ".join(parts) + "}")


if __name__ == "__main__":
    main()
