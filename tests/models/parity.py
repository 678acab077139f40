#!/usr/bin/env python3
"""PyTorch parity of the native model zoo (ctest label `models`).

    parity.py --bin PATH/zoo_parity --model resnet18 [--keep DIR]

Builds the model in PyTorch (torchvision / transformers, random weights from a
fixed seed, eval mode, batch-norm statistics randomized so that folding them is
not a no-op), at a small size, saves its state_dict as safetensors (the same
tensor names the native engine loads), a seeded input and PyTorch's output, then
runs zoo_parity, which builds the native model from those files and compares its
eager and fused outputs with PyTorch's, with every fusion rule on and with each
rule off in turn.  Exit 77 (skipped) when torch/torchvision/transformers/
safetensors cannot be imported."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# The venv's torchaudio may be built for another CUDA than its torch and fails at
# import; transformers imports it when present, and nothing here needs it.
sys.modules.setdefault("torchaudio", None)

try:
    import torch
    import torchvision
    import transformers
    from safetensors.torch import save_file
except Exception as e:  # noqa: BLE001 - any import failure means "not available"
    print(f"skipped: PyTorch stack unavailable ({e})")
    sys.exit(77)

SMALL = {  # model -> (native params, batch)
    "resnet18": ({"image": 64}, 2),
    "mobilenet_v2": ({"image": 64}, 1),
    "vit_b_16": ({"image": 32, "layers": 2}, 2),
    "bert_base": ({"seq": 16, "layers": 2, "vocab": 1000}, 2),
    "resnet50": ({"image": 64}, 1),
    "gpt2": ({"seq": 16, "layers": 2, "vocab": 1000}, 1),
    "mobilenet_v3_large": ({"image": 64}, 1),
    "efficientnet_b0": ({"image": 64}, 1),
    "convnext_tiny": ({"image": 64}, 1),
    "whisper_tiny": ({"frames": 100, "layers": 2}, 1),
    "vgg16": ({"image": 32}, 1),  # the classifier stays full size: 138M weights
}


def randomize_norms(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.1, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
                m.weight.uniform_(0.8, 1.2, generator=gen)
                m.bias.uniform_(-0.1, 0.1, generator=gen)
        if isinstance(m, torch.nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.8, 1.2, generator=gen)
                m.bias.uniform_(-0.1, 0.1, generator=gen)


def build(name, p, batch, gen):
    """The PyTorch model, its input tensor and a function computing the output."""
    if name in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
                "convnext_tiny", "vgg16"):
        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(batch, 3, p["image"], p["image"], generator=gen)
        return model, x, lambda: model(x)
    if name == "vit_b_16":
        from torchvision.models.vision_transformer import VisionTransformer
        model = VisionTransformer(image_size=p["image"], patch_size=16, num_layers=p["layers"],
                                  num_heads=12, hidden_dim=768, mlp_dim=3072)
        with torch.no_grad():  # torchvision zero-inits the head; make it count
            model.heads.head.weight.normal_(0, 0.02, generator=gen)
            model.class_token.normal_(0, 0.02, generator=gen)
        x = torch.randn(batch, 3, p["image"], p["image"], generator=gen)
        return model, x, lambda: model(x)
    if name == "bert_base":
        cfg = transformers.BertConfig(vocab_size=p["vocab"], num_hidden_layers=p["layers"],
                                      attn_implementation="eager")
        model = transformers.BertModel(cfg, add_pooling_layer=False)
        ids = torch.randint(0, p["vocab"], (batch, p["seq"]), generator=gen)
        return model, ids.float(), lambda: model(input_ids=ids).last_hidden_state
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=p["vocab"], n_layer=p["layers"],
                                      attn_implementation="eager")
        model = transformers.GPT2Model(cfg)
        ids = torch.randint(0, p["vocab"], (batch, p["seq"]), generator=gen)
        return model, ids.float(), lambda: model(input_ids=ids).last_hidden_state
    if name == "whisper_tiny":
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        cfg = transformers.WhisperConfig(d_model=384, encoder_layers=p["layers"],
                                         encoder_attention_heads=6, encoder_ffn_dim=1536,
                                         num_mel_bins=80, max_source_positions=p["frames"] // 2,
                                         attn_implementation="eager")
        model = WhisperEncoder(cfg)
        x = torch.randn(batch, 80, p["frames"], generator=gen)
        return model, x, lambda: model(x).last_hidden_state
    raise SystemExit(f"unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--keep", help="write the files here instead of a temporary folder")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    gen = torch.Generator().manual_seed(1234)
    params, batch = SMALL[a.model]
    model, x, run = build(a.model, params, batch, gen)
    randomize_norms(model, gen)
    model.eval()
    with torch.no_grad():
        out = run().contiguous()
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if v.dtype.is_floating_point}
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        save_file(state, os.path.join(d, "weights.safetensors"))
        save_file({"input": x.contiguous()}, os.path.join(d, "input.safetensors"))
        save_file({"output": out}, os.path.join(d, "expected.safetensors"))
        cmd = [a.bin, a.model, d, json.dumps(params), str(batch)]
        print(" ".join(cmd), flush=True)
        return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
