/* Replay on the device: a K-ary float32 sum tree, stratified proportional / uniform sampling, importance
 * weights, priority updates, and the ring storage of transitions (scatter on insert, gather on sample).
 *
 * Sum tree layout (the numpy SumTree's layout, pearl/replay/sumtree.py, in float32)
 * ---------------------------------------------------------------------------------
 * depth = the smallest d >= 1 with K^d >= capacity. All levels live in ONE float buffer, root level first:
 *
 *     level d (0 <= d <= depth) has K^d nodes and starts at offset(d) = K^0 + K^1 + ... + K^(d-1)
 *     (offset(0) = 0: tree[0] is the root, the total); node i of level d has the children
 *     tree[offset(d+1) + i*K .. offset(d+1) + i*K + K-1]; leaf s (slot s) is tree[offset(depth) + s],
 *     and the leaves capacity .. K^depth - 1 are padding, always 0.
 *
 * Every internal node is the sequential left-to-right sum of its K children, ((c0 + c1) + c2) + ... ,
 * always recomputed from the children, never patched with a delta: the tree is a pure function of its
 * leaves, and the same additions in the same order give the same bits as the numpy tree whenever the sums
 * are exact in float32 (and the same float32 bits on any device: additions are correctly rounded in
 * OpenCL, and there are no multiplies for FP_CONTRACT to fuse them with).
 *
 * Prefix-sum lookup (sumtree_descend), for 0 <= v <= total, exactly the numpy rule:
 *
 *     node = 0
 *     for each level below the root:
 *         cs[k] = c[0] + ... + c[k]   (sequential)
 *         j = the first k with cs[k] > v (STRICTLY greater)
 *         if there is none (v >= the node's mass: v == total, or rounding):
 *             j = the last k with c[k] > 0 (K-1 if no child has mass)
 *         v -= c[0] + ... + c[j-1]     (0 for j == 0)
 *         node = node*K + j
 *
 * With a positive total the leaf reached has positive mass, so it is a written slot < capacity. With a
 * degenerate tree (total 0 or not finite) the result is clamped below capacity: whatever the tree holds,
 * a lookup never indexes outside the storage.
 *
 * Writes. A write and the refresh of every ancestor it changes are ONE launch of ONE work-group (global
 * size = local size). Leaves are written first, by work-item 0 in input order where a slot may repeat (so it
 * takes its LAST value on every device), else by every work-item; then parents are recomputed level by
 * level, bottom-up, with a barrier between levels: each work-item recomputes the parents of its slots;
 * work-items whose slots share a parent write the same value computed from the same children (a benign
 * race), and no level is read before every write to it is done. One launch instead of one per level
 * matters where a launch is dear, as on PoCL: a depth-5 tree's update is 1 launch instead of 6.
 *
 * Ring storage: per field one flat buffer of capacity rows (obs and next_obs rows of obs_dim floats,
 * reward and terminated one float). Actions are copied as 32-bit words, act_width per row, so one kernel
 * moves discrete actions (int32, width 1) and continuous ones (float32 rows, width act_dim) bit for bit.
 *
 * Written for FPGA offline compilers too: OpenCL C 1.2 without extensions, float32 only, no atomics, no
 * recursion, every loop bounded by a kernel argument.
 */

/* Only affects this file (it is the last one of the program): no a*b+c may become an fma, so the
 * sampling values below are bit-exact products that the host can reproduce in numpy float32. */
#pragma OPENCL FP_CONTRACT OFF

/* offset(depth): where the leaves start. */
int sumtree_leaf_offset(int arity, int depth) {
    int offset = 0, width = 1;
    for (int d = 0; d < depth; ++d) {
        offset += width;
        width *= arity;
    }
    return offset;
}

/* The leaf the prefix-sum rule reaches for v (see the top of this file). */
int sumtree_descend(__global const float *tree, int arity, int depth, int capacity, float v) {
    int node = 0;
    int level_offset = 0; /* offset of the level the current node is on */
    int level_width = 1;  /* K^level */
    for (int d = 1; d <= depth; ++d) {
        level_offset += level_width; /* now the children's level */
        level_width *= arity;
        int base = level_offset + node * arity;
        float cs = 0.0f;
        int j = arity;          /* the first child whose running sum exceeds v; arity = none yet */
        float before_j = 0.0f;  /* sum of the children before j */
        int last = -1;          /* the last child with mass, the fallback */
        float before_last = 0.0f;
        float before_k = 0.0f;
        for (int k = 0; k < arity; ++k) {
            float c = tree[base + k];
            before_k = cs;
            cs += c;
            if (j == arity && cs > v) {
                j = k;
                before_j = before_k;
            }
            if (c > 0.0f) {
                last = k;
                before_last = before_k;
            }
        }
        if (j == arity) {
            /* v reached this node's mass: step back to the last child with mass. A node without one exists
             * only in a degenerate tree; numpy takes child K-1 there, and so does this. */
            if (last < 0) {
                last = arity - 1;
                before_last = before_k; /* the sum of children 0 .. K-2 */
            }
            j = last;
            before_j = before_last;
        }
        v -= before_j;
        node = node * arity + j;
    }
    return node < capacity ? node : capacity - 1;
}

/* Every ancestor of the leaves slots[0 .. n-1], recomputed bottom-up by the calling work-group (the only one
 * of its launch): work-item l takes slots l, l + L, l + 2L, ... (L = the group's size) on each level, and a
 * barrier closes each level. Call it after a barrier that follows the leaf writes. Slots outside
 * [0, capacity) are skipped (memory safety). Every work-item must call it (it holds barriers). */
void sumtree_refresh_group(__global float *tree, __global const int *slots, int n, int capacity, int arity,
                           int depth, int leaf_offset) {
    int l = (int)get_local_id(0), group = (int)get_local_size(0);
    int child_offset = leaf_offset; /* where the children's level starts */
    int divisor = 1;                /* K^(depth - level of the children + 1) maps a slot to its parent */
    for (int d = depth; d > 0; --d) {
        int parent_offset = (child_offset - 1) / arity; /* offset(d) = 1 + K * offset(d - 1) */
        divisor *= arity;
        for (int i = l; i < n; i += group) {
            int s = slots[i];
            if (s < 0 || s >= capacity) continue;
            int parent = s / divisor;
            int base = child_offset + parent * arity;
            float sum = 0.0f; /* 0 + c0 == c0 exactly, so this is ((c0 + c1) + c2) + ... */
            for (int k = 0; k < arity; ++k) sum += tree[base + k];
            tree[parent_offset + parent] = sum;
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        child_offset = parent_offset;
    }
}

/* tree[leaf_offset + slots[i]] = values[i] for i = 0 .. n-1 IN ORDER (work-item 0 writes, so a repeated slot
 * keeps its last value), then the refresh; one work-group. Slots outside [0, capacity) and values that are
 * negative or not finite are skipped: device arrays cannot be validated on the host without a read-back. */
__kernel void sumtree_set_leaves(__global float *tree, int capacity, int arity, int depth,
                                 __global const int *slots, __global const float *values, int n) {
    int leaf_offset = sumtree_leaf_offset(arity, depth);
    if (get_local_id(0) == 0) {
        for (int i = 0; i < n; ++i) {
            int s = slots[i];
            float v = values[i];
            if (s >= 0 && s < capacity && isfinite(v) && v >= 0.0f) tree[leaf_offset + s] = v;
        }
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    sumtree_refresh_group(tree, slots, n, capacity, arity, depth, leaf_offset);
}

/* out[i] = the leaf of slots[i] (out-of-range slots read 0). */
__kernel void sumtree_get(__global const float *tree, int leaf_offset, int capacity, __global const int *slots,
                          __global float *out) {
    int i = get_global_id(0);
    int s = slots[i];
    out[i] = (s >= 0 && s < capacity) ? tree[leaf_offset + s] : 0.0f;
}

/* out[i] = the leaf the prefix-sum rule reaches for values[i]. */
__kernel void sumtree_find(__global const float *tree, int arity, int depth, int capacity,
                           __global const float *values, __global int *out) {
    int i = get_global_id(0);
    out[i] = sumtree_descend(tree, arity, depth, capacity, values[i]);
}

/* Stratified proportional sampling, one work-item per sample i of B:
 *     u_i = rng_uniform(philox2x32(key, i, call).x)
 *     v_i = min(((float)i + u_i) * (total * inv_batch), total)     (float32, each operation rounded)
 * with total = tree[0] read here (it never visits the host) and inv_batch = (float)(1 / B) from the host:
 * a multiply by it is correctly rounded on every device, where a float division need not be (OpenCL 1.2
 * allows 2.5 ulp), so the host can recompute v_i bit for bit. */
__kernel void sumtree_sample(__global const float *tree, int arity, int depth, int capacity, uint key, uint call,
                             float inv_batch, __global int *out) {
    int i = get_global_id(0);
    float total = tree[0];
    float u = rng_uniform(philox2x32(key, (uint)i, call).x);
    float step = total * inv_batch;
    float v = fmin(((float)i + u) * step, total);
    out[i] = sumtree_descend(tree, arity, depth, capacity, v);
}

/* Uniform sampling: slot_i = rng_below(philox2x32(key, i, call).x, size) (size <= 2^24). */
__kernel void replay_sample_uniform(uint key, uint call, int size, __global int *out) {
    int i = get_global_id(0);
    out[i] = rng_below(philox2x32(key, (uint)i, call).x, size);
}

/* New slots get the running max priority (the slots of one insert are distinct: any order will do), then
 * the refresh; one work-group. */
__kernel void replay_insert_priorities(__global float *tree, int capacity, int arity, int depth,
                                       __global const int *slots, int n, __global const float *max_priority) {
    int leaf_offset = sumtree_leaf_offset(arity, depth);
    float top = max_priority[0];
    for (int i = (int)get_local_id(0); i < n; i += (int)get_local_size(0)) tree[leaf_offset + slots[i]] = top;
    barrier(CLK_GLOBAL_MEM_FENCE);
    sumtree_refresh_group(tree, slots, n, capacity, arity, depth, leaf_offset);
}

/* Priority update, one work-group: work-item 0 sets slot slots[i] <- (|td[i]| + eps)^alpha in order, the last
 * of repeated slots winning, and max_priority[0] <- max(itself, every new priority): it only goes up; then
 * the refresh. Slots outside [0, limit) (never written) and non-finite priorities (from a NaN or huge TD
 * error) are skipped and leave the slot as it was; the host path raises for them instead. */
__kernel void replay_set_priorities(__global float *tree, int capacity, int arity, int depth, int limit,
                                    __global const int *slots, __global const float *td, int n, float alpha,
                                    float eps, __global float *max_priority) {
    int leaf_offset = sumtree_leaf_offset(arity, depth);
    if (get_local_id(0) == 0) {
        float top = max_priority[0];
        for (int i = 0; i < n; ++i) {
            int s = slots[i];
            float p = pow(fabs(td[i]) + eps, alpha);
            if (s >= 0 && s < limit && isfinite(p)) {
                tree[leaf_offset + s] = p;
                top = fmax(top, p);
            }
        }
        max_priority[0] = top;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    sumtree_refresh_group(tree, slots, n, capacity, arity, depth, leaf_offset);
}

/* Insert: row i of the uploaded rows goes to ring slot (start + i) % capacity, which it also writes to
 * slots[i] for the priority kernels. One upload holds every field, as 32-bit words: a row is obs (obs_dim
 * floats), action (act_width int32 or float32), reward, next_obs (obs_dim), terminated; so an insert is one
 * copy and one launch instead of a copy per field. Words move as uint so no bit pattern passes through a
 * float register. */
__kernel void replay_scatter(__global float *obs, __global uint *action, __global float *reward,
                             __global float *next_obs, __global float *terminated, __global const uint *rows,
                             __global int *slots, int start, int capacity, int obs_dim, int act_width) {
    int i = get_global_id(0);
    int slot = (int)(((long)start + i) % capacity);
    slots[i] = slot;
    size_t dst = (size_t)slot;
    __global const uint *row = rows + (size_t)i * (size_t)(2 * obs_dim + act_width + 2);
    for (int k = 0; k < obs_dim; ++k) {
        obs[dst * obs_dim + k] = as_float(row[k]);
        next_obs[dst * obs_dim + k] = as_float(row[obs_dim + act_width + 1 + k]);
    }
    for (int k = 0; k < act_width; ++k) action[dst * act_width + k] = row[obs_dim + k];
    reward[dst] = as_float(row[obs_dim + act_width]);
    terminated[dst] = as_float(row[2 * obs_dim + act_width + 1]);
}

/* Sample: copy the rows of the B sampled slots into the batch buffers, and write the importance weights.
 * prioritized != 0: w_i = (p_i / p_min)^(-beta), p_min the smallest priority in the batch (each work-item
 * scans the B sampled leaves; B <= 1024), so the largest weight is exactly pow(1, -beta) = 1 and all lie in
 * (0, 1] (floored at FLT_MIN against underflow; 1 if the batch holds a zero priority, a degenerate tree).
 * Otherwise (uniform replay) every weight is 1 and tree is not read. */
__kernel void replay_gather(__global const float *obs, __global const uint *action, __global const float *reward,
                            __global const float *next_obs, __global const float *terminated,
                            __global const int *slots, int obs_dim, int act_width,
                            __global const float *tree, int leaf_offset, int prioritized, float beta, int batch,
                            __global float *out_obs, __global uint *out_action, __global float *out_reward,
                            __global float *out_next_obs, __global float *out_terminated,
                            __global float *out_weights) {
    int i = get_global_id(0);
    size_t src = (size_t)slots[i];
    size_t dst = (size_t)i;
    for (int k = 0; k < obs_dim; ++k) {
        out_obs[dst * obs_dim + k] = obs[src * obs_dim + k];
        out_next_obs[dst * obs_dim + k] = next_obs[src * obs_dim + k];
    }
    for (int k = 0; k < act_width; ++k) out_action[dst * act_width + k] = action[src * act_width + k];
    out_reward[dst] = reward[src];
    out_terminated[dst] = terminated[src];

    float w = 1.0f;
    if (prioritized) {
        float p = tree[leaf_offset + (int)src];
        float p_min = p;
        for (int b = 0; b < batch; ++b) p_min = fmin(p_min, tree[leaf_offset + slots[b]]);
        if (p_min > 0.0f) w = fmax(pow(p / p_min, -beta), FLT_MIN);
    }
    out_weights[i] = w;
}
