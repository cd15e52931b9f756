// The heuristics' oracle (issue 39): on a fixed grid of serving and prefill shapes, every configuration the rows
// allow (each row tile for the head dims, each split-KV count), timed on the GPU with the same inputs, beside the
// configuration the heuristics choose. Writes CSV rows that tools/bench/heuristics_report.py turns into
// docs/heuristics.md.
//
//   rime_oracle --list                          the shapes, a line each (fit or held out)
//   rime_oracle --dry-run [--arch A --sms N]    the candidates of every shape, planned without a GPU (no compile)
//   rime_oracle --commit SHA [--shapes I:J] [--iterations N] > oracle.csv      on a GPU: times them
//
// A candidate is a decision the rows accept when the graph pins (tile, split): tuning_candidates
// (include/rime/inspect/config.hpp), the list `rime tune` times. 100 shapes, about 1,700 candidates on the H200: `--shapes I:J` splits the run.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "plan/build_batch.hpp"
#include "rime/graph.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/rows.hpp"
#include "rime/plan.hpp"
#include "testing/trial.hpp"

using namespace rime;

namespace {

struct Shape {
  std::string name;
  std::string kind;  // decode, paged_decode, chunked_prefill, prefill
  DataType in = DataType::FP8_E4M3;
  int64_t B = 1, H_q = 32, H_kv = 8, S_q = 1, S_kv = 1024, D = 128;
  bool causal = true;  // bottom-right aligned
  int64_t page = 0;    // paged: keys per page (pools of B x S_kv / page pages), lengths drawn in [kv_lo, S_kv]
  int64_t kv_lo = 0;
  bool held_out = false;
};

std::string dtype_tag(DataType t) { return t == DataType::BF16 ? "bf16" : "fp8"; }

// Decode (one and four tokens, GQA 4 and 8, 1k-512k keys), paged decode, chunked prefill against long KV, full
// prefill (128-32k, D 64/128/256, causal or not). Every fourth shape is held out of any fit.
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  const DataType fp8 = DataType::FP8_E4M3, bf16 = DataType::BF16;
  const std::pair<int64_t, int64_t> decode_sizes[] = {{1, 8192},    {1, 131072}, {1, 524288}, {8, 4096}, {8, 32768},
                                                      {8, 131072}, {32, 8192},  {32, 32768}, {128, 1024}, {128, 8192}};
  for (DataType in : {fp8, bf16})
    for (const auto& [B, S_kv] : decode_sizes)
      for (int64_t group : {4, 8}) {
        Shape s;
        s.kind = "decode", s.in = in, s.B = B, s.H_kv = 8, s.H_q = 8 * group, s.S_q = 1, s.S_kv = S_kv;
        s.name = fmt::format("{}_decode_b{}_h{}g{}_skv{}", dtype_tag(in), B, s.H_q, group, S_kv);
        out.push_back(s);
      }
  for (const auto& [B, S_kv] : {std::pair<int64_t, int64_t>{1, 131072}, {8, 32768}, {32, 8192}, {128, 1024}}) {
    Shape s;
    s.kind = "decode", s.B = B, s.H_q = 32, s.S_q = 4, s.S_kv = S_kv;
    s.name = fmt::format("fp8_decode_q4_b{}_h32g4_skv{}", B, S_kv);
    out.push_back(s);
  }
  for (DataType in : {fp8, bf16})
    for (int64_t page : {16, 64})
      for (int64_t S_q : {1, 4}) {
        Shape s;
        s.kind = "paged_decode", s.in = in, s.B = 64, s.H_q = 32, s.S_q = S_q, s.S_kv = 32768, s.page = page,
        s.kv_lo = 1024;
        s.name = fmt::format("{}_paged_decode_b64_h32g4_p{}_q{}", dtype_tag(in), page, S_q);
        out.push_back(s);
      }
  for (DataType in : {fp8, bf16})
    for (int64_t S_q : {16, 64, 256, 1024})
      for (int64_t S_kv : {8192, 32768}) {
        if (in == bf16 && (S_q == 16 || S_q == 256)) continue;
        Shape s;
        s.kind = "chunked_prefill", s.in = in, s.B = 4, s.H_q = 32, s.S_q = S_q, s.S_kv = S_kv;
        s.name = fmt::format("{}_chunk_b4_h32g4_sq{}_skv{}", dtype_tag(in), S_q, S_kv);
        out.push_back(s);
      }
  for (int64_t S : {128, 512, 2048, 8192, 32768})
    for (int64_t D : {64, 128, 256})
      for (bool causal : {false, true}) {
        Shape s;
        s.kind = "prefill", s.B = std::max<int64_t>(1, 16384 / S), s.H_q = s.H_kv = D == 256 ? 16 : 32, s.S_q = S,
        s.S_kv = S, s.D = D, s.causal = causal;
        s.name = fmt::format("fp8_prefill_b{}_h{}_s{}_d{}{}", s.B, s.H_q, S, D, causal ? "_causal" : "");
        out.push_back(s);
      }
  for (int64_t S : {512, 4096, 16384})
    for (bool causal : {false, true}) {
      Shape s;
      s.kind = "prefill", s.in = bf16, s.B = std::max<int64_t>(1, 16384 / S), s.H_q = s.H_kv = 32, s.S_q = S,
      s.S_kv = S, s.causal = causal;
      s.name = fmt::format("bf16_prefill_b{}_h32_s{}_d128{}", s.B, S, causal ? "_causal" : "");
      out.push_back(s);
    }
  for (size_t i = 0; i < out.size(); ++i) out[i].held_out = i % 4 == 3;
  return out;
}

// The shape's graph (BHSD tensors; FP8 with per-tensor descales and a BF16 O), with the knobs pinned when given.
Graph graph_of(const Shape& s, std::optional<int> split, std::optional<TileShape> tile) {
  Graph g(s.name);
  int64_t uid = 0;
  auto add = [&](const char* name, std::vector<int64_t> dims, DataType t, bool output = false) {
    std::vector<int64_t> strides = TensorDesc::packed_strides(dims);
    return g.add_tensor({name, ++uid, std::move(dims), std::move(strides), t, output});
  };
  SdpaAttributes a;
  a.causal = s.causal;
  a.alignment = DiagonalAlignment::BottomRight;
  a.split_kv = split;
  a.tile = tile;
  const bool paged = s.page > 0;
  const int64_t pages = s.B * s.S_kv / std::max<int64_t>(1, s.page);
  const std::vector<int64_t> kv = paged ? std::vector<int64_t>{pages, s.H_kv, s.page, s.D}
                                        : std::vector<int64_t>{s.B, s.H_kv, s.S_kv, s.D};
  const int64_t q = add("Q", {s.B, s.H_q, s.S_q, s.D}, s.in), k = add("K", kv, s.in), v = add("V", kv, s.in);
  const int64_t o = add("O", {s.B, s.H_q, s.S_q, s.D}, DataType::BF16, true);
  std::optional<int64_t> lq, lkv, table;
  if (paged) {
    a.padding_mask = true;
    lq = add("seq_len_q", {s.B}, DataType::INT32);
    lkv = add("seq_len_kv", {s.B}, DataType::INT32);
    table = add("page_table", {s.B, s.S_kv / s.page}, DataType::INT32);
  }
  if (s.in == DataType::BF16) {
    SdpaOperands io;
    io.q = q, io.k = k, io.v = v, io.o = o, io.seq_len_q = lq, io.seq_len_kv = lkv, io.page_table = table;
    (void)g.sdpa(io, a, "attn");
  } else {
    SdpaFp8Operands io;
    io.q = q, io.k = k, io.v = v, io.o = o, io.seq_len_q = lq, io.seq_len_kv = lkv, io.page_table = table;
    io.descale_q = add("descale_q", {1, 1, 1, 1}, DataType::FP32);
    io.descale_k = add("descale_k", {1, 1, 1, 1}, DataType::FP32);
    io.descale_v = add("descale_v", {1, 1, 1, 1}, DataType::FP32);
    io.descale_s = add("descale_s", {1, 1, 1, 1}, DataType::FP32);
    io.scale_s = add("scale_s", {1, 1, 1, 1}, DataType::FP32);
    io.scale_o = add("scale_o", {1, 1, 1, 1}, DataType::FP32);
    (void)g.sdpa_fp8(io, a, "attn");
  }
  return g;
}

std::string describe(const Decision& d) {
  return fmt::format("{},{}x{},{},{}", d.row_id, d.tile.q, d.tile.kv, d.consumer_warpgroups, d.split_kv);
}

// Every decision the rows accept for the shape (tuning_candidates, what `rime tune` times).
Result<std::vector<Config>> candidates(const Shape& s, const DeviceDesc& device) {
  Result<Facts> f = analyze(graph_of(s, std::nullopt, std::nullopt), device);
  if (!f.ok()) return f.status();
  return tuning_candidates(f.value());
}

[[noreturn]] void usage(const std::string& why) {
  fmt::print(stderr, "rime_oracle: {}\nusage: rime_oracle --list | --dry-run [--arch A --sms N] | --commit SHA "
                     "[--shapes I:J] [--iterations N]\n",
             why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  bool list = false, dry = false;
  std::string arch = "sm_90a", commit;
  int sms = 132, iterations = 20;
  size_t first = 0, last = SIZE_MAX;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--list") list = true;
    else if (a == "--dry-run") dry = true;
    else if (a == "--arch") arch = value();
    else if (a == "--sms") sms = std::atoi(value().c_str());
    else if (a == "--commit") commit = value();
    else if (a == "--iterations") iterations = std::max(1, std::atoi(value().c_str()));
    else if (a == "--shapes") {
      const std::string r = value();
      const size_t colon = r.find(':');
      if (colon == std::string::npos) usage("--shapes takes I:J");
      first = std::stoul(r.substr(0, colon));
      last = std::stoul(r.substr(colon + 1));
    } else usage("unknown option " + a);
  }
  const std::vector<Shape> all = shapes();
  if (list) {
    for (size_t i = 0; i < all.size(); ++i)
      fmt::print("{:3} {} {} {}\n", i, all[i].held_out ? "held_out" : "fit     ", all[i].kind, all[i].name);
    return 0;
  }
  if (!dry && commit.empty()) usage("a timed run needs --commit (the tree's commit, kept in the CSV)");
  Result<DeviceDesc> planned = DeviceDesc::from_arch(arch, sms);
  if (!planned.ok()) usage(planned.status().message());
  if (dry) {
    // What each shape would time, planned for the given device: its candidates and the heuristics' decision.
    fmt::print("shape,set,kind,candidates,heuristic\n");
    size_t shapes_planned = 0, held_out = 0, total = 0;
    for (size_t i = first; i < std::min(last, all.size()); ++i) {
      const Shape& s = all[i];
      Result<Facts> f = analyze(graph_of(s, std::nullopt, std::nullopt), planned.value());
      Result<Config> h = f.ok() ? choose(f.value(), match(f.value())) : Result<Config>(f.status());
      Result<std::vector<Config>> c = candidates(s, planned.value());
      if (!h.ok() || !c.ok()) {
        fmt::print(stderr, "{}: {}\n", s.name, (!h.ok() ? h.status() : c.status()).to_string());
        return 1;
      }
      if (c->empty()) {
        fmt::print(stderr, "{}: no candidate\n", s.name);
        return 1;
      }
      fmt::print("{},{},{},{},{}\n", s.name, s.held_out ? "held_out" : "fit", s.kind, c->size(),
                 describe(h->decision));
      ++shapes_planned, held_out += s.held_out, total += c->size();
    }
    fmt::print(stderr, "{} shapes ({} held out), {} candidates, planned for {} with {} SMs\n", shapes_planned,
               held_out, total, planned->arch_name(), planned->sm_count);
    return 0;
  }
  // The timed run: the heuristics' plan first (it names the GPU the candidates are planned for), then each
  // candidate on the same inputs.
  fmt::print("device,sm_count,commit,shape,set,kind,row,tile,consumers,split,heuristic,ms\n");
  for (size_t i = first; i < std::min(last, all.size()); ++i) {
    const Shape& s = all[i];
    const Graph g = graph_of(s, std::nullopt, std::nullopt);
    Result<Plan> heuristic = Plan::build(g);
    if (!heuristic.ok() || !heuristic->prepared()) {
      fmt::print(stderr, "{}: {}\n", s.name, heuristic.ok() ? "no GPU to time on" : heuristic.status().to_string());
      return 1;
    }
    const DeviceDesc& device = heuristic->facts().device;
    std::optional<testing::LengthRange> lengths;
    if (s.page > 0) lengths = testing::LengthRange{s.kv_lo, s.S_kv};
    const testing::TrialInputs inputs = testing::make_inputs(g, 1, 2, lengths);
    testing::TrialOptions timed;
    timed.check = false;
    timed.timing_iterations = iterations;
    Result<std::vector<Config>> cs = candidates(s, device);
    if (!cs.ok()) {
      fmt::print(stderr, "{}: {}\n", s.name, cs.status().to_string());
      return 1;
    }
    fmt::print(stderr, "[{}/{}] {}: {} candidates\n", i + 1, all.size(), s.name, cs->size());
    const std::string chosen = describe(heuristic->config().decision);
    auto row_of = [&](const Decision& d, double ms, bool is_heuristic) {
      fmt::print("{},{},{},{},{},{},{},{},{:.5f}\n", device.name, device.sm_count, commit, s.name,
                 s.held_out ? "held_out" : "fit", s.kind, describe(d), is_heuristic ? 1 : 0, ms);
      std::fflush(stdout);
    };
    Result<testing::TrialReport> h = testing::run_trial(heuristic.value(), inputs, timed);
    if (!h.ok()) {
      fmt::print(stderr, "{} (heuristic): {}\n", s.name, h.status().to_string());
      return 1;
    }
    row_of(heuristic->config().decision, h->median_ms, true);
    // The candidates' plans first, on every core (NVRTC compiles one kernel per thread), then timed one by one.
    std::vector<Decision> todo;
    for (const Config& c : cs.value())
      if (describe(c.decision) != chosen) todo.push_back(c.decision);  // the heuristics' plan is timed above
    std::vector<Result<Plan>> plans = build_plans_in_batches(
        todo.size(), [&](size_t j) { return Plan::build(graph_of(s, todo[j].split_kv, todo[j].tile)); });
    for (size_t k = 0; k < todo.size(); ++k) {
      Result<Plan>& p = plans[k];
      Result<testing::TrialReport> r = p.ok() ? testing::run_trial(p.value(), inputs, timed)
                                              : Result<testing::TrialReport>(p.status());
      if (!r.ok()) {
        fmt::print(stderr, "{} {}: {}\n", s.name, describe(todo[k]), r.status().to_string());
        continue;
      }
      row_of(p->config().decision, r->median_ms, false);
    }
  }
  return 0;
}
