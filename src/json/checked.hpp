// Internal: type-checked reads of JSON documents rime did not just write (plan artifacts, cache metadata).
// nlohmann::json's get<T>() throws on a mistyped field; these return a Status naming the JSON pointer and the
// type found instead, so that nothing throws across the API.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace rime::json_checked
