/* fb_engine_list: the engines compiled into this binary.
 *
 * Alone in its file, and weak, so a unit test can link its own table (a fake
 * engine beside the real ones) to drive the run library's failure paths: the
 * archive member is then never pulled in, and code that walks the table does
 * not see this definition's length. */
#include "fb_engines.h"
#include "ind_engine.h"
#include "nat_engine.h"

__attribute__((weak)) const fb_engine *const fb_engines[] = {&nat_engine, &ind_engine, NULL};
