// Error messages bounded in length and kept on one printable line.
#include "hetplan/core/bounded_text.h"

#include <gtest/gtest.h>

#include <string>

namespace hetplan {
namespace {

TEST(BoundedMessage, ShortPrintableTextIsUnchanged) {
  EXPECT_EQ(bounded_message("cluster.yaml: nodes[0].count: expected a positive integer"),
            "cluster.yaml: nodes[0].count: expected a positive integer");
  EXPECT_EQ(bounded_message("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(BoundedMessage, ControlCharactersAreEscaped) {
  EXPECT_EQ(bounded_message(std::string("a\nb\x1b[31mc\td", 11)), "a\\x0ab\\x1b[31mc\\x09d");
  EXPECT_EQ(bounded_message(std::string("x\0y", 3)), "x\\x00y");
}

TEST(BoundedMessage, LongTextKeepsItsStartAndEnd) {
  const std::string key(100000, 'k');
  const std::string msg = "f.yaml: nodes[0]: unknown key '" + key + "' (expected count, device)";
  const std::string out = bounded_message(msg);
  EXPECT_LE(out.size(), kMaxMessageBytes);
  EXPECT_EQ(out.rfind("f.yaml: nodes[0]: unknown key 'kkk", 0), 0u);
  EXPECT_NE(out.find("kk' (expected count, device)"), std::string::npos);
  // 700 bytes kept at the start and 200 at the end.
  EXPECT_NE(out.find(" [... " + std::to_string(msg.size() - 900) + " bytes left out ...] "),
            std::string::npos);
}

TEST(BoundedMessage, NeverCutsInsideAUtf8Character) {
  // "x", then 1000 two-byte characters, then "y": byte 700 and byte 1802 (200 from the end) fall
  // inside characters, so the start keeps 699 bytes and the end 199.
  auto e = [](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += "\xc3\xa9";
    return s;
  };
  EXPECT_EQ(bounded_message("x" + e(1000) + "y"),
            "x" + e(349) + " [... 1104 bytes left out ...] " + e(99) + "y");
}

}  // namespace
}  // namespace hetplan
