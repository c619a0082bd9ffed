/* Searchers and Pareto fronts: every searcher is a function of (seed,
 * ordinal, results seen) and not of the order results are listed in; a
 * grid proposes every point once; the non-dominated sort agrees with a
 * brute-force definition; evolution breeds from the front and beats
 * random search on a synthetic two-objective problem. */
#include <math.h>
#include <stdlib.h>

#include "starling/study.h"
#include "testlib.h"

static sl_study_spec_t load(const char *json) {
    sl_study_spec_t s;
    char why[256] = "";
    sl_err err = sl_study_spec_parse(json, strlen(json), &s, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s", why);
    return s;
}

#define SPACE                                                                                  \
    " \"trainer\": {\"type\": \"command\", \"command\": \"t {x} {y} {c}\"},"                   \
    " \"search_space\": {"                                                                     \
    "  \"x\": {\"type\": \"real\", \"low\": 0, \"high\": 1, \"grid_points\": 4},"              \
    "  \"y\": {\"type\": \"real\", \"low\": 0.001, \"high\": 1, \"log\": true, \"grid_points\": 3}," \
    "  \"c\": {\"type\": \"categorical\", \"values\": [\"a\", \"b\"]}},"                       \
    " \"scheduler\": {\"type\": \"fifo\", \"epochs\": 1},"

static const char *random_json = "{\"name\": \"r\", \"seed\": 5," SPACE
                                 " \"objectives\": [{\"metric\": \"f\", \"goal\": \"max\"}],"
                                 " \"budget\": {\"trials\": 50}}";
static const char *grid_json = "{\"name\": \"g\", \"seed\": 5," SPACE
                               " \"searcher\": {\"type\": \"grid\"},"
                               " \"objectives\": [{\"metric\": \"f\", \"goal\": \"max\"}]}";
static const char *evo_json =
    "{\"name\": \"e\", \"seed\": 5," SPACE
    " \"searcher\": {\"type\": \"evolution\", \"population\": 8},"
    " \"objectives\": [{\"metric\": \"f1\", \"goal\": \"max\"}, {\"metric\": \"f2\", \"goal\": \"min\"}],"
    " \"budget\": {\"trials\": 80}}";

static void make_trial(const sl_study_spec_t *s, uint64_t ordinal, const sl_config_t *c,
                       sl_trial_t *t) {
    memset(t, 0, sizeof *t);
    char json[SL_CONFIG_JSON_MAX];
    size_t len;
    sl_space_encode(s, c, json, sizeof json, &len);
    sl_trial_id("study", 0, json, len, t->id);
    t->ordinal = ordinal;
    t->config = *c;
    t->state = SL_TRIAL_PENDING;
    for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
        t->objectives[o] = NAN;
}

static void test_random_determinism(void) {
    sl_study_spec_t s = load(random_json), s2 = load(random_json);
    s2.seed = 6;
    int differ = 0;
    for (uint64_t i = 0; i < 50; i++) {
        sl_config_t a, b, c;
        CHECK_OK(sl_search_next(&s, i, NULL, 0, &a));
        CHECK_OK(sl_search_next(&s, i, NULL, 0, &b));
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        CHECK_OK(sl_search_next(&s2, i, NULL, 0, &c));
        differ += !sl_space_equal(&s, &a, &c);
    }
    CHECK(differ > 45);
}

/* A random search over a tiny discrete space re-draws duplicates. */
static void test_random_dedup(void) {
    const char *j = "{\"name\": \"d\", \"trainer\": {\"type\": \"command\", \"command\": \"t {c}\"},"
                    " \"search_space\": {\"c\": {\"type\": \"int\", \"low\": 1, \"high\": 6}},"
                    " \"scheduler\": {\"type\": \"fifo\", \"epochs\": 1},"
                    " \"objectives\": [{\"metric\": \"f\", \"goal\": \"max\"}],"
                    " \"budget\": {\"trials\": 6}}";
    sl_study_spec_t s = load(j);
    sl_trial_t seen[6];
    for (uint64_t i = 0; i < 6; i++) {
        sl_config_t c;
        CHECK_OK(sl_search_next(&s, i, seen, (size_t)i, &c));
        make_trial(&s, i, &c, &seen[i]);
        for (uint64_t k = 0; k < i; k++)
            CHECK(!sl_space_equal(&s, &seen[k].config, &c));
    }
}

static void test_grid_complete(void) {
    sl_study_spec_t s = load(grid_json);
    CHECK_INT(s.budget_trials, 4 * 3 * 2);
    sl_trial_t seen[24];
    for (uint64_t i = 0; i < 24; i++) {
        sl_config_t c;
        CHECK_OK(sl_search_next(&s, i, NULL, 0, &c));
        make_trial(&s, i, &c, &seen[i]);
        for (uint64_t k = 0; k < i; k++)
            CHECK(strcmp(seen[k].id, seen[i].id) != 0);
    }
    sl_config_t c;
    CHECK_ERR(sl_search_next(&s, 24, NULL, 0, &c), SL_ENOTFOUND);
    /* every combination of the axis values appears */
    int x = sl_study_spec_param(&s, "x"), y = sl_study_spec_param(&s, "y");
    double xs[] = {0, 1.0 / 3, 2.0 / 3, 1}, ys[] = {0.001, 0.03162, 1};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int cc = 0; cc < 2; cc++) {
                int hits = 0;
                for (int i = 0; i < 24; i++)
                    if (fabs(seen[i].config.values[x].real - xs[a]) < 1e-3 &&
                        fabs(seen[i].config.values[y].real - ys[b]) < 1e-4 &&
                        seen[i].config.values[sl_study_spec_param(&s, "c")].choice == cc)
                        hits++;
                CHECK_MSG(hits == 1, "point (%d,%d,%d) seen %d times", a, b, cc, hits);
            }
}

/* ---- Pareto against brute force ---- */

static int brute_rank(const double *p, size_t n, int dims, const bool *mx, size_t i) {
    /* rank(i) = 0 if nobody dominates i, else 1 + max rank of those that do */
    int r = 0;
    for (size_t j = 0; j < n; j++)
        if (j != i && sl_pareto_dominates(p + j * dims, p + i * dims, dims, mx)) {
            int rj = brute_rank(p, n, dims, mx, j) + 1;
            if (rj > r)
                r = rj;
        }
    return r;
}

static bool brute_dominates(const double *a, const double *b, int dims, const bool *mx) {
    bool strictly = false;
    for (int d = 0; d < dims; d++) {
        double x = isnan(a[d]) ? -INFINITY : (mx[d] ? a[d] : -a[d]);
        double y = isnan(b[d]) ? -INFINITY : (mx[d] ? b[d] : -b[d]);
        if (x < y)
            return false;
        if (x > y)
            strictly = true;
    }
    return strictly;
}

static void test_pareto_brute(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 77);
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + sl_rng_below(&rng, 14);
        int dims = 1 + (int)sl_rng_below(&rng, 3);
        double p[14 * 3];
        bool mx[3];
        for (int d = 0; d < dims; d++)
            mx[d] = sl_rng_below(&rng, 2);
        for (size_t i = 0; i < n * (size_t)dims; i++) {
            /* few distinct values so ties and duplicates happen */
            p[i] = (double)sl_rng_below(&rng, 4);
            if (sl_rng_below(&rng, 20) == 0)
                p[i] = NAN;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                CHECK(sl_pareto_dominates(p + i * dims, p + j * dims, dims, mx) ==
                      brute_dominates(p + i * dims, p + j * dims, dims, mx));
        int rank[14];
        CHECK_OK(sl_pareto_rank(p, n, dims, mx, rank));
        for (size_t i = 0; i < n; i++)
            CHECK_INT(rank[i], brute_rank(p, n, dims, mx, i));
        size_t front[14];
        size_t fn = sl_pareto_front(p, n, dims, mx, front);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (rank[i] == 0) {
                CHECK(k < fn && front[k] == i);
                k++;
            }
        CHECK_INT(k, fn);
        double crowd[14];
        CHECK_OK(sl_pareto_crowding(p, n, dims, rank, crowd));
        for (size_t i = 0; i < n; i++)
            CHECK(crowd[i] >= 0);
    }
    /* crowding: the ends of a front are infinite, the middle finite */
    double line[] = {0, 4, 1, 3, 2, 2, 3, 1, 4, 0};
    bool mx2[] = {true, true};
    int r[5];
    double c[5];
    CHECK_OK(sl_pareto_rank(line, 5, 2, mx2, r));
    for (int i = 0; i < 5; i++)
        CHECK_INT(r[i], 0);
    CHECK_OK(sl_pareto_crowding(line, 5, 2, r, c));
    CHECK(isinf(c[0]) && isinf(c[4]));
    CHECK_NEAR(c[2], 1.0, 1e-12);
}

/* ---- evolution ---- */

/* f1 = peak at x=0.7 (max), f2 = |log10 y| (min): a trade-off-free toy
 * with a known optimum. */
static void score(const sl_study_spec_t *s, sl_trial_t *t) {
    double x = t->config.values[sl_study_spec_param(s, "x")].real;
    double y = t->config.values[sl_study_spec_param(s, "y")].real;
    int c = t->config.values[sl_study_spec_param(s, "c")].choice;
    t->objectives[0] = 1 - (x - 0.7) * (x - 0.7) + 0.1 * c;
    t->objectives[1] = fabs(log10(y) + 1.5) + 0.1 * (x > 0.7 ? x - 0.7 : 0);
    t->state = SL_TRIAL_DONE;
}

static void run_evolution(const sl_study_spec_t *s, sl_trial_t *trials, size_t n) {
    for (uint64_t i = 0; i < n; i++) {
        sl_config_t c;
        sl_err err = sl_search_next(s, i, trials, (size_t)i, &c);
        CHECK_OK(err);
        make_trial(s, i, &c, &trials[i]);
        score(s, &trials[i]);
    }
}

static void test_evolution(void) {
    sl_study_spec_t s = load(evo_json);
    sl_trial_t a[80], b[80];
    run_evolution(&s, a, 80);
    run_evolution(&s, b, 80);
    for (int i = 0; i < 80; i++)
        CHECK_STR(a[i].id, b[i].id);
    /* generational: generation 1 waits for generation 0 */
    sl_trial_t partial[8];
    memcpy(partial, a, sizeof partial);
    partial[3].state = SL_TRIAL_RUNNING;
    sl_config_t c;
    CHECK_ERR(sl_search_next(&s, 8, partial, 8, &c), SL_EAGAIN);
    CHECK_ERR(sl_search_next(&s, 8, partial, 7, &c), SL_EAGAIN);
    CHECK_OK(sl_search_next(&s, 8, a, 8, &c));
    /* independent of the order results are listed in */
    sl_trial_t shuffled[40];
    memcpy(shuffled, a, sizeof shuffled);
    sl_rng_t rng;
    sl_rng_seed(&rng, 1);
    for (int i = 39; i > 0; i--) {
        int j = (int)sl_rng_below(&rng, (uint64_t)i + 1);
        sl_trial_t t = shuffled[i];
        shuffled[i] = shuffled[j];
        shuffled[j] = t;
    }
    sl_config_t c1, c2;
    CHECK_OK(sl_search_next(&s, 40, a, 40, &c1));
    CHECK_OK(sl_search_next(&s, 40, shuffled, 40, &c2));
    CHECK(memcmp(&c1, &c2, sizeof c1) == 0);
    /* better than random: the last generation's best f1 beats the first's */
    double best0 = -1e9, best9 = -1e9;
    for (int i = 0; i < 8; i++)
        best0 = fmax(best0, a[i].objectives[0] - a[i].objectives[1]);
    for (int i = 72; i < 80; i++)
        best9 = fmax(best9, a[i].objectives[0] - a[i].objectives[1]);
    CHECK_MSG(best9 >= best0, "gen 9 best %g < gen 0 best %g", best9, best0);
    /* asynchronous: never waits */
    sl_study_spec_t as = s;
    as.generational = false;
    CHECK_OK(sl_search_next(&as, 8, partial, 8, &c));
    /* no child repeats an earlier configuration */
    for (int i = 0; i < 80; i++)
        for (int j = 0; j < i; j++)
            CHECK(!sl_space_equal(&s, &a[i].config, &a[j].config));
}

int main(void) {
    sl_test_run("random_determinism", test_random_determinism);
    sl_test_run("random_dedup", test_random_dedup);
    sl_test_run("grid_complete", test_grid_complete);
    sl_test_run("pareto_brute", test_pareto_brute);
    sl_test_run("evolution", test_evolution);
    return sl_test_finish();
}
