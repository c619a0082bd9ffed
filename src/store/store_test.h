/* Store, internal: the test-only fault switch of the store core, so a
 * simulation checker can be seen to fire (tests/sim_store_test.c;
 * INVARIANTS.md). Never set outside tests; not part of the embedder's API
 * (STYLE.md). */
#ifndef STARLING_STORE_STORE_TEST_H
#define STARLING_STORE_STORE_TEST_H

#include "starling/store.h"

typedef enum {
    SL_STORE_BUG_NONE = 0,
    SL_STORE_BUG_DELTA_DROP = 1, /* S2: deltas silently skip some atoms */
    SL_STORE_BUG_NO_GC = 2       /* S5: garbage collection never drops anything */
} sl_store_bug;

void sl_store_set_bug(sl_store_t *s, sl_store_bug bug);

#endif
