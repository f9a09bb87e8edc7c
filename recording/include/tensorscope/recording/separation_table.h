// separation_table.h — how well the classes of a projected stream separate, frame by
// frame: a row per pca or tsne frame of a tensor pushed with row labels, so a notebook
// can plot the separation against the steps (tensorscope.read_separation).
//
// Written by a worker's render thread (StreamVideo), one file per stream:
// <session>/separation/<stream>__<device>__rank<r>__pid<p>__<mode>.csv
// (file_naming.h's separation_table_path). The CSV (RFC 4180, '\n' line ends, cells as
// csv_text.h) has the header line
//   step,stream,device,rank,pid,mode,classes,points,silhouette
// and a line per frame: the step, the stream's identity, the classes and the points the
// frame showed, and the silhouette of the labels on the 2-D points (point_classes.h;
// an empty cell when fewer than two classes). Each line goes to the file in a single
// write() (append_file.h): a killed worker loses at most the line it was writing.
// Thread safety: separation_table_line is pure; a writer is used by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensorscope/base/status.h"
#include "tensorscope/recording/append_file.h"

namespace tensorscope::recording {

inline constexpr char kSeparationTableHeader[] = "step,stream,device,rank,pid,mode,classes,points,silhouette";

struct SeparationRow {
  int64_t step = 0;
  std::string stream;
  std::string device;
  int rank = 0;
  int64_t pid = 0;
  std::string mode;  // "pca", "tsne"
  uint64_t classes = 0;
  uint64_t points = 0;
  double silhouette = 0;  // NaN: not defined (fewer than two classes)
};

// The line for one row, without the trailing '\n'.
std::string separation_table_line(const SeparationRow& row);

class SeparationTableWriter {
 public:
  // Opens `path` for appending (creating it and its parent directories; a new file gets
  // the header line; an existing one must start with it). Errors name the file.
  static StatusOr<SeparationTableWriter> open(const std::string& path);

  // Writes one line with a single write(). Errors: I/O errors, naming the file.
  Status append(const SeparationRow& row);

  const std::string& path() const { return file_->path(); }

 private:
  SeparationTableWriter() = default;
  std::optional<AppendFile> file_;  // set by open()
};

}  // namespace tensorscope::recording
