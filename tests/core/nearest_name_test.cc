// Suggestions for mistyped keys.
#include "hetplan/core/nearest_name.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace hetplan {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("bandwith", "bandwidth"), 1u);
  EXPECT_EQ(edit_distance("Latency", "latency"), 0u);  // case ignored
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
}

TEST(DidYouMean, SuggestsTheOneNearName) {
  const std::vector<std::string> keys = {"bandwidth", "count", "latency"};
  EXPECT_EQ(did_you_mean("bandwith", keys), " (did you mean 'bandwidth'?)");
  EXPECT_EQ(did_you_mean("cont", keys), " (did you mean 'count'?)");
  EXPECT_EQ(did_you_mean("speed", keys), "");    // nothing near
  EXPECT_EQ(did_you_mean("latency", keys), "");  // not a typo: the name itself
  const std::array<std::string_view, 3> ranks = {"dp", "tp", "pp"};
  EXPECT_EQ(did_you_mean("p", ranks), "");  // as near to all three: no guess
  EXPECT_EQ(did_you_mean("tpp", ranks), "");
  EXPECT_EQ(did_you_mean("dpp", std::array<const char*, 2>{"dp", "zero"}), " (did you mean 'dp'?)");
}

}  // namespace
}  // namespace hetplan
