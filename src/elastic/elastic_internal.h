/* Elastic jobs, internal: the test-only switches of the rendezvous core
 * (INVARIANTS.md: a checker that cannot fail proves nothing, so each one
 * has a planted bug that the simulator must catch). */
#ifndef STARLING_ELASTIC_INTERNAL_H
#define STARLING_ELASTIC_INTERNAL_H

#include "starling/elastic.h"

typedef enum {
    SL_ELASTIC_BUG_NONE = 0,
    SL_ELASTIC_BUG_NO_MAJORITY = 1,  /* one continuer establishes a world (E5 must fire) */
    SL_ELASTIC_BUG_SORTED_RANKS = 2, /* a peer takes its rank from the sorted ids, not
                                        the world's order (E1 must fire) */
    SL_ELASTIC_BUG_MIN_MINUS_1 = 3,  /* the leader seals with min - 1 volunteers (E2) */
    SL_ELASTIC_BUG_LOWEST_STEP = 4,  /* the source is the state at the lowest step, not
                                        the newest (E3 must fire) */
    SL_ELASTIC_BUG_NEVER_GIVE_UP = 5, /* a waiting peer waits for its world for ever
                                         (progress must fire) */
    SL_ELASTIC_BUG_EVEN_SLICES = 6,   /* the schedule gives every rank global/world
                                         samples and drops the rest (E4 must fire) */
    SL_ELASTIC_BUG_GRAFT_KEPT = 7,    /* a graft is never dropped, when the world it
                                         grafts onto went on too (E5 must fire) */
    SL_ELASTIC_BUG_GRAFT_NO_STATE = 8, /* a graft does not take the state of the world
                                         it grafts onto (E3 must fire) */
    SL_ELASTIC_BUG_ANCHOR_GRAFT = 9   /* a pruned view ignores grafts when it asks
                                         whether a state stepped below its anchor is of
                                         a world's lineage: a graft onto the anchor's
                                         lineage does not take it (E1 or E3 must fire) */
} sl_elastic_bug;

/* Plants a bug in every rendezvous core and schedule of this process
 * (tests only); sl_elastic_bug_now says which. */
void sl_elastic_set_bug(sl_elastic_bug bug);
sl_elastic_bug sl_elastic_bug_now(void);

/* The world and ack records the core's last turn took in (and sorted):
 * what a pruned view keeps flat however long the job runs (tests). */
size_t sl_elastic_walked(const sl_elastic_t *e);

#endif
