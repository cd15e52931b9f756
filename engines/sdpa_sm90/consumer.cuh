// sdpa_sm90: a consumer warpgroup, 64 query rows. Per KV tile j it issues S(j) = Q K_j^T and, in the same batch,
// O += P(j-1) V_{j-1}; waits for S(j), masks it and runs the online softmax, waits for P.V, rescales O and packs
// P(j). (ptxas schedules the wait for P.V near the top of the softmax's block, so the exponentials do not overlap
// this consumer's own P.V; holding the wait below them measured slower: docs/perf-history.md, "Why a consumer's P.V
// does not overlap its own softmax".) Two or three consumers take turns issuing, 0, 1, (2,) 0, ... (a named barrier
// per consumer's turn, ping-pong), so that one's
// softmax runs while another's wgmmas use the tensor cores; one consumer takes no turns (the SM's other CTA is its
// partner at the tensor cores). Of three consumers, one whose own rows need fewer of the CTA's KV tiles (none: rows
// past the end; causal: keys past its rows' diagonal) takes ghost turns past them: its place in the ring and its
// barrier arrivals, no work. The epilogue (normalisation, sink, Stats, Amax, every O format, split partials) is
// common/attention.cuh's.
#pragma once

#include "sdpa_sm90/mask.cuh"
#include "sdpa_sm90/mma.cuh"
#include "sdpa_sm90/pipeline.cuh"
#include "sdpa_sm90/softmax.cuh"
#include "sdpa_sm90/tile_scheduler.cuh"

namespace rime_dev {
namespace sm90 {

// A consumer thread's place: consumer cw (0 .. kC - 1), thread ctid of its warpgroup, its warp and lane, the
// accumulator fragment's row group g and column pair t, its turn's named barrier and the next consumer's, and its
// Q rows in shared memory.
struct ConsumerThread {
  int cw, ctid, warp, lane, g, t, my_bar, next_bar;
  u8* sQw;
};

// The element offset of packed row pr of a (batch, kv head)'s Q, and whether the row exists. Ragged Q: rows past
// the sequence's length are other sequences' tokens, or past the tensor's end. A masked grid's first row tile
// starts at a negative row (grid_work).
template <class Cfg>
__device__ __forceinline__ i64 q_row_offset(const SdpaParams& p, const BatchExtent& ext, int b, int h_kv, int pr,
                                            bool& ok) {
  int rem;
  const int pi = div_by(p.group_div, max(pr, 0), rem);
  ok = (!Cfg::kMask || pr >= 0) && pr < p.packed_rows &&
       ((Cfg::kFeatures & RIME_F_RAGGED_Q) == 0 || pi < ext.seq_q);
  const int i = ok ? pi : 0, h = h_kv * p.group + (ok ? rem : 0);
  return i64(b) * p.q_stride[0] + i64(h) * p.q_stride[1] + i64(q_token<Cfg::kFeatures>(p, ext.q_tok0, i)) * p.q_stride[2];
}

// This thread's part of the warpgroup's 64 Q rows, cp.async into sub-tiles [kSubs][64][kRow], swizzled like the
// TMA tiles, in one group of its own (wait_q waits for it).
template <class Cfg>
__device__ __forceinline__ void issue_q(const SdpaParams& p, const Work& w, u8* sQw, int cw, int ctid) {
  constexpr int kDqk = Cfg::kDqk, kEB = Cfg::kEB, kRow = Cfg::kRow;
  const u8* q_base = static_cast<const u8*>(p.q);
  constexpr int kChunks = kDqk * kEB / 16;
  const int b = w.b, h_kv = w.h_kv, row0 = w.row0;
  const BatchExtent& ext = w.ext;
  for (int c = ctid; c < 64 * kChunks; c += 128) {
    const int r = c / kChunks, ch = c % kChunks;
    bool ok;
    const u8* src = q_base + q_row_offset<Cfg>(p, ext, b, h_kv, row0 + cw * 64 + r, ok) * kEB;
    const int byte = ch * 16;
    cp_async_16(sQw + (byte / kRow) * (64 * kRow) + swz<kRow>(r, byte % kRow), ok ? src + byte : q_base, ok);
  }
  cp_async_commit();
}

// The warpgroup's Q rows have landed (every thread's issue_q) and are visible to its wgmmas.
template <class Cfg>
__device__ __forceinline__ void wait_q(int cw) {
  cp_async_wait<0>();
  fence_proxy_async_shared();
  named_sync(Cfg::kOwnBar + cw, 128);
}

// A 16-bit Q over FP8 K/V on the FP8 kernel (Config::kQ16): this warpgroup's 64 Q rows, each on a power-of-two
// scale 2^e (its largest magnitude times 2^e in (224, 448]), split into two E4M3 terms: hi = e4m3(q 2^e) into
// shared memory as an FP8 Q lands, lo = e4m3(q 2^e - hi) into registers as the A fragments of Q.K^T's k steps
// (q_lo[step]: rows g and g + 8 of the thread's warp, positions 4t .. 4t + 3 and 16 + 4t .. 19 + 4t of the step,
// the layout pack_p_fp8 writes). hi + lo holds q 2^e to about 2^-8 of its magnitude (each E4M3 term keeps 4
// significant bits), where one term would keep 2^-4. row_factor: 2^-e of the thread's two rows, which their
// scores take back. A thread reads exactly the values of its own fragments, so a row's scale is a quad's max.
// Config::kQRounded (q_quantization e4m3_per_row): hi alone, the rounding the graph asks for (the CPU reference
// rounds each row the same way); q_lo is not written.
template <class Cfg>
__device__ __forceinline__ void load_q_split(const SdpaParams& p, const Work& w, u8* sQw, int cw, int ctid,
                                             u32 (&q_lo)[Cfg::kQSplit ? Cfg::kKSteps : 1][4],
                                             float (&row_factor)[2]) {
  constexpr int kKSteps = Cfg::kKSteps, kRow = Cfg::kRow, kQType = Cfg::kQType;
  const int warp = ctid / 32, lane = ctid % 32, g = lane / 4, t = lane % 4;
  auto value = [](u32 pair, int half) {  // one of the two 16-bit values of a pair, exactly
    if constexpr (kQType == RIME_T_BF16) return __uint_as_float(half ? pair & 0xFFFF0000u : pair << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(static_cast<u16>(half ? pair >> 16 : pair & 0xFFFFu)));
    return f;
  };
  // [row g, g + 8][k step][positions 4t.. / 16 + 4t..][two pairs of values], held between the two passes for the
  // split; the rounded Q reads its values again instead (in L1): holding them, 32 registers at D 128, the
  // three-consumer causal kernel spilled 88 bytes, reading again 44 (ptxas 13.0; the FP8 Q's kernel spills 12).
  constexpr bool kHold = Cfg::kQSplit;
  u32 raw[kHold ? 2 : 1][kHold ? kKSteps : 1][2][2];
  auto row_src = [&](int r, bool& ok) {
    return static_cast<const u8*>(p.q) +
           q_row_offset<Cfg>(p, w.ext, w.b, w.h_kv, w.row0 + cw * 64 + warp * 16 + g + 8 * r, ok) * 2;
  };
  float amax[2] = {0.f, 0.f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    bool ok;
    const u8* src = row_src(r, ok);
#pragma unroll
    for (int step = 0; step < kKSteps; ++step)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint2 v = ok ? *reinterpret_cast<const uint2*>(src + (32 * step + 16 * half + 4 * t) * 2) : make_uint2(0, 0);
        if constexpr (kHold) {
          raw[r][step][half][0] = v.x;
          raw[r][step][half][1] = v.y;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) amax[r] = fmaxf(amax[r], fabsf(value(e < 2 ? v.x : v.y, e % 2)));
      }
  }
  if constexpr (!kHold) asm volatile("" ::: "memory");  // the second pass loads again, not the first's values
  float mul[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    amax[r] = fmaxf(amax[r], __shfl_xor_sync(0xffffffffu, amax[r], 1));
    amax[r] = fmaxf(amax[r], __shfl_xor_sync(0xffffffffu, amax[r], 2));
    int e = 0;
    if (amax[r] > 0.f && amax[r] <= 3.0e38f) {  // a row of zeros (or one that does not exist) keeps 2^0
      int ex;
      frexpf(448.f / amax[r], &ex);  // 448 / amax = m 2^ex, m in [0.5, 1): amax 2^(ex - 1) in (224, 448]
      e = min(max(ex - 1, -126), 126);
    }
    mul[r] = __int_as_float((127 + e) << 23);
    row_factor[r] = __int_as_float((127 - e) << 23);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    [[maybe_unused]] bool ok = false;
    [[maybe_unused]] const u8* src = nullptr;
    if constexpr (!kHold) src = row_src(r, ok);
#pragma unroll
    for (int step = 0; step < kKSteps; ++step)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        u32 hi = 0, lo = 0;
        [[maybe_unused]] uint2 v;
        if constexpr (!kHold)
          v = ok ? *reinterpret_cast<const uint2*>(src + (32 * step + 16 * half + 4 * t) * 2) : make_uint2(0, 0);
#pragma unroll
        for (int pr = 0; pr < 2; ++pr) {
          u32 pair;
          if constexpr (kHold) pair = raw[r][step][half][pr];
          else pair = pr ? v.y : v.x;
          const float x0 = value(pair, 0) * mul[r], x1 = value(pair, 1) * mul[r];
          const u16 h = pack2_fp8<RIME_T_E4M3>(x0, x1);
          float h0, h1;
          unpack2_e4m3(h, h0, h1);
          hi |= u32(h) << (16 * pr);
          if constexpr (Cfg::kQSplit) lo |= u32(pack2_fp8<RIME_T_E4M3>(x0 - h0, x1 - h1)) << (16 * pr);
        }
        const int row = warp * 16 + g + 8 * r, byte = 32 * step + 16 * half + 4 * t;
        *reinterpret_cast<u32*>(sQw + (byte / kRow) * (64 * kRow) + swz<kRow>(row, byte % kRow)) = hi;
        if constexpr (Cfg::kQSplit) q_lo[step][2 * half + r] = lo;
      }
  }
  fence_proxy_async_shared();  // generic-proxy writes, then the wgmmas' reads
  named_sync(Cfg::kOwnBar + cw, 128);
}

// One piece of work: the main loop over its KV tiles, the ghost turns, the epilogue.
// Dynamic row tiles: k, the work's ordinal in the CTA; q_issued, whether this thread already issued its part of the
// work's Q (the previous work's prefetch_next_q).
template <class Cfg>
__device__ __forceinline__ void consume_work(const SdpaSm90Params& params, const Tiles& tiles, const Ring& ring,
                                             const ConsumerThread& me, const Work& w, DynamicSlots* dyn, int k,
                                             bool& q_issued) {
  constexpr int kIn = Cfg::kIn, kOut = Cfg::kOut, kDqk = Cfg::kDqk, kDv = Cfg::kDv, kFeatures = Cfg::kFeatures;
  constexpr int kC = Cfg::kC, kN = Cfg::kN, kNT = Cfg::kNT, kDT = Cfg::kDT, kRow = Cfg::kRow;
  constexpr int kKSteps = Cfg::kKSteps, kVtRows = Cfg::kVtRows, kTurnBar = Cfg::kTurnBar, kOwnBar = Cfg::kOwnBar;
  constexpr bool kFp8 = Cfg::kFp8, kMask = Cfg::kMask, kPadding = Cfg::kPadding, kMmaSums = Cfg::kMmaSums;
  constexpr bool kBalanced = Cfg::kBalanced, kUnsignedRing = Cfg::kUnsignedRing;
  constexpr int kStages = Cfg::kStages;
  constexpr rime_sm90::Smem kSmem = Cfg::kSmem;
  const SdpaParams& p = params.p;
  u8* const smem = tiles.base;
  u8* const sK = tiles.k;
  u8* const sV = tiles.v;
  u8* const sVt = tiles.vt;
  u64* const k_ready = ring.k_ready;  // K landed (widened, for FP8 K/V under a 16-bit Q)
  u64* const k_empty = ring.k_empty;
  u64* const pv_ready = ring.pv_ready;
  u64* const pv_empty = ring.pv_empty;
  const int cw = me.cw, ctid = me.ctid, warp = me.warp, lane = me.lane, g = me.g, t = me.t;
  const int my_bar = me.my_bar, next_bar = me.next_bar;
  u8* const sQw = me.sQw;
  const int b = w.b, h_kv = w.h_kv, split = w.split, q_tile = w.q_tile, kt_begin = w.kt_begin, n_tiles = w.n_tiles;
  const int row0 = w.row0;
  const BatchExtent& ext = w.ext;
  auto stage_of = [&](int j) {
    return kUnsignedRing ? int(unsigned(w.base + j) % kStages) : (w.base + j) % kStages;
  };
  auto phase_of = [&](int j) {
    return kUnsignedRing ? unsigned(w.base + j) / kStages & 1u : unsigned((w.base + j) / kStages) & 1u;
  };
  constexpr bool kQ16 = Cfg::kQ16, kQSplit = Cfg::kQSplit;
  u32 q_lo[kQSplit ? kKSteps : 1][4];  // kQSplit: Q's second E4M3 term, as A fragments (load_q_split)
  float q_row_factor[2] = {1.f, 1.f};
  if constexpr (kQ16) {
    load_q_split<Cfg>(p, w, sQw, cw, ctid, q_lo, q_row_factor);
  } else {
    if (!q_issued) issue_q<Cfg>(p, w, sQw, cw, ctid);
    wait_q<Cfg>(cw);
  }
  q_issued = false;
  // Dynamic row tiles: this thread's part of the next work's Q, issued once this consumer's last Q.K^T is done, so
  // that the load runs under this work's last P.V and epilogue instead of before the next work's first Q.K^T. It
  // waits for the producer to take the next index, which it does after issuing this work's last loads: a consumer
  // with ghost tiles (below) must first release them, so it prefetches after its ghost turns.
  // 16-bit kernels only: on the H200, B64 S512 causal BF16 ran 0.968x the time and BF16 4k causal 0.995x-1.003x;
  // the FP8 D 128 causal kernel ran 1.020x, its live range across the last P.V spilling 12-20 bytes.
  auto prefetch_next_q = [&]() {
    if constexpr (Cfg::kDynamic && !kFp8) {
      const int launch = launch_of(*dyn, k + 1);
      if (launch < dynamic_work_count(p, Cfg::kTileQ)) {
        issue_q<Cfg>(p, grid_work_of<Cfg>(p, launch), sQw, cw, ctid);
        q_issued = true;
      }
    }
  };

  float scale_log2 = p.attn_scale * kLog2e;
  if constexpr (kFp8 || Cfg::kWidenKv)
    scale_log2 *= descale_at(p.descale_q, p.descale_q_stride, b, h_kv) * descale_at(p.descale_k, p.descale_k_stride, b, h_kv);
  const ThreadRows rows = thread_rows<kMask, (kFeatures & RIME_F_RAGGED_Q) != 0>(p, ext, row0 + cw * 64 + warp * 16 + g, h_kv);
  // Soft-capping's factors (softmax below): the scaled score over c, and c in log2 units.
  const float cap_in = (kFeatures & RIME_F_SOFTCAP) != 0 ? scale_log2 / (kLog2e * p.logit_softcap) : 0.f;
  const float cap_out = (kFeatures & RIME_F_SOFTCAP) != 0 ? p.logit_softcap * kLog2e : 0.f;

  float o_acc[kDT][4];
  float s[kNT][4];
  zero_fragments(o_acc);
  zero_fragments(s);
  float m_run[2] = {kNoKeyMax, kNoKeyMax};
  float l_run[2] = {0.f, 0.f};
  // kMmaSums: P.V's 8 columns of row sums (row g: 0, 1; row g + 8: 2, 3), one tile's at a time. They are moved
  // into l_run (fp32 adds) and cleared after every P.V: accumulated over a whole row inside the FP8 wgmma, whose
  // accumulation keeps far fewer bits than fp32, the positive sum lost its small late terms (B1 S16384: O rel L2
  // 0.41 against main's 0.11 on the H200). Cleared by a multiply with an opaque zero: assigning 0.f made ptxas
  // serialize every wgmma (C7511, insufficient registers for the wgmma pipeline; 1.43x slower at S16384).
  float l_acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
  float opaque_zero;
  asm("mov.b32 %0, 0;\n" : "=f"(opaque_zero));
  constexpr int kPSteps = kFp8 ? kN / 32 : kN / 16;  // k steps of P.V
  u32 pa[kPSteps][4];                               // P of the previous tile, as wgmma A fragments

  // wgmma descriptors: built once, then moved by constant byte offsets (a descriptor's low 14 bits are the
  // address / 16, and every operand lies below 256 KB, so adding offset / 16 never carries out of the field).
  // Rebuilding each from its pointer cost ~10 uniform instructions per wgmma, and moving them was 1-3% faster on
  // every bench row (docs/perf-history.md, "Kernel versions: prediction and result", v8) except 16-bit D 64, where it
  // measured 8% slower in three A/B runs (ptxas then issues the wgmmas back to back; the SASS shows no other change):
  // that one keeps the per-wgmma form.
  constexpr bool kDescFromPointers = !kFp8 && kDqk == 64;
  const u64 q_desc = desc_k_major<kRow>(sQw);
  const u64 k_desc = desc_k_major<kRow>(sK);
  // FP8 V^T: sub-tiles of kVtRow-byte rows along the keys (256-key tiles: two of 128 bytes).
  constexpr int kVtRow = rime_sm90::row_bytes(kN);
  // 16-bit V: sub-tiles of kRowV-byte rows (kRowV / 2 d) along d, kN keys each.
  constexpr int kRowV = Cfg::kRowV;
  const u64 pv_desc = kFp8 ? desc_k_major<kVtRow>(sVt) : desc_n_major<kRowV>(sV, kN * kRowV);
  auto issue_qk = [&](int j) {
    const u64 k_stage = k_desc + u64(stage_of(j) * (kSmem.k_stage_bytes >> 4));
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      constexpr int kQSub = 64 * kRow, kKSub = kN * kRow;
      const int byte = kk * 32;
      const int q_off = (byte / kRow) * kQSub + byte % kRow, k_off = (byte / kRow) * kKSub + byte % kRow;
      if constexpr (kDescFromPointers)
        wgmma_qk<kIn, kN>(s, desc_k_major<kRow>(sQw + q_off),
                          desc_k_major<kRow>(sK + stage_of(j) * kSmem.k_stage_bytes + k_off), kk);
      else if constexpr (kQ16)
        wgmma_qk_hi<kIn, kN>(s, q_desc + u64(q_off >> 4), k_stage + u64(k_off >> 4), kk);
      else
        wgmma_qk<kIn, kN>(s, q_desc + u64(q_off >> 4), k_stage + u64(k_off >> 4), kk);
    }
    if constexpr (kQSplit) {  // + lo.K^T, into the same accumulator
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        constexpr int kKSub = kN * kRow;
        const int byte = kk * 32;
        wgmma_qk_lo<kIn, kN>(s, q_lo[kk], k_stage + u64(((byte / kRow) * kKSub + byte % kRow) >> 4));
      }
    }
  };
  auto issue_pv = [&](int j) {
    const int stage_bytes = kFp8 ? kSmem.vt_stage_bytes : kSmem.v_stage_bytes;
    const u64 v_stage = pv_desc + u64(stage_of(j) * (stage_bytes >> 4));
#pragma unroll
    for (int c = 0; c < kPSteps; ++c) {
      // FP8: V^T k-major, 32 keys (bytes) per k step, in sub-tile 32c / kVtRow; 16-bit: V N-major, 16 keys (rows
      // of kRowV bytes) per k step.
      constexpr int kStepBytes = kFp8 ? 32 : 16 * kRowV;
      const int off = kFp8 ? (c * 32 / kVtRow) * (kVtRows * kVtRow) + (c * 32) % kVtRow : c * kStepBytes;
      if constexpr (kMmaSums)
        wgmma_pv_sum<kIn, kDv>(o_acc, l_acc[0], pa[c], v_stage + u64(off >> 4));
      else if constexpr (kDescFromPointers)
        wgmma_pv<kIn, kDv>(o_acc, pa[c], desc_n_major<kRowV>(sV + stage_of(j) * stage_bytes + off, kN * kRowV));
      else
        wgmma_pv<kIn, kDv>(o_acc, pa[c], v_stage + u64(off >> 4));
    }
  };
  // The mask (mask.cuh) and the online softmax (softmax.cuh) of tile j. The running max moves only past a slack (online_softmax_raw), so that O's rescale, which ran in 66% of the FP8
  // D 128 tiles, is skipped on most: 8 (P up to 256) for 16-bit P; 1 for FP8, whose P then sits on kPScale / 2 so
  // that it stays within E4M3's 448. Not with Amax_S, whose epilogue takes m_run for the row's max. With the row
  // sums on the tensor cores (kMmaSums): FP8 prefill 2-7% faster, BF16 0-5% (H200, docs/perf-history.md, "Kernel
  // versions: prediction and result", v20).
  constexpr int kSlack = (kFeatures & RIME_F_AMAX_S) != 0 ? 0 : kFp8 ? 1 : 8;
  const float log2_p_scale = kFp8 ? kLog2PScale - float(kSlack) : 0.f;
  auto softmax = [&](int j, float (&alpha)[2]) {
    const int key0 = (kt_begin + j) * kN;
    // A 16-bit Q on the FP8 kernel: each row's power-of-two factor joins the row's scale (the exponent's FFMA, or
    // the cap's and a negative scale's multiply), not a multiply of every score on the softmax's pipe.
    float mul[2] = {scale_log2, scale_log2};
    if constexpr (kQ16) mul[0] *= q_row_factor[0], mul[1] *= q_row_factor[1];
    if constexpr ((kFeatures & RIME_F_SOFTCAP) != 0) {
      // Soft-capping (SPEC section 2): c tanh(s' / c) of the scaled score s' = s scale_log2 / log2(e), in log2 units:
      // an FMUL, a MUFU.TANH and an FMUL per score, before the mask and the max. (Leaving c log2(e) to the exponent's
      // FFMA, as the scale is, saves an FMUL but made ptxas spill 728 more bytes over the 104 specializations.)
      const float in[2] = {kQ16 ? cap_in * q_row_factor[0] : cap_in, kQ16 ? cap_in * q_row_factor[1] : cap_in};
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = cap_out * tanh_approx(s[n][e] * in[e / 2]);
      mul[0] = mul[1] = 1.f;
    } else if (!(scale_log2 > 0.f)) {  // attn_scale <= 0: the largest raw score is not the largest scaled one
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] *= mul[e / 2];
      mul[0] = mul[1] = 1.f;
    }
    mask_tile<kN>(s, rows, key0, t);
    online_softmax_raw<kNT, !kMmaSums, kSlack>(s, m_run, l_run, mul, log2_p_scale, alpha);
  };
  // O's rows times alpha, skipped when no row of the warp moved its max (alpha exactly 1: most tiles past the
  // first few of a long row).
  auto rescale = [&](const float (&alpha)[2]) {
    if constexpr (kMmaSums) {  // l_run (at the previous tile's max) + the finished P.V's sums, then at the new max
#pragma unroll
      for (int r = 0; r < 2; ++r) l_run[r] = (l_run[r] + l_acc[0][2 * r]) * alpha[r];
#pragma unroll
      for (int e = 0; e < 4; ++e) l_acc[0][e] *= opaque_zero;
    }
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) rescale_rows(o_acc, alpha);
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int c = 0; c < kPSteps; ++c) {
      if constexpr (kFp8) {
        pack_p_fp8<kNT, true>(s, c, pa[c]);
      } else {
        pa[c][0] = pack2<kIn>(s[2 * c][0], s[2 * c][1]);
        pa[c][1] = pack2<kIn>(s[2 * c][2], s[2 * c][3]);
        pa[c][2] = pack2<kIn>(s[2 * c + 1][0], s[2 * c + 1][1]);
        pa[c][3] = pack2<kIn>(s[2 * c + 1][2], s[2 * c + 1][3]);
      }
    }
  };
  auto release = [&](u64* bar) {
    if (lane == 0) mbar_arrive(bar);
  };

  // Three consumers: the KV tiles this consumer's own rows see, n_live (<= n_tiles, those of the CTA). Past them it
  // only keeps its turns and its arrivals on the ring's barriers (ghost turns, below): a consumer of the partial
  // row tile with no existing rows (0), and under a causal mask the first two consumers' tiles past their own
  // diagonal (their rows end 128 and 64 rows before the last consumer's: 2 and 1 tiles of 64 keys per CTA). The CTA
  // lasts as long as its longest consumer's chain, which runs faster beside fewer working consumers. Two consumers
  // keep their code (its SASS is sensitive: kTurnBar).
  int n_live = n_tiles;
  if constexpr (kC == 3) {
    const int c0 = row0 + cw * 64;
    int lo_c, hi_c;
    kv_tile_range<64, kN, kMask, false, kFeatures>(p, ext, c0, 0, lo_c, hi_c);
    n_live = c0 < p.packed_rows && c0 + 64 > 0 ? min(max(hi_c - kt_begin, 0), n_tiles) : 0;
  }
  // Consumer 0 goes first (one consumer takes no turns). Three consumers open the ring whether or not their last
  // has a live tile; one and two keep the code from before ghost turns (the same SASS).
  if constexpr (kC == 3) {
    // Dynamic row tiles: the last consumer opens consumer 0's turn once a CTA (at its first work with tiles) and
    // wakes it after every turn, its last included, so that consumer 0 starts the next row tile while the others
    // finish this one (0.975x -> 0.941x the time of one CTA a tile on the B64 S512 causal prefill, H100).
    if (n_tiles > 0 && cw == kC - 1 && (!Cfg::kDynamic || w.base == 0)) named_arrive(kTurnBar, 256);
  }
  if (kC == 3 ? n_live > 0 : n_tiles > 0) {
    if constexpr (kC == 2) {
      if (cw == kC - 1) named_arrive(kTurnBar, 256);
    }
    // Tile 0: S only.
    if constexpr (kC > 1) named_sync(my_bar, 256);
    mbar_wait(&k_ready[stage_of(0)], phase_of(0));
    wgmma_fence_all();
    issue_qk(0);
    wgmma_commit_group();
    if constexpr (kC > 1) named_arrive(next_bar, 256);
    wgmma_wait_group<0>();
    fence_operands(s);
    release(&k_empty[stage_of(0)]);
    {
      float alpha[2];
      softmax(0, alpha);  // O is still zero: no rescale
      pack_p();
    }
    for (int j = 1; j < n_live; ++j) {
      if constexpr (kC > 1) named_sync(my_bar, 256);
      mbar_wait(&k_ready[stage_of(j)], phase_of(j));
      wgmma_fence_all();
      issue_qk(j);
      wgmma_commit_group();
      mbar_wait(&pv_ready[stage_of(j - 1)], phase_of(j - 1));
      issue_pv(j - 1);
      wgmma_commit_group();
      if constexpr (kC > 1) named_arrive(next_bar, 256);
      wgmma_wait_group<1>();  // S(j) is done; P(j - 1).V still runs
      fence_operands(s);
      release(&k_empty[stage_of(j)]);
      float alpha[2];
      softmax(j, alpha);
      wgmma_wait_group<0>();
      fence_operands(o_acc);
      fence_operands(l_acc);
      release(&pv_empty[stage_of(j - 1)]);
      rescale(alpha);
      pack_p();
    }
    if (n_live == n_tiles) prefetch_next_q();
    // The last P.V.
    if constexpr (kC > 1) named_sync(my_bar, 256);
    mbar_wait(&pv_ready[stage_of(n_live - 1)], phase_of(n_live - 1));
    wgmma_fence_all();
    issue_pv(n_live - 1);
    wgmma_commit_group();
    // The last consumer's last turn has no successor to wake, except under dynamic row tiles (the next tile's
    // consumer 0). (Two consumers: the earlier kernel's test, which keeps its SASS identical; see kTurnBar.)
    if (kC > 1 && (kC == 2 ? cw == 0 : cw != kC - 1 || n_live < n_tiles || Cfg::kDynamic)) named_arrive(next_bar, 256);
    wgmma_wait_group<0>();
    fence_operands(o_acc);
    fence_operands(l_acc);
    release(&pv_empty[stage_of(n_live - 1)]);
  }
  if constexpr (kC == 3) {
    // Ghost turns: every consumer takes n_tiles + 1 turns (tile 0's, one per later tile, the last P.V's). The live
    // part took n_live + 1 of them (none when n_live = 0); each ghost tile takes one more, and a consumer with no
    // live tile also tile 0's. The ring's barriers count every consumer's arrival per tile: a ghost waits for the
    // tile to land (so that its arrival counts toward that tile's phase, not the stage's previous one) and arrives.
    if (n_live == 0 && n_tiles > 0) {
      named_sync(my_bar, 256);
      named_arrive(next_bar, 256);
    }
    for (int j = n_live; j < n_tiles; ++j) {
      named_sync(my_bar, 256);
      if (cw != kC - 1 || j + 1 < n_tiles || Cfg::kDynamic) named_arrive(next_bar, 256);
      mbar_wait(&k_ready[stage_of(j)], phase_of(j));
      release(&k_empty[stage_of(j)]);
      mbar_wait(&pv_ready[stage_of(j)], phase_of(j));
      release(&pv_empty[stage_of(j)]);
    }
  }
  if (n_live == 0 || n_live < n_tiles) prefetch_next_q();
  if constexpr (kMmaSums) {  // the last tile's sums (every column of the 8 holds its row's)
    l_run[0] += l_acc[0][0];
    l_run[1] += l_acc[0][2];
  }
  if constexpr (kFp8) {
    // P was summed and multiplied on kPScale / 2^kSlack (log2_p_scale); the epilogue removes kPScale from O (in its
    // descale_v) and from nothing else, so O takes the 2^kSlack back here and l all of it (exact powers of two).
    constexpr float kSlackFactor = float(1 << kSlack);
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] *= kSlackFactor / kPScale;
    if constexpr (kSlack > 0) {
#pragma unroll
      for (int d = 0; d < kDT; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) o_acc[d][e] *= kSlackFactor;
    }
  }

  void* stage = kSmem.staged_epilogue ? static_cast<void*>(smem + kSmem.stage + cw * kSmem.stage_bytes_per_consumer)
                                      : nullptr;
  const int n_q_tiles = Cfg::kDynamic ? (p.packed_rows + Cfg::kTileQ - 1) / Cfg::kTileQ : int(gridDim.x);
  attention_epilogue<kIn, kOut, kDv, kFeatures, kSmem.staged_epilogue ? 64 : 0, kMmaSums>(
      p, o_acc, m_run, l_run, rows, b, split, h_kv, cw == 0 && (kBalanced || q_tile == n_q_tiles - 1), ctid,
      128, stage, kOwnBar + cw);
}

// Warpgroups 1 .. kC of the CTA: take the registers the producer gave up (rime_sm90::consumer_regs), then compute
// every piece of the CTA's work for their rows.
template <class Cfg>
__device__ __forceinline__ void consumer(const SdpaSm90Params& params, const Tiles& tiles, const Ring& ring,
                                         const Work& grid_work, PieceList* piece_lists, int tid, int wg,
                                         DynamicSlots* dyn) {
  constexpr int kC = Cfg::kC, kTurnBar = Cfg::kTurnBar, kDqk = Cfg::kDqk, kEB = Cfg::kEB;
  if constexpr (rime_sm90::shares_registers(Cfg::kC, Cfg::kDv))
    setmaxnreg_inc<rime_sm90::consumer_regs(Cfg::kC, Cfg::kFp8, Cfg::kQSplit, Cfg::kDv)>();
  ConsumerThread me;
  me.cw = wg - 1;             // consumer 0 .. kC - 1
  me.ctid = tid - 128 * wg;  // thread within the consumer warpgroup
  me.warp = me.ctid / 32;
  me.lane = me.ctid % 32;
  me.g = me.lane / 4;
  me.t = me.lane % 4;
  // Ping-pong: named barrier kTurnBar + c is consumer c's turn, which consumer c - 1 (mod kC) opens after issuing.
  me.my_bar = kTurnBar + me.cw;
  me.next_bar = kC == 2 ? kTurnBar + 1 - me.cw : kTurnBar + (me.cw + 1) % kC;
  me.sQw = tiles.q + me.cw * 64 * kDqk * kEB;
  int tiles_run = 0, works_run = 0;
  bool q_issued = false;
  for_each_work<Cfg>(params.p, grid_work, piece_lists, tid, wg,
                     [&](const Work& w) {
                       consume_work<Cfg>(params, tiles, ring, me, w, dyn, works_run, q_issued);
                       if constexpr (Cfg::kDynamic) {
                         tiles_run += w.n_tiles;
                         ++works_run;
                       }
                     }, dyn);
  // Dynamic row tiles: consumer 0 takes the turn that the last consumer's last arrival opened, so that the turn
  // barrier ends the CTA balanced.
  if constexpr (Cfg::kDynamic) {
    if (me.cw == 0 && tiles_run > 0) named_sync(kTurnBar, 256);
  }
}

}  // namespace sm90
}  // namespace rime_dev
