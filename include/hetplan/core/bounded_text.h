// Error messages of bounded length and printable text, however long or odd the input they quote.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hetplan {

// The longest message bounded_message returns, in bytes.
inline constexpr std::size_t kMaxMessageBytes = 1000;

// `text` as one printable line of at most kMaxMessageBytes bytes: control characters (a newline,
// an escape sequence, a NUL quoted from the input) written as \xNN; past the bound, the start and
// the end kept (what names the file and field, and what says what was expected) around
// " [... N bytes left out ...] ". Never cuts inside a UTF-8 character.
std::string bounded_message(std::string_view text);

}  // namespace hetplan
