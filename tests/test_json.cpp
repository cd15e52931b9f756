// JSON graph files: round-trip over every example, a key-order-independent hash, and hostile documents.
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "catch.hpp"
#include "rime/json.hpp"
#include "test_paths.hpp"

using namespace rime;

namespace {
// RFC 3629, written here apart from the library's: whole sequences only, no overlong forms, no surrogates.
bool is_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b >> 6) != 0x2) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

const char* kExamples[] = {"fp8_prefill",           "fp8_decode_gqa", "fp8_nvfp4_o_planes",
                           "fp8_mxfp8_o_token_major", "mxfp8_inputs",   "bf16_causal_sink",
                           "fp16_window_padding"};

}  // namespace

TEST_CASE("every example validates and round-trips exactly", "[json]") {
  for (const char* name : kExamples) {
    INFO(name);
    Result<Graph> g = load_graph_file(test::example_path(name));
    REQUIRE(g.ok());
    const std::string text = graph_to_json(g.value());
    Result<Graph> again = graph_from_json(text);
    REQUIRE(again.ok());
    CHECK(again.value() == g.value());
    CHECK(graph_to_json(again.value()) == text);
    CHECK(graph_hash(again.value()) == graph_hash(g.value()));
  }
}

TEST_CASE("the graph hash does not depend on key order or whitespace", "[json]") {
  const std::string text = test::read_text(test::example_path("fp8_decode_gqa"));
  Result<Graph> g = graph_from_json(text);
  REQUIRE(g.ok());
  // Re-serialize with keys in reverse order and different whitespace: same graph, same hash.
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  std::function<nlohmann::ordered_json(const nlohmann::ordered_json&)> reverse = [&](const nlohmann::ordered_json& v) {
    if (v.is_object()) {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      std::vector<std::string> keys;
      for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
      for (auto k = keys.rbegin(); k != keys.rend(); ++k) out[*k] = reverse(v.at(*k));
      return out;
    }
    if (v.is_array()) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto& e : v) out.push_back(reverse(e));
      return out;
    }
    return v;
  };
  const std::string shuffled = reverse(j).dump(7);
  REQUIRE(shuffled != text);
  Result<Graph> g2 = graph_from_json(shuffled);
  REQUIRE(g2.ok());
  CHECK(graph_hash(g2.value()) == graph_hash(g.value()));
  CHECK(graph_hash(g.value()).size() == 64);

  // A different graph gets a different hash.
  Graph changed = g.value();
  changed.set_name("other");
  CHECK(graph_hash(changed) != graph_hash(g.value()));
}

TEST_CASE("strides default to packed when omitted", "[json]") {
  nlohmann::json j = nlohmann::json::parse(test::read_text(test::example_path("fp8_prefill")));
  for (auto& t : j["tensors"]) t.erase("strides");
  Result<Graph> g = graph_from_json(j.dump());
  REQUIRE(g.ok());
  CHECK(g->find_tensor(1)->strides == std::vector<int64_t>{8 * 1024 * 128, 1024 * 128, 128, 1});
}

TEST_CASE("the C++ builders and the JSON reader make the same graph", "[json][graph]") {
  Result<Graph> from_file = load_graph_file(test::example_path("bf16_causal_sink"));
  REQUIRE(from_file.ok());
  Graph g("bf16_causal_sink");
  const int64_t B = 2, H = 16, Hk = 4, Sq = 512, Skv = 2048, D = 64;
  auto add = [&](const char* n, int64_t uid, std::vector<int64_t> dims, DataType t, bool out = false) {
    return g.add_tensor({n, uid, dims, TensorDesc::packed_strides(dims), t, out});
  };
  SdpaOperands io;
  io.q = add("Q", 1, {B, H, Sq, D}, DataType::BF16);
  io.k = add("K", 2, {B, Hk, Skv, D}, DataType::BF16);
  io.v = add("V", 3, {B, Hk, Skv, D}, DataType::BF16);
  io.sink = add("sink", 4, {1, H, 1, 1}, DataType::FP32);
  io.o = add("O", 5, {B, H, Sq, D}, DataType::BF16, true);
  io.stats = add("Stats", 6, {B, H, Sq, 1}, DataType::FP32, true);
  REQUIRE(g.sdpa(io, SdpaAttributes{}.set_causal(true, DiagonalAlignment::BottomRight), "attn").ok());
  REQUIRE(validate(g).ok());
  CHECK(g == from_file.value());
  CHECK(graph_hash(g) == graph_hash(from_file.value()));
  // One op per graph.
  Status second = g.sdpa(io);
  CHECK(second.code() == StatusCode::InvalidGraph);
  CHECK(second.message().find("one sdpa op per graph") != std::string::npos);
}

TEST_CASE("hostile documents are refused with InvalidJson, never a crash", "[json]") {
  struct Case {
    std::string text;
    std::string substring;
  };
  std::string deep(100000, '[');
  std::string huge_string = "{\"rime_graph\":1,\"name\":\"" + std::string(100u << 20, 'a') + "\"}";
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919 + 13) & 0xff);
  const Case cases[] = {
      {"", "empty document"},
      {"   \n\t ", "empty document"},
      {"{\"rime_graph\": 1, \"name\": ", "syntax error"},
      {"{\"rime_graph\": 1,}", "syntax error"},
      {deep, "nesting deeper than"},
      {huge_string, "graph files are limited to"},
      {garbage, ""},
      {"[1, 2, 3]", "expected an object, found array"},
      {"\"just a string\"", "expected an object, found string"},
      {"null", "expected an object, found null"},
      {"{\"rime_graph\": \"1\"}", "expected an integer, found string"},
      {"{\"name\": \"x\"}", "missing required field 'rime_graph'"},
      {"{\"rime_graph\": 1, \"name\": \"x\\u0000y\", \"tensors\": [], \"op\": {}}", "printable ASCII"},
      {"{\"rime_graph\": 1, \"name\": \"\xff\xfe\"}", "syntax error"},
      // The parser quotes the bytes it read last: here the first byte of a two-, three- and four-byte character,
      // which the message writes as \xNN so that it stays UTF-8 (Python decodes it).
      {"\xc3\xa9\xc3\xa9{", "last read: '\\xC3'"},
      {"\xe6\x97\xa5\xe6\x97\xa5{", "last read: '\\xE6'"},
      {"\xf0\x9f\x98\x80{", "last read: '\\xF0'"},
  };
  for (const Case& c : cases) {
    INFO(c.text.substr(0, 80));
    Result<Graph> g = graph_from_json(c.text);
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == StatusCode::InvalidJson);
    CHECK(g.status().message().find(c.substring) != std::string::npos);
    CHECK(is_utf8(g.status().message()));
  }
}

TEST_CASE("an unknown key is refused at every level of the document, at its pointer", "[json]") {
  // A misspelled attribute or knob must not be a silent default: each object of the format lists what it takes.
  const std::string text = test::read_text(test::example_path("fp8_prefill"));
  const std::pair<const char*, const char*> places[] = {
      {"", "/bogus"},
      {"/tensors/0", "/tensors/0/bogus"},
      {"/op", "/op/bogus"},
      {"/op/attributes", "/op/attributes/bogus"},
      {"/op/knobs", "/op/knobs/bogus"},
      {"/op/knobs/tile", "/op/knobs/tile/bogus"},
  };
  for (const auto& [object, pointer] : places) {
    INFO(pointer);
    nlohmann::json doc = nlohmann::json::parse(text);
    doc["op"]["knobs"] = {{"tile", {{"q", 64}, {"kv", 64}}}};
    doc[nlohmann::json::json_pointer(object)]["bogus"] = 1;
    Result<Graph> g = graph_from_json(doc.dump());
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == StatusCode::InvalidJson);
    CHECK(g.status().location() == pointer);
    CHECK(g.status().message().find("unknown field 'bogus'") != std::string::npos);
  }
  nlohmann::json doc = nlohmann::json::parse(text);
  doc["op"]["inputs"]["bogus"] = 1;  // an operand slot: an unknown role
  Result<Graph> g = graph_from_json(doc.dump());
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().location() == "/op/inputs/bogus");
  CHECK(g.status().message().find("unknown input 'bogus'") != std::string::npos);
}

TEST_CASE("load_graph_file refuses missing, special and oversized files", "[json]") {
  CHECK(load_graph_file("/nonexistent/graph.json").status().code() == StatusCode::InvalidJson);
  CHECK(load_graph_file("/").status().message().find("not a regular file") != std::string::npos);
}

TEST_CASE("a name of exactly the longest length is taken, one byte more is refused", "[json]") {
  nlohmann::json doc = nlohmann::json::parse(test::read_text(test::example_path("fp8_prefill")));
  doc["name"] = std::string(kMaxNameLength, 'n');
  REQUIRE(graph_from_json(doc.dump()).ok());
  doc["name"] = std::string(kMaxNameLength + 1, 'n');
  Result<Graph> g = graph_from_json(doc.dump());
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == StatusCode::InvalidJson);
  CHECK(g.status().location() == "/name");
  CHECK(g.status().message().find("string of 257 bytes; at most 256") != std::string::npos);
}
