/* Rounds and leaders: rendezvous hashing over a membership view. See
 * include/starling/round.h. */
#include <string.h>

#include "starling/hash.h"
#include "starling/rng.h"
#include "starling/round.h"

uint64_t sl_round_key(const char *study_id, uint64_t round) {
    return sl_hash64(study_id, strlen(study_id), 0x726f756e64ULL) ^ sl_mix64(round + 1);
}

/* a outranks b for key. */
static bool outranks(const sl_round_member_t *a, uint64_t wa, const sl_round_member_t *b,
                     uint64_t wb) {
    if (wa != wb)
        return wa > wb;
    return strcmp(a->id, b->id) < 0;
}

static uint64_t weight(const sl_round_member_t *m, uint64_t key) {
    return sl_hrw_weight(m->id, strlen(m->id), key);
}

int sl_round_leader(const sl_round_member_t *members, size_t count, uint64_t key) {
    int best = -1;
    uint64_t bw = 0;
    for (size_t i = 0; i < count; i++) {
        if (!members[i].alive)
            continue;
        uint64_t w = weight(&members[i], key);
        if (best < 0 || outranks(&members[i], w, &members[best], bw)) {
            best = (int)i;
            bw = w;
        }
    }
    return best;
}

size_t sl_round_succession(const sl_round_member_t *members, size_t count, uint64_t key,
                           size_t *order) {
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        if (!members[i].alive)
            continue;
        uint64_t w = weight(&members[i], key);
        size_t j = n++;
        while (j > 0 && outranks(&members[i], w, &members[order[j - 1]],
                                 weight(&members[order[j - 1]], key))) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    return n;
}

uint64_t sl_round_trial_weight(const char *peer_id, const char *trial_id) {
    uint64_t key = sl_hash64(trial_id, strlen(trial_id), 0x747269616cULL);
    return sl_hrw_weight(peer_id, strlen(peer_id), key);
}

sl_err sl_round_assign(const sl_round_member_t *members, size_t count,
                       const char *const *trial_ids, size_t trial_count, int *owner_out) {
    int *left = sl_malloc((count ? count : 1) * sizeof *left);
    if (!left)
        return SL_ENOMEM;
    for (size_t i = 0; i < count; i++)
        left[i] = members[i].alive && members[i].free_slots > 0 ? members[i].free_slots : 0;
    for (size_t t = 0; t < trial_count; t++) {
        int best = -1;
        uint64_t bw = 0;
        for (size_t i = 0; i < count; i++) {
            if (left[i] <= 0)
                continue;
            uint64_t w = sl_round_trial_weight(members[i].id, trial_ids[t]);
            if (best < 0 || outranks(&members[i], w, &members[best], bw)) {
                best = (int)i;
                bw = w;
            }
        }
        owner_out[t] = best;
        if (best >= 0)
            left[best]--;
    }
    sl_free(left);
    return SL_OK;
}

size_t sl_round_rank(const sl_round_member_t *members, size_t count, const char *trial_id,
                     const char *self) {
    sl_round_member_t me = {self, true, 1};
    uint64_t wm = sl_round_trial_weight(self, trial_id);
    size_t above = 0;
    for (size_t i = 0; i < count; i++)
        if (members[i].alive && members[i].free_slots > 0 && strcmp(members[i].id, self) != 0 &&
            outranks(&members[i], sl_round_trial_weight(members[i].id, trial_id), &me, wm))
            above++;
    return above;
}
