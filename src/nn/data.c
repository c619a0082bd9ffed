/* Data sets: IDX files (MNIST, Fashion-MNIST; gzip or plain, read whole by
 * the platform layer's sl_plat_read_file_gz) and CSV files, loaded once into host
 * memory (images as bytes when they are bytes: 4x less memory than floats;
 * the backend converts while it gathers each minibatch).
 *
 * Loaders trust nothing: every size is checked against the bytes present,
 * and every error names the file and what is wrong. The parsers work on
 * bytes in memory; the file system is reached through src/platform/ only. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "platform/process.h"
#include "starling/platform.h"

#define MAX_FILE_LEN ((size_t)1 << 32) /* 4 GiB decompressed */
#define MAX_SAMPLE_LEN ((size_t)1 << 24)

/* Reads a whole file, gunzipping when it is gzip (the platform layer). */
static sl_err read_file(const char *path, uint8_t **out, size_t *out_len, char *why,
                        size_t why_len) {
    return sl_plat_read_file_gz(path, MAX_FILE_LEN, out, out_len, why, why_len);
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Checks an IDX header: unsigned-byte data, `ndims` dimensions (images:
 * 3, labels: 1), and exactly as many bytes as they announce. */
static sl_err idx_check(const uint8_t *b, size_t len, int ndims, const char *name,
                        const char *what, uint32_t dims[3], size_t *hdr, char *why,
                        size_t why_len) {
    if (len < 4)
        return sl_why(why, why_len, SL_ETRUNC,
                      "%s: truncated: %zu bytes, too short for an IDX header", name, len);
    if (b[0] != 0 || b[1] != 0)
        return sl_why(why, why_len, SL_EPROTO,
                      "%s: not an IDX file (magic %02x%02x%02x%02x, want 0000080%d)", name,
                      b[0], b[1], b[2], b[3], ndims);
    if (b[2] != 0x08)
        return sl_why(why, why_len, SL_EUNSUPPORTED,
                      "%s: IDX element type 0x%02x unsupported (only unsigned bytes, 0x08)",
                      name, b[2]);
    if (b[3] != ndims)
        return sl_why(why, why_len, SL_EPROTO,
                      "%s: IDX file has %d dimensions, %s need %d (wrong file?)", name, b[3],
                      what, ndims);
    *hdr = 4 + 4 * (size_t)ndims;
    if (len < *hdr)
        return sl_why(why, why_len, SL_ETRUNC, "%s: truncated inside the IDX header", name);
    size_t total = 1, sample = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(b + 4 + 4 * i);
        if (dims[i] == 0)
            return sl_why(why, why_len, SL_EPROTO, "%s: IDX dimension %d is zero", name,
                          i + 1);
        if (i > 0 && (sample *= dims[i]) > MAX_SAMPLE_LEN)
            return sl_why(why, why_len, SL_ETOOBIG, "%s: samples larger than 16 Mi values",
                          name);
        total *= dims[i];
        if (total > MAX_FILE_LEN)
            return sl_why(why, why_len, SL_ETOOBIG, "%s: IDX dimensions announce over 4 GiB",
                          name);
    }
    if (len - *hdr < total)
        return sl_why(why, why_len, SL_ETRUNC,
                      "%s: truncated: header announces %zu data bytes, file has %zu", name,
                      total, len - *hdr);
    if (len - *hdr > total)
        return sl_why(why, why_len, SL_EPROTO,
                      "%s: %zu unexpected bytes after the %zu data bytes the header announces",
                      name, len - *hdr - total, total);
    return SL_OK;
}

/* Validates a pair and builds the data set. `img` / `lab` are taken over
 * when `own` (the header is stripped in place), else copied. */
static sl_err idx_build(uint8_t *img, size_t img_len, const char *img_name, uint8_t *lab,
                        size_t lab_len, const char *lab_name, bool own, sl_nn_data_t **out,
                        char *why, size_t why_len) {
    uint32_t id[3] = {0}, ld[3] = {0};
    size_t ih, lh;
    sl_err err = idx_check(img, img_len, 3, img_name, "images", id, &ih, why, why_len);
    if (err == SL_OK)
        err = idx_check(lab, lab_len, 1, lab_name, "labels", ld, &lh, why, why_len);
    if (err != SL_OK)
        return err;
    if (id[0] != ld[0])
        return sl_why(why, why_len, SL_EINVAL,
                      "%s and %s do not match: %u images but %u labels", img_name, lab_name,
                      id[0], ld[0]);
    if (id[1] > 65535 || id[2] > 65535)
        return sl_why(why, why_len, SL_ETOOBIG, "%s: images of %ux%u are too large",
                      img_name, id[1], id[2]);
    size_t n = id[0], per = (size_t)id[1] * id[2];
    int maxl = 0;
    for (size_t i = 0; i < n; i++)
        if (lab[lh + i] > maxl)
            maxl = lab[lh + i];
    sl_nn_data_t *d = sl_calloc(1, sizeof *d);
    if (!d)
        return SL_ENOMEM;
    d->labels = sl_malloc(n * sizeof *d->labels);
    if (!d->labels)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        d->labels[i] = lab[lh + i];
    if (own) {
        memmove(img, img + ih, n * per);
        uint8_t *shrunk = sl_realloc(img, n * per);
        d->images_u8 = shrunk ? shrunk : img;
    } else {
        d->images_u8 = sl_malloc(n * per);
        if (!d->images_u8)
            goto nomem;
        memcpy(d->images_u8, img + ih, n * per);
    }
    d->count = n;
    d->shape = (sl_nn_shape_t){.channels = 1,
                               .height = (int)id[1],
                               .width = (int)id[2],
                               .classes = maxl + 1 < 2 ? 2 : maxl + 1};
    d->scale = 1.0f / 255.0f;
    d->shift = 0.0f;
    snprintf(d->name, sizeof d->name, "%s", img_name);
    *out = d;
    return SL_OK;
nomem:
    sl_free(d->labels);
    sl_free(d);
    return sl_why(why, why_len, SL_ENOMEM, "%s: out of memory", img_name);
}

sl_err sl_nn_data_parse_idx(const uint8_t *images, size_t images_len, const uint8_t *labels,
                            size_t labels_len, const char *name, sl_nn_data_t **out,
                            char *why, size_t why_len) {
    *out = NULL;
    char iname[160], lname[160];
    snprintf(iname, sizeof iname, "%s (images)", name);
    snprintf(lname, sizeof lname, "%s (labels)", name);
    return idx_build((uint8_t *)images, images_len, iname, (uint8_t *)labels, labels_len, lname,
                     false, out, why, why_len);
}

sl_err sl_nn_data_load_idx(const char *images_path, const char *labels_path,
                           sl_nn_data_t **out, char *why, size_t why_len) {
    *out = NULL;
    uint8_t *img = NULL, *lab = NULL;
    size_t il, ll;
    sl_err err = read_file(images_path, &img, &il, why, why_len);
    if (err == SL_OK)
        err = read_file(labels_path, &lab, &ll, why, why_len);
    if (err == SL_OK) {
        err = idx_build(img, il, images_path, lab, ll, labels_path, true, out, why, why_len);
        if (err == SL_OK)
            img = NULL; /* taken over */
    }
    sl_free(img);
    sl_free(lab);
    return err;
}

/* ---- CSV ---- */

sl_err sl_nn_data_load_csv(const char *path, sl_nn_data_t **out, char *why, size_t why_len) {
    *out = NULL;
    uint8_t *buf;
    size_t len;
    sl_err err = read_file(path, &buf, &len, why, why_len);
    if (err != SL_OK)
        return err;
    sl_nn_data_t *d = sl_calloc(1, sizeof *d);
    float *vals = NULL;
    size_t vcap = 0, vlen = 0, rows = 0, lcap = 0;
    long cols = -1, line = 0;
    bool all_bytes = true;
    int maxl = 0;
    err = SL_ENOMEM;
    if (!d)
        goto fail;
    char *p = (char *)buf, *end = (char *)buf + len;
    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line++;
        char *q = p;
        char *next = eol < end ? eol + 1 : end;
        char *le = eol;
        if (le > p && le[-1] == '\r')
            le--;
        if (le == p) { /* blank line */
            p = next;
            continue;
        }
        if (memchr(p, '\0', (size_t)(le - p))) {
            err = sl_why(why, why_len, SL_EPROTO, "%s:%ld: NUL byte (not a text file?)", path,
                         line);
            goto fail;
        }
        /* A first line whose first field is not a number is a header. */
        if (rows == 0 && cols < 0) {
            char first[64];
            const char *fe = memchr(p, ',', (size_t)(le - p));
            size_t fl = (size_t)((fe ? fe : le) - p);
            bool header = fl == 0 || fl >= sizeof first;
            if (!header) {
                memcpy(first, p, fl);
                first[fl] = '\0';
                char *e;
                (void)strtod(first, &e);
                while (*e && isspace((unsigned char)*e))
                    e++;
                header = e == first || *e;
            }
            if (header) {
                p = next;
                continue;
            }
        }
        long ncols = 0;
        while (q <= le) {
            char *comma = memchr(q, ',', (size_t)(le - q));
            char *fe = comma ? comma : le;
            char tmp[64];
            size_t fl = (size_t)(fe - q);
            while (fl && isspace((unsigned char)*q)) {
                q++;
                fl--;
            }
            while (fl && isspace((unsigned char)q[fl - 1]))
                fl--;
            if (fl == 0 || fl >= sizeof tmp) {
                err = sl_why(why, why_len, SL_EPROTO, "%s:%ld: field %ld is %s", path, line,
                             ncols + 1, fl ? "too long" : "empty");
                goto fail;
            }
            memcpy(tmp, q, fl);
            tmp[fl] = '\0';
            char *e;
            errno = 0;
            float v = strtof(tmp, &e);
            if (*e || errno || !isfinite(v)) {
                err = sl_why(why, why_len, SL_EPROTO, "%s:%ld: field %ld ('%s') is not a number",
                             path, line, ncols + 1, tmp);
                goto fail;
            }
            if (ncols == 0) {
                if (v < 0 || v > 65535 || v != floorf(v)) {
                    err = sl_why(why, why_len, SL_EPROTO,
                                 "%s:%ld: label '%s' is not an integer in 0..65535", path,
                                 line, tmp);
                    goto fail;
                }
                if (rows >= lcap) {
                    lcap = lcap ? lcap * 2 : 1024;
                    int32_t *nl = sl_realloc(d->labels, lcap * sizeof *nl);
                    if (!nl)
                        goto nomem;
                    d->labels = nl;
                }
                d->labels[rows] = (int32_t)v;
                if ((int)v > maxl)
                    maxl = (int)v;
            } else {
                if (vlen >= vcap) {
                    vcap = vcap ? vcap * 2 : 4096;
                    float *nv = sl_realloc(vals, vcap * sizeof *nv);
                    if (!nv)
                        goto nomem;
                    vals = nv;
                }
                vals[vlen++] = v;
                if (v < 0 || v > 255 || v != floorf(v))
                    all_bytes = false;
            }
            ncols++;
            if (!comma)
                break;
            q = comma + 1;
        }
        if (ncols < 2) {
            err = sl_why(why, why_len, SL_EPROTO,
                         "%s:%ld: a row needs a label and at least one value", path, line);
            goto fail;
        }
        if (cols < 0) {
            cols = ncols;
            if ((size_t)(cols - 1) > MAX_SAMPLE_LEN) {
                err = sl_why(why, why_len, SL_ETOOBIG, "%s: rows too wide", path);
                goto fail;
            }
        } else if (ncols != cols) {
            err = sl_why(why, why_len, SL_EPROTO,
                         "%s:%ld: %ld fields where the first row has %ld", path, line, ncols,
                         cols);
            goto fail;
        }
        rows++;
        p = next;
    }
    if (rows == 0) {
        err = sl_why(why, why_len, SL_EPROTO, "%s: no data rows", path);
        goto fail;
    }
    size_t per = (size_t)cols - 1;
    if (all_bytes) {
        d->images_u8 = sl_malloc(vlen);
        if (!d->images_u8)
            goto nomem;
        for (size_t i = 0; i < vlen; i++)
            d->images_u8[i] = (uint8_t)vals[i];
        sl_free(vals);
        vals = NULL;
        d->scale = 1.0f / 255.0f;
    } else {
        d->images_f32 = vals;
        vals = NULL;
        d->scale = 1.0f;
    }
    long side = lround(sqrt((double)per));
    if ((size_t)(side * side) == per && per > 1)
        d->shape = (sl_nn_shape_t){.channels = 1, .height = (int)side, .width = (int)side};
    else
        d->shape = (sl_nn_shape_t){.channels = 1, .height = 1, .width = (int)per};
    d->shape.classes = maxl + 1 < 2 ? 2 : maxl + 1;
    d->count = rows;
    snprintf(d->name, sizeof d->name, "%s", path);
    sl_free(buf);
    *out = d;
    return SL_OK;
nomem:
    err = sl_why(why, why_len, SL_ENOMEM, "%s: out of memory", path);
fail:
    sl_free(buf);
    sl_free(vals);
    sl_nn_data_destroy(&d);
    return err;
}

/* ---- named sets ---- */

/* Finds DIR/BASE or DIR/BASE.gz. */
static bool find_idx(const char *dir, const char *base, char *out, size_t out_len) {
    snprintf(out, out_len, "%s/%s.gz", dir, base);
    if (sl_plat_path_kind(out) != SL_PLAT_PATH_NONE)
        return true;
    snprintf(out, out_len, "%s/%s", dir, base);
    return sl_plat_path_kind(out) != SL_PLAT_PATH_NONE;
}

static sl_err load_dir(const char *dir, sl_nn_data_t **train, sl_nn_data_t **test, char *why,
                       size_t why_len) {
    static const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                   "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char paths[4][600];
    for (int i = 0; i < 4; i++)
        if (!find_idx(dir, names[i], paths[i], sizeof paths[i]))
            return sl_why(why, why_len, SL_ENOTFOUND,
                          "%s: no %s[.gz] there (a data set directory holds the four IDX "
                          "files train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                          "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte)",
                          dir, names[i]);
    sl_err err = sl_nn_data_load_idx(paths[0], paths[1], train, why, why_len);
    if (err != SL_OK)
        return err;
    err = sl_nn_data_load_idx(paths[2], paths[3], test, why, why_len);
    if (err == SL_OK && ((*test)->shape.height != (*train)->shape.height ||
                         (*test)->shape.width != (*train)->shape.width))
        err = sl_why(why, why_len, SL_EINVAL,
                     "%s: test images are %dx%d but training images %dx%d", paths[2],
                     (*test)->shape.height, (*test)->shape.width, (*train)->shape.height,
                     (*train)->shape.width);
    if (err != SL_OK) {
        sl_nn_data_destroy(train);
        sl_nn_data_destroy(test);
        return err;
    }
    int classes = (*train)->shape.classes > (*test)->shape.classes ? (*train)->shape.classes
                                                                   : (*test)->shape.classes;
    (*train)->shape.classes = (*test)->shape.classes = classes;
    return SL_OK;
}

sl_err sl_nn_data_load(const char *what, sl_nn_data_t **train, sl_nn_data_t **test, char *why,
                       size_t why_len) {
    *train = *test = NULL;
    if (!what || !*what)
        return sl_why(why, why_len, SL_EINVAL, "no data set named");
    if (!strcmp(what, "fashion-mnist") || !strcmp(what, "mnist")) {
        const char *root = sl_plat_getenv("SL_DATASETS");
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", root && *root ? root : "/usr/share/datasets", what);
        if (sl_plat_path_kind(dir) == SL_PLAT_PATH_NONE)
            return sl_why(why, why_len, SL_ENOTFOUND,
                          "data set '%s' not found in %s (install Debian's dataset-%s, or "
                          "pass --dataset DIR with the IDX files)",
                          what, dir, what);
        return load_dir(dir, train, test, why, why_len);
    }
    sl_plat_path_kind_t kind = sl_plat_path_kind(what);
    if (kind == SL_PLAT_PATH_NONE)
        return sl_why(why, why_len, SL_ENOTFOUND,
                      "%s: no such data set, directory or file (use fashion-mnist, mnist, a "
                      "directory of IDX files, or a .csv file)",
                      what);
    if (kind == SL_PLAT_PATH_DIR)
        return load_dir(what, train, test, why, why_len);
    sl_err err = sl_nn_data_load_csv(what, train, why, why_len);
    if (err != SL_OK)
        return err;
    /* FILE.csv -> FILE_test.csv when present. */
    size_t n = strlen(what);
    if (n > 4 && !strcmp(what + n - 4, ".csv") && n < 500) {
        char tpath[512];
        snprintf(tpath, sizeof tpath, "%.*s_test.csv", (int)(n - 4), what);
        if (sl_plat_path_kind(tpath) != SL_PLAT_PATH_NONE) {
            err = sl_nn_data_load_csv(tpath, test, why, why_len);
            if (err == SL_OK && (*test)->shape.width * (*test)->shape.height !=
                                    (*train)->shape.width * (*train)->shape.height)
                err = sl_why(why, why_len, SL_EINVAL,
                             "%s: %d values per row but %s has %d", tpath,
                             (*test)->shape.width * (*test)->shape.height, what,
                             (*train)->shape.width * (*train)->shape.height);
            if (err != SL_OK) {
                sl_nn_data_destroy(train);
                sl_nn_data_destroy(test);
                return err;
            }
            int c = (*train)->shape.classes > (*test)->shape.classes ? (*train)->shape.classes
                                                                     : (*test)->shape.classes;
            (*train)->shape.classes = (*test)->shape.classes = c;
        }
    }
    return SL_OK;
}

void sl_nn_data_truncate(sl_nn_data_t *d, size_t count) {
    if (d && count < d->count)
        d->count = count;
}

sl_err sl_nn_data_standardize(sl_nn_data_t *train, sl_nn_data_t *test, double *mean,
                              double *std) {
    if (!train || train->count == 0)
        return SL_EINVAL;
    size_t n = train->count * (size_t)train->shape.channels * (size_t)train->shape.height *
               (size_t)train->shape.width;
    double s = 0.0, ss = 0.0;
    if (train->images_u8) {
        /* A histogram: exact sums, whatever the size. */
        uint64_t hist[256] = {0};
        for (size_t i = 0; i < n; i++)
            hist[train->images_u8[i]]++;
        for (int v = 0; v < 256; v++) {
            double x = v * (double)train->scale + train->shift;
            s += (double)hist[v] * x;
            ss += (double)hist[v] * x * x;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            double x = train->images_f32[i] * (double)train->scale + train->shift;
            s += x;
            ss += x * x;
        }
    }
    double mu = s / (double)n, var = ss / (double)n - mu * mu;
    if (!(var > 1e-12))
        return SL_EINVAL;
    double sd = sqrt(var);
    /* (stored * scale + shift - mu) / sd, as one multiply-add. */
    float scale = (float)(train->scale / sd), shift = (float)((train->shift - mu) / sd);
    if (test && (test->scale != train->scale || test->shift != train->shift))
        return SL_EINVAL;
    train->scale = scale;
    train->shift = shift;
    if (test) {
        test->scale = scale;
        test->shift = shift;
    }
    if (mean)
        *mean = mu;
    if (std)
        *std = sd;
    return SL_OK;
}

void sl_nn_data_destroy(sl_nn_data_t **pd) {
    if (!pd || !*pd)
        return;
    sl_nn_data_t *d = *pd;
    sl_free(d->images_u8);
    sl_free(d->images_f32);
    sl_free(d->labels);
    sl_free(d);
    *pd = NULL;
}
