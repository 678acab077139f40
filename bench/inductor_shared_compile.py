"""What a counterfactual compile of the Inductor explanation costs, against a
cold one (docs/EXPLAIN.md, "Inductor, fusion by fusion", item 2).

Compiles a torchvision model three times in one process: cold in a fresh
cache directory, then as the explanation's counterfactuals and placebo do
(the runner's _shared_cache: the same directory, Inductor's graph caches off,
every graph scheduled and generated anew, unchanged kernels loaded), then cold
again in another fresh directory (the first cold compile also pays the
process's one-time costs).  Prints each compile's seconds and the C++ kernel
libraries in the shared directory before and after.  CPU; run with the project
venv's python:

    $(scripts/venv.sh) bench/inductor_shared_compile.py --model resnet18 --image-size 64
"""

import argparse
import contextlib
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "worker", "engine", "inductor"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    first = tempfile.mkdtemp(prefix="fb-shared-compile-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = first
    import torch
    import torchvision

    import runner

    torch.set_num_threads(args.threads)
    model = getattr(torchvision.models, args.model)().eval()
    x = torch.randn(args.batch, 3, args.image_size, args.image_size)

    def libs(d):
        return sum(1 for _, _, fs in os.walk(d) for f in fs if f.endswith(".so"))

    def compile_once(label, ctx):
        torch._dynamo.reset()
        with torch.no_grad(), ctx:
            t = time.perf_counter()
            torch.compile(model)(x)
            print("%-34s %7.1f s" % (label, time.perf_counter() - t), flush=True)

    compile_once("cold (fresh directory)", contextlib.nullcontext())
    before = libs(first)
    compile_once("shared (the counterfactuals' way)", runner._shared_cache(first))
    print("%-34s %d before, %d after" % ("C++ kernel libraries", before, libs(first)))
    runner._use_cache(tempfile.mkdtemp(prefix="fb-shared-compile-"))
    compile_once("cold again (another fresh one)", contextlib.nullcontext())


if __name__ == "__main__":
    main()
