#!/usr/bin/env python3
"""bench/gemm.py: what our packed GEMM buys each model against OpenBLAS, on
this machine's kernels: params.gemm "packed" against "openblas" and against
the default, "auto", which under the cost planner times each convolution and
linear shape on both and keeps the faster (graph/gr_cost.h, gr_gemm_choose;
its decisions come from the plan cache after the first run).

  python3 bench/gemm.py --bin build/worker/fusionbench-run [--models a,b] [--threads 2]
                        [--batch 1] [--rounds 4] [--iterations 20] [--warmup 3]
                        [--param k=v ...]

Runs each model's eager and fused variants under the three, alternating the order
each round, and prints bench/isa.py's Markdown table.  FUSIONBENCH_NATIVE_ISA
in the environment picks the width, as for any run."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import isa  # noqa: E402


def main():
    a = isa.options(__doc__, "resnet50,mobilenet_v2,mobilenet_v3_large,efficientnet_b0,bert_base",
                    rounds=4)
    isa.compare(a, [("packed", {}, ("gemm=packed",)), ("openblas", {}, ("gemm=openblas",)),
                    ("per shape", {}, ("gemm=auto", "planner=cost"))])


if __name__ == "__main__":
    main()
