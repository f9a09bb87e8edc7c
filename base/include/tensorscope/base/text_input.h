// text_input.h — reading small untrusted text inputs (config files, index.json) and
// quoting untrusted text inside error messages.
//
// Used by the daemon's config loader and index writer, and by the session-name check.
// Thread safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "tensorscope/base/status.h"

namespace tensorscope {

// Reads a whole file of at most `max_bytes`. `what` names it in messages ("config
// file"): "<path>: cannot open <what>: ...", "<path>: is a directory, not a <what>",
// "<path>: <what> is larger than N bytes ...". When `missing` is non-null, a file that
// does not exist is not an error: *missing is set and the result is empty.
StatusOr<std::string> read_text_file(const std::string& path, size_t max_bytes, const std::string& what,
                                     bool* missing = nullptr);

// The last lines of a file that may be long (a log a restarted daemon reads back): the
// whole file when it holds at most `max_bytes`, else its last `max_bytes` from the first
// line that begins in them. A file that does not exist: "" with *missing set (when
// `missing` is non-null; else an error).
StatusOr<std::string> read_text_tail(const std::string& path, size_t max_bytes, const std::string& what,
                                     bool* missing = nullptr);

// `text` as it may appear in a message or a log line: printable ASCII kept, backslashes
// (and `quote`, unless '\0') escaped with a backslash, other bytes as \xNN, cut with "..."
// after `max_shown` bytes.
std::string escape_for_message(std::string_view text, size_t max_shown = 80, char quote = '\0');

// escape_for_message(text, max_shown, '"') between double quotes.
std::string quote_for_message(std::string_view text, size_t max_shown = 80);

}  // namespace tensorscope
