#include "json/checked.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
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

namespace {
void escape_into(std::string& out, unsigned char c) {
  if (c < 0x20 || c >= 0x7f) out += fmt::format("\\u{:04x}", c);
  else out += static_cast<char>(c);
}
}  // namespace

std::string pointer_token(std::string_view key) {
  std::string out;
  for (unsigned char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else escape_into(out, c);
  }
  return out;
}

std::string quoted(std::string_view text) {
  std::string out = "'";
  for (unsigned char c : text) escape_into(out, c);
  return out + "'";
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // The sequence's length from its lead byte, and the range its second byte must fall in (RFC 3629: no overlong
    // forms, no surrogates, nothing past U+10FFFF).
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) n = 1;
    else if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    bool whole = n > 0 && i + n <= text.size();
    for (size_t k = 1; whole && k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(text[i + k]);
      whole = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    }
    if (whole) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02X}", c);
      ++i;
    }
  }
  return out;
}

// The pointer of the innermost open object: each enclosing container's current child.
std::string DuplicateKeyFinder::path() const {
  std::string p;
  for (size_t i = 0; i + 1 < frames_.size(); ++i) {
    const Frame& f = frames_[i];
    p += "/" + (f.object ? pointer_token(f.keys.empty() ? "" : f.keys.back()) : std::to_string(f.index));
  }
  return p;
}

bool DuplicateKeyFinder::operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
  auto element_done = [&] {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  };
  switch (event) {
    case json::parse_event_t::object_start: frames_.push_back(Frame{true, {}, 0}); break;
    case json::parse_event_t::array_start: frames_.push_back(Frame{false, {}, 0}); break;
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      if (!frames_.empty()) frames_.pop_back();
      element_done();
      break;
    case json::parse_event_t::key: {
      if (frames_.empty()) break;
      const std::string key = parsed.get<std::string>();
      Frame& f = frames_.back();
      if (duplicate_.empty() && std::find(f.keys.begin(), f.keys.end(), key) != f.keys.end()) {
        duplicate_ = path() + "/" + pointer_token(key);
      }
      f.keys.push_back(key);
      break;
    }
    case json::parse_event_t::value: element_done(); break;
  }
  return true;
}

Status parse_object(const std::string& text, json& out, StatusCode code) {
  DuplicateKeyFinder finder;
  try {
    out = json::parse(text, std::ref(finder), /*allow_exceptions=*/false);
  } catch (const std::exception& e) {
    return Status(code, fmt::format("does not parse: {}", valid_utf8(e.what())));
  }
  if (out.is_discarded()) return Status(code, "does not parse as JSON");
  if (!finder.duplicate().empty())
    return Status(code, "a key appears twice in one object", finder.duplicate());
  if (!out.is_object()) return Status(code, fmt::format("expected an object, found {}", type_name(out)));
  return Status::success();
}

}  // namespace rime::json_checked
