/* Optimiser kernels: global-norm gradient clipping, Adam (the update torch.optim.Adam makes), Polyak. */

/* partial[slot + p] = sum over k of x[p + k*P]^2, for P work-items; the host gives every gradient buffer its own
 * range of slots, then clip_scale adds them up in slot order. */
__kernel void sumsq_partial(__global const float *x, int n, __global float *partial, int slot) {
    int p = get_global_id(0);
    int stride = get_global_size(0);
    float acc = 0.0f;
    for (int i = p; i < n; i += stride) acc += x[i] * x[i];
    partial[slot + p] = acc;
}

/* scale[0] = min(1, max_norm / (||g|| + 1e-6)), as torch.nn.utils.clip_grad_norm_; one work-item. */
__kernel void clip_scale(__global const float *partial, int count, float max_norm, __global float *scale) {
    float total = 0.0f;
    for (int i = 0; i < count; ++i) total += partial[i];
    scale[0] = fmin(1.0f, max_norm / (sqrt(total) + 1e-6f));
}

/* One Adam step on n parameters; the gradient is first multiplied by scale[0] (1 without clipping).
 * step_size = lr / (1 - b1^t), inv_sqrt_bc2 = 1 / sqrt(1 - b2^t), computed on the host. */
__kernel void adam_step(__global float *p, __global const float *g, __global float *m, __global float *v,
                        __global const float *scale, float step_size, float inv_sqrt_bc2, float b1, float b2,
                        float eps) {
    int i = get_global_id(0);
    float gi = g[i] * scale[0];
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * mi / (sqrt(vi) * inv_sqrt_bc2 + eps);
}

/* target += tau * (online - target) */
__kernel void polyak(__global float *target, __global const float *online, float tau) {
    int i = get_global_id(0);
    target[i] += tau * (online[i] - target[i]);
}
