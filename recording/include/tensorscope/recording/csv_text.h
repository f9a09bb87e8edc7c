// csv_text.h — the text of one CSV cell, as the tables tensorscope writes spell it
// (RFC 4180, as stats_table.h and summary_table.h describe).
//
// Used by the statistics table and the summary table. Thread safety: pure functions.
#pragma once

#include <string>

namespace tensorscope::recording {

// `s`, quoted (with '"' doubled) when it holds ',', '"', CR or LF.
std::string csv_field(const std::string& s);

// The shortest decimal text that reads back as the very same double ("0.1", "1e-300",
// "inf"); "" for NaN (an empty cell).
std::string csv_number(double v);

}  // namespace tensorscope::recording
