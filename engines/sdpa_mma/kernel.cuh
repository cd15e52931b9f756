// sdpa_f16_sm80 and sdpa_fp8_sm89: FlashAttention-2 style forward on mma.sync, one template for both.
//
// A CTA owns kTileQ packed rows of one (batch, kv head): GQA packs the `group` q heads that share a kv head
// into the row dimension (packed row r -> q row i = r / group, head h_kv * group + r % group), so K and V are
// read once per kv head, and decode (S_q = 1) fills a 16-row warp tile with up to 16 q heads. Each warp owns 16
// rows; K/V tiles of kTileKv keys (32 or 64) are double-buffered with cp.async.
//
// Q.K^T and P.V use m16n8k16 (FP16/BF16) or m16n8k32 (FP8). For both, one k step is 32 bytes of the reduced
// dimension, so the ldmatrix addressing of Q and K fragments is the same byte pattern. For FP8, P.V needs V
// k-major (mma's B operand) and sm_89/sm_90 have no 8-bit ldmatrix.trans, so each V tile is transposed once
// in shared memory into Vt, with its keys permuted to match the register layout of P: the S accumulator gives
// a thread keys {2t, 2t+1, 2t+8, 2t+9} of 16 while the FP8 A fragment wants k positions {4t..4t+3}. Since the
// contraction does not care about the order of keys, Vt stores key kv(p) at position p, where within each
// 16-key half p = 4t + i holds kv = 8 * (i / 2) + 2t + i % 2. Example: t = 1, i = 2 -> p = 6 holds key 10.
#pragma once

#include "common/device.cuh"

namespace rime_dev {

template <int kIn>
struct InType {
  static constexpr int kBytes = (kIn == RIME_T_FP16 || kIn == RIME_T_BF16) ? 2 : 1;
  static constexpr bool kFp8 = kBytes == 1;
  static constexpr int kPvTypeA = kFp8 ? RIME_T_E4M3 : kIn;  // P is quantized to E4M3 for FP8 inputs
};

// P is quantized to E4M3 on a fixed scale: P in [0, 1] times 448 uses E4M3's whole range; 1/448 is folded
// into the final normalization. descale_s / scale_s are therefore not read.
constexpr float kPScale = 448.f;

// A compile-time row slot (0: accumulator elements 0-1, row g; 1: elements 2-3, row g + 8).
template <int kSlot>
struct Slot {
  static constexpr int value = kSlot;
};

template <int kIn, int kOut, int kDqk, int kDv, int kTileQ, int kTileKv, int kFeatures>
__global__ void __launch_bounds__(kTileQ * 2) sdpa_mma_fwd(const SdpaParams p) {
  using T = InType<kIn>;
  constexpr int kEB = T::kBytes;
  constexpr int kWarps = kTileQ / 16;
  constexpr int kThreads = kWarps * 32;
  constexpr int kRowQ = kDqk * kEB + 16;  // shared-memory pitches in bytes, padded to spread banks
  constexpr int kRowK = kDqk * kEB + 16;
  constexpr int kRowV = kDv * kEB + 16;
  constexpr int kRowVt = kTileKv + 16;
  constexpr int kKSteps = kDqk * kEB / 32;  // 32-byte k steps of Q.K^T
  constexpr int kNT = kTileKv / 8;          // 8-key accumulator tiles per KV tile
  constexpr int kDT = kDv / 8;              // 8-column accumulator tiles of O
  constexpr bool kQInRegs = kDqk * kEB <= 256;
  constexpr bool kSplit = (kFeatures & RIME_F_SPLIT) != 0;
  constexpr bool kSink = (kFeatures & RIME_F_SINK) != 0 && !kSplit;  // the combine adds the sink under split
  constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  constexpr bool kMask = (kFeatures & RIME_F_MASK) != 0;
  // MXFP8 inputs (SPEC section 6): one UE8M0 scale per 32 d of Q and K rows and per 32 keys of V columns. A
  // 32-byte k step of Q.K^T is exactly one Q/K scale block and a 32-key P.V step one V block, so each mma goes
  // into a zeroed fp32 partial that is scaled (by a power of two: exact) and added.
  constexpr bool kMx = (kFeatures & RIME_F_MX_INPUTS) != 0;
  constexpr int kVBlocks = kTileKv / 32;  // V scale blocks per KV tile
  static_assert(!kMx || T::kFp8, "MXFP8 inputs are FP8");
  static_assert(kDqk % 32 == 0 && kDv % 16 == 0, "head dims must be multiples of 32 / 16");
  static_assert(kTileKv % 32 == 0, "KV tiles are whole 32-key FP8 k steps");

  extern __shared__ __align__(128) u8 smem[];
  u8* sQ = smem;
  u8* sK = sQ + kTileQ * kRowQ;
  u8* sV = sK + 2 * kTileKv * kRowK;
  u8* sVt = sV + 2 * kTileKv * kRowV;  // FP8 only
  // MXFP8: the KV tile's scales as fp32, K [key][k step] and V [d][32-key block].
  float* sSk = reinterpret_cast<float*>(sVt + (T::kFp8 ? kDv * kRowVt : 0));
  float* sSv = sSk + kTileKv * kKSteps;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int q_tile = blockIdx.x, h_kv = blockIdx.y;
  const int b = blockIdx.z % p.B, split = blockIdx.z / p.B;
  const int row0 = q_tile * kTileQ;

  const int seq_q = kPadding ? min(p.S_q, p.seq_len_q[b]) : p.S_q;
  const int kv_limit = kPadding ? max(0, min(p.S_kv, p.seq_len_kv[b])) : p.S_kv;
  const int right_bound = p.causal ? 0 : p.band_right;  // -1: none

  // The KV tile range of this row tile: the union of its rows' unmasked keys.
  int tile_lo = 0, tile_hi = 0;
  {
    const int last = min(row0 + kTileQ, p.packed_rows) - 1;
    const int i_lo = row0 / p.group, i_hi = last / p.group;
    int hi = kv_limit, lo = 0;
    if (kMask && right_bound >= 0) hi = min(hi, i_hi + p.diag_shift + right_bound + 1);
    if (kMask && p.window_left >= 0) lo = max(0, i_lo + p.diag_shift - p.window_left + 1);
    if (hi > lo) {
      tile_lo = lo / kTileKv;
      tile_hi = (hi + kTileKv - 1) / kTileKv;
    }
  }
  int kt_begin = tile_lo, kt_end = tile_hi;
  if (kSplit) {
    // SPEC section 3: near-equal chunks, the remainder to the leading splits; a chunk past the end is empty.
    const int n = tile_hi - tile_lo, per = n / p.num_splits, rem = n % p.num_splits;
    kt_begin = tile_lo + split * per + min(split, rem);
    kt_end = kt_begin + per + (split < rem ? 1 : 0);
  }

  // The two rows this thread holds in every accumulator: warp row g and g + 8.
  int row_i[2], row_h[2], key_lo[2], key_hi[2];
  bool row_live[2], row_exists[2];
  for (int r = 0; r < 2; ++r) {
    const int pr = row0 + warp * 16 + g + 8 * r;
    row_exists[r] = pr < p.packed_rows;
    row_i[r] = row_exists[r] ? pr / p.group : 0;
    row_h[r] = h_kv * p.group + (row_exists[r] ? pr % p.group : 0);
    row_live[r] = row_exists[r] && row_i[r] < seq_q;
    key_hi[r] = kv_limit;
    key_lo[r] = 0;
    if (kMask && right_bound >= 0) key_hi[r] = min(key_hi[r], row_i[r] + p.diag_shift + right_bound + 1);
    if (kMask && p.window_left >= 0) key_lo[r] = row_i[r] + p.diag_shift - p.window_left + 1;
  }

  const u8* q_base = static_cast<const u8*>(p.q);
  const u8* k_base = static_cast<const u8*>(p.k) + (i64(b) * p.k_stride[0] + i64(h_kv) * p.k_stride[1]) * kEB;
  const u8* v_base = static_cast<const u8*>(p.v) + (i64(b) * p.v_stride[0] + i64(h_kv) * p.v_stride[1]) * kEB;

  auto load_kv = [&](int kt, int stage) {
    constexpr int kChunksK = kDqk * kEB / 16, kChunksV = kDv * kEB / 16;
    u8* dk = sK + stage * kTileKv * kRowK;
    u8* dv = sV + stage * kTileKv * kRowV;
    for (int c = tid; c < kTileKv * kChunksK; c += kThreads) {
      const int r = c / kChunksK, col = c % kChunksK, j = kt * kTileKv + r;
      const bool ok = j < kv_limit;
      cp_async_16(dk + r * kRowK + col * 16, k_base + (ok ? i64(j) * p.k_stride[2] * kEB + col * 16 : 0), ok);
    }
    for (int c = tid; c < kTileKv * kChunksV; c += kThreads) {
      const int r = c / kChunksV, col = c % kChunksV, j = kt * kTileKv + r;
      // Rows past the valid keys are zero-filled: P is 0 there, and 0 * (NaN garbage) would still be NaN.
      const bool ok = j < kv_limit;
      cp_async_16(dv + r * kRowV + col * 16, v_base + (ok ? i64(j) * p.v_stride[2] * kEB + col * 16 : 0), ok);
    }
  };

  // Q tile, then the first K/V tile, in one cp.async group.
  {
    constexpr int kChunksQ = kDqk * kEB / 16;
    for (int c = tid; c < kTileQ * kChunksQ; c += kThreads) {
      const int r = c / kChunksQ, col = c % kChunksQ, pr = row0 + r;
      const bool ok = pr < p.packed_rows;
      const int i = ok ? pr / p.group : 0, h = h_kv * p.group + (ok ? pr % p.group : 0);
      const u8* src = q_base + (i64(b) * p.q_stride[0] + i64(h) * p.q_stride[1] + i64(i) * p.q_stride[2]) * kEB;
      cp_async_16(sQ + r * kRowQ + col * 16, ok ? src + col * 16 : q_base, ok);
    }
  }
  if (kt_begin < kt_end) load_kv(kt_begin, 0);
  cp_async_commit();

  float scale_log2 = p.attn_scale * kLog2e;
  if constexpr (T::kFp8 && !kMx) scale_log2 *= p.descale_q[0] * p.descale_k[0];

  // MXFP8: this thread's two rows' Q scales, one per k step (0 for a row past the end).
  float q_scale[2][kMx ? kKSteps : 1];
  if constexpr (kMx) {
    for (int r = 0; r < 2; ++r) {
      const u8* plane = p.sf_q + (i64(b) * p.H_q + row_h[r]) * p.sf_q_rows * p.sf_q_cols;
      for (int kk = 0; kk < kKSteps; ++kk)
        q_scale[r][kk] = row_exists[r] ? rime_bs::ue8m0_value(plane[rime_bs::f8_128x4_offset(row_i[r], kk, p.sf_q_cols)]) : 0.f;
    }
  }
  const u8* sf_k_plane = kMx ? p.sf_k + (i64(b) * p.H_kv + h_kv) * p.sf_k_rows * p.sf_k_cols : nullptr;
  const u8* sf_v_plane = kMx ? p.sf_v + (i64(b) * p.H_kv + h_kv) * p.sf_v_rows * p.sf_v_cols : nullptr;

  float o_acc[kDT][4];
  for (int d = 0; d < kDT; ++d)
    for (int e = 0; e < 4; ++e) o_acc[d][e] = 0.f;
  float m_run[2] = {neg_inf(), neg_inf()};  // running max of scores (log2 units)
  float l_run[2] = {0.f, 0.f};              // this thread's part of the row sum
  u32 q_frag[kQInRegs ? kKSteps : 1][4];

  const u8* warp_q = sQ + warp * 16 * kRowQ;
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    const int stage = (kt - kt_begin) & 1;
    if (kt + 1 < kt_end) {
      load_kv(kt + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (kQInRegs && kt == kt_begin) {
      for (int kk = 0; kk < kKSteps; ++kk)
        ldmatrix_x4(q_frag[kQInRegs ? kk : 0],
                    warp_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * kRowQ + kk * 32 + ((lane >> 4) & 1) * 16);
    }
    const u8* tk = sK + stage * kTileKv * kRowK;
    const u8* tv = sV + stage * kTileKv * kRowV;
    if constexpr (kMx) {
      // This tile's K and V scales; keys past S_kv (zero-filled K/V rows) get 0, never the pads of SF_K / SF_V.
      for (int n = tid; n < kTileKv * kKSteps; n += kThreads) {
        const int j = kt * kTileKv + n / kKSteps;
        sSk[n] = j < p.S_kv ? rime_bs::ue8m0_value(sf_k_plane[rime_bs::f8_128x4_offset(j, n % kKSteps, p.sf_k_cols)]) : 0.f;
      }
      for (int n = tid; n < kDv * kVBlocks; n += kThreads) {
        const int kvb = kt * kVBlocks + n % kVBlocks;
        sSv[n] = kvb * 32 < p.S_kv ? rime_bs::ue8m0_value(sf_v_plane[rime_bs::f8_128x4_offset(n / kVBlocks, kvb, p.sf_v_cols)])
                                   : 0.f;
      }
    }
    if constexpr (T::kFp8) {
      // Transpose the V tile into Vt (keys permuted, see the header comment), 4 keys x 4 columns per step.
      for (int blk = tid; blk < (kTileKv / 4) * (kDv / 4); blk += kThreads) {
        const int p0 = (blk % (kTileKv / 4)) * 4, d0 = (blk / (kTileKv / 4)) * 4;
        const int base = (p0 / 16) * 16, tq = (p0 % 16) / 4;
        u32 w[4];
        for (int i = 0; i < 4; ++i) {
          const int kv = base + 8 * (i >> 1) + 2 * tq + (i & 1);
          w[i] = *reinterpret_cast<const u32*>(tv + kv * kRowV + d0);
        }
        const u32 lo01 = __byte_perm(w[0], w[1], 0x5140), lo23 = __byte_perm(w[2], w[3], 0x5140);
        const u32 hi01 = __byte_perm(w[0], w[1], 0x7362), hi23 = __byte_perm(w[2], w[3], 0x7362);
        *reinterpret_cast<u32*>(sVt + (d0 + 0) * kRowVt + p0) = __byte_perm(lo01, lo23, 0x5410);
        *reinterpret_cast<u32*>(sVt + (d0 + 1) * kRowVt + p0) = __byte_perm(lo01, lo23, 0x7632);
        *reinterpret_cast<u32*>(sVt + (d0 + 2) * kRowVt + p0) = __byte_perm(hi01, hi23, 0x5410);
        *reinterpret_cast<u32*>(sVt + (d0 + 3) * kRowVt + p0) = __byte_perm(hi01, hi23, 0x7632);
      }
      __syncthreads();
    }

    // S = Q K^T for this warp's 16 rows and kTileKv keys.
    float s[kNT][4];
    for (int n = 0; n < kNT; ++n)
      for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
    for (int kk = 0; kk < kKSteps; ++kk) {
      u32 a_local[4];
      if constexpr (!kQInRegs)
        ldmatrix_x4(a_local, warp_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * kRowQ + kk * 32 + ((lane >> 4) & 1) * 16);
      const u32(&a)[4] = kQInRegs ? q_frag[kQInRegs ? kk : 0] : a_local;
      for (int jj = 0; jj < kNT / 2; ++jj) {
        u32 bk[4];
        ldmatrix_x4(bk, tk + (jj * 16 + (lane & 7) + ((lane >> 4) & 1) * 8) * kRowK + kk * 32 + ((lane >> 3) & 1) * 16);
        if constexpr (kMx) {
          // Two 8-key tiles at a time into zeroed partials (few live registers), then scaled and added.
          float part[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
          mma<kIn, kIn>(part[0], a, bk[0], bk[1]);
          mma<kIn, kIn>(part[1], a, bk[2], bk[3]);
          for (int u = 0; u < 2; ++u)
            for (int e = 0; e < 4; ++e) {
              const int n = 2 * jj + u;
              s[n][e] += part[u][e] * (q_scale[e / 2][kk] * sSk[(n * 8 + 2 * t + (e & 1)) * kKSteps + kk]);
            }
        } else {
          mma<kIn, kIn>(s[2 * jj], a, bk[0], bk[1]);
          mma<kIn, kIn>(s[2 * jj + 1], a, bk[2], bk[3]);
        }
      }
    }

    // Scale to log2 units and mask.
    const bool edge = kMask || kPadding || (kt + 1) * kTileKv > p.S_kv;
    for (int n = 0; n < kNT; ++n)
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, j = kt * kTileKv + n * 8 + 2 * t + (e & 1);
        float v = s[n][e] * scale_log2;
        if (edge && (j >= key_hi[r] || j < key_lo[r])) v = neg_inf();
        s[n][e] = v;
      }

    // Online softmax: rescale the running state to the new row max.
    for (int r = 0; r < 2; ++r) {
      float mx = neg_inf();
      for (int n = 0; n < kNT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(m_run[r], mx);
      const float m_use = m_new == neg_inf() ? 0.f : m_new;  // all keys masked so far: keep exp2 finite
      const float alpha = exp2_approx(m_run[r] - m_use);
      m_run[r] = m_new;
      float sum = 0.f;
      for (int n = 0; n < kNT; ++n)
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[n][e] = exp2_approx(s[n][e] - m_use);
          sum += s[n][e];
        }
      l_run[r] = l_run[r] * alpha + sum;
      for (int d = 0; d < kDT; ++d) {
        o_acc[d][2 * r] *= alpha;
        o_acc[d][2 * r + 1] *= alpha;
      }
    }

    // O += P V
    if constexpr (T::kFp8) {
      for (int c = 0; c < kTileKv / 32; ++c) {
        u32 a[4];
        auto q8 = [&](int n, int e) { return u32(pack2_fp8<RIME_T_E4M3>(s[n][e] * kPScale, s[n][e + 1] * kPScale)); };
        a[0] = q8(4 * c, 0) | (q8(4 * c + 1, 0) << 16);
        a[1] = q8(4 * c, 2) | (q8(4 * c + 1, 2) << 16);
        a[2] = q8(4 * c + 2, 0) | (q8(4 * c + 3, 0) << 16);
        a[3] = q8(4 * c + 2, 2) | (q8(4 * c + 3, 2) << 16);
        for (int d = 0; d < kDT; ++d) {
          const u8* vrow = sVt + (d * 8 + g) * kRowVt + c * 32 + t * 4;
          const u32 b0 = *reinterpret_cast<const u32*>(vrow), b1 = *reinterpret_cast<const u32*>(vrow + 16);
          if constexpr (kMx) {
            float part[4] = {0.f, 0.f, 0.f, 0.f};
            mma<RIME_T_E4M3, kIn>(part, a, b0, b1);
            const float s0 = sSv[(d * 8 + 2 * t) * kVBlocks + c], s1 = sSv[(d * 8 + 2 * t + 1) * kVBlocks + c];
            o_acc[d][0] += part[0] * s0;
            o_acc[d][1] += part[1] * s1;
            o_acc[d][2] += part[2] * s0;
            o_acc[d][3] += part[3] * s1;
          } else {
            mma<RIME_T_E4M3, kIn>(o_acc[d], a, b0, b1);
          }
        }
      }
    } else {
      for (int c = 0; c < kTileKv / 16; ++c) {
        u32 a[4];
        a[0] = pack2<kIn>(s[2 * c][0], s[2 * c][1]);
        a[1] = pack2<kIn>(s[2 * c][2], s[2 * c][3]);
        a[2] = pack2<kIn>(s[2 * c + 1][0], s[2 * c + 1][1]);
        a[3] = pack2<kIn>(s[2 * c + 1][2], s[2 * c + 1][3]);
        for (int dd = 0; dd < kDT / 2; ++dd) {
          u32 bv[4];
          ldmatrix_x4_trans(bv, tv + (c * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRowV +
                                    (dd * 16 + ((lane >> 4) & 1) * 8) * kEB);
          mma<kIn, kIn>(o_acc[2 * dd], a, bv[0], bv[1]);
          mma<kIn, kIn>(o_acc[2 * dd + 1], a, bv[2], bv[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this stage
  }
  cp_async_wait<0>();

  // Epilogue. Row state: m (log2), l (summed over the quad).
  constexpr int kBlock = OutFormat<kOut>::kBlock;  // block-scaled O: scales per kBlock columns
  float descale_v = 1.f;
  if constexpr (T::kFp8) descale_v = (kMx ? 1.f : p.descale_v[0]) / kPScale;
  float scale_o = 1.f;
  if constexpr (!kSplit && (kFeatures & RIME_F_SCALE_O) != 0) scale_o = p.scale_o[0];
  float amax_o = 0.f, amax_s = 0.f;
  // The two rows of this thread, one at a time. The row is a compile-time slot (a template tag): a runtime
  // index into o_acc, m_run or l_run would move them to local memory for the whole kernel, main loop included,
  // and a row loop is too large for the compiler to unroll once the block-scaled epilogue is in it.
  auto finish_row = [&](auto slot_tag) {
    constexpr int slot = decltype(slot_tag)::value;
    float l = quad_sum(l_run[slot]);
    float m = m_run[slot];
    float row_max = m;  // max score without the sink, for Amax_S
    if constexpr (kSink) {
      const float sink = p.sink[row_h[slot]] * kLog2e;
      const float m_f = fmaxf(m, sink);
      const float alpha = exp2_approx(m - m_f);  // m = -inf (no live key) gives 0
      l = l * alpha + exp2_approx(sink - m_f);
      for (int d = 0; d < kDT; ++d) {
        o_acc[d][2 * slot] *= alpha;
        o_acc[d][2 * slot + 1] *= alpha;
      }
      m = m_f;
    }
    const bool live = row_live[slot] && l > 0.f;
    const float inv = live ? descale_v / l : 0.f;
    // Natural-log LSE; -inf for a row with no live key (or a padded row).
    const float lse = live ? (p.stats_log2 && !kSplit ? m + __log2f(l) : m * kLn2 + __logf(l)) : neg_inf();
    if (live && (kFeatures & RIME_F_AMAX_S) && row_max != neg_inf())
      amax_s = fmaxf(amax_s, exp2_approx(row_max - m) / l);
    const int i = row_i[slot], h = row_h[slot];
    if constexpr (kSplit) {
      if (!row_exists[slot]) return;
      const i64 prow = ((i64(split) * p.B + b) * p.H_q + h) * p.S_q + i;
      float* dst = p.o_partial + prow * kDv;
      for (int d = 0; d < kDT; ++d) {
        float2 v;
        v.x = o_acc[d][2 * slot] * inv;
        v.y = o_acc[d][2 * slot + 1] * inv;
        *reinterpret_cast<float2*>(dst + d * 8 + 2 * t) = v;
      }
      if (t == 0) p.lse_partial[prow] = lse;
      return;
    }
    const i64 orow = i64(b) * p.o_stride[0] + i64(h) * p.o_stride[1] + i64(i) * p.o_stride[2];
    if constexpr (kBlock > 0) {
      // A block of kBlock columns is kBlock / 8 accumulator tiles of the 4 threads of a quad (2 columns each):
      // its amax is a quad reduction, which every lane joins (row_exists only guards the stores). Two passes
      // over the block's accumulators (amax, then quantize) keep no copies of them live.
      constexpr int kTiles = kBlock / 8;
      const float to_o = inv * scale_o;
      const rime_bs::SfRow sf_row = rime_bs::sf_o_row(p.sf_layout, p.H_q, p.sf_rows, p.sf_cols, b, h, i);
#pragma unroll
      for (int blk = 0; blk < kDv / kBlock; ++blk) {
        float amax_blk = 0.f;
#pragma unroll
        for (int u = 0; u < kTiles; ++u)
#pragma unroll
          for (int e = 0; e < 2; ++e) amax_blk = fmaxf(amax_blk, fabsf(o_acc[blk * kTiles + u][2 * slot + e]));
        // Amax_O is pre-scale (inv >= 0, so |o * inv| = |o| * inv).
        if (row_exists[slot]) amax_o = fmaxf(amax_o, amax_blk * inv);
        amax_blk = quad_max(amax_blk * to_o);
        u32 sf;
        float q_inv;
        block_scale<kOut>(amax_blk, sf, q_inv);
        if (row_exists[slot]) {
#pragma unroll
          for (int u = 0; u < kTiles; ++u)
            store_block_pair<kOut>(p.o, orow + (blk * kTiles + u) * 8 + 2 * t, o_acc[blk * kTiles + u][2 * slot] * to_o,
                                   o_acc[blk * kTiles + u][2 * slot + 1] * to_o, q_inv);
          if (t == 0) p.sf_o[sf_row.base + rime_bs::f8_128x4_col_part(sf_row.col0 + blk)] = u8(sf);
        }
      }
      // Columns of sf_o past the last block (C is rounded up to 4) read zero.
      if (row_exists[slot] && t == 0)
        for (int c = kDv / kBlock; c < p.sf_cols; ++c) p.sf_o[sf_row.base + rime_bs::f8_128x4_col_part(sf_row.col0 + c)] = 0;
    } else {
      if (!row_exists[slot]) return;
      for (int d = 0; d < kDT; ++d) {
        const float x = o_acc[d][2 * slot] * inv, y = o_acc[d][2 * slot + 1] * inv;
        amax_o = fmaxf(amax_o, fmaxf(fabsf(x), fabsf(y)));
        store_pair<kOut>(p.o, orow + d * 8 + 2 * t, x * scale_o, y * scale_o);
      }
    }
    if ((kFeatures & RIME_F_STATS) && t == 0 && row_exists[slot])
      p.stats[i64(b) * p.stats_stride[0] + i64(h) * p.stats_stride[1] + i64(i) * p.stats_stride[2]] = lse;
    };
  finish_row(Slot<0>{});
  finish_row(Slot<1>{});
  if constexpr (!kSplit && kBlock > 0) {
    // Per-(b,h) planes: the last row tile of each (batch, kv head) zeroes the pad rows of its q heads.
    if (p.sf_layout == 0 && q_tile == gridDim.x - 1)
      zero_sf_pad_rows(p.sf_o, p.H_q, p.sf_rows, p.sf_cols, p.S_q, b, h_kv * p.group, p.group, tid, kThreads);
  }
  if constexpr (!kSplit && (kFeatures & RIME_F_AMAX_O) != 0) {
    amax_o = warp_max(amax_o);
    if (lane == 0) atomic_max_nonneg(p.amax_o, amax_o);
  }
  if constexpr ((kFeatures & RIME_F_AMAX_S) != 0) {
    amax_s = warp_max(amax_s);
    if (lane == 0) atomic_max_nonneg(p.amax_s, amax_s);
  }
}

}  // namespace rime_dev
