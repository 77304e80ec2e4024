/* DDPG: the critic's TD target, loss and output gradient, and Gaussian exploration. */

/* y = r + gamma (1 - d) qn_b;  diff = q_b - y;  td = y - q_b;  G_b = 2 w_b diff / B;  loss_b = w_b diff^2;
 * q_taken_b = q_b (kept for metrics: the critic's output buffer is reused by the actor step). */
__kernel void ddpg_critic_td(__global const float *q, __global const float *qn, __global const float *reward,
                             __global const float *terminated, __global const float *weight, float gamma, int batch,
                             __global float *G, __global float *td, __global float *loss, __global float *q_taken) {
    int b = get_global_id(0);
    float y = reward[b] + gamma * (1.0f - terminated[b]) * qn[b];
    float diff = q[b] - y;
    G[b] = 2.0f * weight[b] * diff / (float)batch;
    td[b] = y - q[b];
    loss[b] = weight[b] * diff * diff;
    q_taken[b] = q[b];
}

/* a = clamp(a + sigma * N(0, 1), -1, 1) with the normal from philox2x32(key, i, call), i the flat index, as
 * DDPGAct in the torch adapter (pearl.rng.normal). */
__kernel void ddpg_act(__global float *a, float sigma, uint key, uint call) {
    int i = get_global_id(0);
    float x = a[i];
    if (sigma > 0.0f) x += sigma * rng_normal(philox2x32(key, (uint)i, call));
    a[i] = clamp(x, -1.0f, 1.0f);
}

/* Ornstein–Uhlenbeck noise (pearl/algos/ddpg.py): x_i <- (x_i - theta_dt x_i) + scale N(0, 1), the normal as in
 * ddpg_act, then a = clamp(a + x_i, -1, 1). The states x stay on the device between calls (one per env and
 * action dimension, the host zeroes an env's rows when its episode ends); the host passes theta_dt = θ·dt and
 * scale = σ·√dt already rounded to float32 (ou_coefficients), and no fma may fuse the update, so it rounds as
 * numpy's ou_step does: the two adapters differ only by the few ulp of the normal's log/cos. */
__kernel void ddpg_act_ou(__global float *a, __global float *x, float theta_dt, float scale, uint key, uint call) {
#pragma OPENCL FP_CONTRACT OFF
    int i = get_global_id(0);
    float xi = x[i];
    float drift = theta_dt * xi;
    float kick = scale * rng_normal(philox2x32(key, (uint)i, call));
    xi = (xi - drift) + kick;
    x[i] = xi;
    a[i] = clamp(a[i] + xi, -1.0f, 1.0f);
}
