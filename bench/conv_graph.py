#!/usr/bin/env python3
"""Prints a fusionbench-run --param for the graph workload: one convolution
(and ReLU, so the fused variant has an epilogue) of the given shape, batch 1.

    bench/conv_graph.py CI HW CO K STRIDE     e.g. 64 56 64 3 1

    build/worker/fusionbench-run graph --threads 2 --param "$(bench/conv_graph.py 64 56 64 3 1)"
    bench/ab.sh OLD_BIN NEW_BIN graph --threads 2 --param "$(bench/conv_graph.py 256 14 256 3 1)"
"""
import json
import sys


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    ci, hw, co, k, stride = (int(a) for a in sys.argv[1:])
    graph = {
        "tensors": [
            {"name": "input", "kind": "input", "shape": [1, ci, hw, hw]},
            {"name": "w", "kind": "weight", "shape": [co, ci, k, k]},
            {"name": "b", "kind": "weight", "shape": [co], "init": "small"},
        ],
        "nodes": [
            {"op": "conv2d", "name": "conv", "inputs": [0, 1, 2], "pad": [k // 2, k // 2],
             "stride": [stride, stride]},
            {"op": "relu", "inputs": [3]},
        ],
    }
    print("graph=" + json.dumps(graph, separators=(",", ":")))


if __name__ == "__main__":
    main()
