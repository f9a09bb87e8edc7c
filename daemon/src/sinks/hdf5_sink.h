// hdf5_sink.h — Hdf5Sink: records the raw values of received tensors in rotating HDF5 files.
//
// Used by a worker process's raw-value sink (append() per received tensor, poll()
// periodically, finalize() on shutdown; recover_stale_partials() once per session
// directory); the files are read with h5py or the HDF5 C API (HDF5 >= 1.10.1: the files
// record their file space strategy, see "Flushes" below).
//
// Files: `<dir>/<base>.<n>.h5`, n = 0, 1, 2, ... The file being written is named
// `<dir>/.<base>.<n>.h5.partial` and is renamed to its final name only after it was
// closed and fsync'ed, so every file with a final name is complete and readable; a
// killed writer leaves a `.partial` file behind, never a final name. open() starts at
// the first n for which no name of that number exists (final, partial, or
// `<base>.<n>.recovered.h5`), so a restarted worker never overwrites (or reuses the
// number of) an earlier file. A file is created by the first append() after open() or
// finalize() (no empty files), and finalized when it holds rotate_bytes of values,
// when rotate_seconds passed since it was created (checked by append() and poll()), by
// finalize(), and by the destructor.
//
// Writer lock: while a partial file is written, the sink holds an open file
// description lock (fcntl F_OFD_SETLK, F_WRLCK, whole file) on it, on a descriptor of
// its own, taken right after creating the file and released after the rename (or when
// finalize fails, or a flush gives the file up). It is independent of the flock() HDF5 1.10 takes on its own
// descriptor (Linux keeps flock and fcntl locks apart on local file systems; on NFS,
// where flock is emulated with fcntl locks, the two would conflict), and it is not
// dropped when HDF5 closes its descriptor (as a classic POSIX lock would be). A partial
// nobody holds locked was left by a dead writer: recover_stale_partials() (below) turns
// it into `<base>.<n>.recovered.h5` when it holds the state of a completed flush (cut
// back to it when needed) and HDF5 reads it whole, and removes it otherwise.
// The file is created (O_EXCL) before it is locked; a cleaner that locks it in between
// gets an empty file (and removes it), and the writer, failing to lock it or finding
// its name gone, moves on to the next number. Where OFD locks are not supported the
// file is written unlocked (logged once); cleaners leave files they cannot lock alone.
//
// Flushes, and what a killed writer loses: HDF5 keeps metadata in its cache until it is
// flushed, so an unflushed file is unreadable. The sink flushes the open file when
// poll() finds flush_seconds passed since its last flush started (and rows were added
// since; never from append()), and before closing it. A writer killed (SIGKILL) between
// flushes loses only the rows appended since its last completed flush: its partial is
// recovered with exactly the rows of that flush, each value as appended. Killed during
// a flush, it is cut back to the flush before (whose rows are intact on disk; see
// recover_stale_partials()); only when the kill hits the moment HDF5 writes the
// flush's metadata (well under a millisecond for a few streams) and leaves an index
// neither flush can be read from (a B-tree node not written yet, a torn metadata block:
// about 1 in 300 kills aimed at flushes in the tests) is the partial removed. Values are
// never kept wrong. flush_seconds = 0 flushes only before closing: a writer killed
// mid-file loses the whole file. Not covered: a machine crash or power loss (flushes
// do not fsync; the finished file is fsync'ed before its rename). How:
//   - the metadata cache does not evict (nothing but a flush or the close writes
//     metadata, so between flushes the file's metadata is that of the last flush; the
//     cache holds all of the file's metadata: measured 0.2 MiB for a 256 MiB file of 4
//     streams of 16 KiB rows, 2.7 MiB for 256 streams of 256 B, 8 MiB for one stream
//     of 64 million scalars);
//   - file space strategy NONE (nothing freed is reused; a compressed chunk rewritten
//     after a flush gets new space, the flushed copy stays intact and is leaked: at most
//     about one chunk per dataset per flush), and after each flush the end of allocated
//     space is moved 8 bytes past the file's end, so space freed at the end of the file
//     is never handed out again either (HDF5 would otherwise shrink the file over it);
//   - flush markers in a 256 KiB user block (offset 0, ignored by HDF5 and h5py; the
//     HDF5 superblock follows it), written with pwrite() on the sink's own descriptor:
//     a header (the first 64 bytes: magic "TSH5FLSH", state "created" / "flushing" /
//     "flushed", flush generation, the last completed flush's record slot, group count
//     and digest, checksum) and two record slots (from byte 512), each the rows of
//     every group at one completed flush (a 64-bit hash of the group name and its row
//     count; up to kHdf5RecordGroups groups, beyond that only the digest is kept). A
//     flush writes the header "flushing" (naming the previous completed flush), calls
//     H5Fflush, writes the new record into the other slot, then the header "flushed"
//     naming it. A header write is one pwrite within one page: a kill leaves the old or
//     the new header, and the checksum catches anything else.
// Files use the 1.8 object format (H5Pset_libver_bounds V18..latest: checksummed object
// headers; the 1.10 format would mark the superblock "open for writing", and a killed
// writer's file could then not be opened without h5clear). A flush closes the dataset
// handles (HDF5 writes the chunks waiting in their chunk caches: work moved earlier,
// not added; up to 1 MiB per dataset, including each partly filled last chunk, which is
// read back by the next append and compressed again later), calls H5Fflush (metadata
// only then) and reopens them; see bench/README.md for the cost.
//
// Layout of a file:
//   /                       attributes: format = "tensorscope-hdf5", format_version = 1
//   /<group>                one group per stream and layout (shape + stored dtype);
//                           attributes (variable-length UTF-8 strings unless noted):
//                             stream  the stream name, unchanged
//                             kind    e.g. "activation" (of the group's first record)
//                             dtype   the stored element type: "float32", "int8",
//                                     "bool", ..., "bfloat16" (see below)
//                             shape   int64 [ndim]: the tensor shape (absent when 0-d)
//   /<group>/values         [N, *shape] of the stored type, extendible along axis 0;
//                           chunked along axis 0 (as many tensors per chunk as fit in
//                           64 KiB, at least one; a tensor over 16 MiB is split into
//                           chunks of at most 16 MiB), gzip when gzip_level > 0
//   /<group>/steps          int64 [N]: the step of each stored value
//   /<group>/ranks          int32 [N]
//   /<group>/devices        fixed-length strings of 16 bytes, NUL-padded [N] ("cpu",
//                           "cuda0", ...; h5py gives bytes: numpy 'S16')
// Row i of the four datasets is one stored tensor; rows are in append order.
//
// Group names: the stream name with '%', '/', '@' and control bytes percent-escaped
// ("%25", "%2F", "%40", ...; a name made only of dots has its dots escaped as "%2E"),
// so "model/fc1.out" is the group "model%2Ffc1.out". When a stream's shape or stored
// dtype changes, its values continue in the group "<name>@1" (then "@2", ...): the
// k-th distinct layout of a stream goes to "<name>@k" (k = 0 is plain "<name>"), the
// same name in every file of this sink; a layout seen before goes back to its group.
//
// Stored element types (HDF5 file types, little-endian; h5py reads them as noted):
//   float32/64 IEEE (f4/f8); float16 a 16-bit IEEE float type (h5py: float16);
//   int8/16/32/64 and uint8 the standard integer types; bool an 8-bit enum
//   {FALSE = 0, TRUE = 1} (h5py: bool; any non-zero byte is stored as 1).
//   bfloat16 with dtype "keep": numpy and h5py have no bfloat16, so the bit patterns
//   are stored unchanged as uint16, the group's `dtype` attribute is "bfloat16" and
//   `values` has the attribute encoding = "bfloat16-bits"; the float32 values are
//   (v.astype('<u4') << 16).view('<f4').
//   With dtype "float32", "float16" or "float64" every element is converted on write
//   (ints and bool too; float16 rounds to nearest even, overflowing to +-Inf).
//
// Change detection (change_detection = true): a value whose bytes, dtype and shape are
// identical to the previous stored value of the same (stream, device, rank) is not
// stored, only counted (skipped_unchanged()); the steps of stored values are kept, so
// skipped steps are gaps in `steps`. Values are compared by a 64-bit hash and then
// byte by byte against a copy of the previous stored value; for values over
// kHdf5ExactCompareBytes (64 MiB) no copy is kept and equal hashes count as unchanged.
// The state lives in the sink, not the file: a value unchanged since the previous
// file is skipped in the next one too.
// Memory cap: the kept copies count against an Hdf5ChangeBudget (options
// change_detection_bytes, or a budget shared by several sinks: a worker shares one
// among all its producers' sinks). When keeping a value's copy would exceed the cap,
// no copy is kept for that (stream, device, rank) and the next value is NOT skipped
// on its hash alone: it is stored even when it is unchanged (counted in
// stored_over_cap(); a value is never lost to a hash collision), and a copy of it is
// tried again. The first refusal of a budget is logged (once per budget). A copy's
// memory is released when the stream's next stored value replaces it and when the
// sink is destroyed (the producer finished). Cap 0 keeps no copy: change detection
// then skips only values over kHdf5ExactCompareBytes (by hash) and empty values.
//
// Errors: every HDF5 failure becomes a Status naming the file and HDF5's messages (the
// library's automatic error printing is turned off); bad records (invalid dtype,
// bytes != numel * dtype size, a negative dim, more than 31 dims, an empty stream name,
// a device name over wire::kDeviceBytes (16) bytes) are refused with nothing written.
// A failed append leaves the datasets of the group as they were.
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

namespace tensorscope::daemon {

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
  int gzip_level = 4;              // 0 = no compression, 1..9 deflate
  bool change_detection = true;    // skip a value identical to the stream's previous one
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
  static StatusOr<std::unique_ptr<Hdf5Sink>> open(std::string dir, std::string base,
                                                  Hdf5SinkOptions options);

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
  void set_flush_hook_for_testing(std::function<void(Hdf5FlushStage)> hook) {
    flush_hook_ = std::move(hook);
  }

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

  Hdf5Sink(std::string dir, std::string base, Hdf5SinkOptions options, wire::DType target,
           uint64_t next_index);

  Status open_file();
  bool number_taken(uint64_t n) const;
  void keep_copy(StreamState& state, const Hdf5Record& record);
  Status write_record(const Hdf5Record& record, const std::string& group_name,
                      wire::DType stored, const void* values, uint64_t value_bytes);
  StatusOr<OpenGroup*> group_for(const Hdf5Record& record, const std::string& group_name,
                                 wire::DType stored);
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
  std::vector<unsigned char> scratch_;  // converted values
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
  std::vector<std::string> removed;    // partials HDF5 could not read whole (or empty)
  uint64_t in_use = 0;                 // held by a live writer (or another cleaner)
  std::vector<std::string> problems;   // files left in place, with the reason
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

}  // namespace tensorscope::daemon
