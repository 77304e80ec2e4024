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
