/* DQN: the TD target, the Huber or squared loss and its gradient with respect to the Q-network's output, and
 * epsilon-greedy acting. One work-item per batch row. */

/* y = r + gamma (1 - d) max_a Qn[b, a];  diff = Q[b, a_b] - y;  td = y - Q[b, a_b];
 * G[b, :] = 0 except G[b, a_b] = w_b * dloss/dq / B;  loss_b = w_b * loss(diff);  q_taken_b = Q[b, a_b]. */
__kernel void dqn_td(__global const float *Q, __global const float *Qn, __global const int *action,
                     __global const float *reward, __global const float *terminated, __global const float *weight,
                     float gamma, int n_actions, int batch, int huber, __global float *G, __global float *td,
                     __global float *loss, __global float *q_taken) {
    int b = get_global_id(0);
    __global const float *qn = Qn + b * n_actions;
    float best = qn[0];
    for (int a = 1; a < n_actions; ++a) best = fmax(best, qn[a]);
    float y = reward[b] + gamma * (1.0f - terminated[b]) * best;
    int act = action[b];
    float q = Q[b * n_actions + act];
    float diff = q - y;
    float ad = fabs(diff);
    float dloss = huber ? clamp(diff, -1.0f, 1.0f) : 2.0f * diff;
    float lval = huber ? (ad < 1.0f ? 0.5f * diff * diff : ad - 0.5f) : diff * diff;
    for (int a = 0; a < n_actions; ++a) G[b * n_actions + a] = 0.0f;
    G[b * n_actions + act] = weight[b] * dloss / (float)batch;
    td[b] = y - q;
    loss[b] = weight[b] * lval;
    q_taken[b] = q;
}

/* actions[b] = argmax_a Q[b, a] (first maximum), or with probability epsilon a uniform action; the draws come
 * from philox2x32(key, b, call), as DQNAct in the torch adapter. */
__kernel void dqn_act(__global const float *Q, int n_actions, float epsilon, uint key, uint call,
                      __global int *actions) {
    int b = get_global_id(0);
    __global const float *q = Q + b * n_actions;
    int best = 0;
    for (int a = 1; a < n_actions; ++a) if (q[a] > q[best]) best = a;
    uint2 r = philox2x32(key, (uint)b, call);
    actions[b] = rng_uniform(r.x) < epsilon ? rng_below(r.y, n_actions) : best;
}
