// Checks of option values, one family for every options struct's validate(): each throws an
// OptionError (base/errors.hpp) naming the option by its declared name (the name visit_fields
// gives it), the value and the rule, in one form: "clip_norm = -1: must be > 0", which the
// command line prints as "--clip-norm = -1: must be > 0" and Python raises as a ValueError.
// Also how every message shows a value or a shape.
#pragma once

#include "filkit/base/errors.hpp"
#include "filkit/base/types.hpp"

#include <concepts>
#include <string>
#include <vector>

namespace filkit {

/// Throws OptionError "<name> = <value>: <rule>".
[[noreturn]] void option_error(const std::string& name, const std::string& value, const Message& rule);
/// Throws OptionError "<name>: <rule>", for a rule no single value breaks (a missing option, two
/// options that exclude each other).
[[noreturn]] void option_error(const std::string& name, const Message& rule);

/// The value as the messages show it: integers exactly, doubles in the fewest digits that read back
/// as the same double ("0.1", "0.0001", "1e-05", "inf").
std::string shown_value(double value);
std::string shown_value(long long value);
/// A shape as the messages show it: "28 x 28".
std::string shape_text(const std::vector<Index>& shape);

/// value > 0 and finite.
void require_positive(const std::string& name, double value);
/// value >= 0 and finite.
void require_non_negative(const std::string& name, double value);
/// value >= minimum.
void require_at_least(const std::string& name, long long value, long long minimum);
/// low <= value <= high.
void require_in_range(const std::string& name, long long value, long long low, long long high);

/// Whether an end of an interval belongs to it.
enum class End { kOpen, kClosed };
/// value in the interval from low to high, each end open or closed: "must lie in [0, 1)".
void require_in_interval(const std::string& name, double value, double low, End low_end, double high, End high_end);

/// Integers: value >= 1, value >= 0.
template <std::integral T>
void require_positive(const std::string& name, T value) {
  require_at_least(name, static_cast<long long>(value), 1);
}
template <std::integral T>
void require_non_negative(const std::string& name, T value) {
  require_at_least(name, static_cast<long long>(value), 0);
}

}  // namespace filkit
