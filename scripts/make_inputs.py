#!/usr/bin/env python3
"""Makes the model zoo's shipped inputs under data/ (run once; outputs are in git).

data/images/*.ppm: binary PPM (P6) pictures the native engine decodes without an
image library (gr_input.c): three real photographs from the sample data of
scikit-image, as Debian ships it (package python3-skimage 0.19.3-8, folder
skimage/data), each centre-cropped to a square and resized to 256 x 256:
astronaut.png (Eileen Collins, NASA: public domain), chelsea.png (a cat, CC0 by
Stefan van der Walt) and coffee.png (a coffee cup, CC0 by Rachel Michetti); the
licences are those stated in skimage/data/_fetchers.py.  Get the folder with
    apt-get download python3-skimage && dpkg -x python3-skimage_*.deb /tmp/sk
and pass --photos /tmp/sk/usr/lib/python3/dist-packages/skimage/data.

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
Needs Pillow and numpy (the project venv).

    scripts/make_inputs.py --photos DIR     (DIR: skimage/data, above)"""
import argparse
import os
import sys

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "images")


PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png"]  # licences: the docstring


def photo(path, size=256):
    """The picture at path, centre-cropped to a square, resized to size x size RGB."""
    img = Image.open(path).convert("RGB")
    w, h = img.size
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    return img.crop((left, top, left + side, top + side)).resize((size, size), Image.LANCZOS)


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--photos", required=True, help="scikit-image's data folder (the docstring)")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    for name in PHOTOS:
        src = os.path.join(a.photos, name)
        if not os.path.exists(src):
            raise SystemExit(f"make_inputs.py: {src} not found (see --help for where it comes from)")
        photo(src).save(os.path.join(OUT, os.path.splitext(name)[0] + ".ppm"))
    sp = os.path.join(OUT, "..", "speech")
    os.makedirs(sp, exist_ok=True)
    speech(sp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
