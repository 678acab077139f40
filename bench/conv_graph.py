#!/usr/bin/env python3
"""Prints a fusionbench-run --param for the graph workload: one convolution
(and an activation, ReLU unless named, so the fused variant has an
epilogue) of the given shape, batch 1; GROUPS = CI = CO is a depthwise one.

    bench/conv_graph.py CI HW CO K STRIDE [GROUPS [ACT]]     e.g. 64 56 64 3 1
    bench/conv_graph.py 1152 7 1152 5 1 1152 silu            EfficientNet's last depthwise

    build/worker/fusionbench-run graph --threads 2 --param "$(bench/conv_graph.py 64 56 64 3 1)"
    bench/ab.sh OLD_BIN NEW_BIN graph --threads 2 --param "$(bench/conv_graph.py 256 14 256 3 1)"
"""
import json
import sys


def main():
    if len(sys.argv) not in (6, 7, 8):
        sys.exit(__doc__)
    ci, hw, co, k, stride = (int(a) for a in sys.argv[1:6])
    groups = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    act = sys.argv[7] if len(sys.argv) > 7 else "relu"
    if groups < 1 or ci % groups or co % groups:
        sys.exit("conv_graph.py: GROUPS must divide CI and CO")
    graph = {
        "tensors": [
            {"name": "input", "kind": "input", "shape": [1, ci, hw, hw]},
            {"name": "w", "kind": "weight", "shape": [co, ci // groups, k, k]},
            {"name": "b", "kind": "weight", "shape": [co], "init": "small"},
        ],
        "nodes": [
            {"op": "conv2d", "name": "conv", "inputs": [0, 1, 2], "pad": [k // 2, k // 2],
             "stride": [stride, stride], "groups": groups},
            {"op": act, "inputs": [3]},
        ],
    }
    print("graph=" + json.dumps(graph, separators=(",", ":")))


if __name__ == "__main__":
    main()
