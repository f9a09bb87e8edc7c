// tensorscope.h — the public C++ header of the tensorscope client library.
//
//   #include <tensorscope/tensorscope.h>
//   tensorscope::Client client(tensorscope::ClientOptions().session("run1").every_n(10));
//   client.push("loss", loss);
//
// Used inside the training process; see client.h for thread safety.
#pragma once

#include "tensorscope/call_stacking.h"
#include "tensorscope/client.h"
#include "tensorscope/client_options.h"
#include "tensorscope/push_result.h"
#include "tensorscope/render_mode.h"
#include "tensorscope/track_handle.h"
#include "tensorscope/track_options.h"
