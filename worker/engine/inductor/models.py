"""The inductor engine's model zoo: real PyTorch models with random weights (no
downloads) and real-looking inputs (never zeros).

Every builder takes (batch, params) and returns (model, inputs) on the CPU in
float32; the runner moves and casts them.  Names match the native zoo's where
both have the model.  A library that is not installed makes its models raise
Unsupported, with the reason.

params (all optional): image_size (vision, default 224), num_classes (1000),
seq_len (NLP, default 128), layers / hidden / heads (transformer depth, width,
heads; defaults are the real model's), audio_s (seconds of 16 kHz audio, 1.0),
mel_frames (whisper, default 3000), channels (tiny_cnn, default 8).
"""

import math
import sys
import zlib

import torch

SENTENCE = ("The study compiled vision and language models with TorchInductor and "
            "found that some of them became slower after fusion, so we measured "
            "every step between eager execution and the fully compiled program, "
            "kernel by kernel, on the same machine with the same inputs.")


class Unsupported(Exception):
    """The model cannot be built here (a library is missing, a shape is not valid)."""


def _need(module):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise Unsupported("%s is not installed: %s" % (module, e)) from e


def _transformers():
    """transformers, with a torchaudio that fails to import (e.g. built for
    another PyTorch/CUDA than the installed torch: it raises RuntimeError, not
    ImportError) hidden from it, so its text and vision models still load."""
    if "torchaudio" not in sys.modules:
        try:
            import torchaudio  # noqa: F401
        except Exception:  # noqa: BLE001 (any failure means "not usable")
            sys.modules["torchaudio"] = None  # find_spec() now answers "absent"
    return _need("transformers")



def _int(params, key, default, lo=1, hi=1 << 20):
    v = params.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError("params.%s must be an integer in %d..%d" % (key, lo, hi))
    return v


# ---- inputs ----

def image(batch, size):
    """A structured RGB image batch, ImageNet-normalized: gradients, rings and a
    texture whose phase differs per image, so convolutions see edges and regions
    as they would on a photograph."""
    y, x = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size),
                          indexing="ij")
    imgs = []
    for b in range(batch):
        p = 0.7 * b + 0.3
        r = torch.sqrt((x - 0.2 * math.sin(p)) ** 2 + (y + 0.1 * math.cos(p)) ** 2)
        red = 0.5 + 0.5 * torch.cos(12.0 * r + p)
        green = (x + 1) / 2 * (r < 0.6).float() + 0.2 * torch.sin(9 * y + p)
        blue = 0.5 + 0.25 * torch.sin(7 * x * y + 3 * p) + 0.25 * (y > 0.3 * x).float()
        imgs.append(torch.stack([red, green, blue]).clamp(0, 1))
    img = torch.stack(imgs)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return (img - mean) / std


def token_ids(batch, seq_len, vocab, cls=101, sep=102):
    """Token ids of a real sentence: each word mapped to a stable id (crc32 of the
    word, so the same word always gets the same id), framed by [CLS]/[SEP],
    repeated to seq_len; batch rows start at different words."""
    words = SENTENCE.lower().replace(",", " ,").replace(".", " .").split()
    ids = [1000 + zlib.crc32(w.encode()) % max(1, vocab - 1000) for w in words]
    rows = []
    for b in range(batch):
        body = [ids[(b * 3 + i) % len(ids)] for i in range(max(0, seq_len - 2))]
        rows.append(([cls] + body + [sep])[:seq_len])
    return torch.tensor(rows, dtype=torch.long)


def waveform(batch, seconds, rate=16000):
    """Speech-like audio: a voiced source (falling pitch, harmonics) shaped by
    two moving formants, syllable-rate amplitude modulation and a little noise."""
    n = max(400, int(seconds * rate))
    t = torch.arange(n, dtype=torch.float64) / rate
    out = []
    g = torch.Generator().manual_seed(1234)
    for b in range(batch):
        f0 = 120 + 30 * torch.sin(2 * math.pi * 0.7 * t + b)
        phase = 2 * math.pi * torch.cumsum(f0, 0) / rate
        voiced = sum(torch.sin(k * phase) / k for k in range(1, 12))
        formant = (torch.sin(2 * math.pi * (500 + 200 * torch.sin(2 * math.pi * t)) * t) +
                   0.5 * torch.sin(2 * math.pi * 1500 * t))
        env = 0.5 + 0.5 * torch.sin(2 * math.pi * 4 * t + b) ** 2
        noise = 0.02 * torch.randn(n, generator=g, dtype=torch.float64)
        out.append((0.3 * env * voiced * (1 + 0.3 * formant) + noise).float())
    return torch.stack(out)


def log_mel(wave, frames, n_mels=80, rate=16000):
    """Whisper-style log-mel features (n_fft 400, hop 160) of wave, padded or cut
    to frames, computed here with a triangular mel filterbank."""
    win = torch.hann_window(400)
    spec = torch.stft(wave, 400, 160, window=win, return_complex=True).abs() ** 2
    mel_hz = lambda m: 700.0 * (10 ** (m / 2595.0) - 1)  # noqa: E731
    top = 2595.0 * math.log10(1 + (rate / 2) / 700.0)
    pts = torch.tensor([mel_hz(top * i / (n_mels + 1)) for i in range(n_mels + 2)])
    freqs = torch.linspace(0, rate / 2, spec.shape[1])
    fb = torch.zeros(n_mels, spec.shape[1])
    for m in range(n_mels):
        lo, mid, hi = pts[m], pts[m + 1], pts[m + 2]
        fb[m] = torch.clamp(torch.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)),
                            min=0)
    mel = torch.log10(torch.clamp(fb @ spec, min=1e-10))
    mel = torch.maximum(mel, mel.amax(dim=(-2, -1), keepdim=True) - 8.0)
    mel = (mel + 4.0) / 4.0
    if mel.shape[-1] < frames:
        mel = torch.nn.functional.pad(mel, (0, frames - mel.shape[-1]), value=float(mel.min()))
    return mel[..., :frames].contiguous()


# ---- builders ----

def _tv(name):
    def build(batch, params):
        tvm = _need("torchvision.models")
        size = _int(params, "image_size", 224, 32, 1024)
        kw = {"weights": None, "num_classes": _int(params, "num_classes", 1000, 1, 100000)}
        if name == "vit_b_16":
            if size % 16:
                raise ValueError("params.image_size must be a multiple of 16 for vit_b_16")
            kw["image_size"] = size
        model = getattr(tvm, name)(**kw)
        if name == "vit_b_16":
            # torchvision zero-initializes ViT's classifier head (weights and bias):
            # with random weights its output would be all zeros, which the
            # accuracy gate rightly refuses.  A seeded normal init, std 0.02.
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        return model, (image(batch, size),)
    return build


def _bert(batch, params):
    tr = _transformers()
    hidden = _int(params, "hidden", 768, 8, 8192)
    heads = _int(params, "heads", 12, 1, 128)
    cfg = tr.BertConfig(hidden_size=hidden, num_hidden_layers=_int(params, "layers", 12, 1, 96),
                        num_attention_heads=heads, intermediate_size=4 * hidden,
                        attn_implementation="eager")
    seq = _int(params, "seq_len", 128, 2, cfg.max_position_embeddings)
    ids = token_ids(batch, seq, cfg.vocab_size)
    return tr.BertModel(cfg, add_pooling_layer=True), (ids, torch.ones_like(ids))


def _gpt2(batch, params):
    tr = _transformers()
    hidden = _int(params, "hidden", 768, 8, 8192)
    cfg = tr.GPT2Config(n_embd=hidden, n_layer=_int(params, "layers", 12, 1, 96),
                        n_head=_int(params, "heads", 12, 1, 128), use_cache=False,
                        attn_implementation="eager")
    seq = _int(params, "seq_len", 128, 2, cfg.n_positions)
    return tr.GPT2Model(cfg), (token_ids(batch, seq, cfg.vocab_size, 50256, 50256),)


def _t5(batch, params):
    tr = _transformers()
    hidden = _int(params, "hidden", 512, 8, 8192)
    heads = _int(params, "heads", 8, 1, 128)
    cfg = tr.T5Config(d_model=hidden, d_ff=4 * hidden, d_kv=hidden // heads, num_heads=heads,
                      num_layers=_int(params, "layers", 6, 1, 96), use_cache=False)
    seq = _int(params, "seq_len", 128, 2, 4096)
    return tr.T5EncoderModel(cfg), (token_ids(batch, seq, cfg.vocab_size, 0, 1),)


class _LastHidden(torch.nn.Module):
    """A transformers encoder returning its last hidden state as a tensor (not a
    ModelOutput), so every rung sees the same output."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x).last_hidden_state


def _wav2vec2(batch, params):
    # wav2vec2-base (12 layers, width 768, the 7-layer conv feature encoder with
    # group norm) from transformers' default Wav2Vec2Config: the same
    # architecture as torchaudio's wav2vec2_base, without torchaudio, whose PyPI
    # builds lag PyTorch's (2.11 against torch 2.15 here) and fail to import.
    tr = _transformers()
    seconds = float(params.get("audio_s", 1.0))
    if not 0.05 <= seconds <= 60:
        raise ValueError("params.audio_s must be in 0.05..60")
    model = tr.Wav2Vec2Model(tr.Wav2Vec2Config())
    return _LastHidden(model), (waveform(batch, seconds),)


class _WhisperEncoder(torch.nn.Module):
    """The encoder alone, returning its last hidden state (a tensor, not a
    ModelOutput, so every rung sees the same output)."""

    def __init__(self, enc):
        super().__init__()
        self.enc = enc

    def forward(self, feats):
        return self.enc(feats).last_hidden_state


def _whisper(batch, params):
    tr = _transformers()
    frames = _int(params, "mel_frames", 3000, 20, 3000)
    if frames % 2:
        raise ValueError("params.mel_frames must be even")
    hidden = _int(params, "hidden", 384, 8, 4096)
    cfg = tr.WhisperConfig(d_model=hidden, encoder_layers=_int(params, "layers", 4, 1, 64),
                           encoder_attention_heads=_int(params, "heads", 6, 1, 64),
                           encoder_ffn_dim=4 * hidden, num_mel_bins=80,
                           max_source_positions=frames // 2, attn_implementation="eager")
    enc = tr.WhisperModel(cfg).get_encoder()
    seconds = float(params.get("audio_s", frames / 100.0))
    return _WhisperEncoder(enc), (log_mel(waveform(batch, seconds), frames),)


def _timm(name):
    def build(batch, params):
        timm = _need("timm")
        size = _int(params, "image_size", 224, 32, 1024)
        kw = {"pretrained": False, "num_classes": _int(params, "num_classes", 1000, 1, 100000)}
        if "vit" in name:
            kw["img_size"] = size
        return timm.create_model(name, **kw), (image(batch, size),)
    return build


class _TinyCnn(torch.nn.Module):
    """conv → batch norm → ReLU twice, pooling, a linear head: the smallest model
    with the patterns Inductor fuses, for tests (compiles in seconds)."""

    def __init__(self, ch, classes):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, ch, 3, padding=1), torch.nn.BatchNorm2d(ch), torch.nn.ReLU(),
            torch.nn.Conv2d(ch, ch, 3, padding=1), torch.nn.BatchNorm2d(ch), torch.nn.ReLU())
        self.head = torch.nn.Linear(ch, classes)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))


def _tiny_cnn(batch, params):
    size = _int(params, "image_size", 32, 8, 512)
    model = _TinyCnn(_int(params, "channels", 8, 1, 512), _int(params, "num_classes", 10, 1, 1000))
    with torch.no_grad():  # non-trivial running statistics, so batch norm does work
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model, (image(batch, size),)


# The params each kind of builder reads (the catalog lists them with the
# runner's: a job naming any other is refused, docs/API.md).
_IMAGE = ("image_size", "num_classes")
_TEXT = ("seq_len", "layers", "hidden", "heads")

# name → (domain, description, builder, params)
MODELS = {
    "resnet18": ("vision", "torchvision ResNet-18", _tv("resnet18"), _IMAGE),
    "resnet50": ("vision", "torchvision ResNet-50", _tv("resnet50"), _IMAGE),
    "mobilenet_v2": ("vision", "torchvision MobileNetV2", _tv("mobilenet_v2"), _IMAGE),
    "mobilenet_v3_large": ("vision", "torchvision MobileNetV3-Large", _tv("mobilenet_v3_large"),
                           _IMAGE),
    "vgg16": ("vision", "torchvision VGG-16", _tv("vgg16"), _IMAGE),
    "efficientnet_b0": ("vision", "torchvision EfficientNet-B0", _tv("efficientnet_b0"), _IMAGE),
    "convnext_tiny": ("vision", "torchvision ConvNeXt-Tiny", _tv("convnext_tiny"), _IMAGE),
    "vit_b_16": ("vision", "torchvision ViT-B/16", _tv("vit_b_16"), _IMAGE),
    "swin_t": ("vision", "torchvision Swin-T", _tv("swin_t"), _IMAGE),
    "bert_base": ("nlp", "transformers BertModel (bert-base config)", _bert, _TEXT),
    "gpt2": ("nlp", "transformers GPT2Model (gpt2 config)", _gpt2, _TEXT),
    "t5_small_encoder": ("nlp", "transformers T5EncoderModel (t5-small config)", _t5, _TEXT),
    "wav2vec2_base": ("speech", "wav2vec2-base (transformers Wav2Vec2Config)", _wav2vec2,
                      ("audio_s",)),
    "whisper_tiny": ("speech", "transformers Whisper encoder (whisper-tiny config)", _whisper,
                     ("mel_frames", "layers", "hidden", "heads", "audio_s")),
    "timm_resnet50d": ("vision", "timm resnet50d", _timm("resnet50d"), _IMAGE),
    "timm_vit_small": ("vision", "timm vit_small_patch16_224", _timm("vit_small_patch16_224"),
                       _IMAGE),
    "tiny_cnn": ("test", "two conv+bn+relu blocks and a linear head (tests)", _tiny_cnn,
                 ("image_size", "channels", "num_classes")),
}


def is_uploaded(name):
    """True for a model someone uploaded: the workload model.<id> (docs/API-EXTENSIONS.md)."""
    return name.startswith("model.") and name[6:].isdigit()


def build_uploaded(name, batch, params):
    """(module, inputs) of an uploaded model: its archive (params.model.archive,
    set by the worker: the file in its model cache) read by pt2safe, never
    unpickled; inputs those uploaded with it (pt2safe.INPUTS_ENTRY), else
    seeded (params.seed, default 0); batch replacing the first dimension where
    the export made it dynamic (the uploaded samples repeated), else the
    exported one."""
    import pt2safe

    ref = params.get("model")
    path = ref.get("archive") if isinstance(ref, dict) else None
    if not isinstance(path, str) or not path.endswith(".pt2"):
        raise ValueError("%s: no archive for the uploaded model (params.model.archive is set by "
                         "the worker)" % name)
    try:
        ep, facts = pt2safe.load(path)
        specs = pt2safe.input_specs(ep)
        uploaded = facts.get("inputs")
        if uploaded is not None:
            uploaded = pt2safe.check_inputs(specs, uploaded)
    except pt2safe.Invalid as e:
        raise Unsupported("%s: %s" % (name, e)) from e
    dynamic = bool(specs) and all(0 in s["dynamic_dims"] for s in specs)
    if uploaded is not None:  # the uploader's, their samples repeated to the job's batch
        return ep.module(), pt2safe.repeat_batch(uploaded, batch) if dynamic else uploaded
    inputs = pt2safe.make_inputs(ep, specs, seed=_int(params, "seed", 0, 0, 1 << 30),
                                 batch=batch if dynamic else None)
    return ep.module(), inputs


def build(name, batch, params):
    """(model in eval mode, inputs tuple) for a zoo name or an uploaded model
    (model.<id>).  KeyError for an unknown name, Unsupported when a library is
    missing, ValueError for bad params."""
    if is_uploaded(name):
        return build_uploaded(name, batch, params)
    if name not in MODELS:
        raise KeyError(name)
    torch.manual_seed(0)
    try:
        model, inputs = MODELS[name][2](batch, params)
    except (Unsupported, ValueError):
        raise
    except ImportError as e:
        raise Unsupported(str(e)) from e
    return model.eval(), inputs
