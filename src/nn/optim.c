/* Optimizers and learning-rate schedules. The per-parameter update rules
 * are in ops_math.h (sl_op_opt, shared with the cuda kernels); this file
 * computes the host-side scalars of each step: the scheduled learning
 * rate and Adam's bias corrections. */
#include <math.h>
#include <string.h>

#include "nn/nn_internal.h"

double sl_nn_optim_lr(const sl_nn_train_cfg_t *cfg, int epoch, size_t step, size_t steps) {
    double base = cfg->lr;
    double pos = (double)epoch + (steps ? (double)step / (double)steps : 0.0);
    if (cfg->warmup_epochs > 0 && pos < cfg->warmup_epochs) {
        /* Linear from base/steps_in_warmup to base, per step. */
        double done = (double)epoch * (double)steps + (double)step + 1.0;
        double total = (double)cfg->warmup_epochs * (double)(steps ? steps : 1);
        return base * done / total;
    }
    switch (cfg->schedule) {
    case SL_NN_SCHED_STEP: {
        int period = cfg->step_epochs > 0 ? cfg->step_epochs : 1;
        return base * pow(cfg->step_gamma, (double)(epoch / period));
    }
    case SL_NN_SCHED_COSINE: {
        double span = (double)cfg->epochs - cfg->warmup_epochs;
        double t = span > 0 ? (pos - cfg->warmup_epochs) / span : 1.0;
        if (t > 1.0)
            t = 1.0;
        return base * 0.5 * (1.0 + cos(3.14159265358979323846 * t));
    }
    case SL_NN_SCHED_NONE:
    default:
        return base;
    }
}

void sl_nn_optim_step_params(const sl_nn_train_cfg_t *cfg, double lr, uint64_t t,
                             sl_nn_opt_step_t *out) {
    memset(out, 0, sizeof *out);
    out->kind = cfg->optimizer;
    out->lr = (float)lr;
    out->momentum = cfg->momentum;
    out->weight_decay = cfg->weight_decay;
    out->beta1 = cfg->beta1;
    out->beta2 = cfg->beta2;
    out->eps = cfg->eps;
    double tt = (double)(t ? t : 1);
    out->bias_corr1 = (float)(1.0 / (1.0 - pow(cfg->beta1, tt)));
    out->bias_corr2 = (float)(1.0 / (1.0 - pow(cfg->beta2, tt)));
}

bool sl_nn_optim_has_s2(sl_nn_opt_kind kind) {
    return kind == SL_NN_OPT_ADAM || kind == SL_NN_OPT_ADAMW;
}

static const char *const opt_names[] = {"sgd", "nesterov", "adam", "adamw"};
static const char *const sched_names[] = {"none", "step", "cosine"};

sl_err sl_nn_optim_parse(const char *name, sl_nn_opt_kind *out) {
    for (int i = 0; i < 4; i++)
        if (name && !strcmp(name, opt_names[i])) {
            *out = (sl_nn_opt_kind)i;
            return SL_OK;
        }
    return SL_EINVAL;
}

sl_err sl_nn_schedule_parse(const char *name, sl_nn_schedule *out) {
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, sched_names[i])) {
            *out = (sl_nn_schedule)i;
            return SL_OK;
        }
    return SL_EINVAL;
}

const char *sl_nn_optim_name(sl_nn_opt_kind kind) {
    return (unsigned)kind < 4 ? opt_names[kind] : "?";
}
