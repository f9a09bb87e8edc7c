// axis_ticks.cc — nice tick steps and compact number formatting.
#include "tensorscope/plotting/axis_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tensorscope::plotting {
namespace {

// "1.5e+07" -> "1.5e7", "2e-05" -> "2e-5".
std::string shorten_exponent(std::string s) {
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mantissa = s.substr(0, e);
  std::string exponent = s.substr(e + 1);
  bool negative = false;
  if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
    negative = exponent[0] == '-';
    exponent.erase(0, 1);
  }
  while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
  return mantissa + "e" + (negative ? "-" : "") + exponent;
}

std::string printf_double(const char* fmt, int precision, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, precision, v);
  std::string s = shorten_exponent(buf);
  if (s == "-0") s = "0";
  return s;
}

}  // namespace

AxisTicks nice_ticks(double lo, double hi, int max_ticks) {
  AxisTicks ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) return ticks;
  max_ticks = std::clamp(max_ticks, 1, 50);
  const double span = hi / 2 - lo / 2;  // half the span: cannot overflow
  // Smallest 1/2/5 x 10^k step that leaves at most max_ticks ticks in [lo, hi].
  double magnitude = std::pow(10.0, std::floor(std::log10(span * 2 / max_ticks)));
  if (!(magnitude > 0) || !std::isfinite(magnitude)) return ticks;
  for (int attempt = 0; attempt < 12; ++attempt, magnitude *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * magnitude;
      const double first = std::ceil(lo / step), last = std::floor(hi / step);
      if (!std::isfinite(first) || !std::isfinite(last) || last - first + 1 > max_ticks) continue;
      ticks.step = step;
      const int count = last >= first ? static_cast<int>(last - first) + 1 : 0;
      for (int i = 0; i < count; ++i) {
        double v = (first + i) * step;
        if (std::abs(v) < step * 1e-9) v = 0;
        ticks.values.push_back(v);
      }
      return ticks;
    }
  }
  return ticks;
}

// log1p/expm1 keep |x| far below linthresh exact.
constexpr double kLn10 = 2.302585092994045684;

double symlog(double x, double linthresh) { return std::copysign(std::log1p(std::abs(x) / linthresh) / kLn10, x); }

double symlog_inverse(double t, double linthresh) {
  return std::copysign(linthresh * std::expm1(std::abs(t) * kLn10), t);
}

std::vector<double> symlog_tick_candidates(double lo, double hi, double linthresh) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi) || !(linthresh > 0)) return ticks;
  if (lo <= 0 && hi >= 0) ticks.push_back(0);
  const double largest = std::max(std::abs(lo), std::abs(hi));
  if (!(largest > 0)) return ticks;
  const int first = static_cast<int>(std::ceil(std::log10(linthresh)));
  const int last = static_cast<int>(std::floor(std::log10(largest)));
  for (int k = last; k >= first && last - k < 700; --k) {
    const double v = std::pow(10.0, k);
    if (v <= hi) ticks.push_back(v);
    if (-v >= lo) ticks.push_back(-v);
  }
  return ticks;
}

std::string format_tick(double value, double step) {
  if (!std::isfinite(value)) return format_number(value);
  if (std::abs(value) < std::abs(step) * 1e-9) return "0";
  const double magnitude = std::abs(value);
  if (std::isfinite(step) && step > 0 && step >= 1e-4 && magnitude < 1e6) {
    int decimals = 0;  // fewest decimals that write `step` exactly (0.25 -> 2)
    for (double scaled = step; decimals < 10; ++decimals, scaled *= 10) {
      if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
    }
    return printf_double("%.*f", decimals, value);
  }
  int digits = 3;
  if (std::isfinite(step) && step > 0) {
    digits = static_cast<int>(std::ceil(std::log10(magnitude / step) + 1e-9)) + 1;
    digits = std::clamp(digits, 1, 10);
  }
  return printf_double("%.*g", digits, value);
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return printf_double("%.*g", 4, value);
}

std::string format_count(uint64_t count) {
  if (count < 10000) return std::to_string(count);
  static const char* const kSuffix[] = {"k", "M", "G", "T", "P", "E"};
  double v = static_cast<double>(count);
  int unit = -1;
  while (v >= 999.95 && unit < 5) {
    v /= 1000;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), v < 9.995 ? "%.2f" : (v < 99.95 ? "%.1f" : "%.0f"), v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {  // "60.0" -> "60", "1.50" -> "1.5"
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s + kSuffix[unit];
}

}  // namespace tensorscope::plotting
