// hdf5_sink.h — Hdf5Sink: records the raw values of received tensors in rotating HDF5 files.
//
// Used by a worker process's raw-value sink (append() per received tensor, poll()
// periodically, finalize() on shutdown; recover_stale_partials() once per session
// directory); the files are read with h5py or the HDF5 C API (HDF5 >= 1.10.1).
//
// In short: `<dir>/<base>.<n>.h5` files, written as `.<base>.<n>.h5.partial` under an
// OFD write lock and renamed once closed and fsync'ed, so every final name is a whole
// file; rotated by size and age; one group per stream and layout with `values`, `steps`,
// `ranks` and `devices` datasets. The open file is flushed every flush_seconds with
// flush markers in a user block, so a killed writer's partial is recovered with exactly
// the rows of its last completed flush (recover_stale_partials()). Optional change
// detection skips values identical to the stream's previous one, within a memory cap.
// Every HDF5 failure is a Status naming the file; bad records are refused, nothing
// written.
//
// Design: docs/design/hdf5_recording.md — the file layout, group names, stored element
// types, the writer lock, flushes and what a killed writer loses, change detection.
//
// Thread safety: an Hdf5Sink is used by one thread at a time. Several sinks in one
// process must use distinct (dir, base) pairs; Debian's HDF5 is built thread-safe
// (calls are serialized by a global lock). Hdf5ChangeBudget and
// recover_stale_partials() are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::recording {

// Values up to this size are compared byte by byte before being skipped as unchanged.
inline constexpr uint64_t kHdf5ExactCompareBytes = uint64_t{64} << 20;

// The memory that change detection may use for kept copies of previous values, shared
// by the sinks that hold it (see "Memory cap" above). Thread-safe.
class Hdf5ChangeBudget {
 public:
  explicit Hdf5ChangeBudget(uint64_t cap_bytes) : cap_(cap_bytes) {}
  Hdf5ChangeBudget(const Hdf5ChangeBudget&) = delete;
  Hdf5ChangeBudget& operator=(const Hdf5ChangeBudget&) = delete;

  // Reserves `bytes`; false (nothing reserved) when used() + bytes would exceed cap().
  // *first_refusal (when given) is set to whether this is the budget's first refusal.
  bool try_reserve(uint64_t bytes, bool* first_refusal = nullptr);
  // Gives back `bytes` reserved before.
  void release(uint64_t bytes);

  uint64_t cap() const { return cap_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> used_{0};
  std::atomic<bool> refused_{false};
};

struct Hdf5SinkOptions {
  // "keep" (the received type), or "float32" / "float16" / "float64": every value is
  // converted to that type on write (ints and bool too).
  std::string dtype = "keep";
  int gzip_level = 4;            // 0 = no compression, 1..9 deflate
  bool change_detection = true;  // skip a value identical to the stream's previous one
  // Cap on the kept copies of change detection (0: keep none), used when change_budget
  // is null; see "Memory cap" above.
  uint64_t change_detection_bytes = uint64_t{256} << 20;
  // A budget shared with other sinks; null: the sink makes its own of
  // change_detection_bytes.
  std::shared_ptr<Hdf5ChangeBudget> change_budget;
  // Finalize the current file once it holds this many bytes of values (as stored,
  // after conversion; 0 = no limit) ...
  uint64_t rotate_bytes = uint64_t{256} << 20;
  // ... or this many seconds after it was created (<= 0: no limit), whichever first.
  int rotate_seconds = 60;
  // poll() flushes the open file when this many seconds passed since its last flush (or
  // its creation) and rows were added since; 0: flush only before closing. Negative is
  // refused by open().
  int flush_seconds = 5;
};

// Groups whose row counts a flush record holds (see "Flushes" above): a partial killed
// during a flush is cut back to its previous flush only when it has at most this many.
inline constexpr uint64_t kHdf5RecordGroups = 8174;

// Points of a flush, reported to a test hook (Hdf5Sink::set_flush_hook_for_testing).
enum class Hdf5FlushStage {
  kMarkedFlushing,  // the header says "flushing"; nothing written by HDF5 yet
  kHdf5Flushed,     // datasets closed and H5Fflush returned; the header still "flushing"
  kMarkedFlushed,   // the new record and the header "flushed" are written
};

// One received tensor. `data` (`bytes` bytes, C order, little-endian) is only read
// during append() and may still be in shared memory.
struct Hdf5Record {
  std::string stream;
  std::string kind;    // wire::tensor_kind_name(), e.g. "activation"
  std::string device;  // "cpu", "cuda0", ...
  int rank = 0;
  int64_t step = 0;
  wire::DType dtype = wire::DType::kInvalid;
  std::vector<int64_t> shape;  // empty: a 0-d tensor
  const void* data = nullptr;
  uint64_t bytes = 0;
};

class Hdf5Sink {
 public:
  // Creates `dir` (and parents) as needed and checks the options. Creates no file yet.
  // Errors: an empty base or one holding '/', an unknown dtype, gzip_level outside
  // 0..9, a negative flush_seconds, deflate not available in the HDF5 library, a
  // directory that cannot be made.
  static StatusOr<std::unique_ptr<Hdf5Sink>> open(std::string dir, std::string base, Hdf5SinkOptions options);

  Hdf5Sink(const Hdf5Sink&) = delete;
  Hdf5Sink& operator=(const Hdf5Sink&) = delete;
  // Finalizes the current file (errors are logged).
  ~Hdf5Sink();

  // Stores `record` (creating the next file first when none is open, and finalizing
  // the current one first when rotate_seconds passed), or skips it when it is
  // unchanged (see the top of this file). Finalizes the file afterwards when it holds
  // rotate_bytes. Errors: a bad record (nothing written), HDF5 and I/O errors.
  Status append(const Hdf5Record& record);

  // Finalizes the current file when rotate_seconds passed since it was created;
  // otherwise flushes it when flush_seconds passed since its last flush and rows were
  // added since (see "Flushes" above). Cheap when neither is due.
  Status poll();

  // Flushes the open file now when rows were added since its last flush (no-op
  // otherwise, and when no file is open). Errors: HDF5 and I/O errors; the file stays
  // open and the next flush or finalize tries again, except when HDF5 could not write a
  // dataset's cached chunks (they may be lost): the file is then given up under its
  // partial name (recovery keeps its last completed flush) and the next append starts
  // the next file.
  Status flush();

  // Flushes (see "Flushes" above), closes, fsyncs and renames the current file to its
  // final name; no-op when no file is open. The next append() creates the next file. On a failure the file keeps its
  // `.partial` name (and its number is not reused).
  Status finalize();

  // Values stored (not counting skipped ones), over the sink's life.
  uint64_t appended() const { return appended_; }
  // Values skipped by change detection, over the sink's life.
  uint64_t skipped_unchanged() const { return skipped_unchanged_; }
  // Values stored although their hash, dtype and shape equal the previous value's,
  // because no copy of it was kept (the memory cap), over the sink's life.
  uint64_t stored_over_cap() const { return stored_over_cap_; }
  // Bytes of the copies this sink keeps now (counted in its budget).
  uint64_t kept_copy_bytes() const { return kept_copy_bytes_; }
  // Paths of the files finalized so far, in order.
  std::vector<std::string> finished_files() const { return finished_files_; }
  // Flushes completed (by poll(), flush() and finalize()), over the sink's life.
  uint64_t flushes() const { return flushes_; }

  // Tests only: `hook` is called at each stage of every flush (on the calling thread).
  void set_flush_hook_for_testing(std::function<void(Hdf5FlushStage)> hook) { flush_hook_ = std::move(hook); }

  // Where the sink writes: the final and temporary path of file `n`.
  std::string final_path(uint64_t n) const;
  std::string partial_path(uint64_t n) const;
  // The name recover_stale_partials() gives partial_path(n) first.
  std::string recovered_path(uint64_t n) const;

 private:
  struct Layout;
  struct OpenGroup;
  struct StreamState;
  struct OpenFile;

  Hdf5Sink(std::string dir, std::string base, Hdf5SinkOptions options, wire::DType target, uint64_t next_index);

  Status open_file();
  bool number_taken(uint64_t n) const;
  void keep_copy(StreamState& state, const Hdf5Record& record);
  Status write_record(const Hdf5Record& record, const std::string& group_name, wire::DType stored, const void* values,
                      uint64_t value_bytes);
  StatusOr<OpenGroup*> group_for(const Hdf5Record& record, const std::string& group_name, wire::DType stored);
  bool rotate_due() const;
  bool flush_due() const;
  Status flush_file(bool reopen);
  bool close_file_handles();

  std::string dir_;
  std::string base_;
  Hdf5SinkOptions options_;
  wire::DType target_ = wire::DType::kInvalid;  // kInvalid: keep the received type
  uint64_t next_index_ = 0;

  std::unique_ptr<OpenFile> file_;
  // Per (stream, device, rank): the previous stored value (change detection).
  std::map<std::tuple<std::string, std::string, int>, StreamState> last_;
  // Per stream: the layouts seen so far, in order (index k = group suffix "@k").
  std::map<std::string, std::vector<Layout>> layouts_;
  std::vector<unsigned char> scratch_;        // converted values
  std::shared_ptr<Hdf5ChangeBudget> budget_;  // kept copies of last_

  uint64_t appended_ = 0;
  uint64_t skipped_unchanged_ = 0;
  uint64_t stored_over_cap_ = 0;
  uint64_t kept_copy_bytes_ = 0;
  uint64_t flushes_ = 0;
  std::vector<std::string> finished_files_;
  std::function<void(Hdf5FlushStage)> flush_hook_;
};

// ---- partial files of dead writers ----

// What recover_stale_partials() did in one directory.
struct Hdf5PartialRecovery {
  std::vector<std::string> recovered;  // new paths, `<base>.<n>.recovered[.<i>].h5`
  // Those of `recovered` that were cut back to their last completed flush (their writer
  // died during a flush): rows of the interrupted flush are dropped.
  std::vector<std::string> truncated;
  std::vector<std::string> removed;   // partials HDF5 could not read whole (or empty)
  uint64_t in_use = 0;                // held by a live writer (or another cleaner)
  std::vector<std::string> problems;  // files left in place, with the reason
};

// Cleans up the partial files (`.<base>.<n>.h5.partial`, no other names) that dead
// writers left in `dir` (not recursive). For each one it takes the writer lock
// (F_OFD_SETLK, F_WRLCK, non-blocking) on a descriptor of its own; a partial it cannot
// lock belongs to a live writer (or another cleaner) and is left alone, and so is one
// on which another descriptor holds flock() (an HDF5 writer without the writer lock,
// e.g. h5py). Holding the lock, it checks that the path still names the locked file
// (another cleaner may have renamed or removed it meanwhile: then it is skipped), then
// reads its flush markers (see "Flushes" above) and decides what the file must hold:
//   - header "flushed": the groups and row counts of that flush (its record, or its
//     digest when the record could not hold every group);
//   - header "flushing" (the writer died during a flush, or between flushes after a
//     failed one): those of the previous completed flush, which needs its record;
//   - header "created" (no flush completed), a damaged header, or "flushing" without a
//     usable record: nothing; the file is removed;
//   - no header (a file of an older writer, whose user block is not ours): whatever HDF5
//     reads whole, as long as the checks below pass.
// It then opens the file read-only with HDF5 (error printing off) and reads it whole:
// the root attribute format = "tensorscope-hdf5", at least one group, and in every
// group the datasets values, steps, ranks and devices with one length, each chunked
// with every chunk of its extent present (a missing chunk is a row whose data never
// reached the disk: HDF5 would read it as zeros) and read back completely (in pieces
// of at most 16 MiB); and the groups and their lengths must be those the markers name.
// When the file reads whole but holds other rows than the markers name, or does not
// read whole, and a record names what it must hold, it is cut back to that record
// (opened read-write: groups the record does not name are deleted, longer datasets
// shrunk; refused when a dataset is shorter than its record or a group is missing;
// new space only beyond the file's end, so nothing on disk is overwritten), its header
// is set to "flushed" for that record, and it is checked again (listed in `truncated`
// when it then passes). Rows of an interrupted flush are dropped this way, never kept
// half written: the rows of a completed flush are intact in every mix of the old and
// new metadata that a kill during the next flush leaves, as no flushed raw data block
// is ever overwritten; where that mix cannot be read (a metadata block torn or not
// written yet) the file is removed. Chunks beyond a dataset's extent may remain in its
// index after the cut (HDF5 does not read them). When the checks pass the file is fsync'ed and renamed to
// `<base>.<n>.recovered.h5` (or, when that name is taken, `<base>.<n>.recovered.1.h5`,
// .2, ...; never overwriting: renameat2 RENAME_NOREPLACE, or link + unlink where that
// is not supported); otherwise it is removed. Each action is logged. The lock is
// released after the rename or removal, so a second cleaner of the same directory
// either fails to lock or finds the name gone. Errors: `dir` cannot be listed (a
// missing `dir` is not an error: nothing to do); per-file failures are in `problems`,
// never fatal.
// Used by a worker (RecordSinks) once per session directory before its first HDF5
// file, and usable standalone. Thread-safe (several threads and processes may clean
// one directory at a time). Cost: reads every stale partial whole, once (twice when it
// is cut back).
StatusOr<Hdf5PartialRecovery> recover_stale_partials(const std::string& dir);

}  // namespace tensorscope::recording
