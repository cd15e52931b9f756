// .npy in and out of `rime run` (tools/testing/npy.hpp): every dtype round-trips through its strided layout,
// and a file of the wrong dtype, shape or size is refused with the tensor named.
#include <cstdio>
#include <fstream>
#include <random>

#include "catch.hpp"
#include "graph/geometry.hpp"
#include "testing/npy.hpp"

using namespace rime;

TEST_CASE(".npy files round-trip every dtype through strided layouts", "[npy]") {
  std::mt19937 rng(3);
  for (DataType t : {DataType::FP32, DataType::FP16, DataType::BF16, DataType::FP8_E4M3, DataType::FP8_E5M2,
                     DataType::FP4_E2M1, DataType::FP8_E8M0, DataType::INT32, DataType::INT64}) {
    // BSHD strides with padded rows: the file is dense logical [2, 3, 5, 8]; the bytes are strided.
    TensorDesc d{"X", 1, {2, 3, 5, 8}, {5 * 3 * 10, 10, 3 * 10, 1}, t, false};
    std::vector<uint8_t> bytes(static_cast<size_t>(tensor_storage_bytes(d)));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    const std::string file = testing::npy_encode(d, bytes);
    INFO(to_string(t));
    CHECK(file.compare(0, 6, "\x93NUMPY") == 0);
    CHECK((10 + (static_cast<unsigned char>(file[8]) | static_cast<unsigned char>(file[9]) << 8)) % 64 == 0);
    std::vector<uint8_t> back(bytes.size(), 0);
    REQUIRE(testing::npy_decode(d, file, back).ok());
    // Every element the strides reach matches; the gaps were not written.
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t s = 0; s < 5; ++s)
          for (int64_t e = 0; e < 8; ++e) {
            const int64_t off = b * d.strides[0] + h * d.strides[1] + s * d.strides[2] + e;
            if (t == DataType::FP4_E2M1) {
              CHECK(((bytes[off / 2] >> (4 * (off & 1))) & 0xF) == ((back[off / 2] >> (4 * (off & 1))) & 0xF));
            } else {
              const int w = bits_of(t) / 8;
              for (int k = 0; k < w; ++k) CHECK(bytes[off * w + k] == back[off * w + k]);
            }
          }
  }
}

TEST_CASE("a .npy of the wrong dtype, shape or size is refused, naming the tensor", "[npy]") {
  TensorDesc q{"Q", 1, {1, 2, 4, 8}, TensorDesc::packed_strides({1, 2, 4, 8}), DataType::FP8_E4M3, false};
  std::vector<uint8_t> bytes(64, 7), out;
  const std::string good = testing::npy_encode(q, bytes);
  REQUIRE(testing::npy_decode(q, good, out).ok());
  TensorDesc bf = q;
  bf.dtype = DataType::BF16;
  Status dtype = testing::npy_decode(bf, good, out);
  CHECK(dtype.code() == StatusCode::InvalidArgument);
  CHECK(dtype.message() == "Q.npy: dtype '|u1' does not match BF16 (expected '<u2')");
  TensorDesc other = q;
  other.dims = {1, 2, 8, 4};
  other.strides = TensorDesc::packed_strides(other.dims);
  CHECK(testing::npy_decode(other, good, out).message() == "Q.npy: shape [1, 2, 4, 8] does not match Q's [1, 2, 8, 4]");
  CHECK(testing::npy_decode(q, good.substr(0, good.size() - 1), out).message() ==
        "Q.npy: holds 63 bytes of data, its shape needs 64");
  CHECK(testing::npy_decode(q, "not numpy at all", out).message().find("not a .npy file") != std::string::npos);
}
