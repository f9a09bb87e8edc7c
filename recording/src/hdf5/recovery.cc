// recovery.cc — recover_stale_partials() (declared in hdf5_sink.h): the partial files
// that dead writers left are kept (renamed `<base>.<n>.recovered[.<i>].h5`, cut back
// to their last completed flush when needed) or removed. See "Crash recovery" in
// docs/design/hdf5_recording.md.
#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28, _GNU_SOURCE)

#include <algorithm>
#include <cerrno>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hdf5/flush_marker.h"
#include "hdf5/names.h"
#include "hdf5/recording_check.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/hdf5_sink.h"
#include "tensorscope/recording/hdf5_support.h"
#include "tensorscope/shared/file_lock.h"

namespace tensorscope::recording {
namespace {

using hdf5::check_recording;
using hdf5::encode_header;
using hdf5::FlushHeader;
using hdf5::Markers;
using hdf5::MarkState;
using hdf5::matches_markers;
using hdf5::name_hash;
using hdf5::partial_stem;
using hdf5::read_markers;
using hdf5::write_marker;

// How many "<stem>.recovered.<i>.h5" names are tried.
constexpr int kMaxRecoveredNames = 1000;

// Cuts `path` back to `record` (see recover_stale_partials in hdf5_sink.h): deletes the
// groups it does not name, shrinks longer datasets; refuses when a group is missing or
// a dataset is shorter.
Status cut_back(const std::string& path, const std::map<uint64_t, uint64_t>& record) {
  Hid file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return hdf5_error(path, "cannot open to cut back");
  // New space goes beyond everything on disk: the blocks a mix of two flushes refers to
  // may lie past the end of allocated space its superblock names.
  if (H5Fincrement_filesize(file.get(), 0) < 0) {
    return hdf5_error(path, "cannot move the end of allocated space");
  }
  std::vector<std::string> names;
  if (H5Literate(
          file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
          [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
            static_cast<std::vector<std::string>*>(data)->emplace_back(name);
            return 0;
          },
          &names) < 0) {
    return hdf5_error(path, "cannot list groups");
  }
  size_t kept = 0;
  for (const std::string& name : names) {
    const std::string where = path + ": group '" + name + "'";
    auto it = record.find(name_hash(name));
    if (it == record.end()) {
      if (H5Ldelete(file.get(), name.c_str(), H5P_DEFAULT) < 0) {
        return hdf5_error(where, "cannot delete (not in the last flush)");
      }
      continue;
    }
    ++kept;
    Hid group(H5Gopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Gclose);
    if (!group.valid()) return hdf5_error(where, "cannot open");
    for (const char* dataset_name : {"values", "steps", "ranks", "devices"}) {
      const std::string at = where + " dataset '" + dataset_name + "'";
      Hid dataset(H5Dopen2(group.get(), dataset_name, H5P_DEFAULT), H5Dclose);
      Hid space(dataset.valid() ? H5Dget_space(dataset.get()) : H5I_INVALID_HID, H5Sclose);
      const int ndims = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
      if (ndims < 1 || ndims > H5S_MAX_RANK) return hdf5_error(at, "cannot open");
      std::vector<hsize_t> dims(static_cast<size_t>(ndims));
      if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
        return hdf5_error(at, "cannot get dims");
      }
      if (dims[0] < it->second) {
        return Status::error(at + ": " + std::to_string(dims[0]) + " rows, its last flush had " +
                             std::to_string(it->second));
      }
      if (dims[0] == it->second) continue;
      dims[0] = it->second;
      if (H5Dset_extent(dataset.get(), dims.data()) < 0) return hdf5_error(at, "cannot shrink");
      if (!dataset.close()) return hdf5_error(at, "cannot close");
    }
    if (!group.close()) return hdf5_error(where, "cannot close");
  }
  if (kept != record.size()) {
    return Status::error(path + ": " + std::to_string(record.size() - kept) +
                         " group(s) of its last flush are missing");
  }
  if (!file.close()) return hdf5_error(path, "cannot close after cutting back");
  return Status::ok();
}

// What a stale partial holds once checked: kept (maybe cut back), or the reason to
// remove it.
struct Verdict {
  Status status;
  bool cut_back = false;
};

// Decides about the partial `path` (locked, open as `fd`); may cut it back.
Verdict judge_partial(const std::string& path, int fd) {
  const Markers m = read_markers(fd);
  if (m.kind == Markers::Kind::kAbsent) return {check_recording(path, nullptr)};  // older writer
  if (m.kind == Markers::Kind::kDamaged) return {Status::error(path + ": " + m.problem)};
  if (m.header.completed == 0) {
    return {Status::error(path +
                          (m.header.state == MarkState::kFlushing ? ": its writer died during its first flush"
                                                                  : ": its writer died before its first flush"))};
  }
  std::vector<std::pair<std::string, uint64_t>> rows;
  const Status read = check_recording(path, &rows);
  if (read.is_ok() && matches_markers(rows, m)) return {Status::ok()};
  const std::string why = read.is_ok()
      ? "it holds other rows than its last completed flush (generation " + std::to_string(m.header.completed) + ")"
      : read.message();
  if (!m.has_record) {
    return {Status::error(path + ": " + why + "; no record of its last flush to cut it back to")};
  }
  Status cut = cut_back(path, m.record);
  if (!cut.is_ok()) return {Status::error(why + "; cannot cut it back: " + cut.message())};
  FlushHeader header = m.header;
  header.state = MarkState::kFlushed;
  header.generation = header.completed;
  cut = write_marker(fd, path, 0, encode_header(header));
  if (!cut.is_ok()) return {Status::error(why + "; " + cut.message())};
  rows.clear();
  const Status again = check_recording(path, &rows);
  if (!again.is_ok()) return {Status::error(why + "; cut back, still: " + again.message())};
  if (!matches_markers(rows, m)) {
    return {Status::error(path + ": " + why + "; cut back, still not its last flush")};
  }
  spdlog::warn(
      "tensorscope: HDF5 recovery: {}: {}: cut back to its last completed flush "
      "(generation {})",
      path, why, m.header.completed);
  return {Status::ok(), true};
}

// Renames `from` to the first free "<dir>/<stem>.recovered[.<i>].h5", never replacing
// a file; the new path.
StatusOr<std::string> rename_recovered(const std::string& from, const std::string& dir, const std::string& stem) {
  for (int i = 0; i < kMaxRecoveredNames; ++i) {
    const std::string to = dir + "/" + stem + ".recovered" + (i == 0 ? "" : "." + std::to_string(i)) + ".h5";
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
      return to;
    }
    int err = errno;
    if (err == EEXIST) continue;
    if (err == EINVAL || err == ENOSYS || err == ENOTSUP) {
      // No RENAME_NOREPLACE on this file system: link() never replaces either.
      if (::link(from.c_str(), to.c_str()) == 0) {
        if (::unlink(from.c_str()) != 0) {
          err = errno;
          return Status::error("linked " + from + " to " + to + " but cannot remove it: " + errno_text(err));
        }
        return to;
      }
      err = errno;
      if (err == EEXIST) continue;
    }
    return Status::error("cannot rename " + from + " to " + to + ": " + errno_text(err));
  }
  return Status::error("cannot rename " + from + ": every recovered name is taken");
}

}  // namespace

StatusOr<Hdf5PartialRecovery> recover_stale_partials(const std::string& dir_in) {
  try {
    quiet_hdf5();
    std::string dir = dir_in.empty() ? "." : dir_in;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    Hdf5PartialRecovery out;
    std::vector<std::string> names;
    DIR* listing = ::opendir(dir.c_str());
    if (listing == nullptr) {
      const int err = errno;
      if (err == ENOENT) return out;  // no directory: nothing left behind
      return Status::error(dir + ": cannot list: " + errno_text(err));
    }
    errno = 0;
    while (const dirent* entry = ::readdir(listing)) {
      const std::string name = entry->d_name;
      if (!partial_stem(name).empty()) names.push_back(name);
      errno = 0;
    }
    const int list_err = errno;
    ::closedir(listing);
    if (list_err != 0) return Status::error(dir + ": cannot list: " + errno_text(list_err));
    std::sort(names.begin(), names.end());

    bool changed = false;
    for (const std::string& name : names) {
      const std::string path = dir + "/" + name;
      auto problem = [&](const std::string& why) {
        out.problems.push_back(path + ": " + why);
        spdlog::warn("tensorscope: HDF5 recovery: {}: {} (left in place)", path, why);
      };
      UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
      if (!fd.valid()) {
        const int err = errno;
        if (err != ENOENT) problem("cannot open: " + errno_text(err));  // ENOENT: done by another
        continue;
      }
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        problem("not a regular file");
        continue;
      }
      const int err = try_lock_file(fd.get());
      if (lock_held_elsewhere(err)) {
        ++out.in_use;  // a live writer, or another cleaner
        continue;
      }
      if (err != 0) {
        problem("cannot take the writer lock: " + errno_text(err));
        continue;
      }
      if (!is_same_file(fd.get(), path)) continue;  // renamed or removed by another cleaner
      // An HDF5 writer without our lock (e.g. h5py) holds flock(): not ours to touch.
      if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
          ++out.in_use;
          continue;
        }
      } else {
        ::flock(fd.get(), LOCK_UN);
      }
      const Verdict verdict = judge_partial(path, fd.get());
      const Status& readable = verdict.status;
      if (readable.is_ok()) {
        if (::fsync(fd.get()) != 0) {
          problem("fsync failed: " + errno_text(errno));
          continue;
        }
        auto renamed = rename_recovered(path, dir, partial_stem(name));
        if (!renamed.is_ok()) {
          problem(renamed.message());
          continue;
        }
        changed = true;
        spdlog::warn(
            "tensorscope: HDF5 recovery: {} was left by a dead writer and reads whole: "
            "renamed to {}",
            path, *renamed);
        if (verdict.cut_back) out.truncated.push_back(*renamed);
        out.recovered.push_back(std::move(renamed).value());
      } else if (::unlink(path.c_str()) == 0) {
        changed = true;
        spdlog::warn(
            "tensorscope: HDF5 recovery: removed {}, left by a dead writer and not "
            "recoverable: {}",
            path, readable.message());
        out.removed.push_back(path);
      } else {
        problem("not recoverable (" + readable.message() + ") and cannot be removed: " + errno_text(errno));
      }
    }  // the lock goes with fd, after the rename or removal
    if (changed) {
      if (Status synced = fsync_path(dir, true); !synced) spdlog::warn("tensorscope: {}", synced.message());
    }
    return out;
  } catch (const std::exception& e) {
    return Status::error(dir_in + ": HDF5 recovery failed: " + e.what());
  } catch (...) {
    return Status::error(dir_in + ": HDF5 recovery failed: unknown error");
  }
}

}  // namespace tensorscope::recording
