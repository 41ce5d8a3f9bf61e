/* key.h: what the key's programs share, beside chapters/lesson.h. */
#ifndef MHA_KEY_H
#define MHA_KEY_H

#include "lesson.h"

/* The trace of the module's forward pass on shapes alone, as `mha trace`
 * prints it: self-attention when Lk is 0, keys and values (B, Lk, D)
 * otherwise; G key-value heads (0: h); lens, when not NULL, the
 * valid_lens (B,). */
static inline void shape_trace(size_t B, size_t Lq, size_t Lk, size_t D,
                               size_t h, size_t G, const double *lens)
{
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h, .shape_only = 1,
                            .kv_heads = G};
    CHECK(multihead_init(&m, &cfg));
    tensor *x, *y = NULL, *vl = NULL, *out;
    CHECK(tensor_alloc_meta(SHAPE(B, Lq, D), &x));
    if (Lk)
        CHECK(tensor_alloc_meta(SHAPE(B, Lk, D), &y));
    if (lens)
        CHECK(tensor_from_array(SHAPE(B), lens, &vl));
    trace_to(stdout);
    CHECK(multihead_forward(&m, x, y ? y : x, y ? y : x, vl, &out, NULL));
    trace_to(NULL);
    tensor_free(x);
    tensor_free(y);
    tensor_free(vl);
    tensor_free(out);
    multihead_free(&m);
}

/* A key program's main(): the exercises' functions in order, after
 * mha_program_init, each printing its section. */
#define KEY_MAIN(...)                                                         \
    int main(void)                                                            \
    {                                                                         \
        mha_program_init();                                                   \
        void (*const exercises[])(void) = {__VA_ARGS__};                      \
        for (size_t i = 0; i < sizeof exercises / sizeof exercises[0]; i++)   \
            exercises[i]();                                                   \
        return 0;                                                             \
    }

#endif
