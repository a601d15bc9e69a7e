// Loads a model spec in a test, recording a failure (with the error) when it does not load.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "hetplan/model/zoo.h"

namespace hetplan::model::testing {

inline Model load_or_fail(const std::string& spec) {
  auto m = load_model(spec);
  EXPECT_TRUE(m.ok()) << spec << ": " << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : Model{};
}

}  // namespace hetplan::model::testing
