/* DDPG: the critic's TD target, loss and output gradient, and Gaussian exploration. */

/* y = r + gamma (1 - d) qn_b;  diff = q_b - y;  td = y - q_b;  G_b = 2 w_b diff / B;  loss_b = w_b diff^2;
 * q_taken_b = q_b (kept for metrics: the critic's output buffer is reused by the actor step). */
__kernel void ddpg_critic_td(__global const real *q, __global const real *qn, __global const real *reward,
                             __global const real *terminated, __global const real *weight, real gamma, int batch,
                             __global real *G, __global real *td, __global real *loss, __global real *q_taken) {
    int b = get_global_id(0);
    real y = reward[b] + gamma * (R(1.0) - terminated[b]) * qn[b];
    real diff = q[b] - y;
    G[b] = R(2.0) * weight[b] * diff / (real)batch;
    td[b] = y - q[b];
    loss[b] = weight[b] * diff * diff;
    q_taken[b] = q[b];
}

/* a = clamp(a + sigma * N(0, 1), -1, 1) with the normal from philox2x32(key, i, call), i the flat index, as
 * DDPGAct in the torch adapter (pearl.rng.normal). */
__kernel void ddpg_act(__global real *a, real sigma, uint key, uint call) {
    int i = get_global_id(0);
    real x = a[i];
    if (sigma > R(0.0)) x += sigma * rng_normal(philox2x32(key, (uint)i, call));
    a[i] = clamp(x, -R(1.0), R(1.0));
}

/* Ornstein–Uhlenbeck noise (pearl/algos/ddpg.py): x_i <- (x_i - theta_dt x_i) + scale N(0, 1), the normal as in
 * ddpg_act, then a = clamp(a + x_i, -1, 1). The states x stay on the device between calls (one per env and
 * action dimension, the host zeroes an env's rows when its episode ends); the host passes theta_dt = θ·dt and
 * scale = σ·√dt already rounded to float32 (ou_coefficients), and no fma may fuse the update, so it rounds as
 * numpy's ou_step does: the two adapters differ only by the few ulp of the normal's log/cos. */
__kernel void ddpg_act_ou(__global real *a, __global real *x, real theta_dt, real scale, uint key, uint call) {
#pragma OPENCL FP_CONTRACT OFF
    int i = get_global_id(0);
    real xi = x[i];
    real drift = theta_dt * xi;
    real kick = scale * rng_normal(philox2x32(key, (uint)i, call));
    xi = (xi - drift) + kick;
    x[i] = xi;
    a[i] = clamp(a[i] + xi, -R(1.0), R(1.0));
}
