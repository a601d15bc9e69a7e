// Reading JSON documents: keys given twice and deep nesting refused with the path, syntax errors
// reported as nlohmann's parse errors.
#include "hetplan/core/json_util.h"

#include <gtest/gtest.h>

#include <string>

#include "hetplan/core/error.h"

namespace hetplan {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json_unique_keys(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(UniqueKeys, ADocumentWithoutRepeatsParsesAsJsonParseDoes) {
  const std::string text = R"({"a": [1, {"b": 2, "c": [3, 4]}, null], "d": {"a": true}})";
  EXPECT_EQ(parse_json_unique_keys(text), Json::parse(text));
}

TEST(UniqueKeys, AKeyGivenTwiceIsRefusedWithItsPath) {
  EXPECT_EQ(error_of(R"({"a": 1, "a": 2})"),
            "a: duplicate key (each key may appear once in an object)");
  EXPECT_EQ(error_of(R"({"stages": [{}, {"replicas": [{"devices": [0], "devices": [1]}]}]})"),
            "stages[1].replicas[0].devices: duplicate key (each key may appear once in an object)");
  // The same key in sibling objects is no repeat.
  EXPECT_EQ(error_of(R"([{"a": 1}, {"a": 2}, {"b": {"a": 3}}])"), "");
}

TEST(UniqueKeys, NestingPast64LevelsIsRefused) {
  EXPECT_EQ(error_of(std::string(64, '[') + std::string(64, ']')), "");
  std::string path;  // the 65th array is the first element of the 64th
  for (int i = 0; i < 64; ++i) path += "[0]";
  EXPECT_EQ(error_of(std::string(65, '[') + std::string(65, ']')),
            path + ": expected at most 64 levels of nesting");
}

TEST(UniqueKeys, SyntaxErrorsAreJsonParseErrors) {
  EXPECT_THROW(parse_json_unique_keys(R"({"a": 1,)"), Json::parse_error);
  EXPECT_THROW(parse_json_unique_keys(""), Json::parse_error);
}

}  // namespace
}  // namespace hetplan
