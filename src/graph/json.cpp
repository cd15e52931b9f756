// JSON graph files: a strict reader (every unknown, missing or mistyped field is an error with its JSON pointer)
// and a canonical writer. nlohmann::json throws; every call into it is inside this file and caught here.
#include "rime/json.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "digest/sha256.hpp"
#include "json/checked.hpp"
#include "status_macros.hpp"

namespace rime {
namespace {

using nlohmann::json;

constexpr int kGraphFormatVersion = 1;

Status json_error(const std::string& pointer, std::string message) {
  return Status(StatusCode::InvalidJson, std::move(message), pointer);
}

const char* type_name(const json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return "integer";
  return j.type_name();
}

// nlohmann's parser keeps its own stack, but a deeply nested document still costs memory and recursion on
// destruction; the schema nests 5 levels, so anything past kMaxGraphJsonDepth is refused before parsing.
Status check_depth(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxGraphJsonDepth)
        return json_error("", fmt::format("nesting deeper than {} levels at byte {}", kMaxGraphJsonDepth, i));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::success();
}

// Reads one JSON object, remembering which keys were consumed so that unknown ones are reported.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string pointer) : j_(j), ptr_(std::move(pointer)) {}

  Status start() const {
    if (!j_.is_object())
      return json_error(ptr_, fmt::format("expected an object, found {}", type_name(j_)));
    return Status::success();
  }
  std::string at(const std::string& key) const { return ptr_ + "/" + json_checked::pointer_token(key); }
  const json* find(const std::string& key) {
    seen_.push_back(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  Status missing(const std::string& key) const {
    return json_error(at(key), fmt::format("missing required field '{}'", key));
  }
  // Call last: any key not asked for is unknown.
  Status finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool known = false;
      for (const auto& s : seen_) known = known || s == it.key();
      if (!known) {
        std::string list;
        for (const auto& s : seen_) list += (list.empty() ? "" : ", ") + s;
        return json_error(at(it.key()), fmt::format("unknown field {} (expected one of: {})",
                                                    json_checked::quoted(it.key()), list));
      }
    }
    return Status::success();
  }

  Status get_int(const std::string& key, int64_t& out, bool required = true) {
    const json* v = find(key);
    if (!v) return required ? missing(key) : Status::success();
    return read_int(*v, at(key), out);
  }
  // An optional integer field: out keeps nullopt when the key is absent.
  Status get_optional_int(const std::string& key, std::optional<int64_t>& out) {
    const json* v = find(key);
    if (!v) return Status::success();
    int64_t x = 0;
    RIME_RETURN_IF_ERROR(read_int(*v, at(key), x));
    out = x;
    return Status::success();
  }
  Status get_bool(const std::string& key, bool& out) {
    const json* v = find(key);
    if (!v) return Status::success();
    if (!v->is_boolean()) return json_error(at(key), fmt::format("expected a boolean, found {}", type_name(*v)));
    out = v->get<bool>();
    return Status::success();
  }
  Status get_string(const std::string& key, std::string& out, bool required = true) {
    const json* v = find(key);
    if (!v) return required ? missing(key) : Status::success();
    if (!v->is_string()) return json_error(at(key), fmt::format("expected a string, found {}", type_name(*v)));
    out = v->get<std::string>();
    if (out.size() > kMaxNameLength)
      return json_error(at(key), fmt::format("string of {} bytes; at most {}", out.size(), kMaxNameLength));
    return Status::success();
  }

  static Status read_int(const json& v, const std::string& ptr, int64_t& out) {
    if (v.is_number_integer() && !v.is_number_unsigned()) {
      out = v.get<int64_t>();
      return Status::success();
    }
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return json_error(ptr, fmt::format("integer {} does not fit in int64", u));
      out = static_cast<int64_t>(u);
      return Status::success();
    }
    return json_error(ptr, fmt::format("expected an integer, found {}", type_name(v)));
  }

 private:
  const json& j_;
  std::string ptr_;
  std::vector<std::string> seen_;
};

Status read_int_array(const json* v, const std::string& ptr, std::vector<int64_t>& out) {
  if (!v->is_array()) return json_error(ptr, fmt::format("expected an array of integers, found {}", type_name(*v)));
  if (v->size() > 8) return json_error(ptr, fmt::format("array of {} entries; tensors have rank <= 8", v->size()));
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    int64_t x = 0;
    RIME_RETURN_IF_ERROR(ObjectReader::read_int((*v)[i], fmt::format("{}/{}", ptr, i), x));
    out.push_back(x);
  }
  return Status::success();
}

Status check_name_chars(const std::string& s, const std::string& ptr) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e)
      return json_error(ptr, fmt::format("name contains byte 0x{:02x}; names are printable ASCII", c));
  return Status::success();
}

Status read_tensor(const json& j, const std::string& ptr, TensorDesc& t) {
  ObjectReader r(j, ptr);
  RIME_RETURN_IF_ERROR(r.start());
  RIME_RETURN_IF_ERROR(r.get_string("name", t.name));
  RIME_RETURN_IF_ERROR(check_name_chars(t.name, r.at("name")));
  RIME_RETURN_IF_ERROR(r.get_int("uid", t.uid));
  const json* dims = r.find("dims");
  if (!dims) return r.missing("dims");
  RIME_RETURN_IF_ERROR(read_int_array(dims, r.at("dims"), t.dims));
  if (const json* strides = r.find("strides")) {
    RIME_RETURN_IF_ERROR(read_int_array(strides, r.at("strides"), t.strides));
  } else {
    bool positive = true;
    for (int64_t d : t.dims) positive = positive && d >= 1;
    // Strides are only derived from positive dims; validate() reports the rest with the dims' own message.
    t.strides = positive ? TensorDesc::packed_strides(t.dims) : std::vector<int64_t>(t.dims.size(), 1);
  }
  std::string dtype;
  RIME_RETURN_IF_ERROR(r.get_string("dtype", dtype));
  auto parsed = parse_data_type(dtype);
  if (!parsed)
    return json_error(r.at("dtype"), fmt::format("unknown dtype {} (expected FP32, FP16, BF16, FP8_E4M3, "
                                                 "FP8_E5M2, FP4_E2M1, FP8_E8M0, INT32, INT64)",
                                                 json_checked::quoted(dtype)));
  t.dtype = *parsed;
  RIME_RETURN_IF_ERROR(r.get_bool("output", t.is_output));
  return r.finish();
}

Status read_bindings(const json& j, const std::string& ptr, bool outputs, SdpaOp& op) {
  if (!j.is_object()) return json_error(ptr, fmt::format("expected an object, found {}", type_name(j)));
  for (auto it = j.begin(); it != j.end(); ++it) {
    auto role = parse_role(it.key());
    std::string p = ptr + "/" + json_checked::pointer_token(it.key());
    if (!role || is_output_role(*role) != outputs)
      return json_error(p, fmt::format("unknown {} {}", outputs ? "output" : "input", json_checked::quoted(it.key())));
    int64_t uid = 0;
    RIME_RETURN_IF_ERROR(ObjectReader::read_int(it.value(), p, uid));
    op.operands[static_cast<int>(*role)] = uid;
  }
  return Status::success();
}

Status read_attributes(const json& j, const std::string& ptr, SdpaAttributes& a) {
  ObjectReader r(j, ptr);
  RIME_RETURN_IF_ERROR(r.start());
  for (auto [key, out] : {std::pair{"attn_scale", &a.attn_scale}, std::pair{"logit_softcap", &a.logit_softcap}}) {
    const json* v = r.find(key);
    if (!v) continue;
    if (!v->is_number()) return json_error(r.at(key), fmt::format("expected a number, found {}", type_name(*v)));
    const double d = v->get<double>();
    if (!(std::fabs(d) <= std::numeric_limits<float>::max()))
      return json_error(r.at(key), fmt::format("{} {} does not fit in FP32", key, d));
    *out = static_cast<float>(d);
  }
  std::string q_quantization = "none";
  RIME_RETURN_IF_ERROR(r.get_string("q_quantization", q_quantization, false));
  if (auto q = parse_q_quantization(q_quantization)) a.q_quantization = *q;
  else
    return json_error(r.at("q_quantization"), fmt::format("unknown q_quantization {} (expected none or e4m3_per_row)",
                                                          json_checked::quoted(q_quantization)));
  RIME_RETURN_IF_ERROR(r.get_bool("generate_stats", a.generate_stats));
  RIME_RETURN_IF_ERROR(r.get_bool("stats_log2", a.stats_log2));
  RIME_RETURN_IF_ERROR(r.get_bool("causal", a.causal));
  std::string alignment = "top_left";
  RIME_RETURN_IF_ERROR(r.get_string("alignment", alignment, false));
  if (alignment == "top_left") a.alignment = DiagonalAlignment::TopLeft;
  else if (alignment == "bottom_right") a.alignment = DiagonalAlignment::BottomRight;
  else
    return json_error(r.at("alignment"),
                      fmt::format("unknown alignment {} (expected top_left or bottom_right)",
                                  json_checked::quoted(alignment)));
  RIME_RETURN_IF_ERROR(r.get_optional_int("window_left", a.window_left));
  RIME_RETURN_IF_ERROR(r.get_optional_int("band_right", a.band_right));
  RIME_RETURN_IF_ERROR(r.get_bool("padding_mask", a.padding_mask));
  RIME_RETURN_IF_ERROR(r.get_optional_int("max_seqlen_q", a.max_seqlen_q));
  RIME_RETURN_IF_ERROR(r.get_optional_int("max_seqlen_kv", a.max_seqlen_kv));
  return r.finish();
}

Status read_small_int(ObjectReader& r, const std::string& key, std::optional<int>& out) {
  if (!r.find(key)) return Status::success();
  int64_t x = 0;
  RIME_RETURN_IF_ERROR(r.get_int(key, x));
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    return json_error(r.at(key), fmt::format("{} {} does not fit in int32", key, x));
  out = static_cast<int>(x);
  return Status::success();
}

Status read_knobs(const json& j, const std::string& ptr, SdpaAttributes& a) {
  ObjectReader r(j, ptr);
  RIME_RETURN_IF_ERROR(r.start());
  RIME_RETURN_IF_ERROR(read_small_int(r, "split_kv", a.split_kv));
  if (const json* tile = r.find("tile")) {
    ObjectReader tr(*tile, r.at("tile"));
    RIME_RETURN_IF_ERROR(tr.start());
    std::optional<int> q, kv;
    RIME_RETURN_IF_ERROR(read_small_int(tr, "q", q));
    RIME_RETURN_IF_ERROR(read_small_int(tr, "kv", kv));
    if (!q) return tr.missing("q");
    if (!kv) return tr.missing("kv");
    RIME_RETURN_IF_ERROR(tr.finish());
    a.tile = TileShape{*q, *kv};
  }
  return r.finish();
}

Status read_op(const json& j, SdpaOp& op) {
  ObjectReader r(j, "/op");
  RIME_RETURN_IF_ERROR(r.start());
  std::string kind;
  RIME_RETURN_IF_ERROR(r.get_string("kind", kind));
  auto parsed = parse_op_kind(kind);
  if (!parsed)
    return json_error(r.at("kind"), fmt::format("unknown op kind {} (expected sdpa, sdpa_fp8, sdpa_mxfp8)",
                                                json_checked::quoted(kind)));
  op.kind = *parsed;
  RIME_RETURN_IF_ERROR(r.get_string("name", op.name, false));
  RIME_RETURN_IF_ERROR(check_name_chars(op.name, r.at("name")));
  const json* inputs = r.find("inputs");
  if (!inputs) return r.missing("inputs");
  RIME_RETURN_IF_ERROR(read_bindings(*inputs, r.at("inputs"), false, op));
  const json* outputs = r.find("outputs");
  if (!outputs) return r.missing("outputs");
  RIME_RETURN_IF_ERROR(read_bindings(*outputs, r.at("outputs"), true, op));
  if (const json* a = r.find("attributes")) RIME_RETURN_IF_ERROR(read_attributes(*a, r.at("attributes"), op.attributes));
  if (const json* k = r.find("knobs")) RIME_RETURN_IF_ERROR(read_knobs(*k, r.at("knobs"), op.attributes));
  return r.finish();
}

Status read_graph(const json& j, Graph& g) {
  ObjectReader r(j, "");
  RIME_RETURN_IF_ERROR(r.start());
  int64_t version = 0;
  RIME_RETURN_IF_ERROR(r.get_int("rime_graph", version));
  if (version != kGraphFormatVersion)
    return json_error(r.at("rime_graph"), fmt::format("graph format version {} is not supported (this rime reads {})",
                                                      version, kGraphFormatVersion));
  std::string name;
  RIME_RETURN_IF_ERROR(r.get_string("name", name));
  RIME_RETURN_IF_ERROR(check_name_chars(name, r.at("name")));
  g.set_name(name);
  const json* tensors = r.find("tensors");
  if (!tensors) return r.missing("tensors");
  if (!tensors->is_array())
    return json_error(r.at("tensors"), fmt::format("expected an array, found {}", type_name(*tensors)));
  if (tensors->size() > 64)
    return json_error(r.at("tensors"), fmt::format("{} tensors; an sdpa graph has at most {}", tensors->size(),
                                                   kRoleCount));
  for (size_t i = 0; i < tensors->size(); ++i) {
    TensorDesc t;
    RIME_RETURN_IF_ERROR(read_tensor((*tensors)[i], fmt::format("/tensors/{}", i), t));
    g.add_tensor(std::move(t));
  }
  const json* op = r.find("op");
  if (!op) return r.missing("op");
  SdpaOp parsed_op;
  RIME_RETURN_IF_ERROR(read_op(*op, parsed_op));
  RIME_RETURN_IF_ERROR(g.set_op(std::move(parsed_op)));
  return r.finish();
}

json to_json_value(const Graph& g) {
  json j;
  j["rime_graph"] = kGraphFormatVersion;
  j["name"] = g.name();
  j["tensors"] = json::array();
  for (const TensorDesc& t : g.tensors()) {
    json jt{{"name", t.name}, {"uid", t.uid}, {"dims", t.dims}, {"strides", t.strides},
            {"dtype", std::string(to_string(t.dtype))}};
    if (t.is_output) jt["output"] = true;
    j["tensors"].push_back(std::move(jt));
  }
  if (const auto& op = g.op()) {
    json jo{{"kind", std::string(to_string(op->kind))}, {"name", op->name}};
    jo["inputs"] = json::object();
    jo["outputs"] = json::object();
    for (int i = 0; i < kRoleCount; ++i) {
      if (!op->operands[i]) continue;
      Role role = static_cast<Role>(i);
      jo[is_output_role(role) ? "outputs" : "inputs"][std::string(to_string(role))] = *op->operands[i];
    }
    const SdpaAttributes& a = op->attributes;
    json ja = json::object();
    if (a.attn_scale) ja["attn_scale"] = static_cast<double>(*a.attn_scale);
    if (a.logit_softcap) ja["logit_softcap"] = static_cast<double>(*a.logit_softcap);
    if (a.q_quantization != QQuantization::None) ja["q_quantization"] = std::string(to_string(a.q_quantization));
    if (a.generate_stats) ja["generate_stats"] = true;
    if (a.stats_log2) ja["stats_log2"] = true;
    if (a.causal) ja["causal"] = true;
    if (a.alignment == DiagonalAlignment::BottomRight) ja["alignment"] = "bottom_right";
    if (a.window_left) ja["window_left"] = *a.window_left;
    if (a.band_right) ja["band_right"] = *a.band_right;
    if (a.padding_mask) ja["padding_mask"] = true;
    if (a.max_seqlen_q) ja["max_seqlen_q"] = *a.max_seqlen_q;
    if (a.max_seqlen_kv) ja["max_seqlen_kv"] = *a.max_seqlen_kv;
    if (!ja.empty()) jo["attributes"] = std::move(ja);
    json jk = json::object();
    if (a.split_kv) jk["split_kv"] = *a.split_kv;
    if (a.tile) jk["tile"] = json{{"q", a.tile->q}, {"kv", a.tile->kv}};
    if (!jk.empty()) jo["knobs"] = std::move(jk);
    j["op"] = std::move(jo);
  }
  return j;
}

}  // namespace

Result<Graph> parse_graph_json(std::string_view text) {
  if (text.size() > kMaxGraphJsonBytes)
    return json_error("", fmt::format("document of {} bytes; graph files are limited to {} bytes", text.size(),
                                      kMaxGraphJsonBytes));
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return json_error("", "empty document");
  RIME_RETURN_IF_ERROR(check_depth(text));
  try {
    // Duplicate keys are refused (nlohmann keeps the last one silently): the file means one thing or nothing.
    json_checked::DuplicateKeyFinder duplicates;
    json j = json::parse(text.begin(), text.end(), std::ref(duplicates));
    if (!duplicates.duplicate().empty())
      return json_error(duplicates.duplicate(), "this key appears twice in its object");
    Graph g;
    RIME_RETURN_IF_ERROR(read_graph(j, g));
    return g;
  } catch (const json::parse_error& e) {
    return json_error("", fmt::format("syntax error at byte {}: {}", e.byte, json_checked::valid_utf8(e.what())));
  } catch (const std::exception& e) {
    return json_error("", fmt::format("unreadable document: {}", json_checked::valid_utf8(e.what())));
  }
}

Result<Graph> graph_from_json(std::string_view text) {
  Result<Graph> g = parse_graph_json(text);
  if (!g.ok()) return g;
  RIME_RETURN_IF_ERROR(validate(g.value()));
  return g;
}

Result<Graph> load_graph_file(const std::string& path, bool run_validate) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return json_error("", fmt::format("cannot open '{}'", path));
  if (!S_ISREG(st.st_mode)) return json_error("", fmt::format("'{}' is not a regular file", path));
  if (static_cast<uint64_t>(st.st_size) > kMaxGraphJsonBytes)
    return json_error("", fmt::format("'{}' has {} bytes; graph files are limited to {} bytes", path, st.st_size,
                                      kMaxGraphJsonBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return json_error("", fmt::format("cannot open '{}'", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return run_validate ? graph_from_json(text) : parse_graph_json(text);
}

std::string graph_to_json(const Graph& graph, bool pretty) {
  // Names that are not valid UTF-8 (only possible through the C++ API) are replaced rather than thrown on;
  // validate() refuses such names, so a valid graph always round-trips exactly.
  return to_json_value(graph).dump(pretty ? 2 : -1, ' ', false, json::error_handler_t::replace) +
         (pretty ? "\n" : "");
}

std::string graph_hash(const Graph& graph) { return sha256_hex(graph_to_json(graph, false)); }

}  // namespace rime
