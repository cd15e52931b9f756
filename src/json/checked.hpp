// Internal: type-checked reads of JSON documents rime did not just write (plan artifacts, cache metadata).
// nlohmann::json's get<T>() throws on a mistyped field; these return a Status naming the JSON pointer and the
// type found instead, so that nothing throws across the API.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "rime/status.hpp"

namespace rime::json_checked {

using nlohmann::json;

// The JSON type of a value as an error message names it ("integer", "string", "object", ...).
const char* type_name(const json& j);

// Each reads obj[key] into out. A missing key or a value of another type is an error of `code`, located at
// pointer + "/" + key. Integers must be exact (no 1.5, no values past int64; get_int32 also bounds to int32).
Status get_object(const json& obj, const char* key, const json*& out, const std::string& pointer,
                  StatusCode code = StatusCode::InvalidJson);
Status get_array(const json& obj, const char* key, const json*& out, const std::string& pointer,
                 StatusCode code = StatusCode::InvalidJson);
Status get_string(const json& obj, const char* key, std::string& out, const std::string& pointer,
                  StatusCode code = StatusCode::InvalidJson);
Status get_int(const json& obj, const char* key, int64_t& out, const std::string& pointer,
               StatusCode code = StatusCode::InvalidJson);
Status get_int32(const json& obj, const char* key, int& out, const std::string& pointer,
                 StatusCode code = StatusCode::InvalidJson);
Status get_number(const json& obj, const char* key, double& out, const std::string& pointer,
                  StatusCode code = StatusCode::InvalidJson);
Status get_bool(const json& obj, const char* key, bool& out, const std::string& pointer,
                StatusCode code = StatusCode::InvalidJson);

// Parses text that must be a JSON object, refusing duplicate keys. Never throws.
Status parse_object(const std::string& text, json& out, StatusCode code = StatusCode::InvalidJson);

// One reference token of a JSON pointer (RFC 6901: '~' as ~0, '/' as ~1), with the bytes that could forge a
// line or a control sequence in a message (below 0x20, 0x7f, and non-ASCII) written \u00XX.
std::string pointer_token(std::string_view key);
// A string a user wrote, for a message: quoted, with the same bytes escaped as pointer_token does.
std::string quoted(std::string_view text);
// Text for a message that may hold a cut UTF-8 sequence (a parser's excerpt of the document): every whole
// sequence kept, every byte outside one written \xNN, so that the message is valid UTF-8 (Python decodes it).
std::string valid_utf8(std::string_view text);

// The parser callback that refuses duplicate keys: set `duplicate` to the JSON pointer of the first key seen
// twice in one object (empty while there is none).
class DuplicateKeyFinder {
 public:
  bool operator()(int depth, json::parse_event_t event, json& parsed);
  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool object = true;
    std::vector<std::string> keys;  // of an object, in order
    size_t index = 0;               // of an array: the next element's
  };
  std::string path() const;
  std::vector<Frame> frames_;
  std::string duplicate_;
};

}  // namespace rime::json_checked
