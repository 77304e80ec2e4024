/* Optimiser kernels: global-norm gradient clipping, Adam (the update torch.optim.Adam makes), Polyak. */

/* partial[slot + p] = sum over k of x[p + k*P]^2, for P work-items; the host gives every gradient buffer its own
 * range of slots, then clip_scale adds them up in slot order. */
__kernel void sumsq_partial(__global const real *x, int n, __global real *partial, int slot) {
    int p = get_global_id(0);
    int stride = get_global_size(0);
    real acc = R(0.0);
    for (int i = p; i < n; i += stride) acc += x[i] * x[i];
    partial[slot + p] = acc;
}

/* scale[0] = min(1, max_norm / (||g|| + 1e-6)), as torch.nn.utils.clip_grad_norm_; one work-item. */
__kernel void clip_scale(__global const real *partial, int count, real max_norm, __global real *scale) {
    real total = R(0.0);
    for (int i = 0; i < count; ++i) total += partial[i];
    scale[0] = fmin(R(1.0), max_norm / (sqrt(total) + R(1e-6)));
}

/* One Adam step on n parameters; the gradient is first multiplied by scale[0] (1 without clipping).
 * step_size = lr / (1 - b1^t), inv_sqrt_bc2 = 1 / sqrt(1 - b2^t), computed on the host. */
__kernel void adam_step(__global real *p, __global const real *g, __global real *m, __global real *v,
                        __global const real *scale, real step_size, real inv_sqrt_bc2, real b1, real b2,
                        real eps) {
    int i = get_global_id(0);
    real gi = g[i] * scale[0];
    real mi = b1 * m[i] + (R(1.0) - b1) * gi;
    real vi = b2 * v[i] + (R(1.0) - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * mi / (sqrt(vi) * inv_sqrt_bc2 + eps);
}

/* target += tau * (online - target) */
__kernel void polyak(__global real *target, __global const real *online, real tau) {
    int i = get_global_id(0);
    target[i] += tau * (online[i] - target[i]);
}
