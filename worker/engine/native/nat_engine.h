/* nat_engine: the native engine (fb_engine): the pattern suite and the model
 * zoo on the CPU, and on CUDA through native/cuda, and the machine's roofline
 * on either.  The top of the native engine's libraries
 * (worker/engine/native/CMakeLists.txt): core <- graph <- cuda <- engine. */
#ifndef NAT_ENGINE_H
#define NAT_ENGINE_H

#include "fb_engine.h"

extern const fb_engine nat_engine;

#endif
