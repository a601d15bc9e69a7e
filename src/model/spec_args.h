// The key=value arguments of a family spec ("layers=24,hidden=2304"), read with errors that name
// the key and what was expected: "gpt: heads=7: expected a divisor of hidden (2304)".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hetplan::model::detail {

class SpecArgs {
 public:
  // `label` prefixes errors (the family or preset name). Keys in `overrides` replace those in
  // `base`; a key given twice in one of them is an error. Throws InputError.
  SpecArgs(std::string label, std::string_view base, std::string_view overrides = {});

  bool has(std::string_view key) const;
  // Gives `key` the value whatever the spec said (a plan's precision= sets dtype).
  void set(std::string_view key, std::string_view value);
  // An integer in [lo, hi]; `dflt` when the key is absent.
  std::int64_t integer(std::string_view key, std::int64_t dflt, std::int64_t lo, std::int64_t hi);
  std::int64_t required(std::string_view key, std::int64_t lo, std::int64_t hi);
  bool flag(std::string_view key, bool dflt);  // true/false or 1/0
  std::string choice(std::string_view key, std::string_view dflt,
                     const std::vector<std::string>& allowed);

  // Throws "label: key=value: expected ..." for the key's value.
  [[noreturn]] void fail(std::string_view key, const std::string& expected) const;
  // Throws "label: expected ..." about the spec as a whole.
  [[noreturn]] void fail_spec(const std::string& expected) const;
  // Throws for the first key that no accessor asked for, listing the keys this family accepts.
  void finish() const;

 private:
  struct Entry {
    std::string key, value;
  };
  const Entry* find(std::string_view key) const;
  void note(std::string_view key);

  std::string label_;
  std::vector<Entry> entries_;
  std::vector<std::string> known_;
};

}  // namespace hetplan::model::detail
