// Internal: early return on a failed Status.
#pragma once

#include "rime/status.hpp"

#define RIME_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::rime::Status rime_status_ = (expr);       \
    if (!rime_status_.ok()) return rime_status_; \
  } while (0)
