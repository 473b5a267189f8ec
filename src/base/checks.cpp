#include "filkit/base/checks.hpp"

#include "filkit/base/io.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace filkit {

void option_error(const std::string& name, const std::string& value, const Message& rule) {
  throw OptionError(name, value, rule);
}

void option_error(const std::string& name, const Message& rule) { throw OptionError(name, rule); }

std::string shown_value(double value) {
  // Integers as integers; otherwise the fewest %g digits that read back as the same double: as
  // short as format_double's, but "0.0001" rather than "1e-04" (%g writes plain decimals down to 1e-4).
  if (!std::isfinite(value)) return format_double(value);
  if (value == std::floor(value) && std::abs(value) < 1e15) return std::to_string(static_cast<long long>(value));
  char buffer[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}
std::string shown_value(long long value) { return std::to_string(value); }

std::string shape_text(const std::vector<Index>& shape) {
  std::string text;
  for (const Index dim : shape) text += (text.empty() ? "" : " x ") + std::to_string(dim);
  return text;
}

void require_positive(const std::string& name, double value) {
  if (!(value > 0.0)) option_error(name, shown_value(value), "must be > 0");
  if (!std::isfinite(value)) option_error(name, shown_value(value), "must be finite");
}

void require_non_negative(const std::string& name, double value) {
  if (!(value >= 0.0)) option_error(name, shown_value(value), "must be >= 0");
  if (!std::isfinite(value)) option_error(name, shown_value(value), "must be finite");
}

void require_at_least(const std::string& name, long long value, long long minimum) {
  if (value < minimum) option_error(name, shown_value(value), "must be >= " + shown_value(minimum));
}

void require_in_range(const std::string& name, long long value, long long low, long long high) {
  if (value < low || value > high)
    option_error(name, shown_value(value), "must be in " + shown_value(low) + ".." + shown_value(high));
}

void require_in_interval(const std::string& name, double value, double low, End low_end, double high, End high_end) {
  const bool above = low_end == End::kOpen ? value > low : value >= low;
  const bool below = high_end == End::kOpen ? value < high : value <= high;
  if (above && below) return;  // NaN fails both
  option_error(name, shown_value(value),
               std::string("must lie in ") + (low_end == End::kOpen ? "(" : "[") + shown_value(low) + ", " +
                   shown_value(high) + (high_end == End::kOpen ? ")" : "]"));
}

}  // namespace filkit
