#include "tensorscope/recording/hdf5_support.h"

#include <vector>

namespace tensorscope::recording {
namespace {

// HDF5 error stack entries quoted in a message.
constexpr size_t kMaxErrorFrames = 3;

herr_t collect_error(unsigned, const H5E_error2_t* err, void* data) {
  std::string frame;
  if (err->func_name != nullptr) frame = std::string(err->func_name) + ": ";
  frame += err->desc != nullptr ? err->desc : "(no description)";
  static_cast<std::vector<std::string>*>(data)->push_back(std::move(frame));
  return 0;
}

}  // namespace

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string hdf5_error_text() {
  std::vector<std::string> frames;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &frames);
  H5Eclear2(H5E_DEFAULT);
  if (frames.empty()) return "unknown HDF5 error";
  std::string text = frames.front();
  const size_t first_inner = frames.size() > kMaxErrorFrames ? frames.size() - (kMaxErrorFrames - 1) : 1;
  if (first_inner > 1) text += "; ...";
  for (size_t i = first_inner; i < frames.size(); ++i) text += "; " + frames[i];
  return text;
}

Status hdf5_error(const std::string& where, const std::string& what) {
  return Status::error(where + ": " + what + ": " + hdf5_error_text());
}

}  // namespace tensorscope::recording
