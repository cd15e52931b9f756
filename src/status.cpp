#include "rime/status.hpp"

namespace rime {

const char* to_string(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::Ok: return "Ok";
    case StatusCode::InvalidGraph: return "InvalidGraph";
    case StatusCode::InvalidJson: return "InvalidJson";
    case StatusCode::NotSupported: return "NotSupported";
    case StatusCode::CompileFailed: return "CompileFailed";
    case StatusCode::CacheCorrupt: return "CacheCorrupt";
    case StatusCode::CudaError: return "CudaError";
    case StatusCode::Internal: return "Internal";
    case StatusCode::InvalidArgument: return "InvalidArgument";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  std::string s = rime::to_string(code_);
  if (!location_.empty()) s += " at " + location_;
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace rime
