// pca.cc — compute_pca: column means, the exact Gram eigendecomposition and the
// randomized subspace iteration, all reading the tensor block by block on std::threads.
//
// The data matrix X (n x d, row-major in the buffer) is read in one of two ways:
//  - "row space" (n <= d): chunks of columns over all rows; the Gram matrix is
//    G = Xc Xc^T (n x n) and the scores are U * Sigma from its eigenvectors;
//  - "feature space" (d < n): blocks of whole rows (contiguous memory); G = Xc^T Xc
//    (d x d) and the scores are Xc V.
// Work is cut into a fixed number of partitions (kPartitions) whose partial sums are
// added in order, so results do not depend on the number of threads.
#include "tensorscope/plotting/pca.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>

#include <Eigen/Eigenvalues>
#include <Eigen/QR>

#include <emmintrin.h>

#include "tensorscope/tensor/element_blocks.h"

namespace tensorscope::plotting {
namespace {

using MatrixRf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixRd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr int kMaxComponents = 16;
constexpr int kPartitions = 16;
constexpr int kMaxThreads = 16;
// Elements converted per step (a private buffer on the stack).
constexpr size_t kChunk = tensor::kBlockElements;
// Elements per block handed to a matrix product (about 256 KiB of float).
constexpr int64_t kBlockTarget = 1 << 16;
// The exact Gram matrix is accumulated blockwise in float above this many elements.
constexpr int64_t kExactFloatAbove = int64_t{1} << 24;

// Converts elements [first, first + n) of the buffer to double, NaN/Inf kept. Each
// element is read once (tensor::convert_to_double copies it into a private array).
void convert_to_double(const unsigned char* base, tensor::ElementType type, int64_t first, size_t n, double* out) {
  tensor::convert_to_double(base + static_cast<size_t>(first) * tensor::element_size(type), type, n, out);
}

inline bool finite(double x) { return (x - x) == 0.0; }

// The matrix being decomposed: the view, its shape as a matrix and how to centre it.
struct DataMatrix {
  const unsigned char* base = nullptr;
  tensor::ElementType type = tensor::ElementType::kFloat32;
  int64_t n = 0;     // rows
  int64_t d = 0;     // features
  double scale = 1;  // a power of two: scaled |x| <= 1
  // Per column, mean of finite values * scale. Not a std::vector: the row-space mean
  // pass fills it from all threads without a serial zero-fill first (d can be 10^7+).
  std::unique_ptr<double[]> mean_scaled;

  // Writes the centred, scaled elements [first, first + count) (row-major; `first`
  // lies in column `col`) as T; NaN/Inf become 0 (= the column mean).
  template <typename T>
  void load(int64_t first, int64_t count, int64_t col, T* out) const {
    const double* mean = mean_scaled.get();
    if (type == tensor::ElementType::kFloat32) {
      // Fast path: floats read straight from the buffer (same arithmetic as below).
      const unsigned char* src = base + static_cast<size_t>(first) * sizeof(float);
      for (int64_t done = 0; done < count;) {
        const size_t run = static_cast<size_t>(std::min<int64_t>(count - done, d - col));
        float raw[kChunk];
        for (size_t i = 0; i < run;) {
          const size_t k = std::min<size_t>(run - i, kChunk);
          std::memcpy(raw, src + (static_cast<size_t>(done) + i) * sizeof(float), k * sizeof(float));
          const double* mu = mean + col + static_cast<int64_t>(i);
          T* o = out + done + static_cast<int64_t>(i);
          for (size_t r = 0; r < k; ++r) {
            const double x = static_cast<double>(raw[r]);
            const double v = x * scale - mu[r];
            o[r] = static_cast<T>(finite(x) ? v : 0.0);
          }
          i += k;
        }
        done += static_cast<int64_t>(run);
        col += static_cast<int64_t>(run);
        if (col == d) col = 0;
      }
      return;
    }
    double buf[kChunk];
    for (int64_t done = 0; done < count;) {
      const size_t n_now = static_cast<size_t>(std::min<int64_t>(count - done, kChunk));
      convert_to_double(base, type, first + done, n_now, buf);
      size_t i = 0;
      while (i < n_now) {
        const size_t run = static_cast<size_t>(std::min<int64_t>(n_now - i, d - col));
        const double* mu = mean + col;
        T* o = out + done + i;
        const double* x = buf + i;
        for (size_t r = 0; r < run; ++r) {
          const double v = x[r] * scale - mu[r];
          o[r] = static_cast<T>(finite(x[r]) ? v : 0.0);
        }
        i += run;
        col += static_cast<int64_t>(run);
        if (col == d) col = 0;
      }
      done += static_cast<int64_t>(n_now);
    }
  }

  // Rows [r0, r1), all columns, into a row-major block.
  template <typename T>
  void load_rows(int64_t r0, int64_t r1, Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>* b) const {
    b->resize(r1 - r0, d);
    load(r0 * d, (r1 - r0) * d, 0, b->data());
  }
  // All rows, columns [c0, c1), into a row-major block.
  template <typename T>
  void load_columns(int64_t c0, int64_t c1,
                    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>* b) const {
    b->resize(n, c1 - c0);
    for (int64_t i = 0; i < n; ++i) load(i * d + c0, c1 - c0, c0, b->row(i).data());
  }
};

// Runs fn(part) for part in [0, parts) on up to `threads` threads; rethrows the first
// exception after all have joined.
void parallel_parts(int parts, int threads, const std::function<void(int)>& fn) {
  threads = std::clamp(threads, 1, std::max(1, parts));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto worker = [&](int t) {
    try {
      for (int p = t; p < parts; p += threads) fn(p);
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// [begin, end) of part p of `total` split into `parts` near-equal pieces.
std::pair<int64_t, int64_t> part_range(int64_t total, int parts, int p) {
  const int64_t base = total / parts, extra = total % parts;
  const int64_t begin = p * base + std::min<int64_t>(p, extra);
  return {begin, begin + base + (p < extra ? 1 : 0)};
}

// SSE2 float32 version of the means loop (the same sums, counts and maximum): adds
// the finite values of src[0, len) to s[], counts them in c[], counts the rest in
// *bad, keeps the largest |x| in *mx. Returns how many elements it handled (a
// multiple of 4; the caller does the tail).
size_t accumulate_float32(const unsigned char* src, size_t len, double* s, int64_t* c, double* mx, int64_t* bad) {
  const size_t n4 = len & ~size_t{3};
  const __m128 zero = _mm_setzero_ps();
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 mxv = zero;
  int64_t ok_total = 0;
  for (size_t r = 0; r < n4; r += 4) {
    const __m128 x = _mm_loadu_ps(reinterpret_cast<const float*>(src + r * sizeof(float)));
    const __m128 ok = _mm_cmpeq_ps(_mm_sub_ps(x, x), zero);  // finite
    const __m128 v = _mm_and_ps(x, ok);
    mxv = _mm_max_ps(mxv, _mm_and_ps(v, abs_mask));
    _mm_storeu_pd(s + r, _mm_add_pd(_mm_loadu_pd(s + r), _mm_cvtps_pd(v)));
    _mm_storeu_pd(s + r + 2, _mm_add_pd(_mm_loadu_pd(s + r + 2), _mm_cvtps_pd(_mm_movehl_ps(v, v))));
    const __m128i oki = _mm_castps_si128(ok);  // -1 per finite lane
    __m128i* cp = reinterpret_cast<__m128i*>(c + r);
    _mm_storeu_si128(cp, _mm_sub_epi64(_mm_loadu_si128(cp), _mm_unpacklo_epi32(oki, oki)));
    _mm_storeu_si128(cp + 1, _mm_sub_epi64(_mm_loadu_si128(cp + 1), _mm_unpackhi_epi32(oki, oki)));
    ok_total += std::popcount(static_cast<unsigned>(_mm_movemask_ps(ok)));
  }
  alignas(16) float m4[4];
  _mm_store_ps(m4, mxv);
  for (float f : m4) *mx = std::max(*mx, static_cast<double>(f));
  *bad += static_cast<int64_t>(n4) - ok_total;
  return n4;
}

// Column means of the finite values, the largest finite |x| and the non-finite count;
// fills m->mean_scaled and m->scale. Long double sums: float64/int64 near their limits
// do not overflow.
struct MeanPass {
  int64_t non_finite = 0;
  int64_t all_non_finite_columns = 0;
};

template <typename Acc>
MeanPass compute_means_t(DataMatrix* m, bool row_space, int threads) {
  const int64_t n = m->n, d = m->d;
  // Feature space only (d is small there); row space writes each column's mean
  // directly (into m->mean_scaled, scaled below; long double means go through
  // mean_wide first so that the rounding stays that of mean * scale).
  constexpr bool kWide = !std::is_same_v<Acc, double>;
  std::vector<Acc> sum(row_space ? 0 : static_cast<size_t>(d), Acc{0});
  std::vector<int64_t> count(row_space ? 0 : static_cast<size_t>(d), 0);
  std::vector<Acc> mean_wide(row_space && kWide ? static_cast<size_t>(d) : 0);
  if (row_space) m->mean_scaled.reset(new double[static_cast<size_t>(d)]);  // all written below
  std::vector<int64_t> part_empty(static_cast<size_t>(row_space ? kPartitions : 0), 0);
  const int parts = static_cast<int>(std::min<int64_t>(kPartitions, row_space ? d : n));
  std::vector<double> part_max(static_cast<size_t>(parts), 0.0);
  std::vector<int64_t> part_bad(static_cast<size_t>(parts), 0);
  // Row space: each part owns a column range (writes sum/count directly). Feature
  // space: each part owns a row range and keeps its own sums (d is small there).
  std::vector<std::vector<Acc>> part_sum(row_space ? 0 : static_cast<size_t>(parts));
  std::vector<std::vector<int64_t>> part_count(row_space ? 0 : static_cast<size_t>(parts));
  const DataMatrix& dm = *m;
  parallel_parts(parts, threads, [&](int p) {
    double buf[kChunk];
    double mx = 0;
    int64_t bad = 0;
    // s[col - s_col], c[col - s_col] hold column col's sums.
    auto accumulate = [&](int64_t first, int64_t len, int64_t col, Acc* s, int64_t* c, int64_t s_col) {
      for (int64_t done = 0; done < len;) {
        const size_t k = static_cast<size_t>(std::min<int64_t>(len - done, kChunk));
        convert_to_double(dm.base, dm.type, first + done, k, buf);
        // Runs within one row: no wrap test per element, branch-free sums.
        for (size_t i = 0; i < k;) {
          const size_t run = static_cast<size_t>(std::min<int64_t>(k - i, d - col));
          Acc* sc = s + (col - s_col);
          int64_t* cc = c + (col - s_col);
          size_t r = 0;
          if constexpr (std::is_same_v<Acc, double>) {
            if (dm.type == tensor::ElementType::kFloat32) {
              r = accumulate_float32(
                  dm.base + static_cast<size_t>(first + done + static_cast<int64_t>(i)) * sizeof(float), run, sc, cc,
                  &mx, &bad);
            }
          }
          for (; r < run; ++r) {
            const double x = buf[i + r];
            const bool ok = finite(x);
            const double v = ok ? x : 0.0;
            sc[r] += v;
            cc[r] += ok ? 1 : 0;
            bad += ok ? 0 : 1;
            mx = std::max(mx, std::abs(v));
          }
          i += run;
          col += static_cast<int64_t>(run);
          if (col == d) col = 0;
        }
        done += static_cast<int64_t>(k);
      }
    };
    const auto [b, e] = part_range(row_space ? d : n, parts, p);
    if (row_space) {
      // Column tiles that stay in cache across the rows.
      for (int64_t cb = b; cb < e; cb += static_cast<int64_t>(kChunk)) {
        const int64_t ce = std::min<int64_t>(e, cb + static_cast<int64_t>(kChunk));
        Acc ts[kChunk];
        int64_t tc[kChunk];
        const size_t len = static_cast<size_t>(ce - cb);
        std::fill_n(ts, len, Acc{0});
        std::fill_n(tc, len, int64_t{0});
        for (int64_t i = 0; i < n; ++i) accumulate(i * d + cb, ce - cb, cb, ts, tc, cb);
        for (size_t j = 0; j < len; ++j) {
          const size_t col = static_cast<size_t>(cb) + j;
          if (tc[j] == 0) {
            ++part_empty[static_cast<size_t>(p)];
            if constexpr (kWide) {
              mean_wide[col] = 0;
            } else {
              m->mean_scaled[col] = 0;
            }
            continue;
          }
          const Acc mean = ts[j] / static_cast<Acc>(tc[j]);
          if constexpr (kWide) {
            mean_wide[col] = mean;
          } else {
            m->mean_scaled[col] = mean;
          }
        }
      }
    } else {
      auto& s = part_sum[static_cast<size_t>(p)];
      auto& c = part_count[static_cast<size_t>(p)];
      s.assign(static_cast<size_t>(d), Acc{0});
      c.assign(static_cast<size_t>(d), 0);
      accumulate(b * d, (e - b) * d, 0, s.data(), c.data(), 0);
    }
    part_max[static_cast<size_t>(p)] = mx;
    part_bad[static_cast<size_t>(p)] = bad;
  });
  if (!row_space) {
    for (int p = 0; p < parts; ++p) {
      for (int64_t j = 0; j < d; ++j) {
        sum[static_cast<size_t>(j)] += part_sum[static_cast<size_t>(p)][static_cast<size_t>(j)];
        count[static_cast<size_t>(j)] += part_count[static_cast<size_t>(p)][static_cast<size_t>(j)];
      }
    }
  }
  MeanPass r;
  double maxabs = 0;
  for (int p = 0; p < parts; ++p) {
    maxabs = std::max(maxabs, part_max[static_cast<size_t>(p)]);
    r.non_finite += part_bad[static_cast<size_t>(p)];
  }
  int exponent = 0;
  if (maxabs > 0 && std::isfinite(maxabs)) std::frexp(maxabs, &exponent);
  m->scale = std::ldexp(1.0, -exponent);  // maxabs * scale in [0.5, 1)
  if (row_space) {
    for (int64_t e : part_empty) r.all_non_finite_columns += e;
    const double scale = m->scale;
    parallel_parts(parts, threads, [&](int p) {
      const auto [b, e] = part_range(d, parts, p);
      double* out = m->mean_scaled.get();
      for (int64_t j = b; j < e; ++j) {
        if constexpr (kWide) {
          out[j] = static_cast<double>(mean_wide[static_cast<size_t>(j)] * scale);
        } else {
          out[j] *= scale;  // a power of two: the same as rounding mean * scale
        }
      }
    });
    return r;
  }
  m->mean_scaled = std::make_unique<double[]>(static_cast<size_t>(d));  // zeros
  for (int64_t j = 0; j < d; ++j) {
    const int64_t c = count[static_cast<size_t>(j)];
    if (c == 0) {
      ++r.all_non_finite_columns;
      continue;
    }
    const Acc mean = sum[static_cast<size_t>(j)] / static_cast<Acc>(c);
    m->mean_scaled[static_cast<size_t>(j)] = static_cast<double>(mean * m->scale);
  }
  return r;
}

// float32 values sum exactly enough in double (no overflow, 53-bit mantissa); the
// other types keep long double.
MeanPass compute_means(DataMatrix* m, bool row_space, int threads) {
  if (m->type == tensor::ElementType::kFloat32) return compute_means_t<double>(m, row_space, threads);
  return compute_means_t<long double>(m, row_space, threads);
}

// The "space" dimension's blocks: row blocks (feature space) or column chunks (row
// space), each about kBlockTarget elements.
int64_t block_length(const DataMatrix& m, bool row_space) {
  const int64_t other = row_space ? m.n : m.d;
  return std::max<int64_t>(8, kBlockTarget / std::max<int64_t>(1, other));
}

// Exact Gram matrix (lower triangle valid) of the centred, scaled data, in double.
Eigen::MatrixXd gram(const DataMatrix& m, bool row_space, int threads) {
  const int64_t dim = row_space ? m.n : m.d;
  const int64_t along = row_space ? m.d : m.n;
  const int parts = static_cast<int>(std::min<int64_t>(kPartitions, along));
  std::vector<Eigen::MatrixXd> partial(static_cast<size_t>(parts));
  const int64_t step = block_length(m, row_space);
  // Small inputs: double throughout. Large ones: each block's product in float (twice
  // the speed; a block sums at most kBlockTarget products), accumulated in double.
  const bool use_float = m.n * m.d > kExactFloatAbove;
  auto run = [&](auto tag, int p) {
    using T = decltype(tag);
    using Block = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Square = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
    Eigen::MatrixXd g = Eigen::MatrixXd::Zero(dim, dim);
    Square blockg(dim, dim);
    Block b;
    const auto [begin, end] = part_range(along, parts, p);
    for (int64_t s = begin; s < end; s += step) {
      const int64_t e = std::min(end, s + step);
      blockg.setZero();
      if (row_space) {
        m.load_columns(s, e, &b);
        blockg.template selfadjointView<Eigen::Lower>().rankUpdate(b);  // B B^T
      } else {
        m.load_rows(s, e, &b);
        blockg.template selfadjointView<Eigen::Lower>().rankUpdate(b.transpose());  // B^T B
      }
      if constexpr (std::is_same_v<T, double>) {
        g += blockg;
      } else {
        g += blockg.template cast<double>();
      }
    }
    partial[static_cast<size_t>(p)] = std::move(g);
  };
  parallel_parts(parts, threads, [&](int p) {
    if (use_float) {
      run(float{}, p);
    } else {
      run(double{}, p);
    }
  });
  Eigen::MatrixXd g = Eigen::MatrixXd::Zero(dim, dim);
  for (auto& pg : partial) g += pg;
  return g;
}

// One pass: G Z for the implicit Gram matrix G (dim x dim) and a dim x k block Z;
// also ||Xc||_F^2 when total != nullptr and, in feature space, Xc Z (n x k) when
// xz != nullptr.
Eigen::MatrixXd apply_gram(const DataMatrix& m, bool row_space, const Eigen::MatrixXd& z, int threads, double* total,
                           Eigen::MatrixXf* xz) {
  const int64_t dim = row_space ? m.n : m.d;
  const int64_t along = row_space ? m.d : m.n;
  const int64_t k = z.cols();
  const int parts = static_cast<int>(std::min<int64_t>(kPartitions, along));
  const MatrixRf zf = z.cast<float>();
  std::vector<Eigen::MatrixXd> partial(static_cast<size_t>(parts));
  std::vector<double> part_total(static_cast<size_t>(parts), 0.0);
  const int64_t step = block_length(m, row_space);
  if (xz != nullptr) xz->resize(m.n, k);
  parallel_parts(parts, threads, [&](int p) {
    Eigen::MatrixXd acc = Eigen::MatrixXd::Zero(dim, k);
    MatrixRf b;
    Eigen::MatrixXf inner, outer;
    double sq = 0;
    const auto [begin, end] = part_range(along, parts, p);
    for (int64_t s = begin; s < end; s += step) {
      const int64_t e = std::min(end, s + step);
      if (row_space) {
        m.load_columns(s, e, &b);
        inner.noalias() = b.transpose() * zf;  // (cols x k) = chunk of Xc^T Z
        outer.noalias() = b * inner;           // (n x k)
        acc += outer.cast<double>();
      } else {
        m.load_rows(s, e, &b);
        inner.noalias() = b * zf;                 // (rows x k) = Xc Z for these rows
        outer.noalias() = b.transpose() * inner;  // (d x k)
        acc += outer.cast<double>();
        if (xz != nullptr) xz->middleRows(s, e - s) = inner;
      }
      if (total != nullptr) sq += static_cast<double>(b.squaredNorm());
    }
    partial[static_cast<size_t>(p)] = std::move(acc);
    part_total[static_cast<size_t>(p)] = sq;
  });
  Eigen::MatrixXd gz = Eigen::MatrixXd::Zero(dim, k);
  double t = 0;
  for (int p = 0; p < parts; ++p) {
    gz += partial[static_cast<size_t>(p)];
    t += part_total[static_cast<size_t>(p)];
  }
  if (total != nullptr) *total = t;
  return gz;
}

// Xc V (n x c) in feature space, one pass over row blocks.
Eigen::MatrixXd project_rows(const DataMatrix& m, const Eigen::MatrixXd& v, int threads) {
  Eigen::MatrixXd out(m.n, v.cols());
  const int parts = static_cast<int>(std::min<int64_t>(kPartitions, m.n));
  const int64_t step = block_length(m, false);
  parallel_parts(parts, threads, [&](int p) {
    MatrixRd b;
    const auto [begin, end] = part_range(m.n, parts, p);
    for (int64_t s = begin; s < end; s += step) {
      const int64_t e = std::min(end, s + step);
      m.load_rows(s, e, &b);
      out.middleRows(s, e - s).noalias() = b * v;
    }
  });
  return out;
}

// Standard normal numbers from splitmix64 and Box-Muller: the same on every platform.
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : state_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(bits() >> 11) + 0.5) * 0x1p-53;
    const double u2 = static_cast<double>(bits() >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2 * M_PI * u2);
  }

 private:
  uint64_t bits() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

Eigen::MatrixXd orthonormalize(const Eigen::MatrixXd& a) {
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  return qr.householderQ() * Eigen::MatrixXd::Identity(a.rows(), a.cols());
}

std::string count_text(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

PcaResult compute(const tensor::TensorView& view, const PcaOptions& options) {
  PcaResult r;
  if (!view.valid()) {
    r.message = "invalid tensor view";
    return r;
  }
  pca_matrix_shape(view, options.layout, &r.rows, &r.features);
  const int64_t n = r.rows, d = r.features;
  if (n == 0 || d == 0) {
    r.message = "empty tensor: nothing to project";
    return r;
  }
  if (n < 2) {
    r.message = "1 row: PCA needs at least 2 rows";
    return r;
  }
  const int c = std::clamp(options.components, 1, kMaxComponents);
  const int threads = options.max_threads > 0
      ? std::min(options.max_threads, kMaxThreads)
      : static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, kMaxThreads));
  DataMatrix m;
  m.base = static_cast<const unsigned char*>(view.data);
  m.type = view.type;
  m.n = n;
  m.d = d;
  const bool row_space = n <= d;
  const int64_t dim = std::min(n, d);

  const MeanPass means = compute_means(&m, row_space, threads);
  if (means.all_non_finite_columns == d) {
    r.message = "no finite values: all " + count_text(n * d, "element is", "elements are") + " NaN or Inf";
    return r;
  }
  if (means.non_finite > 0) {
    r.note = count_text(means.non_finite, "NaN/Inf value", "NaN/Inf values") + " replaced by column means";
  }

  const int64_t oversampling = std::clamp(options.oversampling, 0, 1000);
  const int64_t k = std::min<int64_t>(c + oversampling, dim);
  r.randomized = dim >= std::max<int64_t>(options.exact_below, 1) && k < dim;

  Eigen::VectorXd lambda;   // top eigenvalues of G, descending
  Eigen::MatrixXd vectors;  // dim x (#lambda) eigenvectors of G
  Eigen::MatrixXd scores;   // n x (#lambda), filled below
  double total = 0;
  Eigen::MatrixXf xz;  // randomized, feature space: Xc Z of the last pass
  if (!r.randomized) {
    const Eigen::MatrixXd g = gram(m, row_space, threads);
    total = g.diagonal().sum();
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(g);  // reads the lower triangle
    if (eig.info() != Eigen::Success) {
      r.message = "eigendecomposition failed";
      return r;
    }
    const int64_t take = std::min<int64_t>(c, dim);
    lambda = eig.eigenvalues().tail(take).reverse();
    vectors = eig.eigenvectors().rightCols(take).rowwise().reverse();
  } else {
    Gaussian gauss(options.seed);
    Eigen::MatrixXd z(dim, k);
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t i = 0; i < dim; ++i) z(i, j) = gauss.next();
    }
    z = orthonormalize(z);
    const int q = std::clamp(options.power_iterations, 0, 20);
    Eigen::MatrixXd gz;
    for (int it = 0; it <= q; ++it) {
      const bool last = it == q;
      gz = apply_gram(m, row_space, z, threads, it == 0 ? &total : nullptr, last && !row_space ? &xz : nullptr);
      if (!last) z = orthonormalize(gz);
    }
    // Rayleigh-Ritz on span(Z): eigenpairs of Z^T G Z.
    Eigen::MatrixXd small = z.transpose() * gz;
    small = (small + small.transpose()) * 0.5;
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(small);
    if (eig.info() != Eigen::Success) {
      r.message = "eigendecomposition failed";
      return r;
    }
    const int64_t take = std::min<int64_t>(c, k);
    lambda = eig.eigenvalues().tail(take).reverse();
    const Eigen::MatrixXd w = eig.eigenvectors().rightCols(take).rowwise().reverse();
    if (row_space) {
      vectors = z * w;
    } else {
      scores = xz.cast<double>() * w;
    }
  }
  const int64_t got = lambda.size();
  if (row_space) {
    scores = vectors * lambda.cwiseMax(0.0).cwiseSqrt().asDiagonal();
  } else if (scores.size() == 0) {
    scores = project_rows(m, vectors, threads);
  }

  r.projection = Eigen::MatrixXf::Zero(n, c);
  r.explained_variance_ratio.assign(static_cast<size_t>(c), 0.0f);
  const double kFloatMax = std::numeric_limits<float>::max();
  if (!(total > 0) || !std::isfinite(total)) {
    r.note += std::string(r.note.empty() ? "" : "; ") + "zero variance: all rows equal";
    return r;
  }
  for (int64_t j = 0; j < got; ++j) {
    const double l = lambda(j);
    if (!(l > total * 1e-9)) continue;  // beyond the rank: leave 0
    r.explained_variance_ratio[static_cast<size_t>(j)] = static_cast<float>(std::clamp(l / total, 0.0, 1.0));
    auto col = scores.col(j);
    Eigen::Index at = 0;
    col.cwiseAbs().maxCoeff(&at);
    const double sign = col(at) < 0 ? -1.0 : 1.0;
    const double unscale = sign / m.scale;
    for (int64_t i = 0; i < n; ++i) {
      const double v = col(i) * unscale;
      r.projection(i, j) = static_cast<float>(std::isfinite(v) ? std::clamp(v, -kFloatMax, kFloatMax) : 0.0);
    }
  }
  return r;
}

}  // namespace

void pca_matrix_shape(const tensor::TensorView& view, PcaRowLayout layout, int64_t* rows, int64_t* features) {
  *rows = 0;
  *features = 0;
  if (!view.valid()) return;
  const auto& s = view.shape;
  if (s.empty()) {
    *rows = 1;
    *features = 1;
    return;
  }
  if (view.numel() == 0) return;  // products of the other dims could overflow
  const size_t lead = layout == PcaRowLayout::kFirstTwoDims && s.size() >= 2 ? 2 : 1;
  int64_t r = 1, f = 1;
  for (size_t i = 0; i < s.size(); ++i) (i < lead ? r : f) *= s[i];  // valid(): no overflow
  *rows = r;
  *features = f;
}

PcaResult compute_pca(const tensor::TensorView& view, const PcaOptions& options) {
  try {
    return compute(view, options);
  } catch (const std::bad_alloc&) {
    PcaResult r;
    pca_matrix_shape(view, options.layout, &r.rows, &r.features);
    r.message = "PCA failed: out of memory";
    return r;
  } catch (...) {
    PcaResult r;
    pca_matrix_shape(view, options.layout, &r.rows, &r.features);
    r.message = "PCA failed";
    return r;
  }
}

int align_signs(Eigen::MatrixXf* projection, const Eigen::MatrixXf& previous) {
  if (projection == nullptr || projection->rows() != previous.rows() || previous.rows() < 2) return 0;
  int flipped = 0;
  const Eigen::Index cols = std::min(projection->cols(), previous.cols());
  for (Eigen::Index k = 0; k < cols; ++k) {
    const Eigen::VectorXd a = projection->col(k).cast<double>();
    const Eigen::VectorXd b = previous.col(k).cast<double>();
    if (!a.allFinite() || !b.allFinite()) continue;
    const double na = a.norm(), nb = b.norm();
    if (!(na > 0) || !(nb > 0)) continue;
    if (a.dot(b) / (na * nb) < -0.3) {
      projection->col(k) *= -1.0f;
      ++flipped;
    }
  }
  return flipped;
}

}  // namespace tensorscope::plotting
