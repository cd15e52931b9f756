// Builds a BF16 causal graph with the C++ API, plans it (validate, match the rows, choose, compile through the
// plan cache) and prints the plan. With a GPU, `plan->execute(buffers, workspace, stream)` runs it on device
// memory the caller owns; the plan itself allocates nothing.
#include <rime/inspect/config.hpp>
#include <rime/rime.hpp>

#include <cstdio>

int main() {
  using namespace rime;
  const std::vector<int64_t> q_dims{1, 8, 256, 128}, kv_dims{1, 2, 256, 128};
  Graph g("consumer");
  SdpaOperands io;
  io.q = g.add_tensor({"Q", 1, q_dims, TensorDesc::packed_strides(q_dims), DataType::BF16});
  io.k = g.add_tensor({"K", 2, kv_dims, TensorDesc::packed_strides(kv_dims), DataType::BF16});
  io.v = g.add_tensor({"V", 3, kv_dims, TensorDesc::packed_strides(kv_dims), DataType::BF16});
  io.o = g.add_tensor({"O", 4, q_dims, TensorDesc::packed_strides(q_dims), DataType::BF16, /*is_output=*/true});
  Status st = g.sdpa(io, SdpaAttributes{}.set_causal(true));
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("graph %s\n", graph_hash(g).c_str());
  Result<Plan> plan = Plan::build(g);  // the current GPU, or the H200 defaults without one
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", plan.status().to_string().c_str());
    return 1;
  }
  for (const KernelInfo& k : plan->kernels()) std::printf("kernel %s (%s)\n", k.name_expression.c_str(), k.origin.c_str());
  std::printf("plan: row %s, %zu kernel(s), workspace %lld bytes, %s\n", plan->config().decision.row_id.c_str(),
              plan->kernels().size(), static_cast<long long>(plan->workspace_size()),
              plan->prepared() ? "ready to execute on this GPU" : "compiled (no GPU here to load it on)");
  return 0;
}
