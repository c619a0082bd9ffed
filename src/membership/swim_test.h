/* Membership, internal: the test-only fault switches of the SWIM core, for
 * tests that show each invariant checker catching a planted bug
 * (INVARIANTS.md: a checker that cannot fail proves nothing). Never set
 * outside tests; not part of the embedder's API (STYLE.md). */
#ifndef STARLING_MEMBERSHIP_SWIM_TEST_H
#define STARLING_MEMBERSHIP_SWIM_TEST_H

#include "starling/swim.h"

typedef enum {
    SL_SWIM_BUG_NONE = 0,
    SL_SWIM_BUG_NO_SUSPECT = 1,     /* failed probes never suspect (M1) */
    SL_SWIM_BUG_EAGER_DEAD = 2,     /* one failed probe declares dead (M2) */
    SL_SWIM_BUG_NO_REFUTE = 3,      /* never refute a suspicion (M3) */
    SL_SWIM_BUG_LEFT_AS_DEAD = 4,   /* a leave is announced as DEAD (M4) */
    SL_SWIM_BUG_NO_PUSH_PULL = 5,   /* no periodic SYNC, no dead re-dial (M5) */
    SL_SWIM_BUG_GOSSIP_FOREVER = 6, /* retransmit limit ignored (M6) */
    SL_SWIM_BUG_INC_DOWN = 7        /* accept lower incarnations (M3/check) */
} sl_swim_bug;

void sl_swim_set_bug(sl_swim_t *swim, sl_swim_bug bug);

#endif
