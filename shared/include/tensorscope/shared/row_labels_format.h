// row_labels_format.h — the row labels section of a record: one class label per row of
// the pushed tensor (its first dimension), so projections (pca, tsne) colour points by
// class. The client writes it (encode_row_labels) after the tensor's bytes in the data
// ring; the daemon's ring reader parses it (parse_row_labels) and never trusts it: a
// malformed section drops the record, counted in dropped_invalid.
//
// Not to be confused with RecordHeader::label (the set_label() text of a push).
// Used by the training process (client) and the daemon's workers. Thread safety: free
// functions over value types.
//
// Where: RecordHeader::row_labels_bytes > 0 says a section follows the record's ring
// bytes: at payload_position + row_labels_offset(ring tensor bytes) (ring tensor bytes:
// the payload, or 0 for a device payload, whose section then starts at payload_position).
//
// Layout (little-endian, as the ring): a 24-byte header
//   uint32 magic (kRowLabelsMagic)  uint16 version  uint16 flags (0)
//   uint32 count        labels, == the tensor's first dimension
//   uint32 class_count  names that follow; 0: the labels are numbers, shown as such
//   uint32 names_bytes  size of the names block
//   uint32 reserved (0)
// then `count` int64 labels (with names: each in [0, class_count), an index into them;
// without: any value), then the names block: class_count UTF-8 names, each 1 to
// kMaxRowLabelNameBytes - 1 bytes without control characters, each followed by a NUL.
// The section is exactly 24 + 8 * count + names_bytes bytes. A reader refuses another
// magic or version with a message that names both; a later version bumps it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

inline constexpr uint32_t kRowLabelsMagic = 0x424c5354;  // "TSLB"
inline constexpr uint16_t kRowLabelsVersion = 1;
inline constexpr size_t kRowLabelsHeaderBytes = 24;
inline constexpr uint32_t kMaxRowLabels = uint32_t{1} << 20;  // rows a section labels
inline constexpr uint32_t kMaxRowLabelClasses = 4096;         // names in a section
inline constexpr size_t kMaxRowLabelNameBytes = 64;           // a name and its NUL
inline constexpr uint64_t kMaxRowLabelsBytes =
    kRowLabelsHeaderBytes + uint64_t{8} * kMaxRowLabels + uint64_t{kMaxRowLabelClasses} * kMaxRowLabelNameBytes;

// Where the section starts, from payload_position, after `tensor_ring_bytes` of tensor.
constexpr uint64_t row_labels_offset(uint64_t tensor_ring_bytes) { return wire::align_up(tensor_ring_bytes, 8); }

// One label per row: values[i] is row i's label; with names, an index into them.
struct RowLabels {
  std::vector<int64_t> values;
  std::vector<std::string> names;  // empty: numeric labels

  bool operator==(const RowLabels&) const = default;
  // How a class is shown: its name, or the number.
  std::string class_name(int64_t value) const;
};

// The section for `labels`, or why it cannot be sent: more than kMaxRowLabels labels,
// more than kMaxRowLabelClasses names, a name empty, too long or with control
// characters, a value outside [0, names) when there are names.
StatusOr<std::string> encode_row_labels(const RowLabels& labels);

// The labels of a section for a tensor of `rows` rows, or why it is refused: a wrong
// magic or version, flags or reserved bits set, a count other than `rows`, a size that
// does not match the counts, a malformed name, a value out of range.
StatusOr<RowLabels> parse_row_labels(std::string_view section, uint64_t rows);

// Labels given as text (one per row, e.g. a batch's class names): the names in sorted
// order (so a class keeps its number, and its colour, from push to push) and each row's
// index into them. Errors as encode_row_labels's.
StatusOr<RowLabels> row_labels_from_text(const std::vector<std::string>& text);

}  // namespace tensorscope
