// core/cpu/gemm_profile.cpp — the per-shape product profile of core/cpu/gemm_profile.h: a map from
// shape to calls and seconds behind one lock, written only while profiling is on.
#include "core/cpu/gemm_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

namespace moelab::cpu {
namespace {

using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, bool, bool>;

std::atomic<bool> profiling{false};

struct Records {
  std::mutex lock;
  std::map<Key, GemmShapeTime> shapes;
};

Records& records() {
  static Records* r = new Records;  // never destroyed: a product on another thread may record at exit
  return *r;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void set_gemm_profiling(bool on) { profiling.store(on, std::memory_order_relaxed); }
bool gemm_profiling() { return profiling.load(std::memory_order_relaxed); }

std::vector<GemmShapeTime> gemm_profile() {
  Records& r = records();
  std::vector<GemmShapeTime> out;
  {
    const std::lock_guard<std::mutex> hold(r.lock);
    for (const auto& entry : r.shapes) out.push_back(entry.second);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const GemmShapeTime& x, const GemmShapeTime& y) { return x.seconds > y.seconds; });
  return out;
}

void clear_gemm_profile() {
  Records& r = records();
  const std::lock_guard<std::mutex> hold(r.lock);
  r.shapes.clear();
}

GemmProfileScope::GemmProfileScope(std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a, bool trans_b,
                                   bool strided) {
  if (!profiling.load(std::memory_order_relaxed)) return;
  shape_.m = m, shape_.k = k, shape_.n = n;
  shape_.trans_a = trans_a, shape_.trans_b = trans_b, shape_.strided = strided;
  start_ns_ = now_ns();
}

GemmProfileScope::~GemmProfileScope() {
  if (start_ns_ < 0) return;
  const double seconds = double(now_ns() - start_ns_) * 1e-9;
  Records& r = records();
  const std::lock_guard<std::mutex> hold(r.lock);
  GemmShapeTime& entry =
      r.shapes[Key{shape_.m, shape_.k, shape_.n, shape_.trans_a, shape_.trans_b, shape_.strided}];
  if (entry.calls == 0) entry = shape_;
  entry.calls += 1;
  entry.seconds += seconds;
}

}  // namespace moelab::cpu
