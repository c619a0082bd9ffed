/* Elastic jobs, internal: the test-only switches of the rendezvous core
 * (INVARIANTS.md: a checker that cannot fail proves nothing, so each one
 * has a planted bug that the simulator must catch). */
#ifndef STARLING_ELASTIC_INTERNAL_H
#define STARLING_ELASTIC_INTERNAL_H

#include "starling/elastic.h"

typedef enum {
    SL_ELASTIC_BUG_NONE = 0,
    SL_ELASTIC_BUG_NO_MAJORITY = 1 /* one continuer establishes a world (E5 must fire) */
} sl_elastic_bug;

/* Plants a bug in every rendezvous core of this process (tests only). */
void sl_elastic_set_bug(sl_elastic_bug bug);

#endif
