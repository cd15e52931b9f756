// Builds a BF16 causal graph with the C++ API, validates it and prints its JSON form and hash.
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
  if (st.ok()) st = validate(g);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("%s", graph_to_json(g).c_str());
  std::printf("hash %s\n", graph_hash(g).c_str());
  return 0;
}
