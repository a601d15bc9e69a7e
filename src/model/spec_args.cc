#include "spec_args.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "hetplan/core/error.h"
#include "hetplan/core/nearest_name.h"

namespace hetplan::model::detail {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

SpecArgs::SpecArgs(std::string label, std::string_view base, std::string_view overrides)
    : label_(std::move(label)) {
  for (std::string_view text : {base, overrides}) {
    std::vector<std::string> keys_of_text;  // a key may override the base's once, not twice
    while (!trim(text).empty()) {
      const std::size_t comma = text.find(',');
      const std::string_view item = trim(text.substr(0, comma));
      text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos || trim(item.substr(0, eq)).empty())
        throw InputError(fmt::format("{}: '{}'", label_, item), "expected key=value");
      Entry e{std::string(trim(item.substr(0, eq))), std::string(trim(item.substr(eq + 1)))};
      if (std::find(keys_of_text.begin(), keys_of_text.end(), e.key) != keys_of_text.end())
        throw InputError(fmt::format("{}: {}", label_, e.key),
                         "given twice; expected each key once");
      keys_of_text.push_back(e.key);
      auto same = [&](const Entry& o) { return o.key == e.key; };
      auto it = std::find_if(entries_.begin(), entries_.end(), same);
      if (it != entries_.end())
        it->value = e.value;  // an override
      else
        entries_.push_back(std::move(e));
    }
  }
}

const SpecArgs::Entry* SpecArgs::find(std::string_view key) const {
  for (const Entry& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

void SpecArgs::note(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
}

bool SpecArgs::has(std::string_view key) const { return find(key) != nullptr; }

void SpecArgs::set(std::string_view key, std::string_view value) {
  for (Entry& e : entries_)
    if (e.key == key) {
      e.value = std::string(value);
      return;
    }
  entries_.push_back({std::string(key), std::string(value)});
}

void SpecArgs::fail(std::string_view key, const std::string& expected) const {
  const Entry* e = find(key);
  const std::string field = e ? fmt::format("{}={}", e->key, e->value) : std::string(key);
  throw InputError(fmt::format("{}: {}", label_, field), expected);
}

void SpecArgs::fail_spec(const std::string& expected) const { throw InputError(label_, expected); }

std::int64_t SpecArgs::integer(std::string_view key, std::int64_t dflt, std::int64_t lo,
                               std::int64_t hi) {
  note(key);
  const Entry* e = find(key);
  if (!e) return dflt;
  std::int64_t v = 0;
  const char* end = e->value.data() + e->value.size();
  auto [ptr, ec] = std::from_chars(e->value.data(), end, v);
  if (ec != std::errc() || ptr != end || v < lo || v > hi)
    fail(key, fmt::format("expected an integer from {} to {}", lo, hi));
  return v;
}

std::int64_t SpecArgs::required(std::string_view key, std::int64_t lo, std::int64_t hi) {
  if (!has(key)) {
    note(key);
    // A key not asked for yet that looks like this one was likely meant for it: say so rather
    // than that the key is missing ("gpt: hiden=64: unknown key (did you mean 'hidden'?)").
    for (const Entry& e : entries_)
      if (std::find(known_.begin(), known_.end(), e.key) == known_.end() && likely_typo(e.key, key))
        throw InputError(fmt::format("{}: {}={}", label_, e.key, e.value),
                         fmt::format("unknown key (did you mean '{}'?)", key));
    fail(key, fmt::format("missing; expected an integer from {} to {}", lo, hi));
  }
  return integer(key, 0, lo, hi);
}

bool SpecArgs::flag(std::string_view key, bool dflt) {
  note(key);
  const Entry* e = find(key);
  if (!e) return dflt;
  if (e->value == "1" || e->value == "true") return true;
  if (e->value == "0" || e->value == "false") return false;
  fail(key, "expected true or false (or 1 or 0)");
}

std::string SpecArgs::choice(std::string_view key, std::string_view dflt,
                             const std::vector<std::string>& allowed) {
  note(key);
  const Entry* e = find(key);
  if (!e) return std::string(dflt);
  if (std::find(allowed.begin(), allowed.end(), e->value) == allowed.end())
    fail(key, fmt::format("expected one of {}", fmt::join(allowed, ", ")));
  return e->value;
}

void SpecArgs::finish() const {
  for (const Entry& e : entries_)
    if (std::find(known_.begin(), known_.end(), e.key) == known_.end())
      throw InputError(fmt::format("{}: {}={}", label_, e.key, e.value),
                       fmt::format("unknown key{}; expected one of {}", did_you_mean(e.key, known_),
                                   fmt::join(known_, ", ")));
}

}  // namespace hetplan::model::detail
