// hdf5_sink_h5py_test.cc — files of Hdf5Sink (finalized, and recovered) read with h5py
// (when /usr/bin/python3 has h5py and numpy; skipped otherwise).
#include "hdf5_sink_test_support.h"

namespace tensorscope::recording {
namespace {

using namespace sink_testing;  // NOLINT: the shared helpers of the Hdf5Sink tests

// ---- h5py interoperability (needs /usr/bin/python3 with h5py and numpy) ----

TEST(Hdf5Sink, H5pyReadsFinalizedFiles) {
  if (!h5py_available()) GTEST_SKIP() << "/usr/bin/python3 has no h5py";
  TempDir tmp("h5py");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  // Known values: float32 i*0.5, float16 1.0/-2.0/0.5, bfloat16 1.0/-2.0/0.5, bool, int64.
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> f32{step * 0.5f, -1.0f};
    ASSERT_OK(sink->append(make_record("m/f32", DType::kFloat32, {2}, to_bytes(f32), step * 10, step % 2, "cuda1")));
  }
  const std::vector<uint16_t> f16{0x3c00, 0xc000, 0x3800};
  ASSERT_OK(sink->append(make_record("f16", DType::kFloat16, {3}, to_bytes(f16), 5)));
  const std::vector<uint16_t> bf16{0x3f80, 0xc000, 0x3f00};
  ASSERT_OK(sink->append(make_record("bf16", DType::kBFloat16, {3}, to_bytes(bf16), 6)));
  const std::vector<uint8_t> bools{1, 0, 1};
  ASSERT_OK(sink->append(make_record("flags", DType::kBool, {3}, to_bytes(bools), 7)));
  const std::vector<int64_t> ints{-5, 1LL << 40};
  ASSERT_OK(sink->append(make_record("ids", DType::kInt64, {1, 2}, to_bytes(ints), 8)));
  ASSERT_OK(sink->finalize());

  const std::string script = tmp.path() + "/check.py";
  std::ofstream(script) << R"PY(
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
assert f.attrs['format'] == 'tensorscope-hdf5', f.attrs['format']
g = f['m%2Ff32']
assert g.attrs['stream'] == 'm/f32' and g.attrs['kind'] == 'activation' and g.attrs['dtype'] == 'float32'
v = g['values'][...]
assert v.dtype == np.float32 and v.shape == (4, 2), (v.dtype, v.shape)
assert (v == np.array([[s * 0.5, -1.0] for s in range(4)], np.float32)).all(), v
assert list(g['steps'][...]) == [0, 10, 20, 30], g['steps'][...]
assert list(g['ranks'][...]) == [0, 1, 0, 1]
assert [d.decode() if isinstance(d, bytes) else d for d in g['devices'][...]] == ['cuda1'] * 4
h = f['f16/values'][...]
assert h.dtype == np.float16 and list(h[0]) == [1.0, -2.0, 0.5], (h.dtype, h)
b = f['bf16']
assert b.attrs['dtype'] == 'bfloat16' and b['values'].attrs['encoding'] == 'bfloat16-bits'
bits = b['values'][...]
assert bits.dtype == np.uint16
vals = (bits.astype('<u4') << np.uint32(16)).view('<f4')
assert list(vals[0]) == [1.0, -2.0, 0.5], vals
t = f['flags/values'][...]
assert t.dtype == np.bool_ and list(t[0]) == [True, False, True], (t.dtype, t)
i = f['ids/values'][...]
assert i.dtype == np.int64 and i.shape == (1, 1, 2) and list(i[0, 0]) == [-5, 1 << 40], i
print('ok')
)PY";
  const std::string out_path = tmp.path() + "/check.out";
  const std::string command =
      "/usr/bin/python3 '" + script + "' '" + sink->finished_files().at(0) + "' >'" + out_path + "' 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream in(out_path);
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST(Hdf5Recovery, H5pyReadsARecoveredFile) {
  if (!h5py_available()) GTEST_SKIP() << "/usr/bin/python3 has no h5py";
  TempDir tmp("h5pyrec");
  ASSERT_FALSE(make_readable_partial(tmp.path(), "rank3_pid9", 4, 2).empty());
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_THAT(r->recovered, ElementsAre(tmp.path() + "/rank3_pid9.2.recovered.h5"));
  const std::string out_path = tmp.path() + "/check.out";
  const std::string command =
      "/usr/bin/python3 -c \"import sys, h5py; f = h5py.File(sys.argv[1], 'r'); "
      "assert f.attrs['format'] == 'tensorscope-hdf5'; "
      "print(f['a/steps'][...].tolist(), f['a/values'][:, 0].tolist())\" '" +
      r->recovered[0] + "' >'" + out_path + "' 2>&1";
  const int rc = std::system(command.c_str());
  const std::string out = read_file(out_path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "[0, 1, 2, 3] [0, 1, 2, 3]\n");
}

}  // namespace
}  // namespace tensorscope::recording
