// Internal to the runtime: small helpers the training loops share.
#pragma once

#include <c10/util/Exception.h>

#include <chrono>
#include <exception>
#include <string>

namespace hetplan::runtime::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What a failed collective or point-to-point wait says, on one line and without a backtrace.
inline std::string failure_text(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10 ? c10->what_without_backtrace() : e.what();
  if (const auto eol = text.find('\n'); eol != std::string::npos) text.resize(eol);
  return text;
}

}  // namespace hetplan::runtime::detail
