#include "filkit/base/errors.hpp"

namespace filkit {

Message::Message(std::string text) {
  if (!text.empty()) parts_.push_back({std::move(text), false});
}

Message::Message(const char* text) : Message(std::string(text)) {}

Message::Message(OptionName option) { parts_.push_back({std::move(option.name), true}); }

Message& Message::operator+=(const Message& other) {
  for (const Part& part : other.parts_) {
    if (!part.option && !parts_.empty() && !parts_.back().option) parts_.back().text += part.text;
    else parts_.push_back(part);
  }
  return *this;
}

Message operator+(Message a, const Message& b) {
  a += b;
  return a;
}

std::string Message::spelled(const OptionSpelling& spell) const {
  std::string out;
  for (const Part& part : parts_) out += part.option && spell ? spell(part.text) : part.text;
  return out;
}

std::string Message::plain() const { return spelled(nullptr); }

std::vector<std::string> Message::options() const {
  std::vector<std::string> names;
  for (const Part& part : parts_)
    if (part.option) names.push_back(part.text);
  return names;
}

OptionError::OptionError(const std::string& option, const Message& text, int)
    : std::invalid_argument(text.plain()), Error(ErrorKind::kOption, text), option_(option) {}

OptionError::OptionError(const std::string& option, const std::string& value, const Message& rule)
    : OptionError(option, option_name(option) + " = " + value + ": " + rule, 0) {}

OptionError::OptionError(const std::string& option, const Message& rule)
    : OptionError(option, option_name(option) + ": " + rule, 0) {}

DataError::DataError(const Message& text) : std::invalid_argument(text.plain()), Error(ErrorKind::kData, text) {}

ResourceError::ResourceError(const Message& text)
    : std::runtime_error(text.plain()), Error(ErrorKind::kResource, text) {}

NumericalError::NumericalError(const Message& text)
    : std::runtime_error(text.plain()), Error(ErrorKind::kNumerical, text) {}

std::string error_message(const std::exception& error, const OptionSpelling& spell) {
  if (const auto* typed = dynamic_cast<const Error*>(&error)) return typed->message(spell);
  return error.what();
}

}  // namespace filkit
