/*
 * flash_attention.cu: causal self-attention on the tensor cores,
 * FlashAttention-2 style (Dao 2023), for the engine's bf16 mode and (the
 * TF32 kernels at the end of the file) its TF32 mode. The interface and layouts are in
 * flash_attention.h; the plain-C reference the tests compare against is
 * attention_ref.c.
 *
 * Notation: one (b, h) pair is one head of one sequence; q, k, v are its
 * T x hs slices of qkv (row stride 3C, no copies made); s = q.k^T * scale with
 * scale = 1/sqrt(hs); P = softmax(s) over the visible keys (key <= query).
 *
 * Tiling (both directions): blocks of 128 threads = 4 warps; a tile is 64
 * rows (queries or keys) x hs; each warp owns 16 of the 64 rows. All matrix
 * products are mma.sync.m16n8k16 bf16 x bf16 -> fp32. Tiles sit in shared
 * memory once, row-major, each row padded to hs + 8 bf16 so that the 8 rows an
 * ldmatrix phase reads start on 8 distinct bank groups. Fragments come from
 * ldmatrix.x4 (four 8x8 matrices per instruction); an operand that a product
 * needs transposed (V in P.V, Q and dO in dK and dV, K in dQ) is read with
 * ldmatrix.trans from the same row-major tile, so no transposed copy exists.
 * Global reads are 16 bytes per thread, all of a tile's reads issued before
 * the first shared store (tile_regs), and for hs = 64 the next tile's reads
 * are in flight while the current tile is multiplied (the registers fit;
 * hs = 128 reads tile by tile).
 *
 * Forward, grid (ceil(T/64), B*NH), heaviest query blocks first:
 *   registers  the warp's Q fragments (16 x hs), the O accumulator
 *              (16 x hs fp32), the S / P tile (16 x 64 fp32), and per row
 *              the running max m and running sum l (fp32)
 *   shared     Q tile (loaded once), K and V tiles, reloaded for each key
 *              block 0 .. the diagonal one; blocks above the diagonal are
 *              never visited, the diagonal one is masked (key > query -> -inf)
 *   recurrence for each key block j:  m' = max(m, rowmax(S_j));
 *              P_j = exp2((S_j - m') * scale * log2 e);  l = l * exp(m - m') +
 *              rowsum(P_j);  O = O * exp(m - m') + bf16(P_j) V_j.  At the end
 *              out = O / l and lse = m * scale + ln(l).
 *              P is rounded to bf16 for the P.V product (fp32 everywhere
 *              else), the one rounding besides the inputs and the output.
 * Backward, two launches:
 *   1. D = rowsum(dout * out) per (b, h, query), fp32, into the scratch: one
 *      warp per row of hs.
 *   2. one launch of 2 x ceil(T/64) x B*NH blocks (blockIdx.z picks the role),
 *      so the two kinds of block share the machine:
 *      dK/dV blocks (one per 64 keys): K and V tiles stay in shared memory,
 *        dK and dV accumulate in registers (16 keys x hs each per warp); for
 *        each query block from the diagonal on, load Q, dO, lse, D and
 *        RECOMPUTE S^T = K Q^T and P^T = exp(S^T - lse) (the forward's lse,
 *        so no max pass), then dV += bf16(P^T) dO, dP^T = V dO^T,
 *        dS^T = P^T * (dP^T - D), dK += bf16(dS^T) Q.
 *      dQ blocks (one per 64 queries): Q and dO fragments stay in registers;
 *        for each key block up to the diagonal, load K, V and RECOMPUTE S, P,
 *        dP = dO V^T, dS = P * (dP - D), then dQ += bf16(dS) K.
 *      dK and dQ take the factor scale at the end. No atomics and no fp32
 *      dQ accumulator in memory (dS is recomputed instead, twice the S/dP
 *      products of the atomic scheme: at T = 256 the kernels are bound by
 *      latency and loads, not by these products), and the result is
 *      deterministic.
 * The bf16 kernels are written over the storage type IO (only bf16 is
 * instantiated: an fp32-storage variant with these bf16 products existed and
 * was dropped, since the TF32 mode must not compute attention in bf16; the
 * TF32 kernels below have their own fragments).
 * The bf16 tensor-core code needs sm_80+: on older targets (the build's sm_75
 * code) the kernel bodies are empty and the host functions refuse to launch.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "flash_attention.h"

typedef __nv_bfloat16 bf16;

#define FA_ROWS 64     /* rows of a tile (queries or keys) */
#define FA_THREADS 128 /* 4 warps, 16 rows each */
#define FA_LOG2E 1.4426950408889634f

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FA_DEVICE_CODE 1
#endif

/* ---------------- fragments ---------------- */
/* (only in the sm_80+ device code: the sm_75 pass and the host pass see none of it) */
#ifdef FA_DEVICE_CODE

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (low half) = lo */
    return *reinterpret_cast<uint32_t *>(&v);
}

static __device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* Four 8x8 bf16 matrices; lane l gives the address of row l % 8 of matrix
 * l / 8. Plain: register i of lane l holds M_i[l/4][2(l%4) .. +1].
 * Transposed: it holds M_i[2(l%4)][l/4] and M_i[2(l%4)+1][l/4]. */
static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
static __device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col). Fragment layout
 * (g = lane / 4, t = lane % 4): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..],
 * a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]; b0 = B[2t..2t+1][g],
 * b1 = B[2t+8..][g]; d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..]. */
static __device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* A fragment at rows m0.., columns k0.. of a row-major shared tile (leading
 * dimension ld): matrices (rows +0/+8) x (columns +0/+8) in a[0..3] order. */
static __device__ __forceinline__ void lds_a(uint32_t a[4], const bf16 *s, int ld, int m0, int k0, int lane) {
    ldsm_x4(a, smem_addr(s + (m0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + k0 + (lane >> 4) * 8));
}

/* acc (16 x 8NT) += A (16 x 16KT) B, A from registers (KT fragments), B from
 * a row-major shared tile with leading dimension ldb, stored
 *   BT == false: as [n][k] (B^T row-major: K for Q K^T), plain ldmatrix;
 *   BT == true:  as [k][n] (B row-major: V for P V), ldmatrix.trans.
 * One ldmatrix.x4 gives b0, b1 of two n-tiles. */
/* B fragments of k-chunk kc for n-tiles 2np, 2np+1 from a row-major shared
 * tile with leading dimension ldb, stored
 *   BT == false: as [n][k] (B^T row-major: K for Q K^T), plain ldmatrix;
 *   BT == true:  as [k][n] (B row-major: V for P V), ldmatrix.trans.
 * base is this lane's address of the tile (b_base), b gets b0, b1 of n-tile
 * 2np then b0, b1 of n-tile 2np+1. */
template <bool BT>
static __device__ __forceinline__ uint32_t b_base(const bf16 *bs, int ldb, int lane) {
    const int ro = (lane & 7) + (BT ? ((lane >> 3) & 1) * 8 : (lane >> 4) * 8);
    const int co = BT ? (lane >> 4) * 8 : ((lane >> 3) & 1) * 8;
    return smem_addr(bs + ro * ldb + co);
}
template <bool BT>
static __device__ __forceinline__ void lds_b2(uint32_t b[4], uint32_t base, int ldb, int kc, int np) {
    if (BT) ldsm_x4_t(b, base + 2u * (uint32_t)(kc * 16 * ldb + np * 16));
    else ldsm_x4(b, base + 2u * (uint32_t)(np * 16 * ldb + kc * 16));
}

/* acc (16 x 8NT) += A (16 x 16KT) B, A from registers (KT fragments), B from
 * shared memory as lds_b2 says. */
template <int NT, int KT, bool BT>
static __device__ __forceinline__ void warp_mma_rs(float (*acc)[4], const uint32_t (*a)[4], const bf16 *bs, int ldb,
                                                   int lane) {
    static_assert(NT % 2 == 0, "n-tiles go in pairs");
    const uint32_t base = b_base<BT>(bs, ldb, lane);
#pragma unroll
    for (int kc = 0; kc < KT; kc++)
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b[4];
            lds_b2<BT>(b, base, ldb, kc, np);
            mma_bf16(acc[2 * np], a[kc], b[0], b[1]);
            mma_bf16(acc[2 * np + 1], a[kc], b[2], b[3]);
        }
}

/* The same with A = rows m0..m0+15 of a row-major shared tile (one fragment
 * at a time, to keep registers for hs = 128), B as [n][k]. */
template <int NT, int KT>
static __device__ __forceinline__ void warp_mma_ss(float (*acc)[4], const bf16 *as, int lda, int m0, const bf16 *bs,
                                                   int ldb, int lane) {
    const uint32_t base = b_base<false>(bs, ldb, lane);
#pragma unroll
    for (int kc = 0; kc < KT; kc++) {
        uint32_t a[4];
        lds_a(a, as, lda, m0, kc * 16, lane);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b[4];
            lds_b2<false>(b, base, ldb, kc, np);
            mma_bf16(acc[2 * np], a, b[0], b[1]);
            mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
        }
    }
}

/* A 16 x 64 fp32 accumulator (8 n-tiles) as 4 bf16 A fragments over its 64
 * columns: the accumulator layout of columns 16kc..16kc+15 is exactly the A
 * layout of k-chunk kc. */
static __device__ __forceinline__ void acc_to_a(uint32_t (*a)[4], const float (*c)[4]) {
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        a[kc][0] = pack_bf16(c[2 * kc][0], c[2 * kc][1]);
        a[kc][1] = pack_bf16(c[2 * kc][2], c[2 * kc][3]);
        a[kc][2] = pack_bf16(c[2 * kc + 1][0], c[2 * kc + 1][1]);
        a[kc][3] = pack_bf16(c[2 * kc + 1][2], c[2 * kc + 1][3]);
    }
}

/* A 64 x HS tile of storage type IO in flight: each thread's pieces of 8
 * elements (16 bytes of bf16 or 32 of fp32), held in registers between the
 * global reads (fetch_rows) and the shared stores (stash_rows), so all of a
 * tile's reads are issued before the first store waits on one. */
template <int HS, typename IO>
struct tile_regs {
    static constexpr int pieces = FA_ROWS * (HS / 8) / FA_THREADS, words = sizeof(IO) / 2; /* uint4 per piece */
    uint4 v[pieces * words];
};

/* Rows r0..r0+63 of a (nrows x HS) slice with row stride ld; rows >= nrows
 * read as zero. Piece n of thread i is row (i + 128n) % 64, columns 8c..8c+7
 * with c = (i + 128n) / 64: a warp's reads cover 32 rows. */
template <int HS, typename IO>
static __device__ __forceinline__ void fetch_rows(tile_regs<HS, IO> &t, const IO *src, int64_t ld, int r0,
                                                  int nrows) {
    constexpr int W = tile_regs<HS, IO>::words;
#pragma unroll
    for (int n = 0; n < tile_regs<HS, IO>::pieces; n++) {
        const int i = threadIdx.x + n * FA_THREADS, r = i % FA_ROWS, c = i / FA_ROWS;
        const uint4 *p = reinterpret_cast<const uint4 *>(src + (int64_t)(r0 + r) * ld + c * 8);
#pragma unroll
        for (int w = 0; w < W; w++) t.v[n * W + w] = r0 + r < nrows ? __ldg(p + w) : make_uint4(0u, 0u, 0u, 0u);
    }
}

/* The fetched tile into a row-major shared tile [64][HS+8] of bf16 (fp32
 * storage is rounded to nearest here). */
template <int HS, typename IO>
static __device__ __forceinline__ void stash_rows(bf16 *dst, const tile_regs<HS, IO> &t) {
    constexpr int W = tile_regs<HS, IO>::words;
#pragma unroll
    for (int n = 0; n < tile_regs<HS, IO>::pieces; n++) {
        const int i = threadIdx.x + n * FA_THREADS, r = i % FA_ROWS, c = i / FA_ROWS;
        uint4 b;
        if (W == 1) {
            b = t.v[n];
        } else {
            const float *f = reinterpret_cast<const float *>(&t.v[n * W]);
            b = make_uint4(pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]),
                           pack_bf16(f[6], f[7]));
        }
        *reinterpret_cast<uint4 *>(dst + r * (HS + 8) + c * 8) = b;
    }
}

/* Two output values (row, columns 2t, 2t+1 of an n-tile) to storage. */
static __device__ __forceinline__ void store2(bf16 *p, float x, float y) {
    *reinterpret_cast<uint32_t *>(p) = pack_bf16(x, y);
}

/* Stores rows row0 and row0 + 8 (those < T) of a 16 x HS fp32 accumulator,
 * times mul, at dst + row * ld. */
template <int NO, typename IO>
static __device__ __forceinline__ void store_rows(IO *dst, int64_t ld, const float (*acc)[4], float mul, int row0,
                                                  int T, int t4) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = row0 + 8 * r;
        if (row >= T) continue;
        IO *p = dst + (int64_t)row * ld + 2 * t4;
#pragma unroll
        for (int nt = 0; nt < NO; nt++) store2(p + nt * 8, acc[nt][2 * r] * mul, acc[nt][2 * r + 1] * mul);
    }
}

/* Whether a kernel keeps the next tile's reads in flight during the current
 * tile's products: for hs 64 in bf16 (the registers fit); hs 128 or fp32
 * storage would spill. */
template <int HS, typename IO>
struct fa_prefetch {
    static constexpr bool on = HS <= 64 && sizeof(IO) == 2;
};

#endif /* FA_DEVICE_CODE */

/* ---------------- forward ---------------- */

template <int HS>
static constexpr size_t fwd_smem() {
    return sizeof(bf16) * (size_t)(3 * FA_ROWS * (HS + 8));
}

template <int HS, typename IO>
__global__ void __launch_bounds__(FA_THREADS)
    flash_fwd_k(IO *__restrict__ out, float *__restrict__ lse, const IO *__restrict__ qkv, int T, int C, int NH,
                float scale) {
#ifdef FA_DEVICE_CODE
    constexpr int LD = HS + 8, KT = HS / 16, NO = HS / 8;
    constexpr bool PF = fa_prefetch<HS, IO>::on;
    extern __shared__ uint4 fa_smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(fa_smem), *Ks = Qs + FA_ROWS * LD, *Vs = Ks + FA_ROWS * LD;
    const int qb = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh - b * NH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int64_t ld3 = 3 * (int64_t)C;
    const IO *q = qkv + (int64_t)b * T * ld3 + h * HS, *k = q + C, *v = q + 2 * C;
    const int q0 = qb * FA_ROWS, row0 = q0 + warp * 16 + g; /* this thread's rows: row0, row0 + 8 */
    const float sl2 = scale * FA_LOG2E;

    tile_regs<HS, IO> kr, vr;
    {
        tile_regs<HS, IO> qr;
        fetch_rows<HS, IO>(qr, q, ld3, q0, T);
        if (PF) {
            fetch_rows<HS, IO>(kr, k, ld3, 0, T);
            fetch_rows<HS, IO>(vr, v, ld3, 0, T);
        }
        stash_rows<HS, IO>(Qs, qr);
    }
    __syncthreads();
    uint32_t qf[KT][4];
#pragma unroll
    for (int kc = 0; kc < KT; kc++) lds_a(qf[kc], Qs, LD, warp * 16, kc * 16, lane);
    float o[NO][4];
#pragma unroll
    for (int nt = 0; nt < NO; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * FA_ROWS;
        if (!PF) {
            fetch_rows<HS, IO>(kr, k, ld3, k0, T);
            fetch_rows<HS, IO>(vr, v, ld3, k0, T);
        }
        __syncthreads(); /* the previous block's K and V are no longer read */
        stash_rows<HS, IO>(Ks, kr);
        stash_rows<HS, IO>(Vs, vr);
        __syncthreads();
        if (PF && kb < qb) { /* the next block's reads fly during this block's products */
            fetch_rows<HS, IO>(kr, k, ld3, k0 + FA_ROWS, T);
            fetch_rows<HS, IO>(vr, v, ld3, k0 + FA_ROWS, T);
        }
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        warp_mma_rs<8, KT, false>(s, qf, Ks, LD, lane); /* S = Q K^T */
        if (kb == qb) {
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k0 + nt * 8 + 2 * t4 + (e & 1) > row0 + (e >> 1) * 8) s[nt][e] = -INFINITY;
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = m[r];
#pragma unroll
            for (int nt = 0; nt < 8; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            /* key k0 <= every row of this block, so mx is finite here */
            const float alpha = exp2f((m[r] - mx) * sl2), mb = mx * sl2;
            m[r] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                s[nt][2 * r] = exp2f(fmaf(s[nt][2 * r], sl2, -mb));
                s[nt][2 * r + 1] = exp2f(fmaf(s[nt][2 * r + 1], sl2, -mb));
                sum += s[nt][2 * r] + s[nt][2 * r + 1];
            }
            l[r] = l[r] * alpha + sum; /* this thread's 16 columns; the quad sums at the end */
#pragma unroll
            for (int nt = 0; nt < NO; nt++) {
                o[nt][2 * r] *= alpha;
                o[nt][2 * r + 1] *= alpha;
            }
        }
        uint32_t pa[4][4];
        acc_to_a(pa, s);
        warp_mma_rs<NO, 4, true>(o, pa, Vs, LD, lane); /* O += P V */
    }
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv[r] = 1.0f / l[r];
#pragma unroll
        for (int nt = 0; nt < NO; nt++) {
            o[nt][2 * r] *= inv[r];
            o[nt][2 * r + 1] *= inv[r];
        }
        const int row = row0 + 8 * r;
        if (row < T && t4 == 0) lse[(int64_t)bh * T + row] = m[r] * scale + logf(l[r]);
    }
    store_rows<NO, IO>(out + (int64_t)b * T * C + h * HS, C, o, 1.0f, row0, T, t4);
#endif
}

/* ---------------- backward ---------------- */

#ifdef FA_DEVICE_CODE
static __device__ __forceinline__ float2 load2(const bf16 *p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
}
#endif

/* D[(b*NH + h)*T + t] = sum over hs of dout * out, one warp per (b, t, h). */
template <typename IO>
__global__ void flash_bwd_d_k(float *__restrict__ D, const IO *__restrict__ dout, const IO *__restrict__ out, int B,
                              int T, int C, int NH) {
#ifdef FA_DEVICE_CODE
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, hs = C / NH;
    if (w >= (int64_t)B * T * NH) return;
    const int64_t bt = w / NH;
    const int h = (int)(w - bt * NH);
    const IO *a = dout + bt * C + h * hs, *o = out + bt * C + h * hs;
    float sum = 0.0f;
    for (int i = 2 * lane; i < hs; i += 64) {
        const float2 x = load2(a + i), y = load2(o + i);
        sum = fmaf(x.x, y.x, fmaf(x.y, y.y, sum));
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) {
        const int64_t b = bt / T, t = bt - b * T;
        D[(b * NH + h) * T + t] = sum;
    }
#endif
}

template <int HS>
static constexpr size_t bwd_smem() {
    /* Q, dO, K, V [64][HS+8] bf16; lse, D [64] fp32 (dK/dV blocks) */
    return sizeof(bf16) * (size_t)(4 * FA_ROWS * (HS + 8)) + sizeof(float) * 2 * FA_ROWS;
}

template <int HS, typename IO>
static __device__ __forceinline__ void bwd_dkdv(bf16 *smem, IO *dqkv, const float *Dv, const IO *dout, const IO *qkv,
                                                const float *lse, int T, int C, int NH, float scale) {
#ifdef FA_DEVICE_CODE
    constexpr int LD = HS + 8, KT = HS / 16, NO = HS / 8;
    constexpr bool PF = fa_prefetch<HS, IO>::on;
    bf16 *Qs = smem, *dOs = Qs + FA_ROWS * LD, *Ks = dOs + FA_ROWS * LD, *Vs = Ks + FA_ROWS * LD;
    float *lse_s = reinterpret_cast<float *>(Vs + FA_ROWS * LD), *D_s = lse_s + FA_ROWS;
    const int nqb = gridDim.x, kb = blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh - b * NH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int64_t ld3 = 3 * (int64_t)C;
    const IO *q = qkv + (int64_t)b * T * ld3 + h * HS, *k = q + C, *v = q + 2 * C;
    const IO *dob = dout + (int64_t)b * T * C + h * HS;
    const float *lse_bh = lse + (int64_t)bh * T, *D_bh = Dv + (int64_t)bh * T;
    const int k0 = kb * FA_ROWS, key0 = k0 + warp * 16 + g; /* this thread's keys: key0, key0 + 8 */
    const float sl2 = scale * FA_LOG2E;

    tile_regs<HS, IO> qr, dr;
    float lse_r = 0.0f, D_r = 0.0f; /* threads 0..63: row threadIdx.x of the query block */
    {
        tile_regs<HS, IO> kr, vr;
        fetch_rows<HS, IO>(kr, k, ld3, k0, T);
        fetch_rows<HS, IO>(vr, v, ld3, k0, T);
        if (PF) {
            fetch_rows<HS, IO>(qr, q, ld3, k0, T);
            fetch_rows<HS, IO>(dr, dob, C, k0, T);
            if (threadIdx.x < FA_ROWS && k0 + (int)threadIdx.x < T) {
                lse_r = lse_bh[k0 + threadIdx.x] * FA_LOG2E;
                D_r = D_bh[k0 + threadIdx.x];
            }
        }
        stash_rows<HS, IO>(Ks, kr);
        stash_rows<HS, IO>(Vs, vr);
    }
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int nt = 0; nt < NO; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[nt][e] = dv[nt][e] = 0.0f;

    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * FA_ROWS;
        if (!PF) {
            fetch_rows<HS, IO>(qr, q, ld3, q0, T);
            fetch_rows<HS, IO>(dr, dob, C, q0, T);
            if (threadIdx.x < FA_ROWS && q0 + (int)threadIdx.x < T) {
                lse_r = lse_bh[q0 + threadIdx.x] * FA_LOG2E;
                D_r = D_bh[q0 + threadIdx.x];
            }
        }
        __syncthreads(); /* the previous query block is no longer read */
        stash_rows<HS, IO>(Qs, qr);
        stash_rows<HS, IO>(dOs, dr);
        if (threadIdx.x < FA_ROWS) {
            lse_s[threadIdx.x] = lse_r;
            D_s[threadIdx.x] = D_r;
        }
        __syncthreads();
        lse_r = D_r = 0.0f; /* rows past T stay 0 */
        if (PF && qb + 1 < nqb) { /* the next query block's reads fly during this block's products */
            fetch_rows<HS, IO>(qr, q, ld3, q0 + FA_ROWS, T);
            fetch_rows<HS, IO>(dr, dob, C, q0 + FA_ROWS, T);
            if (threadIdx.x < FA_ROWS && q0 + FA_ROWS + (int)threadIdx.x < T) {
                lse_r = lse_bh[q0 + FA_ROWS + threadIdx.x] * FA_LOG2E;
                D_r = D_bh[q0 + FA_ROWS + threadIdx.x];
            }
        }
        /* S^T (16 keys x 64 queries) = K Q^T, then P^T = exp(S^T * scale - lse) */
        float st[8][4], dpt[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) st[nt][e] = dpt[nt][e] = 0.0f;
        warp_mma_ss<8, KT>(st, Ks, LD, warp * 16, Qs, LD, lane);
        warp_mma_ss<8, KT>(dpt, Vs, LD, warp * 16, dOs, LD, lane); /* dP^T = V dO^T */
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qc = nt * 8 + 2 * t4 + (e & 1), key = key0 + (e >> 1) * 8;
                st[nt][e] = (q0 + qc < T && key <= q0 + qc) ? exp2f(fmaf(st[nt][e], sl2, -lse_s[qc])) : 0.0f;
            }
        uint32_t pa[4][4];
        acc_to_a(pa, st);
        warp_mma_rs<NO, 4, true>(dv, pa, dOs, LD, lane); /* dV += P^T dO */
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) st[nt][e] *= dpt[nt][e] - D_s[nt * 8 + 2 * t4 + (e & 1)]; /* dS^T */
        acc_to_a(pa, st);
        warp_mma_rs<NO, 4, true>(dk, pa, Qs, LD, lane); /* dK += dS^T Q */
    }
    IO *dbase = dqkv + (int64_t)b * T * ld3 + h * HS;
    store_rows<NO, IO>(dbase + C, ld3, dk, scale, key0, T, t4);
    store_rows<NO, IO>(dbase + 2 * C, ld3, dv, 1.0f, key0, T, t4);
#endif
}

template <int HS, typename IO>
static __device__ __forceinline__ void bwd_dq(bf16 *smem, IO *dqkv, const float *Dv, const IO *dout, const IO *qkv,
                                              const float *lse, int T, int C, int NH, float scale) {
#ifdef FA_DEVICE_CODE
    constexpr int LD = HS + 8, KT = HS / 16, NO = HS / 8;
    constexpr bool PF = fa_prefetch<HS, IO>::on;
    bf16 *Qs = smem, *dOs = Qs + FA_ROWS * LD, *Ks = dOs + FA_ROWS * LD, *Vs = Ks + FA_ROWS * LD;
    const int qb = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh - b * NH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int64_t ld3 = 3 * (int64_t)C;
    const IO *q = qkv + (int64_t)b * T * ld3 + h * HS, *k = q + C, *v = q + 2 * C;
    const IO *dob = dout + (int64_t)b * T * C + h * HS;
    const int q0 = qb * FA_ROWS, row0 = q0 + warp * 16 + g; /* this thread's rows: row0, row0 + 8 */
    const float sl2 = scale * FA_LOG2E;

    tile_regs<HS, IO> kr, vr;
    {
        tile_regs<HS, IO> qr, dr;
        fetch_rows<HS, IO>(qr, q, ld3, q0, T);
        fetch_rows<HS, IO>(dr, dob, C, q0, T);
        if (PF) {
            fetch_rows<HS, IO>(kr, k, ld3, 0, T);
            fetch_rows<HS, IO>(vr, v, ld3, 0, T);
        }
        stash_rows<HS, IO>(Qs, qr);
        stash_rows<HS, IO>(dOs, dr);
    }
    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = row0 + 8 * r;
        lse2[r] = row < T ? lse[(int64_t)bh * T + row] * FA_LOG2E : 0.0f;
        Dr[r] = row < T ? Dv[(int64_t)bh * T + row] : 0.0f;
    }
    __syncthreads();
    uint32_t qf[KT][4], df[KT][4];
#pragma unroll
    for (int kc = 0; kc < KT; kc++) {
        lds_a(qf[kc], Qs, LD, warp * 16, kc * 16, lane);
        lds_a(df[kc], dOs, LD, warp * 16, kc * 16, lane);
    }
    float dq[NO][4];
#pragma unroll
    for (int nt = 0; nt < NO; nt++) dq[nt][0] = dq[nt][1] = dq[nt][2] = dq[nt][3] = 0.0f;

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * FA_ROWS;
        if (!PF) {
            fetch_rows<HS, IO>(kr, k, ld3, k0, T);
            fetch_rows<HS, IO>(vr, v, ld3, k0, T);
        }
        __syncthreads(); /* the previous key block is no longer read */
        stash_rows<HS, IO>(Ks, kr);
        stash_rows<HS, IO>(Vs, vr);
        __syncthreads();
        if (PF && kb < qb) { /* the next key block's reads fly during this block's products */
            fetch_rows<HS, IO>(kr, k, ld3, k0 + FA_ROWS, T);
            fetch_rows<HS, IO>(vr, v, ld3, k0 + FA_ROWS, T);
        }
        float s[8][4], dp[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[nt][e] = dp[nt][e] = 0.0f;
        warp_mma_rs<8, KT, false>(s, qf, Ks, LD, lane);  /* S = Q K^T */
        warp_mma_rs<8, KT, false>(dp, df, Vs, LD, lane); /* dP = dO V^T */
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + nt * 8 + 2 * t4 + (e & 1), r = e >> 1;
                const float p = key <= row0 + 8 * r ? exp2f(fmaf(s[nt][e], sl2, -lse2[r])) : 0.0f;
                s[nt][e] = p * (dp[nt][e] - Dr[r]); /* dS */
            }
        uint32_t pa[4][4];
        acc_to_a(pa, s);
        warp_mma_rs<NO, 4, true>(dq, pa, Ks, LD, lane); /* dQ += dS K */
    }
    store_rows<NO, IO>(dqkv + (int64_t)b * T * ld3 + h * HS, ld3, dq, scale, row0, T, t4);
#endif
}

template <int HS, typename IO>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd_k(IO *__restrict__ dqkv, const float *__restrict__ Dv, const IO *__restrict__ dout,
                const IO *__restrict__ qkv, const float *__restrict__ lse, int T, int C, int NH, float scale) {
    extern __shared__ uint4 fa_smem[];
    bf16 *smem = reinterpret_cast<bf16 *>(fa_smem);
    if (blockIdx.z == 0) bwd_dkdv<HS, IO>(smem, dqkv, Dv, dout, qkv, lse, T, C, NH, scale);
    else bwd_dq<HS, IO>(smem, dqkv, Dv, dout, qkv, lse, T, C, NH, scale);
}

/* ---------------- host side ---------------- */

static int misaligned(const void *p) { return p == NULL || ((uintptr_t)p & 15u) != 0; }

/* 0, or why these arguments cannot run; *hs receives C / NH. */
static int check_shape(int B, int T, int C, int NH, int *hs) {
    if (B < 1 || T < 1 || NH < 1 || C < 1 || C % NH != 0 || C % 8 != 0) return (int)cudaErrorInvalidValue;
    *hs = C / NH;
    if (*hs != 64 && *hs != 128) return (int)cudaErrorInvalidValue;
    if ((int64_t)B * NH > 65535) return (int)cudaErrorInvalidValue;
    int dev = 0, major = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e != cudaSuccess) return (int)e;
    if (major < 8) return (int)cudaErrorNoKernelImageForDevice;
    return 0;
}

template <int HS, typename IO>
static int fwd_launch(IO *out, float *lse, const IO *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    const size_t smem = fwd_smem<HS>();
    cudaError_t e =
        cudaFuncSetAttribute(flash_fwd_k<HS, IO>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    const dim3 grid((unsigned)((T + FA_ROWS - 1) / FA_ROWS), (unsigned)(B * NH));
    flash_fwd_k<HS, IO><<<grid, FA_THREADS, smem, s>>>(out, lse, qkv, T, C, NH, 1.0f / sqrtf((float)HS));
    return (int)cudaGetLastError();
}

template <int HS, typename IO>
static int bwd_launch(IO *dqkv, float *D, const IO *dout, const IO *qkv, const float *lse, int B, int T, int C, int NH,
                      cudaStream_t s) {
    const size_t smem = bwd_smem<HS>();
    cudaError_t e =
        cudaFuncSetAttribute(flash_bwd_k<HS, IO>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    const dim3 grid((unsigned)((T + FA_ROWS - 1) / FA_ROWS), (unsigned)(B * NH), 2);
    flash_bwd_k<HS, IO><<<grid, FA_THREADS, smem, s>>>(dqkv, D, dout, qkv, lse, T, C, NH, 1.0f / sqrtf((float)HS));
    return (int)cudaGetLastError();
}

template <typename IO>
static int fwd_any(IO *out, float *lse, const IO *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    int hs = 0, rc = check_shape(B, T, C, NH, &hs);
    if (rc) return rc;
    if (misaligned(out) || misaligned(qkv) || lse == NULL || ((uintptr_t)lse & 3u)) return (int)cudaErrorInvalidValue;
    return hs == 64 ? fwd_launch<64, IO>(out, lse, qkv, B, T, C, NH, s)
                    : fwd_launch<128, IO>(out, lse, qkv, B, T, C, NH, s);
}

template <typename IO>
static int bwd_any(IO *dqkv, void *scratch, const IO *dout, const IO *qkv, const IO *out, const float *lse, int B,
                   int T, int C, int NH, cudaStream_t s) {
    int hs = 0, rc = check_shape(B, T, C, NH, &hs);
    if (rc) return rc;
    if (misaligned(dqkv) || misaligned(scratch) || misaligned(dout) || misaligned(qkv) || misaligned(out) ||
        lse == NULL || ((uintptr_t)lse & 3u))
        return (int)cudaErrorInvalidValue;
    float *D = static_cast<float *>(scratch);
    const int64_t rows = (int64_t)B * T * NH;
    const int per_block = 256 / 32;
    flash_bwd_d_k<IO><<<(unsigned)((rows + per_block - 1) / per_block), 256, 0, s>>>(D, dout, out, B, T, C, NH);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return (int)e;
    return hs == 64 ? bwd_launch<64, IO>(dqkv, D, dout, qkv, lse, B, T, C, NH, s)
                    : bwd_launch<128, IO>(dqkv, D, dout, qkv, lse, B, T, C, NH, s);
}

extern "C" int flash_attn_fwd_bf16(__nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int B, int T, int C,
                                   int NH, cudaStream_t s) {
    return fwd_any<bf16>(out, lse, qkv, B, T, C, NH, s);
}

extern "C" size_t flash_attn_bwd_scratch_bytes(int B, int T, int C, int NH) {
    (void)C;
    if (B < 1 || T < 1 || NH < 1) return 0;
    const size_t bytes = sizeof(float) * (size_t)B * (size_t)NH * (size_t)T;
    return (bytes + 255) / 256 * 256;
}

extern "C" int flash_attn_bwd_bf16(__nv_bfloat16 *dqkv, void *scratch, const __nv_bfloat16 *dout,
                                   const __nv_bfloat16 *qkv, const __nv_bfloat16 *out, const float *lse, int B,
                                   int T, int C, int NH, cudaStream_t s) {
    return bwd_any<bf16>(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH, s);
}

/* ======================================================================
 * The TF32 kernels (flash_attn_*_tf32): fp32 storage, TF32 tensor-core math
 * (mma.sync.m16n8k8 tf32 x tf32 -> fp32), fp32 softmax, for the engine's
 * TF32 mode. Same tiling (64-row tiles, 4 warps of 16 rows), the same grid,
 * the same softmax recurrence and the same two backward roles as the bf16
 * kernels above; what differs is the fragments.
 *
 * Every tile lives in shared memory as [row][dim] with a row of hs + 4
 * words, already rounded to TF32 (cvt.rna: round to nearest, 10-bit
 * mantissa) when it is stored, so each element is rounded once. A tf32
 * register holds ONE element (bf16 packs two along k), so every operand can
 * be read from that one layout by choosing the addresses; no transposed copy
 * is needed:
 *   A (16 x 8, row)   a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4],
 *                     a3 = A[g+8][t+4]   (g = lane / 4, t = lane % 4)
 *   B (8 x 8, col)    b0 = B[t][g], b1 = B[t+4][g]
 *   C (16 x 8)        c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
 * S = Q K^T reads K[key][dim] as B[dim][key] (address (key)*ld + dim); with
 * ld = hs + 4 = 4 (mod 32) the 32 lanes hit banks 4g + t, all distinct.
 *
 * The accumulator-to-A mismatch (the products P V, P^T dO, dS^T Q, dS K take
 * the 16 x 64 accumulator S / P / dS as their A operand; C holds columns 2t
 * and 2t+1 of each 8-column tile, A wants columns t and t+4): neither
 * __shfl_sync nor a shared-memory round trip. The product sums over its k
 * index (keys or queries), and a sum does not depend on the order of its
 * terms, so k-slot t of chunk kc is taken to be column 8kc + 2t and k-slot
 * t + 4 column 8kc + 2t + 1: then a0..a3 = c0, c2, c1, c3 of the same thread
 * (no data movement at all), and the B operand is read with the same
 * permutation, b0 = B[8kc + 2t][n], b1 = B[8kc + 2t + 1][n], from the tile's
 * [row][dim] layout (address (8kc + 2t) * ld + n: banks 8t + g, distinct).
 * A shuffle would cost 4-8 SHFL per A fragment and a round trip two shared
 * accesses and a barrier per tile, on the kernels' critical path.
 *
 * Rounding: q, k, v, dO to TF32 when staged; P (forward, dV) and dS (dK, dQ)
 * to TF32 when they become A operands; every sum in fp32. D = rowsum(dO * O)
 * uses the TF32-rounded dO, the one the dP products see. The tiles are
 * staged through registers; at hs 64 the next block's two tiles are read
 * while the current one is multiplied (64 more registers a thread: 164 in
 * the forward, 254 in the backward, no spills; PLACER_FLASH32_PF=0 turns it
 * off); hs 128 reads tile by tile (its registers would spill) and relies on
 * the other blocks of an SM to hide the loads.
 * ====================================================================== */

#ifdef FA_DEVICE_CODE
static __device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

/* d (16x8 fp32) += a (16x8 tf32, row) * b (8x8 tf32, col); layouts above */
static __device__ __forceinline__ void mma_tf32(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* A 64 x HS fp32 tile in flight for the prefetching kernels (hs 64: 8
 * float4 a thread): read by fetch32, rounded and stored by stash32, with the
 * pieces laid out as in load_tile32. */
template <int HS>
struct tile32 {
    float4 v[FA_ROWS * (HS / 4) / FA_THREADS];
};

template <int HS>
static __device__ __forceinline__ void fetch32(tile32<HS> &t, const float *src, int64_t ld, int r0, int nrows) {
    constexpr int VPR = HS / 4, NV = FA_ROWS * VPR / FA_THREADS;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int i = threadIdx.x + j * FA_THREADS, r = i / VPR, c = i - r * VPR;
        t.v[j] = r0 + r < nrows ? __ldg(reinterpret_cast<const float4 *>(src + (int64_t)(r0 + r) * ld) + c)
                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

template <int HS>
static __device__ __forceinline__ void stash32(uint32_t *dst, const tile32<HS> &t) {
    constexpr int VPR = HS / 4, NV = FA_ROWS * VPR / FA_THREADS;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int i = threadIdx.x + j * FA_THREADS, r = i / VPR, c = i - r * VPR;
        *reinterpret_cast<uint4 *>(dst + r * (HS + 4) + 4 * c) =
            make_uint4(to_tf32(t.v[j].x), to_tf32(t.v[j].y), to_tf32(t.v[j].z), to_tf32(t.v[j].w));
    }
}

/* Rows r0..r0+63 of a (nrows x HS) fp32 slice with row stride ld into a
 * [64][HS+4] shared tile as TF32; rows >= nrows read as zero. Consecutive
 * threads take consecutive 16-byte pieces of a row (coalesced reads, and a
 * quarter-warp's 16-byte stores fill 128 consecutive bytes). Up to 8 loads in
 * flight a thread before the first store. */
template <int HS>
static __device__ __forceinline__ void load_tile32(uint32_t *dst, const float *src, int64_t ld, int r0, int nrows) {
    constexpr int VPR = HS / 4, NV = FA_ROWS * VPR / FA_THREADS, GRP = NV < 8 ? NV : 8;
#pragma unroll
    for (int n0 = 0; n0 < NV; n0 += GRP) {
        float4 v[GRP];
#pragma unroll
        for (int j = 0; j < GRP; j++) {
            const int i = threadIdx.x + (n0 + j) * FA_THREADS, r = i / VPR, c = i - r * VPR;
            v[j] = r0 + r < nrows ? __ldg(reinterpret_cast<const float4 *>(src + (int64_t)(r0 + r) * ld) + c)
                                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int j = 0; j < GRP; j++) {
            const int i = threadIdx.x + (n0 + j) * FA_THREADS, r = i / VPR, c = i - r * VPR;
            *reinterpret_cast<uint4 *>(dst + r * (HS + 4) + 4 * c) =
                make_uint4(to_tf32(v[j].x), to_tf32(v[j].y), to_tf32(v[j].z), to_tf32(v[j].w));
        }
    }
}

/* acc (16 x 8NT) += A B: A = rows m0..m0+15 of the [row][k] tile as, B[k][n]
 * = bs[n][k] (the [row][dim] tile bs read transposed), k = 0 .. 8KT-1. */
template <int NT, int KT, int LD>
static __device__ __forceinline__ void mma32_nk(float (*acc)[4], const uint32_t *as, int m0, const uint32_t *bs,
                                                int lane) {
    const int g = lane >> 2, t = lane & 3;
    const uint32_t *pa = as + (m0 + g) * LD + t, *pb = bs + g * LD + t;
#pragma unroll
    for (int kc = 0; kc < KT; kc++) {
        const uint32_t a[4] = {pa[kc * 8], pa[8 * LD + kc * 8], pa[kc * 8 + 4], pa[8 * LD + kc * 8 + 4]};
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const uint32_t *q = pb + nt * 8 * LD + kc * 8;
            mma_tf32(acc[nt], a, q[0], q[4]);
        }
    }
}

/* acc (16 x 8NO) += X B with X the 16 x 64 fp32 accumulator x (8 tiles),
 * rounded to TF32, and B[k][n] = bs[k][n] (a [row][dim] tile): k-slot t of
 * chunk kc is column 8kc + 2t, k-slot t + 4 column 8kc + 2t + 1 (see above). */
template <int NO, int LD>
static __device__ __forceinline__ void mma32_xk(float (*acc)[4], const float (*x)[4], const uint32_t *bs, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const uint32_t *pb = bs + 2 * t * LD + g;
#pragma unroll
    for (int kc = 0; kc < 8; kc++) {
        const uint32_t a[4] = {to_tf32(x[kc][0]), to_tf32(x[kc][2]), to_tf32(x[kc][1]), to_tf32(x[kc][3])};
#pragma unroll
        for (int nt = 0; nt < NO; nt++) {
            const uint32_t *q = pb + kc * 8 * LD + nt * 8;
            mma_tf32(acc[nt], a, q[0], q[LD]);
        }
    }
}

/* Rows row0 and row0 + 8 (those < T) of a 16 x 8NO fp32 accumulator, times mul, at dst + row * ld */
template <int NO>
static __device__ __forceinline__ void store_rows32(float *dst, int64_t ld, const float (*acc)[4], float mul, int row0,
                                                    int T, int t4) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = row0 + 8 * r;
        if (row >= T) continue;
        float *p = dst + (int64_t)row * ld + 2 * t4;
#pragma unroll
        for (int nt = 0; nt < NO; nt++)
            *reinterpret_cast<float2 *>(p + nt * 8) = make_float2(acc[nt][2 * r] * mul, acc[nt][2 * r + 1] * mul);
    }
}
#endif /* FA_DEVICE_CODE */

template <int HS>
static constexpr size_t fwd32_smem() {
    return sizeof(uint32_t) * (size_t)(3 * FA_ROWS * (HS + 4));
}

/* PF: the next key block's K and V reads are in flight (in registers)
 * while the current block is multiplied (hs 64: 64 more registers). */
template <int HS, bool PF>
__global__ void __launch_bounds__(FA_THREADS)
    flash_fwd32_k(float *__restrict__ out, float *__restrict__ lse, const float *__restrict__ qkv, int T, int C,
                  int NH, float scale) {
#ifdef FA_DEVICE_CODE
    constexpr int LD = HS + 4, KT = HS / 8, NO = HS / 8;
    extern __shared__ uint4 fa_smem[];
    uint32_t *Qs = reinterpret_cast<uint32_t *>(fa_smem), *Ks = Qs + FA_ROWS * LD, *Vs = Ks + FA_ROWS * LD;
    const int qb = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh - b * NH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int64_t ld3 = 3 * (int64_t)C;
    const float *q = qkv + (int64_t)b * T * ld3 + h * HS, *k = q + C, *v = q + 2 * C;
    const int q0 = qb * FA_ROWS, row0 = q0 + warp * 16 + g; /* this thread's rows: row0, row0 + 8 */
    const float sl2 = scale * FA_LOG2E;

    tile32<HS> kr, vr;
    if (PF) {
        fetch32<HS>(kr, k, ld3, 0, T);
        fetch32<HS>(vr, v, ld3, 0, T);
    }
    load_tile32<HS>(Qs, q, ld3, q0, T);
    float o[NO][4];
#pragma unroll
    for (int nt = 0; nt < NO; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * FA_ROWS;
        __syncthreads(); /* the previous block's K and V are no longer read */
        if (PF) {
            stash32<HS>(Ks, kr);
            stash32<HS>(Vs, vr);
        } else {
            load_tile32<HS>(Ks, k, ld3, k0, T);
            load_tile32<HS>(Vs, v, ld3, k0, T);
        }
        __syncthreads();
        if (PF && kb < qb) { /* the next block's reads fly during this block's products */
            fetch32<HS>(kr, k, ld3, k0 + FA_ROWS, T);
            fetch32<HS>(vr, v, ld3, k0 + FA_ROWS, T);
        }
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        mma32_nk<8, KT, LD>(s, Qs, warp * 16, Ks, lane); /* S = Q K^T */
        if (kb == qb) {
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k0 + nt * 8 + 2 * t4 + (e & 1) > row0 + (e >> 1) * 8) s[nt][e] = -INFINITY;
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = m[r];
#pragma unroll
            for (int nt = 0; nt < 8; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            /* key k0 <= every row of this block, so mx is finite here */
            const float alpha = exp2f((m[r] - mx) * sl2), mb = mx * sl2;
            m[r] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                s[nt][2 * r] = exp2f(fmaf(s[nt][2 * r], sl2, -mb));
                s[nt][2 * r + 1] = exp2f(fmaf(s[nt][2 * r + 1], sl2, -mb));
                sum += s[nt][2 * r] + s[nt][2 * r + 1];
            }
            l[r] = l[r] * alpha + sum; /* this thread's 16 columns; the quad sums at the end */
#pragma unroll
            for (int nt = 0; nt < NO; nt++) {
                o[nt][2 * r] *= alpha;
                o[nt][2 * r + 1] *= alpha;
            }
        }
        mma32_xk<NO, LD>(o, s, Vs, lane); /* O += tf32(P) V */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        const int row = row0 + 8 * r;
        if (row >= T) continue;
        const float inv = 1.0f / l[r];
        float *op = out + ((int64_t)b * T + row) * C + h * HS + 2 * t4;
#pragma unroll
        for (int nt = 0; nt < NO; nt++)
            *reinterpret_cast<float2 *>(op + nt * 8) = make_float2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
        if (t4 == 0) lse[(int64_t)bh * T + row] = m[r] * scale + logf(l[r]);
    }
#endif
}

/* D[(b*NH + h)*T + t] = sum over hs of tf32(dout) * out, one warp per (b, t, h). */
__global__ void flash_bwd_d32_k(float *__restrict__ D, const float *__restrict__ dout, const float *__restrict__ out,
                                int B, int T, int C, int NH) {
#ifdef FA_DEVICE_CODE
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, hs = C / NH;
    if (w >= (int64_t)B * T * NH) return;
    const int64_t bt = w / NH;
    const int h = (int)(w - bt * NH);
    const float *a = dout + bt * C + h * hs, *o = out + bt * C + h * hs;
    float sum = 0.0f;
    for (int i = 2 * lane; i < hs; i += 64) {
        const float2 x = *reinterpret_cast<const float2 *>(a + i), y = *reinterpret_cast<const float2 *>(o + i);
        sum = fmaf(__uint_as_float(to_tf32(x.x)), y.x, fmaf(__uint_as_float(to_tf32(x.y)), y.y, sum));
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) {
        const int64_t b = bt / T, t = bt - b * T;
        D[(b * NH + h) * T + t] = sum;
    }
#endif
}

template <int HS>
static constexpr size_t bwd32_smem() {
    /* Q, dO, K, V [64][HS+4] (both roles); lse, D [64] (the dK/dV role) */
    return sizeof(uint32_t) * (size_t)(4 * FA_ROWS * (HS + 4)) + sizeof(float) * 2 * FA_ROWS;
}

template <int HS, bool PF>
static __device__ __forceinline__ void bwd32_dkdv(uint32_t *smem, float *dqkv, const float *Dv, const float *dout,
                                                  const float *qkv, const float *lse, int T, int C, int NH,
                                                  float scale) {
#ifdef FA_DEVICE_CODE
    constexpr int LD = HS + 4, KT = HS / 8, NO = HS / 8;
    uint32_t *Qs = smem, *dOs = Qs + FA_ROWS * LD, *Ks = dOs + FA_ROWS * LD, *Vs = Ks + FA_ROWS * LD;
    float *lse_s = reinterpret_cast<float *>(Vs + FA_ROWS * LD), *D_s = lse_s + FA_ROWS;
    const int nqb = gridDim.x, kb = blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh - b * NH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int64_t ld3 = 3 * (int64_t)C;
    const float *q = qkv + (int64_t)b * T * ld3 + h * HS, *k = q + C, *v = q + 2 * C;
    const float *dob = dout + (int64_t)b * T * C + h * HS;
    const float *lse_bh = lse + (int64_t)bh * T, *D_bh = Dv + (int64_t)bh * T;
    const int k0 = kb * FA_ROWS, key0 = k0 + warp * 16 + g; /* this thread's keys: key0, key0 + 8 */
    const float sl2 = scale * FA_LOG2E;

    /* threads 0..63: row threadIdx.x of the next query block's lse and D */
    tile32<HS> qr, dr;
    float lse_r = 0.0f, D_r = 0.0f;
    if (PF) {
        fetch32<HS>(qr, q, ld3, k0, T);
        fetch32<HS>(dr, dob, C, k0, T);
        const int row = k0 + threadIdx.x;
        if (threadIdx.x < FA_ROWS && row < T) {
            lse_r = lse_bh[row] * FA_LOG2E;
            D_r = D_bh[row];
        }
    }
    load_tile32<HS>(Ks, k, ld3, k0, T);
    load_tile32<HS>(Vs, v, ld3, k0, T);
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int nt = 0; nt < NO; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[nt][e] = dv[nt][e] = 0.0f;

    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * FA_ROWS;
        __syncthreads(); /* the previous query block is no longer read */
        if (PF) {
            stash32<HS>(Qs, qr);
            stash32<HS>(dOs, dr);
            if (threadIdx.x < FA_ROWS) {
                lse_s[threadIdx.x] = lse_r;
                D_s[threadIdx.x] = D_r;
            }
        } else {
            load_tile32<HS>(Qs, q, ld3, q0, T);
            load_tile32<HS>(dOs, dob, C, q0, T);
            if (threadIdx.x < FA_ROWS) {
                const int row = q0 + threadIdx.x;
                lse_s[threadIdx.x] = row < T ? lse_bh[row] * FA_LOG2E : 0.0f;
                D_s[threadIdx.x] = row < T ? D_bh[row] : 0.0f;
            }
        }
        __syncthreads();
        if (PF && qb + 1 < nqb) { /* the next query block's reads fly during this block's products */
            const int q1 = q0 + FA_ROWS, row = q1 + threadIdx.x;
            fetch32<HS>(qr, q, ld3, q1, T);
            fetch32<HS>(dr, dob, C, q1, T);
            lse_r = D_r = 0.0f; /* rows past T stay 0 */
            if (threadIdx.x < FA_ROWS && row < T) {
                lse_r = lse_bh[row] * FA_LOG2E;
                D_r = D_bh[row];
            }
        }
        /* S^T (16 keys x 64 queries) = K Q^T, dP^T = V dO^T */
        float st[8][4], dpt[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) st[nt][e] = dpt[nt][e] = 0.0f;
        mma32_nk<8, KT, LD>(st, Ks, warp * 16, Qs, lane);
        mma32_nk<8, KT, LD>(dpt, Vs, warp * 16, dOs, lane);
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qc = nt * 8 + 2 * t4 + (e & 1), key = key0 + (e >> 1) * 8;
                st[nt][e] = (q0 + qc < T && key <= q0 + qc) ? exp2f(fmaf(st[nt][e], sl2, -lse_s[qc])) : 0.0f;
            }
        mma32_xk<NO, LD>(dv, st, dOs, lane); /* dV += tf32(P^T) dO */
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) st[nt][e] *= dpt[nt][e] - D_s[nt * 8 + 2 * t4 + (e & 1)]; /* dS^T */
        mma32_xk<NO, LD>(dk, st, Qs, lane); /* dK += tf32(dS^T) Q */
    }
    float *dbase = dqkv + (int64_t)b * T * ld3 + h * HS;
    store_rows32<NO>(dbase + C, ld3, dk, scale, key0, T, t4);
    store_rows32<NO>(dbase + 2 * C, ld3, dv, 1.0f, key0, T, t4);
#endif
}

template <int HS, bool PF>
static __device__ __forceinline__ void bwd32_dq(uint32_t *smem, float *dqkv, const float *Dv, const float *dout,
                                                const float *qkv, const float *lse, int T, int C, int NH,
                                                float scale) {
#ifdef FA_DEVICE_CODE
    constexpr int LD = HS + 4, KT = HS / 8, NO = HS / 8;
    uint32_t *Qs = smem, *dOs = Qs + FA_ROWS * LD, *Ks = dOs + FA_ROWS * LD, *Vs = Ks + FA_ROWS * LD;
    const int qb = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh - b * NH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int64_t ld3 = 3 * (int64_t)C;
    const float *q = qkv + (int64_t)b * T * ld3 + h * HS, *k = q + C, *v = q + 2 * C;
    const float *dob = dout + (int64_t)b * T * C + h * HS;
    const int q0 = qb * FA_ROWS, row0 = q0 + warp * 16 + g; /* this thread's rows: row0, row0 + 8 */
    const float sl2 = scale * FA_LOG2E;

    tile32<HS> kr, vr;
    if (PF) {
        fetch32<HS>(kr, k, ld3, 0, T);
        fetch32<HS>(vr, v, ld3, 0, T);
    }
    load_tile32<HS>(Qs, q, ld3, q0, T);
    load_tile32<HS>(dOs, dob, C, q0, T);
    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = row0 + 8 * r;
        lse2[r] = row < T ? lse[(int64_t)bh * T + row] * FA_LOG2E : 0.0f;
        Dr[r] = row < T ? Dv[(int64_t)bh * T + row] : 0.0f;
    }
    float dq[NO][4];
#pragma unroll
    for (int nt = 0; nt < NO; nt++) dq[nt][0] = dq[nt][1] = dq[nt][2] = dq[nt][3] = 0.0f;

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * FA_ROWS;
        __syncthreads(); /* the previous key block is no longer read */
        if (PF) {
            stash32<HS>(Ks, kr);
            stash32<HS>(Vs, vr);
        } else {
            load_tile32<HS>(Ks, k, ld3, k0, T);
            load_tile32<HS>(Vs, v, ld3, k0, T);
        }
        __syncthreads();
        if (PF && kb < qb) { /* the next key block's reads fly during this block's products */
            fetch32<HS>(kr, k, ld3, k0 + FA_ROWS, T);
            fetch32<HS>(vr, v, ld3, k0 + FA_ROWS, T);
        }
        float s[8][4], dp[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[nt][e] = dp[nt][e] = 0.0f;
        mma32_nk<8, KT, LD>(s, Qs, warp * 16, Ks, lane);  /* S = Q K^T */
        mma32_nk<8, KT, LD>(dp, dOs, warp * 16, Vs, lane); /* dP = dO V^T */
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + nt * 8 + 2 * t4 + (e & 1), r = e >> 1;
                const float p = key <= row0 + 8 * r ? exp2f(fmaf(s[nt][e], sl2, -lse2[r])) : 0.0f;
                s[nt][e] = p * (dp[nt][e] - Dr[r]); /* dS */
            }
        mma32_xk<NO, LD>(dq, s, Ks, lane); /* dQ += tf32(dS) K */
    }
    store_rows32<NO>(dqkv + (int64_t)b * T * ld3 + h * HS, ld3, dq, scale, row0, T, t4);
#endif
}

template <int HS, bool PF>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd32_k(float *__restrict__ dqkv, const float *__restrict__ Dv, const float *__restrict__ dout,
                  const float *__restrict__ qkv, const float *__restrict__ lse, int T, int C, int NH, float scale) {
    extern __shared__ uint4 fa_smem[];
    uint32_t *smem = reinterpret_cast<uint32_t *>(fa_smem);
    if (blockIdx.z == 0) bwd32_dkdv<HS, PF>(smem, dqkv, Dv, dout, qkv, lse, T, C, NH, scale);
    else bwd32_dq<HS, PF>(smem, dqkv, Dv, dout, qkv, lse, T, C, NH, scale);
}

/* Whether the hs-64 TF32 kernels prefetch: yes unless PLACER_FLASH32_PF=0
 * (H200, B16 T256 C384 NH6, graph replay of the kernels alone: fwd 20.1 /
 * bwd 59.4 us with it in GPU call 2, 22.5 / 61.4 without in call 3; the TF32
 * step 5.623 ms with it against 5.637 in call 3); hs 128 never does (its
 * registers would spill). */
static int fa32_prefetch(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("PLACER_FLASH32_PF");
        v = !(e && e[0] == '0');
    }
    return v;
}

template <int HS, bool PF>
static int fwd32_launch(float *out, float *lse, const float *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    const size_t smem = fwd32_smem<HS>();
    cudaError_t e =
        cudaFuncSetAttribute(flash_fwd32_k<HS, PF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    const dim3 grid((unsigned)((T + FA_ROWS - 1) / FA_ROWS), (unsigned)(B * NH));
    flash_fwd32_k<HS, PF><<<grid, FA_THREADS, smem, s>>>(out, lse, qkv, T, C, NH, 1.0f / sqrtf((float)HS));
    return (int)cudaGetLastError();
}

template <int HS, bool PF>
static int bwd32_launch(float *dqkv, float *D, const float *dout, const float *qkv, const float *lse, int B, int T,
                        int C, int NH, cudaStream_t s) {
    const size_t smem = bwd32_smem<HS>();
    cudaError_t e =
        cudaFuncSetAttribute(flash_bwd32_k<HS, PF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    const dim3 grid((unsigned)((T + FA_ROWS - 1) / FA_ROWS), (unsigned)(B * NH), 2);
    flash_bwd32_k<HS, PF><<<grid, FA_THREADS, smem, s>>>(dqkv, D, dout, qkv, lse, T, C, NH, 1.0f / sqrtf((float)HS));
    return (int)cudaGetLastError();
}

extern "C" int flash_attn_fwd_tf32(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                                   cudaStream_t s) {
    int hs = 0, rc = check_shape(B, T, C, NH, &hs);
    if (rc) return rc;
    if (misaligned(out) || misaligned(qkv) || lse == NULL || ((uintptr_t)lse & 3u)) return (int)cudaErrorInvalidValue;
    if (hs == 128) return fwd32_launch<128, false>(out, lse, qkv, B, T, C, NH, s);
    return fa32_prefetch() ? fwd32_launch<64, true>(out, lse, qkv, B, T, C, NH, s)
                           : fwd32_launch<64, false>(out, lse, qkv, B, T, C, NH, s);
}

extern "C" int flash_attn_bwd_tf32(float *dqkv, void *scratch, const float *dout, const float *qkv, const float *out,
                                   const float *lse, int B, int T, int C, int NH, cudaStream_t s) {
    int hs = 0, rc = check_shape(B, T, C, NH, &hs);
    if (rc) return rc;
    if (misaligned(dqkv) || misaligned(scratch) || misaligned(dout) || misaligned(qkv) || misaligned(out) ||
        lse == NULL || ((uintptr_t)lse & 3u))
        return (int)cudaErrorInvalidValue;
    float *D = static_cast<float *>(scratch);
    const int64_t rows = (int64_t)B * T * NH;
    const int per_block = 256 / 32;
    flash_bwd_d32_k<<<(unsigned)((rows + per_block - 1) / per_block), 256, 0, s>>>(D, dout, out, B, T, C, NH);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return (int)e;
    if (hs == 128) return bwd32_launch<128, false>(dqkv, D, dout, qkv, lse, B, T, C, NH, s);
    return fa32_prefetch() ? bwd32_launch<64, true>(dqkv, D, dout, qkv, lse, B, T, C, NH, s)
                           : bwd32_launch<64, false>(dqkv, D, dout, qkv, lse, B, T, C, NH, s);
}
