/* TD3 (pearl/algos/td3.py): target policy smoothing, and both critics' TD target, loss and output gradients. */

/* a'_i = clamp(a'_i + clamp(sigma * N(0, 1), -c, c), -1, 1) in place on the target actor's output, the normal
 * from philox2x32(key, i, update), i the flat index (row * action_dim + column), as the torch adapter's
 * LearnDraws gives it for update `update` of a learn kernel keyed by learn_key(seed). */
__kernel void td3_smooth(__global real *a, real sigma, real clip, uint key, uint update) {
    int i = get_global_id(0);
    real noise = clamp(sigma * rng_normal(philox2x32(key, (uint)i, update)), -clip, clip);
    a[i] = clamp(a[i] + noise, -R(1.0), R(1.0));
}

/* y = r + gamma (1 - d) min(qn1_b, qn2_b) (clipped double-Q); for each critic j, G_j = 2 w_b (q_j - y) / B, the
 * gradient of mean_b w_b ((y - q1)^2 + (y - q2)^2) in q_j; td = y - q1 (the priorities' input);
 * loss_b = w_b ((y - q1)^2 + (y - q2)^2); q_taken = q1 (kept for metrics: the critic's output buffer is reused
 * by the actor step). */
__kernel void td3_critic_td(__global const real *q1, __global const real *q2, __global const real *qn1,
                            __global const real *qn2, __global const real *reward,
                            __global const real *terminated, __global const real *weight, real gamma, int batch,
                            __global real *G1, __global real *G2, __global real *td, __global real *loss,
                            __global real *q_taken) {
    int b = get_global_id(0);
    real y = reward[b] + gamma * (R(1.0) - terminated[b]) * fmin(qn1[b], qn2[b]);
    real d1 = q1[b] - y, d2 = q2[b] - y;
    G1[b] = R(2.0) * weight[b] * d1 / (real)batch;
    G2[b] = R(2.0) * weight[b] * d2 / (real)batch;
    td[b] = y - q1[b];
    loss[b] = weight[b] * (d1 * d1 + d2 * d2);
    q_taken[b] = q1[b];
}
