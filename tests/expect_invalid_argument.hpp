// A call that must throw std::invalid_argument (or a subclass: filkit's OptionError, DataError)
// whose message names the bad value.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace filkit {

inline void expect_invalid_argument_naming(const std::function<void()>& call, const std::string& name) {
  try {
    call();
    ADD_FAILURE() << "no std::invalid_argument for a bad " << name;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
  }
}

}  // namespace filkit
