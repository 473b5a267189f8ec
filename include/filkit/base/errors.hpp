// filkit's typed errors. Four kinds, each a standard exception (so that code catching
// std::invalid_argument or std::runtime_error still catches them) and a filkit::Error:
//
//   OptionError     an option's value breaks its rule          std::invalid_argument
//   DataError       an input file or array is malformed        std::invalid_argument
//   ResourceError   the machine cannot do it: files, devices,  std::runtime_error
//                   processes; MemoryLimitError, a size beyond
//                   the memory budget or an allocation failing
//   NumericalError  a computation failed (NaN, divergence)     std::runtime_error
//
// A message names options by the name their struct's visit_fields declares (base/options.hpp),
// marked as options (option_name), so that each front end spells them as its users type them:
// the command line as --name-with-dashes (and maps the kinds to exit codes), Python as the
// keyword (and raises ValueError, OSError, MemoryError and ArithmeticError subclasses). what()
// spells them by their declared names, which are the Python keywords.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace filkit {

/// How a front end spells an option it is given by its declared name.
using OptionSpelling = std::function<std::string(std::string_view name)>;

/// An option named in a message (by its declared name): option_name("clip_norm").
struct OptionName {
  std::string name;
};
inline OptionName option_name(std::string name) { return OptionName{std::move(name)}; }

/// Message text in which options are marked, to be spelled by a front end. Built by +, from text
/// and option_name(...): "must be <= " + option_name("batch_size").
class Message {
 public:
  Message() = default;
  Message(std::string text);   // NOLINT: text is a message
  Message(const char* text);   // NOLINT
  Message(OptionName option);  // NOLINT
  Message& operator+=(const Message& other);
  /// The text with each option spelled by `spell`.
  std::string spelled(const OptionSpelling& spell) const;
  /// The text with each option by its declared name.
  std::string plain() const;
  /// The options named, in order.
  std::vector<std::string> options() const;

 private:
  struct Part {
    std::string text;
    bool option = false;
  };
  std::vector<Part> parts_;
};
Message operator+(Message a, const Message& b);

enum class ErrorKind { kOption, kData, kResource, kNumerical };

/// What every typed error has besides its standard exception: its kind and its message with the
/// options marked.
class Error {
 public:
  virtual ~Error() = default;
  ErrorKind kind() const { return kind_; }
  /// The message with options spelled by `spell` (what() spells them by their declared names).
  std::string message(const OptionSpelling& spell) const { return text_.spelled(spell); }
  const Message& text() const { return text_; }

 protected:
  Error(ErrorKind kind, Message text) : kind_(kind), text_(std::move(text)) {}

 private:
  ErrorKind kind_;
  Message text_;
};

/// An option's value breaks its rule: "<option> = <value>: <rule>", or "<option>: <rule>" where
/// no single value is at fault. `option` is the declared name.
class OptionError : public std::invalid_argument, public Error {
 public:
  OptionError(const std::string& option, const std::string& value, const Message& rule);
  OptionError(const std::string& option, const Message& rule);
  /// A message of another form, about `option` (e.g. a product of several options).
  static OptionError with_text(const std::string& option, const Message& text) { return {option, text, 0}; }
  const std::string& option() const { return option_; }

 private:
  OptionError(const std::string& option, const Message& text, int);
  std::string option_;
};

/// An input file or array is malformed; the message names the file and the position.
class DataError : public std::invalid_argument, public Error {
 public:
  explicit DataError(const Message& text);
};

/// The machine cannot do what was asked: a file or device, a process, a thread.
class ResourceError : public std::runtime_error, public Error {
 public:
  explicit ResourceError(const Message& text);
};

/// A size beyond the memory budget (max_memory), or an allocation that failed.
class MemoryLimitError : public ResourceError {
 public:
  explicit MemoryLimitError(const Message& text) : ResourceError(text) {}
};

/// A computation failed: a result that must be finite is not, training diverged.
class NumericalError : public std::runtime_error, public Error {
 public:
  explicit NumericalError(const Message& text);
};

/// The message of any exception, options spelled by `spell` when it is a filkit::Error.
std::string error_message(const std::exception& error, const OptionSpelling& spell);

}  // namespace filkit
