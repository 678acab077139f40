#!/usr/bin/env python3
"""Prints a fusionbench-run --param for the graph workload: one convolution
(and an activation, ReLU unless named, so the fused variant has an
epilogue) of the given shape, batch 1; GROUPS = CI = CO is a depthwise one.

    bench/conv_graph.py CI HW CO K STRIDE [GROUPS [ACT [bn]]]  e.g. 64 56 64 3 1
    bench/conv_graph.py 1152 7 1152 5 1 1152 silu            EfficientNet's last depthwise
    bench/conv_graph.py 320 7 1280 1 1 1 silu bn             its head: conv (no bias), batch
                                                             norm, SiLU, as in the zoo

    build/worker/fusionbench-run graph --threads 2 --param "$(bench/conv_graph.py 64 56 64 3 1)"
    bench/ab.sh OLD_BIN NEW_BIN graph --threads 2 --param "$(bench/conv_graph.py 256 14 256 3 1)"
"""
import json
import sys


def main():
    if len(sys.argv) not in (6, 7, 8, 9) or (len(sys.argv) == 9 and sys.argv[8] != "bn"):
        sys.exit(__doc__)
    ci, hw, co, k, stride = (int(a) for a in sys.argv[1:6])
    groups = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    act = sys.argv[7] if len(sys.argv) > 7 else "relu"
    if groups < 1 or ci % groups or co % groups:
        sys.exit("conv_graph.py: GROUPS must divide CI and CO")
    if len(sys.argv) == 9:  # conv without bias, then batch norm (folded when fused)
        graph = {
            "tensors": [
                {"name": "input", "kind": "input", "shape": [1, ci, hw, hw]},
                {"name": "w", "kind": "weight", "shape": [co, ci // groups, k, k]},
                {"name": "bn.w", "kind": "weight", "shape": [co], "init": "one"},
                {"name": "bn.b", "kind": "weight", "shape": [co], "init": "small"},
                {"name": "bn.m", "kind": "weight", "shape": [co], "init": "small"},
                {"name": "bn.v", "kind": "weight", "shape": [co], "init": "var"},
            ],
            "nodes": [
                {"op": "conv2d", "name": "conv", "inputs": [0, 1], "pad": [k // 2, k // 2],
                 "stride": [stride, stride], "groups": groups},
                {"op": "batch_norm", "name": "bn", "inputs": [6, 2, 3, 4, 5], "eps": 1e-5},
                {"op": act, "inputs": [7]},
            ],
        }
        print("graph=" + json.dumps(graph, separators=(",", ":")))
        return
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
