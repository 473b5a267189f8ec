// The notes of a report as one text, for the report tests to search.
#pragma once

#include "filkit/report/report.hpp"

#include <string>

namespace filkit::testing {

inline std::string notes_text(const ReportResult& result) {
  std::string text;
  for (const std::string& note : result.notes) text += note + "\n";
  return text;
}

}  // namespace filkit::testing
