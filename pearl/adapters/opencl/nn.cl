/* Dense layers of an MLP, row-major, weights (out, in) as torch's Linear stores them.
 * One work-item per output element; every sum runs in index order, so results are deterministic. */

/* `real` is the type of the networks' and learn kernels' numbers (this file, optim.cl and each algorithm's
 * file): float in the program every device runs; double in the program built with -D PEARL_FP64 on a device
 * with cl_khr_fp64, in which a test holds the hand-derived kernels' arithmetic to the autograd reference free
 * of float32's rounding. R(x) writes a literal in that type. rng.cl and replay.cl stay float32. */
#ifdef PEARL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
#define R(x) x
#else
typedef float real;
#define R(x) x##f
#endif

#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_TANH 2

/* Y[b,o] = act(bias[o] + sum_i X[b,i] * W[o,i]); global size B * out_dim. */
__kernel void linear_forward(__global const real *X, __global const real *W, __global const real *bias,
                             __global real *Y, int in_dim, int out_dim, int act) {
    int gid = get_global_id(0);
    int b = gid / out_dim, o = gid % out_dim;
    __global const real *x = X + b * in_dim;
    __global const real *w = W + o * in_dim;
    real acc = R(0.0);
    for (int i = 0; i < in_dim; ++i) acc += x[i] * w[i];
    acc += bias[o];
    if (act == ACT_RELU) acc = fmax(acc, R(0.0));
    else if (act == ACT_TANH) acc = tanh(acc);
    Y[gid] = acc;
}

/* dX[b,i] = sum_o G[b,o] * W[o,i], times relu'(X) when the input came out of a ReLU (X > 0 iff z > 0).
 * global size B * in_dim. */
__kernel void linear_backward_input(__global const real *G, __global const real *W, __global const real *X,
                                    __global real *dX, int in_dim, int out_dim, int relu_mask) {
    int gid = get_global_id(0);
    int b = gid / in_dim, i = gid % in_dim;
    __global const real *g = G + b * out_dim;
    real acc = R(0.0);
    for (int o = 0; o < out_dim; ++o) acc += g[o] * W[o * in_dim + i];
    if (relu_mask && X[gid] <= R(0.0)) acc = R(0.0);
    dX[gid] = acc;
}

/* dW[o,i] = sum_b G[b,o] * X[b,i]; global size out_dim * in_dim. */
__kernel void linear_backward_weight(__global const real *G, __global const real *X, __global real *dW,
                                     int batch, int in_dim, int out_dim) {
    int gid = get_global_id(0);
    int o = gid / in_dim, i = gid % in_dim;
    real acc = R(0.0);
    for (int b = 0; b < batch; ++b) acc += G[b * out_dim + o] * X[b * in_dim + i];
    dW[gid] = acc;
}

/* db[o] = sum_b G[b,o]; global size out_dim. */
__kernel void linear_backward_bias(__global const real *G, __global real *db, int batch, int out_dim) {
    int o = get_global_id(0);
    real acc = R(0.0);
    for (int b = 0; b < batch; ++b) acc += G[b * out_dim + o];
    db[o] = acc;
}

/* G *= 1 - Y^2: back through a tanh output whose value is Y; global size n. */
__kernel void tanh_backward(__global real *G, __global const real *Y) {
    int i = get_global_id(0);
    G[i] *= R(1.0) - Y[i] * Y[i];
}

/* out[b, :da] = A[b, :], out[b, da:] = Bm[b, :] (critic input from observation and action). */
__kernel void concat_cols(__global const real *A, __global const real *Bm, __global real *out, int da, int db) {
    int gid = get_global_id(0);
    int width = da + db;
    int b = gid / width, j = gid % width;
    out[gid] = j < da ? A[b * da + j] : Bm[b * db + (j - da)];
}

/* out[b, j] = X[b, start + j]: a column slice, e.g. the action part of a critic's input gradient. */
__kernel void slice_cols(__global const real *X, __global real *out, int width, int start, int count) {
    int gid = get_global_id(0);
    int b = gid / count, j = gid % count;
    out[gid] = X[b * width + start + j];
}

__kernel void fill(__global real *x, real value) { x[get_global_id(0)] = value; }

/* C[m,n] = epilogue(sum_k A(m,k) * B(k,n)) with 16x16 tiles staged in local memory, for batches >= 16.
 * A(m,k) = A[m*sAm + k*sAk] and B(k,n) = B[k*sBk + n*sBn], so one kernel serves the forward product (X W^T),
 * the input gradient (G W) and the weight gradient (G^T X). Each work-item still adds k = 0..K-1 in order, so
 * the result is the naive kernels' to the last bit. Epilogue: + bias[n] when use_bias, then the activation;
 * or zero where mask[m,n] <= 0 when use_mask (the ReLU derivative). 2-D range: (ceil16(N), ceil16(M)). */
#define TILE 16
__kernel void gemm_tiled(__global const real *A, int sAm, int sAk, __global const real *B, int sBk, int sBn,
                         __global real *C, int M, int N, int K, __global const real *bias, int use_bias, int act,
                         __global const real *mask, int use_mask) {
    __local real As[TILE][TILE];
    __local real Bs[TILE][TILE];
    int n = get_global_id(0), m = get_global_id(1);
    int ln = get_local_id(0), lm = get_local_id(1);
    real acc = R(0.0);
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + ln, kb = k0 + lm;
        As[lm][ln] = (m < M && ka < K) ? A[m * sAm + ka * sAk] : R(0.0);
        Bs[lm][ln] = (kb < K && n < N) ? B[kb * sBk + n * sBn] : R(0.0);
        barrier(CLK_LOCAL_MEM_FENCE);
        int kmax = min(TILE, K - k0);
        for (int k = 0; k < kmax; ++k) acc += As[lm][k] * Bs[k][ln];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m >= M || n >= N) return;
    if (use_bias) acc += bias[n];
    if (act == ACT_RELU) acc = fmax(acc, R(0.0));
    else if (act == ACT_TANH) acc = tanh(acc);
    if (use_mask && mask[m * N + n] <= R(0.0)) acc = R(0.0);
    C[m * N + n] = acc;
}
