#include "json/checked.hpp"

#include <fmt/format.h>

#include <limits>
#include <set>
#include <vector>

namespace rime::json_checked {

const char* type_name(const json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return "integer";
  return j.type_name();
}

namespace {

Status find(const json& obj, const char* key, const json*& out, const std::string& pointer, StatusCode code) {
  if (!obj.is_object())
    return Status(code, fmt::format("expected an object, found {}", type_name(obj)), pointer);
  auto it = obj.find(key);
  if (it == obj.end()) return Status(code, fmt::format("missing field '{}'", key), pointer + "/" + key);
  out = &*it;
  return Status::success();
}

Status wrong_type(const json& v, const char* key, const char* want, const std::string& pointer, StatusCode code) {
  return Status(code, fmt::format("field '{}' is {}, expected {}", key, type_name(v), want), pointer + "/" + key);
}

}  // namespace

Status get_object(const json& obj, const char* key, const json*& out, const std::string& pointer, StatusCode code) {
  Status s = find(obj, key, out, pointer, code);
  if (!s.ok()) return s;
  return out->is_object() ? Status::success() : wrong_type(*out, key, "an object", pointer, code);
}

Status get_array(const json& obj, const char* key, const json*& out, const std::string& pointer, StatusCode code) {
  Status s = find(obj, key, out, pointer, code);
  if (!s.ok()) return s;
  return out->is_array() ? Status::success() : wrong_type(*out, key, "an array", pointer, code);
}

Status get_string(const json& obj, const char* key, std::string& out, const std::string& pointer, StatusCode code) {
  const json* v = nullptr;
  Status s = find(obj, key, v, pointer, code);
  if (!s.ok()) return s;
  if (!v->is_string()) return wrong_type(*v, key, "a string", pointer, code);
  out = v->get_ref<const std::string&>();
  return Status::success();
}

Status get_int(const json& obj, const char* key, int64_t& out, const std::string& pointer, StatusCode code) {
  const json* v = nullptr;
  Status s = find(obj, key, v, pointer, code);
  if (!s.ok()) return s;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return Status(code, fmt::format("field '{}' = {} does not fit in int64", key, u), pointer + "/" + key);
    out = static_cast<int64_t>(u);
    return Status::success();
  }
  if (!v->is_number_integer()) return wrong_type(*v, key, "an integer", pointer, code);
  out = v->get<int64_t>();
  return Status::success();
}

Status get_int32(const json& obj, const char* key, int& out, const std::string& pointer, StatusCode code) {
  int64_t x = 0;
  Status s = get_int(obj, key, x, pointer, code);
  if (!s.ok()) return s;
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    return Status(code, fmt::format("field '{}' = {} does not fit in int32", key, x), pointer + "/" + key);
  out = static_cast<int>(x);
  return Status::success();
}

Status get_number(const json& obj, const char* key, double& out, const std::string& pointer, StatusCode code) {
  const json* v = nullptr;
  Status s = find(obj, key, v, pointer, code);
  if (!s.ok()) return s;
  if (!v->is_number()) return wrong_type(*v, key, "a number", pointer, code);
  out = v->get<double>();
  return Status::success();
}

Status get_bool(const json& obj, const char* key, bool& out, const std::string& pointer, StatusCode code) {
  const json* v = nullptr;
  Status s = find(obj, key, v, pointer, code);
  if (!s.ok()) return s;
  if (!v->is_boolean()) return wrong_type(*v, key, "a boolean", pointer, code);
  out = v->get<bool>();
  return Status::success();
}

Status parse_object(const std::string& text, json& out, StatusCode code) {
  // The SAX callback sees every key as it is read: a second occurrence within one object is refused (nlohmann
  // keeps the last one silently).
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: open.emplace_back(); break;
      case json::parse_event_t::object_end: if (!open.empty()) open.pop_back(); break;
      case json::parse_event_t::key:
        if (!open.empty() && !open.back().insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default: break;
    }
    return true;
  };
  try {
    out = json::parse(text, callback, /*allow_exceptions=*/false);
  } catch (const std::exception& e) {
    return Status(code, fmt::format("does not parse: {}", e.what()));
  }
  if (out.is_discarded()) return Status(code, "does not parse as JSON");
  if (!duplicate.empty()) return Status(code, fmt::format("key '{}' appears twice in one object", duplicate));
  if (!out.is_object()) return Status(code, fmt::format("expected an object, found {}", type_name(out)));
  return Status::success();
}

}  // namespace rime::json_checked
