// Physical quantities as distinct types, so a cost model cannot add seconds to bytes.
// All quantities hold a double in SI base units (seconds, bytes, FLOPs).
#pragma once

#include <compare>
#include <cstdint>
#include <ostream>

namespace hetplan {

template <class Tag>
struct Quantity {
  double value = 0.0;

  constexpr Quantity() = default;
  constexpr explicit Quantity(double v) : value(v) {}

  constexpr auto operator<=>(const Quantity&) const = default;

  constexpr Quantity operator+(Quantity o) const { return Quantity(value + o.value); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value - o.value); }
  constexpr Quantity& operator+=(Quantity o) {
    value += o.value;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value -= o.value;
    return *this;
  }
  constexpr Quantity operator*(double k) const { return Quantity(value * k); }
  constexpr Quantity operator/(double k) const { return Quantity(value / k); }
  constexpr Quantity& operator*=(double k) {
    value *= k;
    return *this;
  }
  constexpr double operator/(Quantity o) const { return value / o.value; }
  friend constexpr Quantity operator*(double k, Quantity q) { return Quantity(k * q.value); }
  friend std::ostream& operator<<(std::ostream& os, Quantity q) { return os << q.value; }
};

struct SecondsTag {};
struct BytesTag {};
struct FlopsTag {};
struct BytesPerSecondTag {};
struct FlopsPerSecondTag {};
struct UsdTag {};
struct UsdPerHourTag {};

using Seconds = Quantity<SecondsTag>;
using Bytes = Quantity<BytesTag>;
using Flops = Quantity<FlopsTag>;
using BytesPerSecond = Quantity<BytesPerSecondTag>;
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;
// Money, for rental prices: US dollars, and US dollars per hour of use.
using Usd = Quantity<UsdTag>;
using UsdPerHour = Quantity<UsdPerHourTag>;

constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds(b.value / r.value); }
constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds(f.value / r.value); }
constexpr Bytes operator*(BytesPerSecond r, Seconds t) { return Bytes(r.value * t.value); }
constexpr Flops operator*(FlopsPerSecond r, Seconds t) { return Flops(r.value * t.value); }
constexpr FlopsPerSecond operator/(Flops f, Seconds t) { return FlopsPerSecond(f.value / t.value); }
constexpr BytesPerSecond operator/(Bytes b, Seconds t) { return BytesPerSecond(b.value / t.value); }
constexpr Usd operator*(UsdPerHour p, Seconds t) { return Usd(p.value * t.value / 3600.0); }

template <class Tag>
constexpr Quantity<Tag> max(Quantity<Tag> a, Quantity<Tag> b) {
  return a < b ? b : a;
}
template <class Tag>
constexpr Quantity<Tag> min(Quantity<Tag> a, Quantity<Tag> b) {
  return a < b ? a : b;
}

namespace literals {
constexpr Seconds operator""_s(long double v) { return Seconds(static_cast<double>(v)); }
constexpr Seconds operator""_us(long double v) { return Seconds(static_cast<double>(v) * 1e-6); }
constexpr Seconds operator""_us(unsigned long long v) {
  return Seconds(static_cast<double>(v) * 1e-6);
}
constexpr Bytes operator""_B(unsigned long long v) { return Bytes(static_cast<double>(v)); }
constexpr Bytes operator""_GiB(unsigned long long v) {
  return Bytes(static_cast<double>(v) * 1073741824.0);
}
constexpr Bytes operator""_GB(unsigned long long v) { return Bytes(static_cast<double>(v) * 1e9); }
constexpr BytesPerSecond operator""_GBps(unsigned long long v) {
  return BytesPerSecond(static_cast<double>(v) * 1e9);
}
constexpr FlopsPerSecond operator""_TFLOPS(unsigned long long v) {
  return FlopsPerSecond(static_cast<double>(v) * 1e12);
}
}  // namespace literals

}  // namespace hetplan
