// The messages' view of text from input files (base/parsing.hpp): what is invisible is shown.
#include "base/parsing.hpp"

#include <gtest/gtest.h>

#include <string>

namespace filkit::detail {
namespace {

TEST(Visible, ShowsControlCharactersAndInvisibleCodePointsEscaped) {
  EXPECT_EQ(visible("plain, é and 漢"), "plain, é and 漢");  // printable UTF-8 as it is
  EXPECT_EQ(visible("y\xEF\xBB\xBF"), "y\\u{FEFF}");         // a byte-order mark inside a name
  EXPECT_EQ(visible("a\rb\tc\nd"), "a\\rb\\tc\\nd");
  EXPECT_EQ(visible(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(visible("zero\xE2\x80\x8Bwidth"), "zero\\u{200B}width");
  EXPECT_EQ(visible("no\xC2\xA0"
                    "break"),
            "no\\u{00A0}break");
  EXPECT_EQ(visible("\x7F"), "\\x7F");
  EXPECT_EQ(visible("bad\xFF\xC3"), "bad\\xFF\\xC3");  // not UTF-8: each byte shown
  EXPECT_EQ(quoted_list({"a", "y\xEF\xBB\xBF"}), "'a', 'y\\u{FEFF}'");
}

}  // namespace
}  // namespace filkit::detail
