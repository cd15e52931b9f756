// Main of the GPU tests: without a GPU they report themselves skipped (exit 77, which ctest shows as
// "Skipped"), so CI prints a visible skip instead of a silent pass.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <cstdio>
#include <cstdlib>

#include "runtime/driver.hpp"

int main(int argc, char** argv) {
  if (!rime::driver::api()) {
    std::printf("SKIPPED: GPU tests need a GPU: %s\n", rime::driver::load_status().message().c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
