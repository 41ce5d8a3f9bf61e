//> 13
/* test_adam.c: the Adam optimiser against the update worked by hand and
 * against the formulas written out here with pow(). */
#include "check.h"

/* Step 1 by hand: with g = 2, m = 0.1 * 2 = 0.2 and v = 0.001 * 4 =
 * 0.004; the corrections give m_hat = 0.2 / 0.1 = 2, v_hat = 0.004 /
 * 0.001 = 4, so theta moves by lr * 2 / (2 + eps): almost exactly lr.
 * Step 2 with g = -1: m = 0.18 - 0.1 = 0.08, v = 0.003996 + 0.001 =
 * 0.004996; m_hat = 0.08 / 0.19, v_hat = 0.004996 / 0.001999. */
Test(adam, two_steps_by_hand)
{
    tensor *p, *g;
    OK(tensor_from_array(SHAPE(1), (double[]){1.0}, &p));
    OK(tensor_from_array(SHAPE(1), (double[]){2.0}, &g));
    adam a;
    OK(adam_init(&a, 1, &p, &g, 0.1));
    cr_assert_eq(a.beta1, 0.9);
    cr_assert_eq(a.beta2, 0.999);
    cr_assert_eq(a.eps, 1e-8);
    OK(adam_step(&a));
    cr_assert_float_eq(p->data[0], 1.0 - 0.1 * 2 / (2 + 1e-8), 1e-15);
    cr_assert_float_eq(a.m[0]->data[0], 0.2, 1e-15);
    cr_assert_float_eq(a.v[0]->data[0], 0.004, 1e-15);
    double after1 = p->data[0];
    g->data[0] = -1.0;
    OK(adam_step(&a));
    double m_hat = 0.08 / 0.19, v_hat = 0.004996 / 0.001999;
    cr_assert_float_eq(p->data[0], after1 - 0.1 * m_hat / (sqrt(v_hat) + 1e-8),
                       1e-14);
    cr_assert_eq(a.steps, 2);
    adam_free(&a);
    FREE_ALL(p, g);
}

/* Twenty steps on three tensors with gradients that change every step,
 * against the update written out with pow() in plain loops. */
Test(adam, matches_the_formulas)
{
    gsl_rng *r = mha_rng_new(31);
    tensor *p[3], *g[3];
    double ref[3][12], m[3][12] = {{0}}, v[3][12] = {{0}};
    size_t sizes[3] = {12, 5, 1};
    OK(tensor_alloc(SHAPE(3, 4), &p[0]));
    OK(tensor_alloc(SHAPE(5), &p[1]));
    OK(tensor_alloc(SHAPE(1, 1), &p[2]));
    for (int i = 0; i < 3; i++) {
        OK(tensor_alloc(p[i]->ndim, p[i]->shape, &g[i]));
        tensor_fill_normal(p[i], r, 0, 1);
        memcpy(ref[i], p[i]->data, sizes[i] * sizeof(double));
    }
    adam a;
    OK(adam_init(&a, 3, p, g, 0.01));
    a.beta1 = 0.8;
    a.beta2 = 0.99;
    a.eps = 1e-6;
    for (int t = 1; t <= 20; t++) {
        adam_zero_grad(&a);
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(g[i]->data[0], 0.0);
            tensor_fill_normal(g[i], r, 0, t % 3 ? 1.0 : 1e-3);
        }
        OK(adam_step(&a));
        for (int i = 0; i < 3; i++)
            for (size_t k = 0; k < sizes[i]; k++) {
                double gk = g[i]->data[k];
                m[i][k] = 0.8 * m[i][k] + 0.2 * gk;
                v[i][k] = 0.99 * v[i][k] + 0.01 * gk * gk;
                double mh = m[i][k] / (1 - pow(0.8, t));
                double vh = v[i][k] / (1 - pow(0.99, t));
                ref[i][k] -= 0.01 * mh / (sqrt(vh) + 1e-6);
                cr_assert_float_eq(p[i]->data[k], ref[i][k], 1e-13,
                                   "step %d, tensor %d, element %zu", t, i, k);
            }
    }
    adam_free(&a);
    for (int i = 0; i < 3; i++) {
        tensor_free(p[i]);
        tensor_free(g[i]);
    }
    gsl_rng_free(r);
}

/* It optimises: (x - 3)^2 + 10 (y + 1)^2 from (0, 0) ends near (3, -1). */
Test(adam, finds_a_minimum)
{
    tensor *p, *g;
    OK(tensor_alloc(SHAPE(2), &p));
    OK(tensor_alloc(SHAPE(2), &g));
    adam a;
    OK(adam_init(&a, 1, &p, &g, 0.05));
    for (int t = 0; t < 2000; t++) {
        g->data[0] = 2 * (p->data[0] - 3);
        g->data[1] = 20 * (p->data[1] + 1);
        OK(adam_step(&a));
    }
    cr_assert_float_eq(p->data[0], 3.0, 1e-3);
    cr_assert_float_eq(p->data[1], -1.0, 1e-3);
    adam_free(&a);
    FREE_ALL(p, g);
}

Test(adam, errors)
{
    tensor *p, *g3, *big, *col;
    OK(tensor_alloc(SHAPE(2, 2), &p));
    OK(tensor_alloc(SHAPE(3), &g3));
    OK(tensor_alloc(SHAPE(2, 4), &big));
    OK(tensor_narrow(big, 1, 0, 2, &col)); /* (2, 2), rows 4 apart */
    adam a;
    FAILS(adam_init(&a, 1, &p, &g3, 0.1), GSL_EBADLEN,
          "adam_init: parameter 0 has shape (2, 2) but its gradient (3,)");
    cr_assert_null(a.m);
    FAILS(adam_init(&a, 1, &col, &p, 0.1), GSL_EINVAL,
          "adam_init: the tensor of parameter 0 (2, 2) is not contiguous");
    FAILS(adam_init(&a, 0, &p, &p, 0.1), GSL_EINVAL,
          "adam_init: no parameters (n 0)");
    tensor *none = NULL;
    FAILS(adam_init(&a, 1, &p, &none, 0.1), GSL_EINVAL,
          "adam_init: gradient 0 is NULL");
    OK(adam_init(&a, 1, &p, &p, 0.1));
    a.lr = -1;
    FAILS(adam_step(&a), GSL_EINVAL,
          "adam_step: learning rate -1 must be positive and finite");
    a.lr = 0.1;
    a.beta2 = 1;
    FAILS(adam_step(&a), GSL_EINVAL,
          "adam_step: beta1 0.9 and beta2 1 must be in [0, 1)");
    a.beta2 = 0.999;
    a.eps = 0;
    FAILS(adam_step(&a), GSL_EINVAL,
          "adam_step: eps 0 must be positive and finite");
    cr_assert_eq(a.steps, 0);
    adam_free(&a);
    FREE_ALL(p, g3, big, col);
}

Test(adam, every_allocation_may_fail)
{
    tensor *p[2], *g[2];
    OK(tensor_alloc(SHAPE(2, 2), &p[0]));
    OK(tensor_alloc(SHAPE(3), &p[1]));
    OK(tensor_alloc(SHAPE(2, 2), &g[0]));
    OK(tensor_alloc(SHAPE(3), &g[1]));
    adam a;
    long failures = 0;
    EACH_ALLOCATION_FAILS(failures,
        adam_init(&a, 2, p, g, 0.1),
        cr_assert_null(a.m));
    cr_assert_gt(failures, 8); /* 4 arrays, then m and v of 2 tensors */
    adam_free(&a);
    for (int i = 0; i < 2; i++) {
        tensor_free(p[i]);
        tensor_free(g[i]);
    }
}
//<
