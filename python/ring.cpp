// The context-parallel prefill ring (docs/context-parallel.md): RingPlan, ring_plan(), and NCCL communicators for
// callers that have none (rime/communicator.hpp).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "binding.hpp"
#include "rime/communicator.hpp"
#include "rime/ring.hpp"

namespace rime::python {

void bind_ring(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<RingPlan>(m, "RingPlan",
                             "A rank's part of the context-parallel prefill ring (docs/context-parallel.md): its "
                             "pass plans, the K/V transfers over NCCL and the merge.")
      .def_prop_ro("graph", &RingPlan::graph, "the rank's shard: its two zig-zag chunks of Q, K, V and O")
      .def_prop_ro("workspace_size", &RingPlan::workspace_size, "bytes of device memory run() needs")
      .def_prop_ro("prepared", &RingPlan::prepared)
      .def_prop_ro("pass_plans",
                   [](const RingPlan& r) {
                     nb::list out;
                     for (const Plan* p : r.pass_plans()) out.append(*p);
                     return out;
                   },
                   "the plans of the passes (copies sharing their state): one per slot (step), K/V chunk count and "
                   "mask")
      .def("explain", &RingPlan::explain, "the rank, its chunks, the schedule and the pass plans")
      .def(
          "transfer_times",
          [](const RingPlan& r) {
            const RingPlan::TransferTimes t = take(r.transfer_times());
            nb::dict d;
            d["transfers"] = t.transfers;
            d["transfer_ms"] = t.transfer_ms;
            d["exposed_ms"] = t.exposed_ms;
            return d;
          },
          "The last run's K/V transfers, once it has finished: their count, their time and the part of it the "
          "attention waited for (exposed).")
      .def(
          "run",
          [](const RingPlan& r, const nb::dict& buffers, nb::handle workspace, nb::handle stream) {
            const int device = r.pass_plans().empty() ? -1 : r.pass_plans()[0]->device_ordinal();
            execute(r, pointers_by_uid(r.graph(), buffers, device, "run()"), workspace_of(workspace, device),
                    stream_of(stream));
          },
          "buffers"_a, "workspace"_a = nb::none(), "stream"_a = nb::none(),
          "Runs the rank's part of the ring on `stream`: every rank of the communicator runs it for the step. "
          "buffers as Plan.run takes them, for the shard's tensors.");
  // NCCL communicators for callers without one (rime.torch.NcclCommunicator makes one over a torch.distributed
  // group, which exposes none): the unique id rank 0 makes and broadcasts, then every rank's collective init.
  m.def(
      "_nccl_unique_id",
      []() {
        const NcclUniqueId id = take(nccl_unique_id());
        return nb::bytes(id.bytes, sizeof(id.bytes));
      },
      "NCCL's unique id for a new communicator (128 bytes), made by one rank and given to all.");
  m.def(
      "_nccl_comm_init_rank",
      [](const nb::bytes& id_bytes, int world, int rank, int device) {
        NcclUniqueId id{};
        if (id_bytes.size() != sizeof(id.bytes))
          invalid_argument("an NCCL unique id is " + std::to_string(sizeof(id.bytes)) + " bytes, not " +
                           std::to_string(id_bytes.size()));
        std::memcpy(id.bytes, id_bytes.c_str(), sizeof(id.bytes));
        Result<void*> comm = Status();
        {
          nb::gil_scoped_release release;  // collective: returns once every rank has joined
          comm = nccl_comm_init_rank(id, world, rank, device);
        }
        return reinterpret_cast<uintptr_t>(take(std::move(comm)));
      },
      "id"_a, "world"_a, "rank"_a, "device"_a,
      "Joins rank `rank` of `world` to the communicator of `id` on GPU `device`; returns its ncclComm_t's address.");
  m.def(
      "_nccl_comm_destroy", [](uintptr_t comm) { check(nccl_comm_destroy(reinterpret_cast<void*>(comm))); },
      "comm"_a);
  m.def(
      "ring_plan",
      [](const Graph& shard, uintptr_t comm, int rank, int world, nb::handle device,
         std::optional<std::string> arch, std::optional<int> sms, bool use_tuned) {
        PlanOptions o = options_for(device, arch, sms);
        o.use_tuned = use_tuned;
        nb::gil_scoped_release release;
        return take(RingPlan::build(shard, ContextParallel{reinterpret_cast<void*>(comm), rank, world}, o));
      },
      "shard"_a, "comm"_a, "rank"_a, "world"_a, "device"_a = nb::none(), "arch"_a = nb::none(), "sms"_a = nb::none(),
      "use_tuned"_a = true,
      "Plans rank `rank`'s part of the prefill ring over `world` GPUs (docs/context-parallel.md): `shard` holds chunks "
      "rank and 2 world - 1 - rank of the sequence's 2 world equal chunks of Q, K, V and O, one after the other "
      "along dims[2]; `comm` is the address of the caller's ncclComm_t over the ranks (an int; 0 plans without "
      "loading). device/arch/sms as plan() takes them.");
}

}  // namespace rime::python
