//> 08
/* numbers.c: where each number of a split or a join goes; see numbers.h. */
#include "plot/numbers.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tensor/tensor.h"

#define STAGES_MAX 8 /* the input and the steps of one split or join */
#define SPLITS_MAX 8 /* different splits and joins shown */
#define NAMES_MAX 4  /* inputs one entry stands for */

/* One stage of a split: a tensor and the buffer it reads. */
typedef struct stage {
    tensor *t;
    const trace_shape *traced; /* its shape as the trace has it (names) */
    const char *op;            /* "input", or the step that made it */
    const double *base;        /* where its buffer starts */
    size_t buffer;             /* 0: the input's; 1, 2 ...: each copy's */
} stage;

static int is_split(const trace_record *r)
{
    return r->kind == TRACE_STEP && r->n_inputs >= 1 &&
           (!strncmp(r->op, "transpose_qkv(", 14) ||
            !strncmp(r->op, "transpose_output(", 17));
}

/* op "name(a, b, c)" into name (room for cap) and its integers; 0 when
 * it is not of that form. */
static int parse_op(const char *op, char *name, size_t cap, long *args,
                    size_t *n)
{
    size_t len = strcspn(op, "(");
    if (!op[len] || len >= cap)
        return 0;
    memcpy(name, op, len);
    name[len] = '\0';
    const char *s = op + len + 1;
    for (*n = 0; *n < TENSOR_MAX_DIMS;) {
        char *end;
        args[(*n)++] = strtol(s, &end, 10);
        if (end == s)
            return 0;
        s = end;
        if (*s == ')')
            return s[1] == '\0';
        if (*s != ',')
            return 0;
        s++;
    }
    return 0;
}

/* The step r recorded, run again on x by the library's own operation;
 * GSL_EINVAL for a step that is not a reshape, a view or a permute. */
static int replay(const tensor *x, const trace_record *r, tensor **out)
{
    char name[16];
    long a[TENSOR_MAX_DIMS];
    size_t n, perm[TENSOR_MAX_DIMS];
    *out = NULL;
    if (!parse_op(r->op, name, sizeof name, a, &n))
        return GSL_EINVAL;
    if (!strcmp(name, "reshape"))
        return tensor_reshape(x, n, a, NULL, out);
    if (!strcmp(name, "view"))
        return tensor_view(x, n, a, NULL, out);
    if (!strcmp(name, "permute")) {
        for (size_t d = 0; d < n; d++)
            perm[d] = a[d] < 0 ? TENSOR_MAX_DIMS : (size_t)a[d];
        return tensor_permute(x, n, perm, out);
    }
    return GSL_EINVAL;
}

/* The next row-major index below shape after idx; 0 after the last. */
static int next_index(size_t ndim, const size_t *shape, size_t *idx)
{
    for (size_t d = ndim; d-- > 0;) {
        if (++idx[d] < shape[d])
            return 1;
        idx[d] = 0;
    }
    return 0;
}

/* Which input element t's position idx holds. */
static size_t source(const tensor *t, const size_t *idx)
{
    return (size_t)*tensor_at(t, idx);
}

static void json_sizes(FILE *f, const char *key, size_t n, const size_t *v)
{
    fprintf(f, ", \"%s\": [", key);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%zu", i ? ", " : "", v[i]);
    fputc(']', f);
}

/* One stage, its drawn positions those that hold an element of shown. */
static int write_stage(FILE *f, const stage *s, const char *kind,
                       const unsigned char *shown)
{
    const tensor *t = s->t;
    size_t nd = t->ndim, idx[TENSOR_MAX_DIMS] = {0};
    size_t *kept[TENSOR_MAX_DIMS] = {0}, nkept[TENSOR_MAX_DIMS] = {0};
    unsigned char *keep[TENSOR_MAX_DIMS] = {0};
    int status = GSL_SUCCESS;
    for (size_t d = 0; d < nd && !status; d++) {
        keep[d] = calloc(t->shape[d], 1);
        kept[d] = calloc(t->shape[d], sizeof *kept[d]);
        if (!keep[d] || !kept[d])
            status = mha_fail(GSL_ENOMEM, "numbers_write_json: out of memory");
    }
    if (!status) {
        do
            if (shown[source(t, idx)])
                for (size_t d = 0; d < nd; d++)
                    keep[d][idx[d]] = 1;
        while (next_index(nd, t->shape, idx));
        for (size_t d = 0; d < nd; d++)
            for (size_t i = 0; i < t->shape[d]; i++)
                if (keep[d][i])
                    kept[d][nkept[d]++] = i;

        fputs("\n{\"op\": ", f);
        trace_json_string(f, s->op);
        fprintf(f, ", \"kind\": \"%s\"", kind);
        json_sizes(f, "shape", nd, t->shape);
        fputs(", \"names\": [", f);
        for (size_t d = 0; d < nd; d++) {
            fputs(d ? ", " : "", f);
            trace_json_string(f, d < s->traced->ndim ? s->traced->names[d] : "");
        }
        fputc(']', f);
        json_sizes(f, "strides", nd, t->strides);
        fprintf(f, ", \"offset\": %zu, \"buffer\": %zu, \"index\": [",
                (size_t)(t->data - s->base), s->buffer);
        for (size_t d = 0; d < nd; d++) {
            fputs(d ? ", [" : "[", f);
            for (size_t i = 0; i < nkept[d]; i++)
                fprintf(f, "%s%zu", i ? ", " : "", kept[d][i]);
            fputc(']', f);
        }
        // the drawn positions in row-major order: what each holds, then
        // where it lies in its buffer
        for (int pass = 0; pass < 2; pass++) {
            fputs(pass ? "],\n \"slots\": [" : "],\n \"cells\": [", f);
            size_t j[TENSOR_MAX_DIMS] = {0}, n = 0;
            do {
                size_t at[TENSOR_MAX_DIMS], slot = (size_t)(t->data - s->base);
                for (size_t d = 0; d < nd; d++) {
                    at[d] = kept[d][j[d]];
                    slot += at[d] * t->strides[d];
                }
                fprintf(f, "%s%zu", n++ ? "," : "", pass ? slot : source(t, at));
            } while (next_index(nd, nkept, j));
        }
        fputs("]}", f);
    }
    for (size_t d = 0; d < nd; d++) {
        free(keep[d]);
        free(kept[d]);
    }
    return status;
}

/* The stages of the split or join whose step record is log's record at:
 * its input, contiguous (as the module's are: a projection's output, the
 * attention's), each element its own index, then each step inside it run
 * again.  *n stages made; note says why a step could not be, or is "". */
static int make_stages(const trace_log *log, size_t at, stage *st, size_t *n,
                       char *note, size_t cap)
{
    const trace_record *r = &log->records[at];
    const trace_shape *in = &r->inputs[0].shape;
    *n = 0;
    note[0] = '\0';
    if (tensor_alloc(in->ndim, in->dims, &st[0].t))
        return GSL_ENOMEM;
    for (size_t k = 0, N = tensor_numel(st[0].t); k < N; k++)
        st[0].t->data[k] = (double)k;
    st[0] = (stage){st[0].t, in, "input", st[0].t->data, 0};
    *n = 1;
    size_t copies = 0;
    for (size_t k = at + 1; k < log->count && log->records[k].depth > r->depth;
         k++) {
        const trace_record *s = &log->records[k];
        if (s->depth != r->depth + 1 || s->kind == TRACE_NOTE)
            continue;
        tensor *y;
        int status = *n < STAGES_MAX && s->has_output
                         ? replay(st[*n - 1].t, s, &y)
                         : GSL_EINVAL;
        if (status == GSL_ENOMEM)
            return status;
        if (status) {
            snprintf(note, cap, "The step %s is not a reshape or a permute: "
                     "this view cannot follow the numbers through it.", s->op);
            return GSL_SUCCESS;
        }
        stage next = {y, &s->output, s->op, y->data, 0};
        size_t j = 0;
        while (j < *n && !tensor_shares_buffer(y, st[j].t))
            j++;
        int view = j < *n; // the buffer of an earlier stage
        if (view) {
            next.base = st[j].base;
            next.buffer = st[j].buffer;
        } else {
            next.buffer = ++copies;
        }
        st[(*n)++] = next;
        if (view != (s->kind == TRACE_VIEW)) {
            snprintf(note, cap, "The step %s was a %s in the trace but is a "
                     "%s from a contiguous input: the input was not "
                     "contiguous, and this view cannot show its memory.",
                     s->op, trace_kind_name(s->kind), view ? "view" : "copy");
            return GSL_SUCCESS;
        }
    }
    return GSL_SUCCESS;
}

/* The elements drawn (shown[k] for input element k): all of them, or the
 * first of each dimension of the first 4-D stage, the largest count
 * halved until at most NUMBERS_SHOWN_MAX remain.  Returns how many. */
static size_t choose_shown(const stage *st, size_t n, unsigned char *shown)
{
    const tensor *box = st[0].t;
    for (size_t k = 0; k < n; k++)
        if (st[k].t->ndim == 4) {
            box = st[k].t;
            break;
        }
    size_t count[TENSOR_MAX_DIMS], total = 1;
    for (size_t d = 0; d < box->ndim; d++)
        total *= count[d] = box->shape[d];
    while (total > NUMBERS_SHOWN_MAX) {
        size_t big = 0;
        for (size_t d = 1; d < box->ndim; d++)
            if (count[d] > count[big])
                big = d;
        total = total / count[big] * ((count[big] + 1) / 2);
        count[big] = (count[big] + 1) / 2;
    }
    size_t idx[TENSOR_MAX_DIMS] = {0};
    do
        shown[source(box, idx)] = 1;
    while (next_index(box->ndim, count, idx));
    return total;
}

/* One entry of the list: the split or join at record at, for inputs of. */
static int write_split(FILE *f, const trace_log *log, size_t at,
                       const char *const *of, size_t nof)
{
    stage st[STAGES_MAX];
    size_t n;
    char note[TRACE_OP_MAX + 160];
    int status = make_stages(log, at, st, &n, note, sizeof note);
    unsigned char *shown = NULL;
    if (!status && !(shown = calloc(tensor_numel(st[0].t), 1)))
        status = mha_fail(GSL_ENOMEM, "numbers_write_json: out of memory");
    if (!status) {
        fputs("{\"op\": ", f);
        trace_json_string(f, log->records[at].op);
        fputs(", \"of\": \"", f);
        for (size_t i = 0; i < nof; i++)
            fprintf(f, "%s%s", i == 0 ? "" : i + 1 < nof ? ", " : " and ",
                    of[i]);
        fputc('"', f);
        if (note[0]) {
            fputs(", \"note\": ", f);
            trace_json_string(f, note);
        }
        size_t shown_n = note[0] ? 0 : choose_shown(st, n, shown);
        fprintf(f, ", \"numel\": %zu, \"shown\": %zu, \"stages\": [",
                tensor_numel(st[0].t), shown_n);
        for (size_t k = 0; k < n && !note[0] && !status; k++) {
            fputs(k ? "," : "", f);
            const char *kind = k == 0 ? "input"
                               : st[k].buffer == st[k - 1].buffer ? "view"
                                                                  : "copy";
            status = write_stage(f, &st[k], kind, shown);
        }
        fputs("]}", f);
    }
    free(shown);
    for (size_t k = 0; k < n; k++)
        tensor_free(st[k].t);
    return status;
}

static int same_split(const trace_record *a, const trace_record *b)
{
    const trace_shape *x = &a->inputs[0].shape, *y = &b->inputs[0].shape;
    return !strcmp(a->op, b->op) && x->ndim == y->ndim &&
           !memcmp(x->dims, y->dims, x->ndim * sizeof x->dims[0]);
}

int numbers_write_json(FILE *f, const trace_log *log)
{
    static const char *const qkv[] = {"queries", "keys", "values"};
    size_t at[SPLITS_MAX], n = 0, nof[SPLITS_MAX] = {0}, splits = 0;
    const char *of[SPLITS_MAX][NAMES_MAX];
    for (size_t k = 0; log && k < log->count; k++) {
        const trace_record *r = &log->records[k];
        if (!is_split(r))
            continue;
        int split = !strncmp(r->op, "transpose_qkv(", 14);
        const char *name = !split       ? "heads' outputs"
                           : splits < 3 ? qkv[splits]
                                        : "another input";
        splits += split;
        size_t j = 0;
        while (j < n && !same_split(&log->records[at[j]], r))
            j++;
        if (j == n && n == SPLITS_MAX)
            continue;
        if (j == n)
            at[n++] = k;
        if (nof[j] < NAMES_MAX)
            of[j][nof[j]++] = name;
    }
    fputc('[', f);
    int status = GSL_SUCCESS;
    {
        QUIET; // the steps run again are not the module's
        for (size_t j = 0; j < n; j++) {
            fputs(j ? ",\n" : "\n", f);
            STEP(write_split(f, log, at[j], of[j], nof[j]));
        }
    }
done:
    fputc(']', f);
    return status;
}
//<
