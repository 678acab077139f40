#!/usr/bin/env python3
"""Makes the model zoo's shipped inputs under data/ (run once; outputs are in git).

data/images/*.ppm: binary PPM (P6) pictures the native engine decodes without an
image library (gr_input.c).  No photograph with a clear public-domain licence was
on the build machine, so these are synthetic, photo-like renderings (sky
gradient, sun, layered hills, trees, a lake, sensor-like noise), made here from a
fixed seed: public domain (CC0) as our own work.  Replace them with real photos
(any RGB PPM) and the engine uses those instead.

data/speech/sentence.wav: a spoken sentence made with espeak-ng (Debian package
espeak-ng, GPL-3 program; its output audio is ours), and data/speech/mel80.f32:
its log-mel features with Whisper's parameters (16 kHz, 25 ms Hann window = 400
samples, hop 160, 80 Slaney mel bins up to 8 kHz, log10 clamped to max - 8,
(x + 4) / 4), float32 little-endian [80, frames] for the speech frames only; the
engine pads to the model's frame count with the silence value (the minimum), as
Whisper pads audio with zeros to 30 s.  espeak-ng speaks at 22050 Hz; we
resample to 16 kHz by linear interpolation (numpy only).

data/text/vocab.txt is written by hand (a WordPiece vocabulary subset in BERT's
layout: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103); nothing to do here.
Needs Pillow and numpy (the project venv)."""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "images")


def landscape(seed, size=256):
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (size, size))
    d = ImageDraw.Draw(img)
    top, bottom = rng.integers(60, 140, 3), rng.integers(170, 240, 3)
    for y in range(size):  # sky
        t = y / size
        d.line([(0, y), (size, y)], fill=tuple(int(a * (1 - t) + b * t) for a, b in zip(top, bottom)))
    sx, sy, r = rng.integers(30, size - 30), rng.integers(20, 80), rng.integers(12, 24)
    d.ellipse([sx - r, sy - r, sx + r, sy + r], fill=(255, 236, 180))
    for layer in range(3):  # hills, far to near
        base = size * (0.45 + 0.15 * layer)
        xs = np.arange(0, size + 8, 8)
        ys = base + np.cumsum(rng.normal(0, 4, xs.size))
        col = tuple(int(c) for c in rng.integers([20, 70, 20], [70, 140, 60]))
        d.polygon([(0, size)] + list(zip(xs.tolist(), ys.tolist())) + [(size, size)], fill=col)
    for _ in range(int(rng.integers(6, 14))):  # trees
        x, y = int(rng.integers(0, size)), int(rng.integers(int(size * 0.6), size))
        h = int(rng.integers(15, 40))
        d.rectangle([x - 2, y - h // 3, x + 2, y], fill=(70, 45, 25))
        d.polygon([(x - h // 3, y - h // 3), (x + h // 3, y - h // 3), (x, y - h)], fill=(20, 90, 35))
    d.ellipse([size * 0.1, size * 0.8, size * 0.7, size * 0.98], fill=(60, 110, 170))  # lake
    img = img.filter(ImageFilter.GaussianBlur(1.2))
    a = np.asarray(img).astype(np.float32) + rng.normal(0, 6, (size, size, 3))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


SENTENCE = "FusionBench measures what kernel fusion buys each model on a graphics processor."


def mel_filters(sr=16000, n_fft=400, n_mels=80, fmax=8000.0):
    """Slaney-style mel filterbank (area-normalized triangles), as Whisper's."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        lin = f / (200.0 / 3)
        log = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
        return np.where(f >= 1000.0, log, lin)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        lin = m * (200.0 / 3)
        log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
        return np.where(m >= 15.0, log, lin)

    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    pts = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(fmax), n_mels + 2))
    fb = np.zeros((n_mels, freqs.size))
    for i in range(n_mels):
        lo, c, hi = pts[i], pts[i + 1], pts[i + 2]
        fb[i] = np.maximum(0, np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)))
        fb[i] *= 2.0 / (hi - lo)
    return fb


def log_mel(audio, n_fft=400, hop=160):
    pad = np.pad(audio, (n_fft // 2, n_fft // 2), mode="reflect")
    win = np.hanning(n_fft + 1)[:-1]  # periodic Hann, as torch.hann_window
    frames = 1 + (pad.size - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    spec = np.abs(np.fft.rfft(pad[idx] * win, axis=1)) ** 2
    spec = spec[:-1].T  # Whisper drops the last frame
    mel = np.log10(np.maximum(mel_filters() @ spec, 1e-10))
    mel = np.maximum(mel, mel.max() - 8.0)
    return ((mel + 4.0) / 4.0).astype("<f4")


def speech(folder):
    import subprocess
    import wave
    wav = os.path.join(folder, "sentence.wav")
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", wav, SENTENCE], check=True)
    with wave.open(wav) as w:
        sr, n = w.getframerate(), w.getnframes()
        a = np.frombuffer(w.readframes(n), dtype="<i2").astype(np.float64) / 32768.0
    t = np.arange(0, a.size / sr, 1 / 16000.0)
    a16 = np.interp(t, np.arange(a.size) / sr, a)
    log_mel(a16).tofile(os.path.join(folder, "mel80.f32"))


def main():
    os.makedirs(OUT, exist_ok=True)
    for i, seed in enumerate([7, 23]):
        landscape(seed).save(os.path.join(OUT, f"scene{i}.ppm"))
    sp = os.path.join(OUT, "..", "speech")
    os.makedirs(sp, exist_ok=True)
    speech(sp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
