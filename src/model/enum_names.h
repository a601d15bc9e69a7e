// String tables for the model enums, shared by to_string and the parse_* functions.
#pragma once

#include <optional>
#include <string_view>
#include <utility>

namespace hetplan::model::detail {

template <class E, std::size_t N>
const char* name_of(const std::pair<E, const char*> (&table)[N], E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

template <class E, std::size_t N>
std::optional<E> value_of(const std::pair<E, const char*> (&table)[N], std::string_view name) {
  for (const auto& [v, n] : table)
    if (name == n) return v;
  return std::nullopt;
}

}  // namespace hetplan::model::detail
