/* Plots as plain SVG text, no dependencies: training curves (a metric
 * against epochs, one line per trial, the best one drawn thick) and the
 * Pareto front of two objectives (every trial a dot, the front joined by
 * a step line). An axis whose values span over three decades of positive
 * numbers (parameter counts) is drawn in log scale. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "starling/study.h"

#define W 720
#define H 440
#define ML 72  /* left margin */
#define MR 24  /* right margin */
#define MT 40  /* top margin */
#define MB 56  /* bottom margin */

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/* An axis: data range and scale. */
typedef struct {
    double lo, hi; /* data range shown */
    bool log;      /* log10 scale */
} axis_t;

static void axis_fit(axis_t *a, double lo, double hi, bool allow_log) {
    if (!(lo <= hi)) {
        lo = 0;
        hi = 1;
    }
    a->log = allow_log && lo > 0 && hi / lo > 1000;
    if (a->log) {
        a->lo = pow(10, floor(log10(lo)));
        a->hi = pow(10, ceil(log10(hi)));
        if (a->hi <= a->lo)
            a->hi = a->lo * 10;
        return;
    }
    double pad = (hi - lo) * 0.05;
    if (pad == 0)
        pad = fabs(hi) > 0 ? fabs(hi) * 0.05 : 0.5;
    a->lo = lo - pad;
    a->hi = hi + pad;
}

/* Fraction 0..1 of v along the axis. */
static double axis_t01(const axis_t *a, double v) {
    if (a->log)
        return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    return (v - a->lo) / (a->hi - a->lo);
}

static double px(const axis_t *a, double v) { return ML + axis_t01(a, v) * (W - ML - MR); }
static double py(const axis_t *a, double v) { return H - MB - axis_t01(a, v) * (H - MT - MB); }

static void frame(sl_buf_t *b, const char *title, const char *xl, const char *yl,
                  const axis_t *x, const axis_t *y) {
    sl_buf_printf(b,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                  "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                  "<text x=\"%d\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n",
                  W, H, W, H, W / 2, title);
    sl_buf_printf(b,
                  "<g stroke=\"#333\" fill=\"none\"><rect x=\"%d\" y=\"%d\" width=\"%d\" "
                  "height=\"%d\"/></g>\n",
                  ML, MT, W - ML - MR, H - MT - MB);
    for (int i = 0; i <= 5; i++) {
        double t = i / 5.0;
        double xv = x->log ? pow(10, log10(x->lo) + t * (log10(x->hi) - log10(x->lo)))
                           : x->lo + t * (x->hi - x->lo);
        double yv = y->log ? pow(10, log10(y->lo) + t * (log10(y->hi) - log10(y->lo)))
                           : y->lo + t * (y->hi - y->lo);
        double X = ML + t * (W - ML - MR), Y = H - MB - t * (H - MT - MB);
        sl_buf_printf(b,
                      "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                      "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.4g</text>\n",
                      X, MT, X, H - MB, X, H - MB + 16, xv);
        sl_buf_printf(b,
                      "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                      "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
                      ML, Y, W - MR, Y, ML - 6, Y + 4, yv);
    }
    sl_buf_printf(b,
                  "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s%s</text>\n"
                  "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">"
                  "%s%s</text>\n",
                  (ML + W - MR) / 2, H - 16, xl, x->log ? " (log)" : "", (MT + H - MB) / 2,
                  (MT + H - MB) / 2, yl, y->log ? " (log)" : "");
}

sl_err sl_plot_curves(const sl_study_spec_t *spec, const sl_trial_result_t *rs, size_t count,
                      const char *metric, sl_buf_t *out) {
    double lo = INFINITY, hi = -INFINITY;
    int max_epoch = 1;
    size_t best = (size_t)-1;
    double bestv = NAN;
    bool mx = true;
    for (int o = 0; o < spec->objective_count; o++)
        if (strcmp(spec->objectives[o].metric, metric) == 0)
            mx = spec->objectives[o].maximize;
    for (size_t i = 0; i < count; i++) {
        double last = NAN;
        for (int e = 0; e < rs[i].epoch_count; e++) {
            double v = sl_report_get(&rs[i].epochs[e], metric);
            if (!isfinite(v))
                continue;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            if (rs[i].epochs[e].epoch > max_epoch)
                max_epoch = rs[i].epochs[e].epoch;
            last = v;
        }
        if (isfinite(last) && (isnan(bestv) || (mx ? last > bestv : last < bestv))) {
            bestv = last;
            best = i;
        }
    }
    axis_t x, y;
    axis_fit(&x, 0, max_epoch, false);
    x.lo = 0;
    x.hi = max_epoch;
    axis_fit(&y, lo, hi, false);
    char title[160];
    snprintf(title, sizeof title, "%s: %s per epoch (%zu trials)", spec->name, metric, count);
    frame(out, title, "epoch", metric, &x, &y);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < count; i++) {
            bool is_best = i == best;
            if (is_best != (pass == 1))
                continue;
            sl_buf_printf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" "
                               "opacity=\"%s\" points=\"",
                          is_best ? "#d62728" : palette[i % 10], is_best ? "3" : "1.2",
                          is_best ? "1" : "0.6");
            for (int e = 0; e < rs[i].epoch_count; e++) {
                double v = sl_report_get(&rs[i].epochs[e], metric);
                if (isfinite(v))
                    sl_buf_printf(out, "%.1f,%.1f ", px(&x, rs[i].epochs[e].epoch), py(&y, v));
            }
            sl_buf_printf(out, "\"><title>%s</title></polyline>\n", rs[i].trial->id);
        }
    }
    if (best != (size_t)-1)
        sl_buf_printf(out,
                      "<text x=\"%d\" y=\"%d\" fill=\"#d62728\" text-anchor=\"end\">best %s: "
                      "%s = %.4g</text>\n",
                      W - MR - 6, MT + 16, rs[best].trial->id, metric, bestv);
    sl_buf_printf(out, "</svg>\n");
    return out->failed ? SL_ENOMEM : SL_OK;
}

sl_err sl_plot_pareto(const sl_study_spec_t *spec, const sl_trial_result_t *rs, size_t count,
                      int obj_x, int obj_y, sl_buf_t *out) {
    if (obj_x < 0 || obj_y < 0 || obj_x >= spec->objective_count ||
        obj_y >= spec->objective_count)
        return SL_EINVAL;
    double *pts = sl_malloc((count ? count : 1) * 2 * sizeof *pts);
    size_t *map = sl_malloc((count ? count : 1) * sizeof *map);
    size_t *front = sl_malloc((count ? count : 1) * sizeof *front);
    if (!pts || !map || !front) {
        sl_free(pts);
        sl_free(map);
        sl_free(front);
        return SL_ENOMEM;
    }
    double xl = INFINITY, xh = -INFINITY, yl = INFINITY, yh = -INFINITY;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        double a = rs[i].trial->objectives[obj_x], b = rs[i].trial->objectives[obj_y];
        if (!isfinite(a) || !isfinite(b))
            continue;
        pts[2 * n] = a;
        pts[2 * n + 1] = b;
        map[n++] = i;
        xl = a < xl ? a : xl;
        xh = a > xh ? a : xh;
        yl = b < yl ? b : yl;
        yh = b > yh ? b : yh;
    }
    bool maximize[2] = {spec->objectives[obj_x].maximize, spec->objectives[obj_y].maximize};
    size_t fn = sl_pareto_front(pts, n, 2, maximize, front);
    axis_t x, y;
    axis_fit(&x, xl, xh, true);
    axis_fit(&y, yl, yh, true);
    char title[400]; /* a study name and two metric names at their limits fit */
    snprintf(title, sizeof title, "%s: Pareto front, %s (%s) vs %s (%s), %zu of %zu on it",
             spec->name, spec->objectives[obj_y].metric, maximize[1] ? "max" : "min",
             spec->objectives[obj_x].metric, maximize[0] ? "max" : "min", fn, n);
    frame(out, title, spec->objectives[obj_x].metric, spec->objectives[obj_y].metric, &x, &y);
    /* the front, in x order, as a step line */
    for (size_t i = 1; i < fn; i++) {
        size_t v = front[i], j = i;
        while (j > 0 && pts[2 * front[j - 1]] > pts[2 * v]) {
            front[j] = front[j - 1];
            j--;
        }
        front[j] = v;
    }
    if (fn > 1) {
        sl_buf_printf(out, "<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" "
                           "points=\"");
        for (size_t i = 0; i < fn; i++)
            sl_buf_printf(out, "%.1f,%.1f ", px(&x, pts[2 * front[i]]),
                          py(&y, pts[2 * front[i] + 1]));
        sl_buf_printf(out, "\"/>\n");
    }
    for (size_t i = 0; i < n; i++) {
        bool on = false;
        for (size_t k = 0; k < fn; k++)
            on = on || front[k] == i;
        sl_buf_printf(out,
                      "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"><title>%s: %.4g, "
                      "%.4g</title></circle>\n",
                      px(&x, pts[2 * i]), py(&y, pts[2 * i + 1]), on ? "5" : "3.5",
                      on ? "#d62728" : "#1f77b4", rs[map[i]].trial->id, pts[2 * i],
                      pts[2 * i + 1]);
    }
    sl_buf_printf(out, "</svg>\n");
    sl_free(pts);
    sl_free(map);
    sl_free(front);
    return out->failed ? SL_ENOMEM : SL_OK;
}

sl_err sl_plot_series(const char *title, const char *xlabel, const char *ylabel,
                      const double *x, const double *y, size_t n, bool steps, sl_buf_t *out) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i]))
            continue;
        xlo = fmin(xlo, x[i]);
        xhi = fmax(xhi, x[i]);
        ylo = fmin(ylo, y[i]);
        yhi = fmax(yhi, y[i]);
    }
    if (steps && ylo > 0)
        ylo = 0; /* a count: from zero */
    axis_t ax, ay;
    axis_fit(&ax, xlo, xhi, false);
    axis_fit(&ay, ylo, yhi, false);
    frame(out, title, xlabel, ylabel, &ax, &ay);
    sl_buf_printf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                  palette[0]);
    bool have = false;
    double last_y = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i]))
            continue;
        if (steps && have)
            sl_buf_printf(out, "%.1f,%.1f ", px(&ax, x[i]), py(&ay, last_y));
        sl_buf_printf(out, "%.1f,%.1f ", px(&ax, x[i]), py(&ay, y[i]));
        have = true;
        last_y = y[i];
    }
    sl_buf_printf(out, "\"/>\n</svg>\n");
    return out->failed ? SL_ENOMEM : SL_OK;
}
