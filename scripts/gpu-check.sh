#!/usr/bin/env bash
# gpu-check.sh: the one staged run on a lent GPU machine, from the prebuilt
# bundle of scripts/gpu-bundle.sh (docs/gpu/README.md has the exact call).
#
#   scripts/gpu-check.sh [--budget SECONDS] [--stages a,b] [--out DIR]
#   scripts/gpu-check.sh --dry-run       every stage walked here, without a GPU
#   scripts/gpu-check.sh --help
#
# Stages in priority order, each with a time cap (540 s in all by default):
# 1 env (GPU, driver, CUDA, cuDNN, cuBLAS, PyTorch, clocks; the GPU unit
# tests), 2 patterns (the ten, float16; the copy roofline; the CUPTI
# injection), 3 zoo (resnet50, bert_base, vit_b_16, whisper_tiny at bs 1 and
# 32; parity with the CPU engine), 4 inductor (the CUDA rungs on resnet50 and
# bert_base), 5 repeat (five resnet50 runs: the CV), 6 explain (the native
# explanation, launch marks), 7 inductor_explain (Inductor, fusion by fusion,
# on resnet18 and bert_base), 8 planner (the cost planner's timing; attention
# on the tensor cores).  report.md and raw.jsonl are written to --out ($OUT on
# the device machine) as each stage and command ends.  The work is scripts/gpu_check.py's (standard library only).
cd "$(dirname "$0")/.." || exit 1
PY=${FB_CHECK_PYTHON:-python3}
exec "$PY" scripts/gpu_check.py "$@"
