// separation_table.cc — see separation_table.h.
#include "tensorscope/recording/separation_table.h"

#include "tensorscope/recording/csv_text.h"

namespace tensorscope::recording {

std::string separation_table_line(const SeparationRow& row) {
  return std::to_string(row.step) + ',' + csv_field(row.stream) + ',' + csv_field(row.device) + ',' +
      std::to_string(row.rank) + ',' + std::to_string(row.pid) + ',' + csv_field(row.mode) + ',' +
      std::to_string(row.classes) + ',' + std::to_string(row.points) + ',' + csv_number(row.silhouette);
}

StatusOr<SeparationTableWriter> SeparationTableWriter::open(const std::string& path) {
  auto file = AppendFile::open(path, kSeparationTableHeader, "separation table");
  if (!file) return file.status();
  SeparationTableWriter writer;
  writer.file_.emplace(std::move(*file));
  return writer;
}

Status SeparationTableWriter::append(const SeparationRow& row) {
  return file_->append(separation_table_line(row) + '\n');
}

}  // namespace tensorscope::recording
