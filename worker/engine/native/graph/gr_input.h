/* gr_input: real inputs for the model zoo, from files shipped in data/ (found
 * under $FB_DATA_DIR, else the source tree's data/ compiled in):
 *  - images: data/images/NAME.ppm (binary PPM, made from the photos by
 *    scripts/make_inputs.py), resized bilinearly, ImageNet-normalized;
 *  - tokens: data/text/sentence.txt tokenized by greedy WordPiece over
 *    data/text/vocab.txt (a subset of a WordPiece vocabulary, one token a line,
 *    its id the line number);
 *  - log-mel: data/speech/mel80.f32 (float32 little-endian [80, n]: Whisper's
 *    features of data/speech/sentence.wav, see scripts/make_inputs.py).
 * Never all zeros; a missing file is an error naming the file. */
#ifndef GR_INPUT_H
#define GR_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "fb_err.h"

/* Parses a binary PPM (P6, maxval 255) of len bytes: *w, *h and the RGB bytes
 * (a pointer into buf).  FB_EINVAL on anything else or over 8192 x 8192. */
FB_MUSTCHECK fb_code gr_ppm_parse(const unsigned char *buf, size_t len, int *w, int *h,
                                  const unsigned char **rgb, fb_err *err);

/* Fills out [batch, 3, size, size] with the shipped photos (image i % count
 * for batch item i), resized and normalized. */
FB_MUSTCHECK fb_code gr_input_images(float *out, int64_t batch, int64_t size, fb_err *err);

/* Fills out [batch, seq] with token ids of the shipped sentence (repeated,
 * [CLS] ... [SEP] framing), each below vocab. */
FB_MUSTCHECK fb_code gr_input_tokens(float *out, int64_t batch, int64_t seq, int64_t vocab,
                                     fb_err *err);

/* Fills out [batch, 80, frames] with the shipped log-mel features of the spoken
 * sentence, padded with its silence value (the minimum) past the speech. */
FB_MUSTCHECK fb_code gr_input_mel(float *out, int64_t batch, int64_t frames, fb_err *err);

#endif
