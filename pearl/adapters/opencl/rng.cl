/* Philox2x32-10 counter-based RNG; the same function as pearl/rng.py, bit for bit.
 * Uniform floats take the top 24 bits (exact in float32); integers in [0, n) use integer arithmetic only. */

#define PHILOX_M0 0xD256D193u
#define PHILOX_W0 0x9E3779B9u

uint2 philox2x32(uint key, uint c0, uint c1) {
    for (int r = 0; r < 10; ++r) {
        if (r) key += PHILOX_W0;
        uint hi = mul_hi(PHILOX_M0, c0);
        uint lo = PHILOX_M0 * c0;
        c0 = hi ^ key ^ c1;
        c1 = lo;
    }
    return (uint2)(c0, c1);
}

float rng_uniform(uint bits) { return (float)(bits >> 8) * 5.9604644775390625e-8f; /* 2^-24 */ }

int rng_below(uint bits, int n) { return (int)(((ulong)(bits >> 8) * (ulong)n) >> 24); }

float rng_normal(uint2 r) {
    float radius = sqrt(-2.0f * log(1.0f - rng_uniform(r.y)));
    return radius * cos(6.2831853071795865f * rng_uniform(r.x));
}

/* Test hook: the raw bits for counters (i, c1), so the host can compare with pearl.rng. */
__kernel void philox_bits(uint key, uint c1, __global uint *out0, __global uint *out1) {
    int i = get_global_id(0);
    uint2 r = philox2x32(key, (uint)i, c1);
    out0[i] = r.x;
    out1[i] = r.y;
}
