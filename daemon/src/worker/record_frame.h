// record_frame.h — the text a frame shows about its record (plotting::FrameInfo).
//
// Used inside a worker process (reader thread); the record's payload as a tensor view
// is recording::tensor_view (wire_tensor.h). Thread safety: free functions.
#pragma once

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::daemon {

// Stream, device, rank, step, label, kind, shape and dtype for the frame's text.
plotting::FrameInfo frame_info(const wire::RecordHeader& header);

}  // namespace tensorscope::daemon
