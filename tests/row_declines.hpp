// A feature the rows do not serve yet: every row that serves a graph without it declines the graph with it, naming
// the field and the reason (the matcher's verdict, the first field that fails).
#pragma once

#include <string>

#include "catch.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"

namespace rime::test {

inline const CapabilityRow& row_of(const std::string& id) {
  for (const CapabilityRow& r : capability_rows())
    if (r.id == id) return r;
  FAIL("no capability row " << id);
  return capability_rows().front();
}

// Returns how many rows serve `without` (each of which must decline `with` by `field` and `reason`).
inline int rows_declining(const Facts& without, const Facts& with, const std::string& field,
                          const std::string& reason) {
  int serving = 0;
  for (const RowVerdict& v : match(without)) {
    if (!v.accepted) continue;
    ++serving;
    const RowVerdict declined = match_row(row_of(v.row_id), with);
    INFO(v.row_id << ": " << declined.reason);
    CHECK_FALSE(declined.accepted);
    CHECK(declined.field == field);
    CHECK(declined.reason.find(reason) != std::string::npos);
  }
  return serving;
}

}  // namespace rime::test
