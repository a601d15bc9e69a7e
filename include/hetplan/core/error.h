// Errors from bad user input, kept apart from broken invariants (assertions).
// A user-facing error names where it came from (file or argument), the field and what was expected.
#pragma once

#include <cassert>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace hetplan {

struct Error {
  std::string message;  // one line: "<source>: <field>: <what was expected>"
};

// Builds "source: field: expected" with the empty parts left out.
Error make_error(const std::string& source, const std::string& field, const std::string& expected);

// Thrown inside parsers and converted to Result at their public boundary; never escapes a library
// function that returns Result.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& msg) : std::runtime_error(msg) {}
  InputError(const std::string& field, const std::string& expected)
      : std::runtime_error(field + ": " + expected) {}
};

// A value or a user-facing error (a small std::expected).
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit on purpose
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Runs f(); turns an InputError (or a std::exception from a parsing library) into an Error whose
// message is prefixed by source.
template <class F>
auto capture_errors(const std::string& source, F&& f) -> Result<decltype(f())> {
  try {
    return f();
  } catch (const InputError& e) {
    return Error{source.empty() ? std::string(e.what()) : source + ": " + e.what()};
  } catch (const std::exception& e) {
    return Error{source.empty() ? std::string(e.what()) : source + ": " + e.what()};
  }
}

}  // namespace hetplan
