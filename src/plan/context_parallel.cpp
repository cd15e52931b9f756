#include "plan/context_parallel.hpp"

#include <fmt/format.h>

#include "runtime/nccl.hpp"
#include "status_macros.hpp"

namespace rime::context_parallel {

Status apply(Facts& f, const std::optional<ContextParallel>& cp) {
  if (!cp) return Status::success();
  if (cp->world < 1 || cp->rank < 0 || cp->rank >= cp->world)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("context_parallel: rank {} of world {}: the world must be at least 1 and the rank in "
                              "[0, world)",
                              cp->rank, cp->world));
  if (f.mask.window_left || f.mask.band_right)
    return Status(StatusCode::NotSupported,
                  "context_parallel: a window or band mask needs the keys' global positions, which the kernels do not "
                  "take yet");
  if (f.mask.causal && !(f.mask.bottom_right && f.S_q == 1))
    return Status(StatusCode::NotSupported,
                  fmt::format("context_parallel: a {} causal mask over S_q = {} query rows needs the keys' global "
                              "positions, which the kernels do not take yet (served: bottom-right over one row, "
                              "where every key is visible)",
                              f.mask.bottom_right ? "bottom-right" : "top-left", f.S_q));
  f.context_parallel = {cp->rank, cp->world};
  return Status::success();
}

Status check_communicator(const ContextParallel& cp, int device_ordinal) {
  RIME_RETURN_IF_ERROR(nccl::load_status());
  if (!cp.comm) return Status(StatusCode::InvalidArgument, "context_parallel.comm is null (an ncclComm_t is needed)");
  const nccl::Api& n = *nccl::api();
  int count = 0, rank = -1, device = -1;
  RIME_RETURN_IF_ERROR(nccl::check(n.ncclCommCount(cp.comm, &count), "ncclCommCount"));
  RIME_RETURN_IF_ERROR(nccl::check(n.ncclCommUserRank(cp.comm, &rank), "ncclCommUserRank"));
  RIME_RETURN_IF_ERROR(nccl::check(n.ncclCommCuDevice(cp.comm, &device), "ncclCommCuDevice"));
  if (count != cp.world || rank != cp.rank)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("context_parallel: the communicator is rank {} of {}, the options say rank {} of {}",
                              rank, count, cp.rank, cp.world));
  if (device != device_ordinal)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("context_parallel: the communicator's GPU is {}, the plan is loaded on GPU {}", device,
                              device_ordinal));
  return Status::success();
}

Status all_gather(const Facts& f, const Config& c, void* workspace, void* comm, CUstream stream) {
  const nccl::Api* n = nccl::api();
  if (!n) return nccl::load_status();
  const WorkspaceRegion* o = c.derived.region("o_partial");
  const WorkspaceRegion* lse = c.derived.region("lse_partial");
  if (!o || !lse) return Status(StatusCode::Internal, "a context-parallel plan without split partials");
  const size_t rows = static_cast<size_t>(f.B * f.H_q * f.S_q), split = static_cast<size_t>(c.decision.split_kv);
  const size_t o_count = split * rows * static_cast<size_t>(f.D_v), lse_count = split * rows;
  float* o_all = reinterpret_cast<float*>(static_cast<char*>(workspace) + o->offset);
  float* lse_all = reinterpret_cast<float*>(static_cast<char*>(workspace) + lse->offset);
  const size_t r = static_cast<size_t>(f.context_parallel.rank);
  RIME_RETURN_IF_ERROR(nccl::check(n->ncclGroupStart(), "ncclGroupStart"));
  const nccl::Result a = n->ncclAllGather(o_all + r * o_count, o_all, o_count, nccl::kFloat32, comm, stream);
  const nccl::Result b = n->ncclAllGather(lse_all + r * lse_count, lse_all, lse_count, nccl::kFloat32, comm, stream);
  const nccl::Result e = n->ncclGroupEnd();
  RIME_RETURN_IF_ERROR(nccl::check(a, "ncclAllGather (O partials)"));
  RIME_RETURN_IF_ERROR(nccl::check(b, "ncclAllGather (LSE partials)"));
  return nccl::check(e, "ncclGroupEnd");
}

std::array<int, 2> zigzag_chunks(int rank, int world) { return {rank, 2 * world - 1 - rank}; }

std::vector<RingPair> ring_schedule(int rank, int world, bool causal) {
  std::vector<RingPair> out;
  for (int step = 0; step < world; ++step) {
    const int kv_rank = ((rank - step) % world + world) % world;
    for (int q : zigzag_chunks(rank, world))
      for (int kv : zigzag_chunks(kv_rank, world)) {
        if (causal && kv > q) continue;  // every key of the chunk is after every row of the Q chunk
        out.push_back(RingPair{step, kv_rank, q, kv, causal && kv == q});
      }
  }
  return out;
}

std::vector<RingPass> ring_passes(int rank, int world, bool causal) {
  std::vector<RingPass> out;
  for (const RingPair& p : ring_schedule(rank, world, causal)) {
    const int kv_local = p.kv_chunk == zigzag_chunks(p.kv_rank, world)[0] ? 0 : 1;
    if (!out.empty()) {
      RingPass& last = out.back();
      // The first held chunk in full, then the second (in full or the diagonal): one run of keys.
      if (last.step == p.step && last.q_chunk == p.q_chunk && last.kv_local == 0 && last.kv_chunks == 1 &&
          !last.causal && kv_local == 1) {
        last.kv_chunks = 2;
        last.causal = p.causal;
        continue;
      }
    }
    out.push_back(RingPass{p.step, p.kv_rank, p.q_chunk, kv_local, 1, p.causal});
  }
  return out;
}

}  // namespace rime::context_parallel
