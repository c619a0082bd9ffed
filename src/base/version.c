/* The library's version (include/starling/starling.h): compiled in, so a
 * program can tell the release it links from the one it was built with. */
#include "starling/starling.h"

const char *sl_version(void) { return STARLING_VERSION; }
