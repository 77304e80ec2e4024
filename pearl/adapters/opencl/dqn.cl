/* DQN: the TD target, the Huber or squared loss and its gradient with respect to the Q-network's output, and
 * epsilon-greedy acting. One work-item per batch row. */

/* y = r + gamma (1 - d) max_a Qn[b, a];  diff = Q[b, a_b] - y;  td = y - Q[b, a_b];
 * G[b, :] = 0 except G[b, a_b] = w_b * dloss/dq / B;  loss_b = w_b * loss(diff);  q_taken_b = Q[b, a_b]. */
__kernel void dqn_td(__global const real *Q, __global const real *Qn, __global const int *action,
                     __global const real *reward, __global const real *terminated, __global const real *weight,
                     real gamma, int n_actions, int batch, int huber, __global real *G, __global real *td,
                     __global real *loss, __global real *q_taken) {
    int b = get_global_id(0);
    __global const real *qn = Qn + b * n_actions;
    real best = qn[0];
    for (int a = 1; a < n_actions; ++a) best = fmax(best, qn[a]);
    real y = reward[b] + gamma * (R(1.0) - terminated[b]) * best;
    int act = action[b];
    real q = Q[b * n_actions + act];
    real diff = q - y;
    real ad = fabs(diff);
    real dloss = huber ? clamp(diff, -R(1.0), R(1.0)) : R(2.0) * diff;
    real lval = huber ? (ad < R(1.0) ? R(0.5) * diff * diff : ad - R(0.5)) : diff * diff;
    for (int a = 0; a < n_actions; ++a) G[b * n_actions + a] = R(0.0);
    G[b * n_actions + act] = weight[b] * dloss / (real)batch;
    td[b] = y - q;
    loss[b] = weight[b] * lval;
    q_taken[b] = q;
}

/* actions[b] = argmax_a Q[b, a] (first maximum), or with probability epsilon a uniform action; the draws come
 * from philox2x32(key, b, call), as DQNAct in the torch adapter. */
__kernel void dqn_act(__global const real *Q, int n_actions, real epsilon, uint key, uint call,
                      __global int *actions) {
    int b = get_global_id(0);
    __global const real *q = Q + b * n_actions;
    int best = 0;
    for (int a = 1; a < n_actions; ++a) if (q[a] > q[best]) best = a;
    uint2 r = philox2x32(key, (uint)b, call);
    actions[b] = rng_uniform(r.x) < epsilon ? rng_below(r.y, n_actions) : best;
}
