// A plan for a K/V capacity executed over fewer keys (ExecuteOptions::kv_extent: a cache that grows a token a step
// keeps one plan): what execute checks of the extent, and the kernels' parameters it fills, which must be those of
// a plan made for the actual length and strides in every field that depends on them (no GPU: the parameter blocks
// are host data; fake addresses, never dereferenced).
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "catch.hpp"
#include "common/sdpa_params.hpp"
#include "engine.hpp"
#include "graph_builder.hpp"
#include "plan/bindings.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/plan.hpp"

using namespace rime;

namespace {

// A BF16 decode over a [B, H_kv, S_kv, D] cache (as transformers holds K and V), per-sequence key lengths,
// bottom-right causal; `stats`: with a Stats output (4-byte aligned, so its placement is checked 4 bytes at a time).
Graph decode(int64_t s_kv, bool stats = false) {
  Graph g("decode");
  test::TensorAdder add{g};
  const int64_t B = 2, H_q = 8, H_kv = 2, D = 128;
  SdpaOperands io;
  io.q = add("Q", {B, H_q, 1, D}, DataType::BF16);
  io.k = add("K", {B, H_kv, s_kv, D}, DataType::BF16);  // packed: a [B, H_kv, S_kv, D] cache
  io.v = add("V", {B, H_kv, s_kv, D}, DataType::BF16);
  io.o = add("O", {B, H_q, 1, D}, DataType::BF16, true);
  io.seq_len_q = add("seq_len_q", {B}, DataType::INT32);
  io.seq_len_kv = add("seq_len_kv", {B}, DataType::INT32);
  if (stats) io.stats = add("Stats", {B, H_q, 1, 1}, DataType::FP32, true);
  SdpaAttributes a;
  a.generate_stats = stats;
  a.causal = true;
  a.alignment = DiagonalAlignment::BottomRight;
  a.padding_mask = true;
  REQUIRE(g.sdpa(io, a, "attn").ok());
  return g;
}

struct Planned {
  Facts facts;
  Config config;
};

Planned planned(const Graph& g) {
  Result<Facts> f = analyze(g, DeviceDesc::h200());
  REQUIRE(f.ok());
  Result<Config> c = choose(f.value(), match(f.value()));
  REQUIRE(c.ok());
  return {f.value(), c.value()};
}

}  // namespace

TEST_CASE("a capacity plan's parameters over fewer keys are those of a plan for the actual length",
          "[plan][kv_extent]") {
  const int64_t capacity = 4096, length = 2311;
  const Planned cap = planned(decode(capacity));
  const Planned actual = planned(decode(length));
  const engines::RoleBuffers buffers{};
  const KvExtent kv{length, {2 * length * 128, length * 128, 128, 1}, {2 * length * 128, length * 128, 128, 1}};
  char* ws = reinterpret_cast<char*>(uintptr_t{1} << 40);
  const SdpaParams with = engines::sdpa_params(cap.facts, cap.config, engines::Bindings{buffers, ws, &kv});
  const SdpaParams want = engines::sdpa_params(actual.facts, actual.config, engines::Bindings{buffers, ws});
  CHECK(with.S_kv == want.S_kv);
  CHECK(with.diag_shift == want.diag_shift);
  for (int i = 0; i < 3; ++i) {
    CHECK(with.k_stride[i] == want.k_stride[i]);
    CHECK(with.v_stride[i] == want.v_stride[i]);
  }
  CHECK(with.S_q == want.S_q);
  CHECK(with.B == want.B);
  CHECK(with.H_kv == want.H_kv);
  // Without the extent the capacity plan reads its own S_kv and strides.
  const SdpaParams plain = engines::sdpa_params(cap.facts, cap.config, engines::Bindings{buffers, ws});
  CHECK(plain.S_kv == capacity);
  CHECK(plain.k_stride[1] == capacity * 128);
}

TEST_CASE("execute refuses a K/V extent the plan cannot read, naming the field", "[plan][kv_extent]") {
  const Planned p = planned(decode(1024));
  const std::array<int64_t, 4> dense = {2 * 100 * 128, 100 * 128, 128, 1};
  CHECK(check_kv_extent(p.facts, KvExtent{100, dense, dense}).ok());
  CHECK(check_kv_extent(p.facts, KvExtent{1024, {2 * 1024 * 128, 1024 * 128, 128, 1}, dense}).ok());
  // The edges of what is taken: one key; a zero stride (every batch reads one cache); a dim of one element, whose
  // stride is never stepped, need not be a multiple of 16 bytes.
  CHECK(check_kv_extent(p.facts, KvExtent{1, {2 * 128, 128, 128, 1}, {2 * 128, 128, 128, 1}}).ok());
  CHECK(check_kv_extent(p.facts, KvExtent{100, {0, 100 * 128, 128, 1}, dense}).ok());
  CHECK(check_kv_extent(p.facts, KvExtent{1, {2 * 128, 128, 7, 1}, {2 * 128, 128, 7, 1}}).ok());
  struct Case {
    KvExtent kv;
    const char* message;
  };
  const Case cases[] = {
      {{0, dense, dense}, "kv_extent: length 0 is outside [1, S_kv = 1024] (the graph's S_kv is the capacity)"},
      {{1025, dense, dense}, "kv_extent: length 1025 is outside [1, S_kv = 1024]"},
      {{100, {2 * 100 * 128, 100 * 128, 1, 100}, dense}, "kv_extent: K's D stride is 100; it must be 1"},
      {{100, dense, {2 * 100 * 128, 100 * 128 + 4, 128, 1}},
       "kv_extent: V's strides [25600, 12804, 128, 1] are not multiples of 16 bytes, which the plan's V were"},
      {{100, {-1, 100 * 128, 128, 1}, dense}, "kv_extent: K's strides [-1, 12800, 128, 1] hold a negative one"},
  };
  for (const Case& c : cases) {
    const Status s = check_kv_extent(p.facts, c.kv);
    INFO(s.message());
    CHECK(s.code() == StatusCode::InvalidArgument);
    CHECK(s.message().find(c.message) != std::string::npos);
  }
  // The spans execute checks for overlap are the extent's: a K of 100 keys ends where its 100th key does.
  std::unordered_map<int64_t, void*> buffers;
  uintptr_t next = uintptr_t{1} << 40;
  for (const TensorFacts& t : p.facts.tensors)
    if (t.bound) buffers[t.uid] = reinterpret_cast<void*>(next), next += uintptr_t{1} << 20;
  // O right after K's 100 keys of both batches: K's capacity span would overlap it, its extent's does not.
  const uintptr_t k_base = reinterpret_cast<uintptr_t>(buffers[p.facts.k().uid]);
  buffers[p.facts.o().uid] = reinterpret_cast<void*>(k_base + 2 * 2 * 100 * 128 * 2);
  CHECK(check_bindings(p.facts, buffers, nullptr, 0).code() == StatusCode::InvalidArgument);
  const KvExtent kv{100, dense, dense};
  CHECK(check_bindings(p.facts, buffers, nullptr, 0, &kv).ok());
}

TEST_CASE("under a K/V extent, K's and V's spans are each their own strides' to their last key", "[plan][kv_extent]") {
  const Planned p = planned(decode(1024, true));
  // K dense for its 100 keys, V left in the capacity's layout: 102400 and 812032 bytes from their bases to the
  // byte after their last key.
  const KvExtent kv{100, {2 * 100 * 128, 100 * 128, 128, 1}, {2 * 1024 * 128, 1024 * 128, 128, 1}};
  REQUIRE(check_kv_extent(p.facts, kv).ok());
  std::unordered_map<int64_t, void*> buffers;
  uintptr_t next = uintptr_t{1} << 40;
  for (const TensorFacts& t : p.facts.tensors)
    if (t.bound) buffers[t.uid] = reinterpret_cast<void*>(next), next += uintptr_t{1} << 20;
  REQUIRE(check_bindings(p.facts, buffers, nullptr, 0, &kv).ok());
  const uintptr_t k_base = reinterpret_cast<uintptr_t>(buffers[p.facts.k().uid]);
  const uintptr_t v_base = reinterpret_cast<uintptr_t>(buffers[p.facts.v().uid]);
  // Stats (an output, 4-byte aligned) right after each span is taken; 4 bytes earlier it overlaps the span's last
  // key.
  for (const auto& [name, end] : {std::pair{"K", k_base + 102400}, std::pair{"V", v_base + 812032}}) {
    INFO(name);
    auto placed = buffers;
    placed[p.facts.operand(Role::Stats).uid] = reinterpret_cast<void*>(end);
    CHECK(check_bindings(p.facts, placed, nullptr, 0, &kv).ok());
    placed[p.facts.operand(Role::Stats).uid] = reinterpret_cast<void*>(end - 4);
    const Status s = check_bindings(p.facts, placed, nullptr, 0, &kv);
    CHECK(s.message().find(fmt::format("the buffer of output Stats (uid {}) overlaps the buffer of {}",
                                       p.facts.operand(Role::Stats).uid, name)) != std::string::npos);
  }
}
