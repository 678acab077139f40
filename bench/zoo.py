#!/usr/bin/env python3
"""The native model zoo on the CPU: eager against fused, rule ablation, and
PyTorch eager / torch.compile (Inductor's C++ backend) side by side.

    PY=$(scripts/venv.sh)   # the project venv's python
    $PY bench/zoo.py --bin build/worker/fusionbench-run --threads 2 \
        [--models resnet50,bert_base] [--ablation resnet50,bert_base] \
        [--torch resnet50,mobilenet_v2,bert_base] [--batch 1] [--iterations 10] [--rounds 3] \
        [--bin-before OLD/worker/fusionbench-run] > zoo.md

Native figures come from fusionbench-run --json (its own warmup, interleaved
rounds, accuracy gate, profiled iteration): median latency, speedup, kernels per
iteration, fusion groups by taxonomy kind, peak memory (weights + the planned
activation arena + workspaces of the variant).  PyTorch runs the same model
(torchvision / transformers, random weights), shapes, batch 1 and thread count,
eager and torch.compile interleaved, in rounds that alternate with ours (raw
samples pooled, median of the pool); its compile time is reported apart.  Prints a markdown section on stdout."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.modules.setdefault("torchaudio", None)  # the venv's may not import; unused

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "vgg16",
          "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert_base", "gpt2", "whisper_tiny"]
RULES = ["bn_fold", "epilogue", "residual_epilogue", "element_chain", "softmax", "layernorm",
         "attention", "mlp"]


def native(binary, model, threads, iters, warmup, disable=None, batch=1):
    cmd = [binary, model, "--json", "--iterations", str(iters), "--warmup", str(warmup),
           "--threads", str(threads), "--batch", str(batch)]
    if disable:
        cmd += ["--param", "disable_rules=" + json.dumps([disable])]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if not p.stdout.strip():
        raise RuntimeError(f"{model}: {p.stderr.strip()[-300:]}")
    return {v["name"]: v for v in json.loads(p.stdout)["result"]["variants"]}


def kinds(v):
    out = {}
    for g in v.get("fusion_groups") or []:
        out[g["kind"]] = out.get(g["kind"], 0) + g["count"]
    return ", ".join(f"{k} {n}" for k, n in sorted(out.items())) or "-"


def med(v):
    return v["latency_ms"]["median"]


def mib(v):
    return v["peak_mem_bytes"] / 2**20 if v.get("peak_mem_bytes") is not None else float("nan")


def table_models(binary, models, threads, iters, warmup):
    print("| model | eager ms | fused ms | speedup | kernels eager → fused | fusion groups by kind"
          " | peak MiB eager → fused | max rel err |")
    print("|---|---:|---:|---:|---|---|---|---:|")
    for m in models:
        try:
            r = native(binary, m, threads, iters, warmup)
        except RuntimeError as e:
            print(f"| {m} | error: {e} | | | | | | |")
            continue
        e, f = r["eager"], r["fused"]
        print(f"| {m} | {med(e):.1f} | {med(f):.1f} | {med(e) / med(f):.2f}x | "
              f"{e['kernels']} → {f['kernels']} | {kinds(f)} | {mib(e):.0f} → {mib(f):.0f} | "
              f"{f['max_rel_error']:.1e} |", flush=True)


def table_ablation(binary, model, threads, iters, warmup):
    base = native(binary, model, threads, iters, warmup)
    print(f"\n**{model}**: all rules on: eager {med(base['eager']):.1f} ms, fused "
          f"{med(base['fused']):.1f} ms, {base['fused']['kernels']} kernels.\n")
    print("| rule off | fused ms | speedup vs eager | kernels | fused groups | peak MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for rule in RULES:
        r = native(binary, model, threads, iters, warmup, rule)
        f = r["fused"]
        print(f"| {rule} | {med(f):.1f} | {med(r['eager']) / med(f):.2f}x | {f['kernels']} | "
              f"{f['fused_kernels']} | {mib(f):.0f} |", flush=True)


def torch_model(name, batch=1):
    import torch
    import torchvision
    import transformers
    if name in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "vgg16",
                "efficientnet_b0", "convnext_tiny", "vit_b_16"):
        m = getattr(torchvision.models, name)(weights=None).eval()
        return m, (torch.randn(batch, 3, 224, 224),)
    if name == "bert_base":
        cfg = transformers.BertConfig(attn_implementation="eager")
        m = transformers.BertModel(cfg, add_pooling_layer=False).eval()
        return m, (torch.randint(0, 30522, (batch, 128)),)
    if name == "gpt2":
        m = transformers.GPT2Model(transformers.GPT2Config(attn_implementation="eager")).eval()
        return m, (torch.randint(0, 50257, (batch, 128)),)
    if name == "whisper_tiny":
        # the native model: Whisper-tiny's encoder (4 layers, width 384, 6
        # heads) over an 80-bin log-mel of 3000 frames, last_hidden_state
        cfg = transformers.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                                         encoder_ffn_dim=1536, num_mel_bins=80,
                                         max_source_positions=1500, attn_implementation="eager")
        m = transformers.models.whisper.modeling_whisper.WhisperEncoder(cfg).eval()
        return m, (torch.randn(batch, 80, 3000),)
    raise SystemExit(f"no PyTorch peer for {name}")


class TorchSide:
    """One model in PyTorch, eager and torch.compile, prepared once (compile
    time measured apart) and timed in rounds (measure)."""

    def __init__(self, name, threads, warmup, batch=1):
        import torch
        torch.set_num_threads(threads)
        self.torch = torch
        self.model, self.args = torch_model(name, batch)
        with torch.no_grad():
            t0 = time.perf_counter()
            self.comp = torch.compile(self.model)
            self.comp(*self.args)
            self.compile_s = time.perf_counter() - t0
            for _ in range(warmup):
                self.model(*self.args)
                self.comp(*self.args)

    def measure(self, iters):
        """Raw samples (ms) of eager and compiled, interleaved as METHOD.md asks."""
        te, tc = [], []
        with self.torch.no_grad():
            self.model(*self.args)  # warm again after the other side ran
            self.comp(*self.args)
            for _ in range(iters):
                t = time.perf_counter_ns()
                self.model(*self.args)
                te.append((time.perf_counter_ns() - t) / 1e6)
                t = time.perf_counter_ns()
                self.comp(*self.args)
                tc.append((time.perf_counter_ns() - t) / 1e6)
        return te, tc


def table_torch(binary, models, threads, iters, warmup, rounds, batch=1, before=None):
    """Ours and PyTorch in alternating rounds (ours first in odd rounds, PyTorch
    first in even ones), each side's raw samples pooled over the rounds: a burst
    of load from elsewhere then hits both sides, not one.  With before (another
    build's fusionbench-run), it runs in every round too, beside ours: its
    fused time against the same torch.compile samples."""
    print(f"{threads} thread(s), batch {batch}: {rounds} rounds of {iters} iterations per side,"
          " alternating; medians of the pooled samples.\n")
    if before:
        print(f"Before: `{before}`; after: `{binary}`, in the same rounds.\n")
        print("| model | native eager ms | native fused ms before | after | PyTorch eager ms |"
              " torch.compile ms | compile s | native eager / PyTorch eager |"
              " native fused / compile before | after |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("| model | native eager ms | native fused ms | PyTorch eager ms | torch.compile ms |"
              " compile s | native eager / PyTorch eager | native fused / compile |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for m in models:
        side = TorchSide(m, threads, warmup, batch)
        ne, nf, pe, pc, bf = [], [], [], [], []
        for rnd in range(rounds):
            def ours():
                r = native(binary, m, threads, iters, warmup, batch=batch)
                ne.extend(r["eager"]["samples_ms"])
                nf.extend(r["fused"]["samples_ms"])
                if before:
                    bf.extend(native(before, m, threads, iters, warmup,
                                     batch=batch)["fused"]["samples_ms"])

            def theirs():
                e, c = side.measure(iters)
                pe.extend(e)
                pc.extend(c)
            for step in ((ours, theirs) if rnd % 2 == 0 else (theirs, ours)):
                step()
        ne, nf, pe, pc = (statistics.median(x) for x in (ne, nf, pe, pc))
        if before:
            bf = statistics.median(bf)
            print(f"| {m} | {ne:.1f} | {bf:.1f} | {nf:.1f} | {pe:.1f} | {pc:.1f} |"
                  f" {side.compile_s:.0f} | {ne / pe:.2f} | {bf / pc:.2f} | {nf / pc:.2f} |",
                  flush=True)
        else:
            print(f"| {m} | {ne:.1f} | {nf:.1f} | {pe:.1f} | {pc:.1f} | {side.compile_s:.0f} |"
                  f" {ne / pe:.2f} | {nf / pc:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--ablation", default="resnet50,bert_base")
    ap.add_argument("--torch", default="resnet50,mobilenet_v2,bert_base")
    ap.add_argument("--batch", type=int, default=1,
                    help="batch size of the PyTorch side-by-side table (both sides)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of the PyTorch side-by-side table")
    ap.add_argument("--bin-before",
                    help="another build's fusionbench-run, run beside --bin in the PyTorch "
                         "table's rounds (its fused time against the same torch.compile)")
    a = ap.parse_args()
    pick = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    if pick(a.models):
        table_models(a.bin, pick(a.models), a.threads, a.iterations, a.warmup)
    for m in pick(a.ablation):
        table_ablation(a.bin, m, a.threads, a.iterations, a.warmup)
    if pick(a.torch):
        print()
        table_torch(a.bin, pick(a.torch), a.threads, a.iterations, a.warmup, a.rounds, a.batch,
                    a.bin_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
