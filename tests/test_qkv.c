//> 04
/* test_qkv.c: the rules every attention's queries, keys and values follow
 * (qkv.h), found by qkv_find_fault and worded by qkv_check; then the one
 * message each caller gives for each broken rule, under its own name and
 * in its own names for the inputs.
 *
 * Shapes: the good inputs are queries (2, 3, 4), keys (2, 5, 4), values
 * (2, 5, 4); each case breaks one rule. */
#include "check.h"

#include <criterion/parameterized.h>

#include "nn/qkv.h"

/* --- the rules ------------------------------------------------------- */

struct fault_case {
    size_t q[3], k[3], v[3]; /* shapes; a 0 in the last place: 2-D; q[0]
                                0: that input is NULL */
    int missing;             /* which input is NULL, or -1 */
    int same_d;
    qkv_fault fault;
    int which;
};

static struct fault_case fault_cases[] = {
    {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, -1, 1, QKV_FINE, QKV_QUERIES},
    {{2, 3, 4}, {2, 5, 7}, {2, 5, 6}, -1, 0, QKV_FINE, QKV_QUERIES},
    {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, QKV_QUERIES, 1, QKV_MISSING, QKV_QUERIES},
    {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, QKV_VALUES, 1, QKV_MISSING, QKV_VALUES},
    {{2, 3, 0}, {2, 5, 4}, {2, 5, 6}, -1, 1, QKV_NOT_3D, QKV_QUERIES},
    {{2, 3, 4}, {2, 5, 0}, {2, 5, 6}, -1, 1, QKV_NOT_3D, QKV_KEYS},
    {{2, 3, 4}, {2, 5, 4}, {2, 5, 0}, -1, 1, QKV_NOT_3D, QKV_VALUES},
    {{2, 3, 4}, {3, 5, 4}, {2, 5, 6}, -1, 1, QKV_BATCH, QKV_KEYS},
    {{2, 3, 4}, {2, 5, 4}, {1, 5, 6}, -1, 1, QKV_BATCH, QKV_VALUES},
    {{2, 3, 4}, {3, 5, 4}, {3, 5, 6}, -1, 1, QKV_BATCH, QKV_KEYS},
    {{2, 3, 4}, {2, 5, 4}, {2, 4, 6}, -1, 1, QKV_LENGTH, QKV_VALUES},
    {{2, 3, 4}, {2, 5, 3}, {2, 5, 6}, -1, 1, QKV_DEPTH, QKV_KEYS},
    /* the first rule broken wins: 2-D keys of another batch size */
    {{2, 3, 4}, {3, 5, 0}, {2, 4, 6}, -1, 1, QKV_NOT_3D, QKV_KEYS},
    /* Lk before d */
    {{2, 3, 4}, {2, 5, 3}, {2, 4, 6}, -1, 1, QKV_LENGTH, QKV_VALUES},
};

ParameterizedTestParameters(qkv, find_fault)
{
    return cr_make_param_array(struct fault_case, fault_cases,
                               sizeof fault_cases / sizeof fault_cases[0]);
}

static tensor *of_shape(const size_t *s)
{
    tensor *t;
    OK(tensor_alloc(s[2] ? 3 : 2, s, &t));
    return t;
}

ParameterizedTest(struct fault_case *c, qkv, find_fault)
{
    tensor *in[3] = {of_shape(c->q), of_shape(c->k), of_shape(c->v)};
    const tensor *arg[3] = {in[0], in[1], in[2]};
    if (c->missing >= 0)
        arg[c->missing] = NULL;
    int which = -1;
    cr_assert_eq(qkv_find_fault(arg[0], arg[1], arg[2], c->same_d, &which),
                 c->fault);
    cr_assert_eq(which, c->which);
    /* which may be NULL, and the check agrees with the rules */
    cr_assert_eq(qkv_find_fault(arg[0], arg[1], arg[2], c->same_d, NULL),
                 c->fault);
    int status = qkv_check("f", &qkv_lesson_names, arg[0], arg[1], arg[2],
                           c->same_d, NULL, NULL);
    cr_assert_eq(status, c->fault == QKV_FINE      ? GSL_SUCCESS
                         : c->fault == QKV_MISSING ? GSL_EINVAL
                                                   : GSL_EBADLEN);
    for (int i = 0; i < 3; i++)
        tensor_free(in[i]);
}

/* The shapes qkv_check hands on, with the caller's `more` in the list. */
Test(qkv, shapes_for_the_callers_messages)
{
    tensor *q, *k, *v;
    OK(tensor_alloc(SHAPE(2, 1, 2), &q));
    OK(tensor_alloc(SHAPE(2, 10, 2), &k));
    OK(tensor_alloc(SHAPE(2, 10, 4), &v));
    qkv_shapes s;
    OK(qkv_check("f", &qkv_lesson_names, q, k, v, 1, NULL, &s));
    cr_assert_str_eq(s.all, "queries (2, 1, 2), keys (2, 10, 2), values "
                            "(2, 10, 4)");
    cr_assert_str_eq(s.qk, "queries (2, 1, 2), keys (2, 10, 2)");
    OK(qkv_check("f", &qkv_seed_names, q, k, v, 0, ", w (3,)", &s));
    cr_assert_str_eq(s.all, "q (2, 1, 2), k (2, 10, 2), v (2, 10, 4), w (3,)");
    cr_assert_str_eq(s.qk, "q (2, 1, 2), k (2, 10, 2)");
    FAILS(qkv_check("f", &qkv_seed_names, q, v, v, 1, ", w (3,)", &s),
          GSL_EBADLEN,
          "f: q has d = 2 but k has d = 4 (q (2, 1, 2), k (2, 10, 4), v "
          "(2, 10, 4), w (3,))");
    FREE_ALL(q, k, v);
}

//> full
/* --- every caller's messages ----------------------------------------- */

/* The callers, by number (a parameter is a copy made in another process,
 * so it cannot carry a function pointer of this one). */
enum { DOT, ADDITIVE, FLASH, BACKWARD, MODULE, MODULE_FAST, MODULE_NAIVE,
       MODULE_CACHED, HEAD_MAJOR };

/* The multi-head module's four ways in, on a module whose sizes fit the
 * good inputs; out must stay NULL. */
static int run_module(int caller, const tensor *q, const tensor *k,
                      const tensor *v)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1);
    multihead_cache c = {0};
    tensor *out = (tensor *)1;
    int status =
        caller == MODULE ? multihead_forward(&m, q, k, v, NULL, &out, NULL)
        : caller == MODULE_FAST
            ? multihead_forward_fast(&m, q, k, v, NULL, NULL, &out, NULL)
        : caller == MODULE_NAIVE
            ? multihead_forward_naive(&m, q, k, v, NULL, &out)
            : multihead_forward_cached(&m, q, k, v, NULL, NULL, &c, &out, NULL);
    cr_assert_null(out);
    cr_assert_null(c.concat);
    multihead_free(&m);
    return status;
}

/* Runs one caller on q, k, v with a module whose sizes fit the good
 * inputs, and returns its status; out must stay NULL. */
static int run_caller(int caller, const tensor *q, const tensor *k,
                      const tensor *v)
{
    dot_attention dot;
    additive_attention add;
    headmajor hm;
    headmajor_config hm_cfg = {.n_head = 2, .d_model = 4, .d_k = 2, .d_v = 2};
    tensor *w, *dout, *out = (tensor *)1, *attn = NULL;
    int status;
    switch (caller) {
    case DOT:
        OK(dot_attention_init(&dot, 0.0));
        status = dot_attention_forward(&dot, q, k, v, NULL, &out, NULL);
        dot_attention_free(&dot);
        break;
    case ADDITIVE:
        OK(additive_attention_init(&add, 4, 4, 3, 0.0));
        status = additive_attention_forward(&add, q, k, v, NULL, &out, NULL);
        additive_attention_free(&add);
        break;
    case FLASH:
        status = flash_attention_forward(q, k, v, NULL, 0, 0, &out);
        break;
    case BACKWARD: /* weights (2, 3, 5) and dout (2, 3, 4) that fit */
        OK(tensor_alloc(SHAPE(2, 3, 5), &w));
        OK(tensor_alloc(SHAPE(2, 3, 4), &dout));
        status = dot_attention_backward(q, k, v, NULL, w, dout, &out, NULL,
                                        NULL);
        FREE_ALL(w, dout);
        break;
    case HEAD_MAJOR:
        OK(headmajor_init(&hm, &hm_cfg));
        status = headmajor_forward(&hm, q, k, v, NULL, &out, &attn);
        headmajor_free(&hm);
        break;
    default:
        return run_module(caller, q, k, v);
    }
    cr_assert_null(out);
    cr_assert_null(attn);
    return status;
}

enum { NO_KEYS, Q_2D, V_2D, K_BATCH, V_SHORT, K_DEPTH };

struct message_case {
    int caller;
    int broken; /* which rule, by the inputs above */
    int status;
    char message[320];
};

#define BACK_MORE ", weights (2, 3, 5), dout (2, 3, 4)"

static struct message_case message_cases[] = {
    {DOT, NO_KEYS, GSL_EINVAL, "dot_attention_forward: keys is NULL"},
    {DOT, V_2D, GSL_EBADLEN,
     "dot_attention_forward: queries, keys and values must be 3-D (B, L, "
     "features), got queries (2, 3, 4), keys (2, 5, 4), values (2, 5)"},
    {DOT, K_BATCH, GSL_EBADLEN,
     "dot_attention_forward: batch sizes differ (queries (2, 3, 4), keys "
     "(3, 5, 4), values (2, 5, 4))"},
    {DOT, V_SHORT, GSL_EBADLEN,
     "dot_attention_forward: keys have Lk = 5 but values have Lk = 4 "
     "(queries (2, 3, 4), keys (2, 5, 4), values (2, 4, 4))"},
    {DOT, K_DEPTH, GSL_EBADLEN,
     "dot_attention_forward: queries have d = 4 but keys have d = 3 (queries "
     "(2, 3, 4), keys (2, 5, 3), values (2, 5, 4))"},
    {ADDITIVE, NO_KEYS, GSL_EINVAL, "additive_attention_forward: keys is NULL"},
    {ADDITIVE, Q_2D, GSL_EBADLEN,
     "additive_attention_forward: queries, keys and values must be 3-D (B, L, "
     "features), got queries (2, 3), keys (2, 5, 4), values (2, 5, 4)"},
    {ADDITIVE, K_BATCH, GSL_EBADLEN,
     "additive_attention_forward: batch sizes differ (queries (2, 3, 4), keys "
     "(3, 5, 4), values (2, 5, 4))"},
    {ADDITIVE, V_SHORT, GSL_EBADLEN,
     "additive_attention_forward: keys have Lk = 5 but values have Lk = 4 "
     "(queries (2, 3, 4), keys (2, 5, 4), values (2, 4, 4))"},
    /* additive attention scores any d_k against any d_q: the layer says */
    {ADDITIVE, K_DEPTH, GSL_EBADLEN,
     "additive_attention_forward: keys have 3 features, W_k takes key_size 4 "
     "(queries (2, 3, 4), keys (2, 5, 3), values (2, 5, 4))"},
    {FLASH, NO_KEYS, GSL_EINVAL, "flash_attention_forward: keys is NULL"},
    {FLASH, V_2D, GSL_EBADLEN,
     "flash_attention_forward: queries, keys and values must be 3-D (B, L, "
     "features), got queries (2, 3, 4), keys (2, 5, 4), values (2, 5)"},
    {FLASH, K_BATCH, GSL_EBADLEN,
     "flash_attention_forward: batch sizes differ (queries (2, 3, 4), keys "
     "(3, 5, 4), values (2, 5, 4))"},
    {FLASH, V_SHORT, GSL_EBADLEN,
     "flash_attention_forward: keys have Lk = 5 but values have Lk = 4 "
     "(queries (2, 3, 4), keys (2, 5, 4), values (2, 4, 4))"},
    {FLASH, K_DEPTH, GSL_EBADLEN,
     "flash_attention_forward: queries have d = 4 but keys have d = 3 "
     "(queries (2, 3, 4), keys (2, 5, 3), values (2, 5, 4))"},
    {BACKWARD, NO_KEYS, GSL_EINVAL, "dot_attention_backward: keys is NULL"},
    {BACKWARD, Q_2D, GSL_EBADLEN,
     "dot_attention_backward: queries, keys and values must be 3-D (B, L, "
     "features), got queries (2, 3), keys (2, 5, 4), values (2, 5, 4)"
     BACK_MORE},
    {BACKWARD, K_BATCH, GSL_EBADLEN,
     "dot_attention_backward: batch sizes differ (queries (2, 3, 4), keys "
     "(3, 5, 4), values (2, 5, 4)" BACK_MORE ")"},
    {BACKWARD, V_SHORT, GSL_EBADLEN,
     "dot_attention_backward: keys have Lk = 5 but values have Lk = 4 "
     "(queries (2, 3, 4), keys (2, 5, 4), values (2, 4, 4)" BACK_MORE ")"},
    {BACKWARD, K_DEPTH, GSL_EBADLEN,
     "dot_attention_backward: queries have d = 4 but keys have d = 3 "
     "(queries (2, 3, 4), keys (2, 5, 3), values (2, 5, 4)" BACK_MORE ")"},
    {MODULE, NO_KEYS, GSL_EINVAL, "multihead: keys is NULL"},
    {MODULE, Q_2D, GSL_EBADLEN,
     "multihead: queries, keys and values must be 3-D (B, L, features), got "
     "queries (2, 3), keys (2, 5, 4), values (2, 5, 4)"},
    {MODULE, K_BATCH, GSL_EBADLEN,
     "multihead: batch sizes differ (queries (2, 3, 4), keys (3, 5, 4), "
     "values (2, 5, 4))"},
    {MODULE, V_SHORT, GSL_EBADLEN,
     "multihead: keys have Lk = 5 but values have Lk = 4 (queries (2, 3, 4), "
     "keys (2, 5, 4), values (2, 4, 4))"},
    /* the module's projections take any feature sizes: the layers say */
    {MODULE, K_DEPTH, GSL_EBADLEN,
     "multihead: feature sizes queries (2, 3, 4), keys (2, 5, 3), values "
     "(2, 5, 4) do not match the layers' query_size 4, key_size 4, "
     "value_size 4"},
    /* the head-major module names its inputs as its seed does */
    {HEAD_MAJOR, NO_KEYS, GSL_EINVAL, "headmajor_forward: k is NULL"},
    {HEAD_MAJOR, Q_2D, GSL_EBADLEN,
     "headmajor_forward: q, k and v must be 3-D (B, L, d_model), got q "
     "(2, 3), k (2, 5, 4), v (2, 5, 4)"},
    {HEAD_MAJOR, K_BATCH, GSL_EBADLEN,
     "headmajor_forward: batch sizes differ (q (2, 3, 4), k (3, 5, 4), v "
     "(2, 5, 4))"},
    {HEAD_MAJOR, V_SHORT, GSL_EBADLEN,
     "headmajor_forward: k has Lk = 5 but v has Lk = 4 (q (2, 3, 4), k "
     "(2, 5, 4), v (2, 4, 4))"},
    {HEAD_MAJOR, K_DEPTH, GSL_EBADLEN,
     "headmajor_forward: q, k and v must end in d_model = 4 features (q "
     "(2, 3, 4), k (2, 5, 3), v (2, 5, 4))"},
};

ParameterizedTestParameters(qkv, every_callers_messages)
{
    return cr_make_param_array(struct message_case, message_cases,
                               sizeof message_cases / sizeof message_cases[0]);
}

ParameterizedTest(struct message_case *c, qkv, every_callers_messages)
{
    size_t q_s[3] = {2, 3, 4}, k_s[3] = {2, 5, 4}, v_s[3] = {2, 5, 4};
    if (c->broken == Q_2D)
        q_s[2] = 0;
    if (c->broken == V_2D)
        v_s[2] = 0;
    if (c->broken == K_BATCH)
        k_s[0] = 3;
    if (c->broken == V_SHORT)
        v_s[1] = 4;
    if (c->broken == K_DEPTH)
        k_s[2] = 3;
    tensor *q = of_shape(q_s), *k = of_shape(k_s), *v = of_shape(v_s);
    /* the module's fast path, plain loops and cached forward check as its
     * forward does, under its name */
    int last = c->caller == MODULE ? MODULE_CACHED : c->caller;
    for (int caller = c->caller; caller <= last; caller++)
        FAILS(run_caller(caller, q, c->broken == NO_KEYS ? NULL : k, v),
              c->status, c->message);
    FREE_ALL(q, k, v);
}
//<
//<
