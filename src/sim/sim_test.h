/* Simulator, internal: plants a SWIM fault switch in every simulated core
 * (tests/sim_swim_bugs_test.c; INVARIANTS.md). Tests only; not part of the
 * embedder's API (STYLE.md). */
#ifndef STARLING_SIM_SIM_TEST_H
#define STARLING_SIM_SIM_TEST_H

#include "starling/sim.h"
#include "membership/swim_test.h"

/* Plants a bug in every core, present and restarted (tests only). */
void sl_simswim_set_bug(sl_simswim_t *c, sl_swim_bug bug);

#endif
