#include "testing/npy.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "graph/geometry.hpp"

namespace rime::testing {
namespace {

int item_bytes(DataType t) { return t == DataType::FP4_E2M1 ? 1 : bits_of(t) / 8; }

Status bad(const TensorDesc& t, const std::string& what) {
  return Status(StatusCode::InvalidArgument, fmt::format("{}.npy: {}", t.name, what));
}

// Calls f(dense element index, strided element offset) for every logical element in C order.
template <class F>
void for_each_element(const TensorDesc& t, F&& f) {
  const size_t rank = t.dims.size();
  std::vector<int64_t> idx(rank, 0);
  const int64_t count = element_count(t.dims).value_or(0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += idx[d] * t.strides[d];
    f(n, off);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < t.dims[d]) break;
      idx[d] = 0;
    }
  }
}

std::string shape_tuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

}  // namespace

NpyLayout npy_layout(const TensorDesc& t) {
  NpyLayout l;
  l.shape = t.dims;
  switch (t.dtype) {
    case DataType::FP32: l.descr = "<f4"; break;
    case DataType::FP16: l.descr = "<f2"; break;
    case DataType::BF16: l.descr = "<u2"; break;
    case DataType::INT32: l.descr = "<i4"; break;
    case DataType::INT64: l.descr = "<i8"; break;
    case DataType::FP4_E2M1:
      l.descr = "|u1";
      l.shape.back() /= 2;
      break;
    default: l.descr = "|u1"; break;  // FP8_E4M3, FP8_E5M2, FP8_E8M0: raw codes
  }
  return l;
}

std::string npy_encode(const TensorDesc& t, const std::vector<uint8_t>& bytes) {
  const NpyLayout l = npy_layout(t);
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", l.descr,
                                    shape_tuple(l.shape));
  // Version 1.0: magic, version, little-endian header length; the header is padded with spaces to a multiple
  // of 64 bytes (with the magic) and ends in a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const int item = item_bytes(t.dtype);
  if (t.dtype == DataType::FP4_E2M1) {
    std::string data(static_cast<size_t>(element_count(t.dims).value_or(0) / 2), '\0');
    for_each_element(t, [&](int64_t n, int64_t off) {
      const uint8_t nib = (bytes[static_cast<size_t>(off / 2)] >> (4 * (off & 1))) & 0xF;
      data[static_cast<size_t>(n / 2)] = static_cast<char>(data[static_cast<size_t>(n / 2)] | (nib << (4 * (n & 1))));
    });
    return out + data;
  }
  std::string data(static_cast<size_t>(element_count(t.dims).value_or(0) * item), '\0');
  for_each_element(t, [&](int64_t n, int64_t off) {
    std::memcpy(&data[static_cast<size_t>(n * item)], &bytes[static_cast<size_t>(off * item)], static_cast<size_t>(item));
  });
  return out + data;
}

Status npy_decode(const TensorDesc& t, const std::string& file, std::vector<uint8_t>& bytes) {
  if (file.size() < 10 || file.compare(0, 6, "\x93NUMPY") != 0) return bad(t, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(file[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(file[8]) | (static_cast<size_t>(static_cast<unsigned char>(file[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return bad(t, "truncated header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(file[8 + i])) << (8 * i);
    start = 12;
  } else {
    return bad(t, fmt::format(".npy format version {} is not 1, 2 or 3", major));
  }
  if (start + header_len > file.size()) return bad(t, "truncated header");
  const std::string header = file.substr(start, header_len);
  auto field = [&](const char* key) -> std::string {
    const size_t k = header.find(fmt::format("'{}':", key));
    if (k == std::string::npos) return {};
    size_t v = header.find_first_not_of(' ', k + std::strlen(key) + 3);
    if (v == std::string::npos) return {};
    if (header[v] == '(') return header.substr(v, header.find(')', v) - v + 1);
    if (header[v] == '\'') return header.substr(v + 1, header.find('\'', v + 1) - v - 1);
    return header.substr(v, header.find_first_of(",}", v) - v);
  };
  const NpyLayout want = npy_layout(t);
  const std::string descr = field("descr");
  if (descr != want.descr && !(want.descr == "|u1" && descr == "<u1"))
    return bad(t, fmt::format("dtype '{}' does not match {} (expected '{}')", descr, to_string(t.dtype), want.descr));
  if (field("fortran_order") != "False") return bad(t, "fortran_order must be False (C order)");
  std::vector<int64_t> shape;
  std::string tuple = field("shape");
  for (char& c : tuple)
    if (c == '(' || c == ')' || c == ',') c = ' ';
  std::istringstream in(tuple);
  for (int64_t x; in >> x;) shape.push_back(x);
  if (shape != want.shape)
    return bad(t, fmt::format("shape [{}] does not match {}'s [{}]", fmt::join(shape, ", "), t.name,
                              fmt::join(want.shape, ", ")));
  const int item = item_bytes(t.dtype);
  int64_t stored = 1;
  for (int64_t d : want.shape) stored *= d;
  const size_t data_bytes = static_cast<size_t>(stored * item);
  if (file.size() - start - header_len != data_bytes)
    return bad(t, fmt::format("holds {} bytes of data, its shape needs {}", file.size() - start - header_len, data_bytes));
  const char* data = file.data() + start + header_len;
  bytes.resize(static_cast<size_t>(tensor_storage_bytes(t)), 0);
  if (t.dtype == DataType::FP4_E2M1) {
    for_each_element(t, [&](int64_t n, int64_t off) {
      const uint8_t nib = (static_cast<uint8_t>(data[n / 2]) >> (4 * (n & 1))) & 0xF;
      uint8_t& b = bytes[static_cast<size_t>(off / 2)];
      b = static_cast<uint8_t>((b & ~(0xF << (4 * (off & 1)))) | (nib << (4 * (off & 1))));
    });
    return Status::success();
  }
  for_each_element(t, [&](int64_t n, int64_t off) {
    std::memcpy(&bytes[static_cast<size_t>(off * item)], data + n * item, static_cast<size_t>(item));
  });
  return Status::success();
}

Status read_npy_inputs(const Graph& g, const std::string& dir, reference::HostTensors& tensors,
                       std::vector<std::string>& read) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status(StatusCode::InvalidArgument, fmt::format("--inputs {}: not a directory", dir));
  for (const TensorDesc& t : g.tensors()) {
    if (t.is_output) continue;
    const std::string path = dir + "/" + t.name + ".npy";
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Status s = npy_decode(t, file, tensors[t.uid]);
    if (!s.ok()) return Status(s.code(), fmt::format("{}: {}", dir, s.message()));
    read.push_back(t.name);
  }
  return Status::success();
}

Status write_npy_tensors(const Graph& g, const std::string& dir, const reference::HostTensors& tensors) {
  ::mkdir(dir.c_str(), 0755);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status(StatusCode::InvalidArgument, fmt::format("--save {}: cannot create the directory", dir));
  nlohmann::json manifest = nlohmann::json::array();
  const SdpaOp& op = *g.op();
  for (const TensorDesc& t : g.tensors()) {
    auto it = tensors.find(t.uid);
    if (it == tensors.end()) continue;
    const std::string path = dir + "/" + t.name + ".npy";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::string data = npy_encode(t, it->second);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return Status(StatusCode::InvalidArgument, fmt::format("--save: cannot write {}", path));
    std::string role;
    for (int r = 0; r < kRoleCount; ++r)
      if (op.operands[r] == t.uid) role = std::string(to_string(static_cast<Role>(r)));
    const NpyLayout l = npy_layout(t);
    const bool native = t.dtype == DataType::FP32 || t.dtype == DataType::FP16 || t.dtype == DataType::INT32 ||
                        t.dtype == DataType::INT64;
    manifest.push_back({{"file", t.name + ".npy"}, {"name", t.name}, {"uid", t.uid}, {"role", role},
                        {"output", t.is_output}, {"dtype", std::string(to_string(t.dtype))}, {"dims", t.dims},
                        {"npy_dtype", l.descr}, {"npy_shape", l.shape},
                        {"stored_as", native ? "values" : (t.dtype == DataType::FP4_E2M1
                                                               ? "raw codes, two per byte, element 2j in the low nibble"
                                                               : "raw codes")}});
  }
  std::ofstream(dir + "/tensors.json") << nlohmann::json{{"rime_tensors", 1}, {"tensors", manifest}}.dump(2) << "\n";
  return Status::success();
}

}  // namespace rime::testing
