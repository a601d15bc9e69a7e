#include "hetplan/core/bounded_text.h"

#include <fmt/format.h>

namespace hetplan {
namespace {

bool continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string bounded_message(std::string_view text) {
  std::string line = printable(text);
  if (line.size() <= kMaxMessageBytes) return line;
  // Keep 700 bytes of the start and 200 of the end, each moved to a character boundary.
  std::size_t head = 700;
  while (head > 0 && continuation(line[head])) --head;
  std::size_t tail = line.size() - 200;
  while (tail < line.size() && continuation(line[tail])) ++tail;
  return fmt::format("{} [... {} bytes left out ...] {}", line.substr(0, head), tail - head,
                     line.substr(tail));
}

}  // namespace hetplan
