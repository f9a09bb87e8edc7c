// record_log.h — a flat binary log of received records (name, step, dtype, kind, device,
// whether the payload came by CUDA IPC, payload bytes), written by ipc_sink and read back
// by the CUDA tests (C++ here, Python in python/tests/test_cuda.py) to compare what
// arrived with what was pushed, byte for byte.
//
// Each record, little-endian: u32 name length, name, u32 device length, device, i64 step,
// u8 dtype, u8 kind, u8 by_ipc, u64 payload length, payload.
//
// Used by tests only. Thread safety: one writer (append flushes each record), readers
// read the whole file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tensorscope/shared/ring_reader.h"

namespace tensorscope::itest {

struct LoggedRecord {
  std::string name;
  std::string device;
  int64_t step = 0;
  uint8_t dtype = 0;
  uint8_t kind = 0;  // wire::TensorKind
  bool by_ipc = false;
  std::vector<uint8_t> payload;
};

inline bool append_record(std::FILE* out, const RecordView& v) {
  const std::string name = v.header.name;
  const std::string device = v.header.device;
  const uint32_t name_len = static_cast<uint32_t>(name.size());
  const uint32_t device_len = static_cast<uint32_t>(device.size());
  const uint8_t by_ipc = (v.header.flags & wire::kRecordDevicePayload) != 0 ? 1 : 0;
  const uint64_t bytes = v.header.payload_bytes;
  bool ok = std::fwrite(&name_len, 4, 1, out) == 1 && std::fwrite(name.data(), 1, name_len, out) == name_len &&
      std::fwrite(&device_len, 4, 1, out) == 1 && std::fwrite(device.data(), 1, device_len, out) == device_len &&
      std::fwrite(&v.header.step, 8, 1, out) == 1 && std::fwrite(&v.header.dtype, 1, 1, out) == 1 &&
      std::fwrite(&v.header.kind, 1, 1, out) == 1 && std::fwrite(&by_ipc, 1, 1, out) == 1 &&
      std::fwrite(&bytes, 8, 1, out) == 1;
  if (ok && bytes > 0) ok = std::fwrite(v.payload, 1, bytes, out) == bytes;
  return ok && std::fflush(out) == 0;
}

// Every complete record of the log (a torn last record is ignored).
inline std::vector<LoggedRecord> read_records(const std::string& path) {
  std::vector<LoggedRecord> records;
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) return records;
  for (;;) {
    LoggedRecord r;
    uint32_t name_len = 0, device_len = 0;
    uint64_t bytes = 0;
    if (std::fread(&name_len, 4, 1, in) != 1 || name_len > 4096) break;
    r.name.resize(name_len);
    if (std::fread(r.name.data(), 1, name_len, in) != name_len) break;
    if (std::fread(&device_len, 4, 1, in) != 1 || device_len > 64) break;
    r.device.resize(device_len);
    if (std::fread(r.device.data(), 1, device_len, in) != device_len) break;
    uint8_t by_ipc = 0;
    if (std::fread(&r.step, 8, 1, in) != 1 || std::fread(&r.dtype, 1, 1, in) != 1 ||
        std::fread(&r.kind, 1, 1, in) != 1 || std::fread(&by_ipc, 1, 1, in) != 1 || std::fread(&bytes, 8, 1, in) != 1 ||
        bytes > (uint64_t{1} << 34)) {
      break;
    }
    r.by_ipc = by_ipc != 0;
    r.payload.resize(bytes);
    if (bytes > 0 && std::fread(r.payload.data(), 1, bytes, in) != bytes) break;
    records.push_back(std::move(r));
  }
  std::fclose(in);
  return records;
}

}  // namespace tensorscope::itest
