// Main of the GPU tests: without a GPU they report themselves skipped (exit 77, which ctest shows as
// "Skipped"), so CI prints a visible skip instead of a silent pass. A run of the whole tier (no test named) ends
// with the coverage check of gpu/tier.hpp; `--rime-coverage FILE` checks the union of per-case runs instead.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu/tier.hpp"
#include "runtime/driver.hpp"

int main(int argc, char** argv) {
  if (!rime::driver::api()) {
    std::printf("SKIPPED: GPU tests need a GPU: %s\n", rime::driver::load_status().message().c_str());
    return 77;
  }
  rime::Result<rime::DeviceDesc> device = rime::driver::query_device();
  if (!device.ok()) {
    std::printf("GPU tests: %s\n", device.status().to_string().c_str());
    return 1;
  }
  if (argc == 3 && std::string(argv[1]) == "--rime-coverage")
    return rime::test::report_coverage(rime::test::read_coverage_file(argv[2]), device.value()) ? 0 : 1;
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  bool whole_tier = session.configData().testsOrTags.empty();
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--list", 0) == 0 || std::string(argv[i]) == "-h" ||
        std::string(argv[i]) == "--help")
      whole_tier = false;
  fmt::print("GPU tests, {} tier (RIME_GPU_TIER=quick|full) on {}\n",
             rime::test::tier_name(rime::test::gpu_tier()), device->arch_name());
  std::fflush(stdout);
  int result = session.run();
  if (whole_tier && !rime::test::report_coverage(rime::test::covered_so_far(), device.value()) && result == 0)
    result = 1;
  return result;
}
