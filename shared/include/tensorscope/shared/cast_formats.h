// cast_formats.h — the low-precision formats a track can measure its tensors against
// (TrackOptions::cast_format, track_model(cast_format=...)), once: each one's wire value,
// name and the two magnitudes that decide what a cast to it loses.
//
// A summary with a cast format (shared/summary_format.h) counts, over the finite values,
// those a round-to-nearest-even cast would turn to zero (underflow: 0 < |x| <= half the
// smallest subnormal; the tie rounds to the even zero) and those it would turn to Inf, or
// NaN for fp8 e4m3 which has no Inf (overflow: |x| from the midpoint between the largest
// finite value and the next power of the format's grid; the tie rounds to Inf where the
// largest value's mantissa is odd: bf16, fp16, fp8 e5m2; e4m3's largest, 448, is even, so
// 464 itself rounds down and only |x| > 464 overflows). Saturating fp8 casts clip those
// values instead of turning them to NaN: they are counted alike, as values the format
// cannot hold.
//
// Used by the client (the option, the summaries), the daemon (the summary table's
// cast_format column) and the Python package (CAST_FORMATS, built by the extension from
// this list). To add a format: one line in TENSORSCOPE_CAST_FORMATS; its value, name and
// limits cannot be given apart. Thread safety: constants only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tensorscope {

// X(enumerator, name, underflow_at_most, overflow_from)
#define TENSORSCOPE_CAST_FORMATS(X)                                                                          \
  X(kBf16, "bf16", 0x1p-134, 0x1.ffp127)            /* 8-bit exponent, 7-bit mantissa; max (2-2^-7) 2^127 */ \
  X(kFp16, "fp16", 0x1p-25, 65520.0)                /* IEEE half; max 65504 */                               \
  X(kFp8E4m3, "fp8_e4m3", 0x1p-10, 464.0 + 0x1p-44) /* e4m3fn; max 448, no Inf: > 464 overflows */           \
  X(kFp8E5m2, "fp8_e5m2", 0x1p-17, 61440.0)         /* max 57344 */

// The wire value (summary entries) of a summary's cast format; kNone: the track measured
// no format (and the entry has no low-precision fields). Values are part of the ABI.
enum class CastFormat : uint8_t {
  kNone = 0,
#define TENSORSCOPE_CAST_FORMAT_VALUE(id, name, under, over) id,
  TENSORSCOPE_CAST_FORMATS(TENSORSCOPE_CAST_FORMAT_VALUE)
#undef TENSORSCOPE_CAST_FORMAT_VALUE
};

struct CastFormatInfo {
  CastFormat format;
  std::string_view name;     // "bf16": the option's value, the summary table's cell
  double underflow_at_most;  // non-zero |x| up to this rounds to zero
  double overflow_from;      // |x| from this rounds to Inf (NaN for e4m3)
};

// Every format, in value order (kNone left out).
inline constexpr std::array kCastFormats = {
#define TENSORSCOPE_CAST_FORMAT_INFO(id, name, under, over) CastFormatInfo{CastFormat::id, name, under, over},
    TENSORSCOPE_CAST_FORMATS(TENSORSCOPE_CAST_FORMAT_INFO)
#undef TENSORSCOPE_CAST_FORMAT_INFO
};

inline constexpr uint8_t kMaxCastFormat = static_cast<uint8_t>(kCastFormats.size());

// The format's entry; nullptr for kNone and for values no format has.
constexpr const CastFormatInfo* cast_format_info(CastFormat format) {
  const auto value = static_cast<uint8_t>(format);
  return value >= 1 && value <= kMaxCastFormat ? &kCastFormats[value - 1] : nullptr;
}

// "bf16", ...; "" for kNone and for values no format has.
constexpr std::string_view cast_format_name(CastFormat format) {
  const CastFormatInfo* info = cast_format_info(format);
  return info != nullptr ? info->name : std::string_view();
}

// The format called `name`; nullopt for any other text ("" included).
constexpr std::optional<CastFormat> cast_format_from_name(std::string_view name) {
  for (const CastFormatInfo& info : kCastFormats) {
    if (info.name == name) return info.format;
  }
  return std::nullopt;
}

static_assert([] {
  for (uint8_t i = 0; i < kMaxCastFormat; ++i) {
    const CastFormatInfo& f = kCastFormats[i];
    if (static_cast<uint8_t>(f.format) != i + 1 || f.name.empty() || !(f.underflow_at_most < f.overflow_from)) {
      return false;
    }
  }
  return true;
}());

}  // namespace tensorscope
