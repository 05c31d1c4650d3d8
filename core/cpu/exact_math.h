// core/cpu/exact_math.h — Eigen's vectorised exp and log, with IEEE-exact results at the extremes.
//
// Eigen evaluates exp and log on whole vectors with polynomial approximations, several times
// faster than calling std::exp per element. Their range handling differs by instruction set, and
// some of it is wrong at the extremes (Eigen 3.4):
//   - float exp clamps its input to about [-88.4, 88.4] (AVX-512) or [-88.7, 88.7] (SSE, AVX2), so
//     exp(-100) gives 0 on one machine and 2.9e-39 on another, where IEEE says 3.8e-44, and
//     exp(-1000) is not always 0;
//   - double exp on AVX2 returns 5.56e-309 for exp(-1000), not 0;
//   - float and double log clamp subnormal inputs to the smallest normal number.
// A softmax entry that should underflow to 0 then is a tiny positive number, and results differ
// between an AVX2 and an AVX-512 machine.
//
// The fix, here and nowhere else: ExactExp and ExactLog are Eigen functors that run Eigen's
// vector code and then check, for the whole vector at once, whether any input lies outside the
// range where that code is exact to its usual accuracy:
//
//   exp:  float [-87, 88]   double [-708, 709]   (results stay normal numbers, no overflow)
//   log:  [smallest normal, largest finite]
//
// Lanes outside it (and NaN) are recomputed with std::exp / std::log, which underflow to exactly
// 0, overflow to inf, give subnormals where IEEE does, and propagate NaN. In-range inputs, nearly
// all of them in practice, cost one compare per vector. Scalar elements (Eigen's head and tail)
// already use std::exp / std::log.
//
// One out-of-range case is common: a causal attention mask puts -inf in almost half the scores,
// so nearly every vector of a masked softmax row has such a lane, and the per-lane std::exp made
// the attention softmax a tenth of a training step. Below `zero_below` (float -104, double -746)
// exp is exactly +0 (std::exp's last nonzero results are at -103.972 and -745.133), so those lanes,
// -inf included, are zeroed in the vector code; only the thin bands [-104, -87) and [-746, -708),
// overflow and NaN still take the per-lane path. The results are the same bits as before.
//
//   y = x.unaryExpr(ExactExp<float>());     or   y = exact_exp(x - m);
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, see core/cpu/elementwise.cpp
#include <Eigen/Core>
#pragma GCC diagnostic pop
#include <cmath>
#include <limits>

namespace moelab::cpu {

namespace exact_math_detail {

// GCC 12's false "used uninitialized" inside its AVX-512 intrinsics (bug 105593) is reported where
// they are inlined, i.e. here, when the AVX-512 build vectorises pandnot through 256-bit halves.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

// y = fast(x) on a packet, then y[i] = 0 for every lane with x[i] < zero_below, and y[i] = slow(x[i])
// for every other lane with x[i] outside [lo, hi] or NaN. zero_below <= lo; -inf disables it.
template <class Packet, class Scalar, class Slow>
Packet fix_out_of_range(const Packet& x, Packet y, Scalar lo, Scalar hi, Slow slow,
                        Scalar zero_below = -std::numeric_limits<Scalar>::infinity()) {
  using namespace Eigen::internal;
  const Packet outside = por(pcmp_lt_or_nan(x, pset1<Packet>(lo)), pcmp_lt(pset1<Packet>(hi), x));
  if (!predux_any(outside)) return y;
  const Packet zero = pcmp_lt(x, pset1<Packet>(zero_below));  // false for NaN
  y = pandnot(y, zero);                                        // those lanes: +0
  if (!predux_any(pandnot(outside, zero))) return y;
  constexpr int n = unpacket_traits<Packet>::size;
  Scalar xs[n], ys[n];
  pstoreu(xs, x);
  pstoreu(ys, y);
  for (int i = 0; i < n; ++i)
    if (!(xs[i] >= lo && xs[i] <= hi) && !(xs[i] < zero_below)) ys[i] = slow(xs[i]);
  return ploadu<Packet>(ys);
}
#pragma GCC diagnostic pop

// A scalar element (Eigen's head and tail of an array) as the vector lanes compute it. In the
// AVX-512 build Eigen's 16-lane exp and log are algorithms of their own that can round an ulp
// away from std::exp / std::log (float exp(30): tests/test_extremes.cpp puts copies of one input
// at every offset), so an element's bits would depend on where it sits in its array: there the
// scalar goes through the packet code, lane 0 of a broadcast. The AVX2 and SSE builds keep
// std::exp / std::log for scalars, which agree with their lanes on every input the tests place
// (and keep the recorded runs' bits, all made with the default x86-64-v3 build).
template <class Functor, class T, class Std>
T scalar_like_lanes(const Functor& f, T x, Std std_fn) {
#if defined(__AVX512F__)
  using Packet = typename Eigen::internal::packet_traits<T>::type;
  (void)std_fn;
  return Eigen::internal::pfirst(f.packetOp(Eigen::internal::pset1<Packet>(x)));
#else
  (void)f;
  return std_fn(x);
#endif
}

}  // namespace exact_math_detail

template <class T>
struct ExactExp {
  static constexpr T lo = sizeof(T) == 4 ? T(-87) : T(-708);
  static constexpr T hi = sizeof(T) == 4 ? T(88) : T(709);
  static constexpr T zero_below = sizeof(T) == 4 ? T(-104) : T(-746);  // exp(x) rounds to +0 below
  T operator()(const T& x) const { return exact_math_detail::scalar_like_lanes(*this, x, [](T v) { return std::exp(v); }); }
  template <class Packet>
  Packet packetOp(const Packet& x) const {
    return exact_math_detail::fix_out_of_range(x, Eigen::internal::pexp(x), lo, hi, [](T v) { return std::exp(v); },
                                               zero_below);
  }
};

template <class T>
struct ExactLog {
  static constexpr T lo = std::numeric_limits<T>::min();  // smallest normal
  static constexpr T hi = std::numeric_limits<T>::max();
  T operator()(const T& x) const { return exact_math_detail::scalar_like_lanes(*this, x, [](T v) { return std::log(v); }); }
  template <class Packet>
  Packet packetOp(const Packet& x) const {
    return exact_math_detail::fix_out_of_range(x, Eigen::internal::plog(x), lo, hi, [](T v) { return std::log(v); });
  }
};

template <class Derived>
auto exact_exp(const Eigen::ArrayBase<Derived>& x) {
  return x.unaryExpr(ExactExp<typename Derived::Scalar>());
}

template <class Derived>
auto exact_log(const Eigen::ArrayBase<Derived>& x) {
  return x.unaryExpr(ExactLog<typename Derived::Scalar>());
}

}  // namespace moelab::cpu

namespace Eigen::internal {

// Vectorised like Eigen's own exp and log, at a little more cost for the range check.
template <class T>
struct functor_traits<moelab::cpu::ExactExp<T>> {
  enum { Cost = functor_traits<scalar_exp_op<T>>::Cost + 2 * NumTraits<T>::AddCost, PacketAccess = packet_traits<T>::HasExp };
};
template <class T>
struct functor_traits<moelab::cpu::ExactLog<T>> {
  enum { Cost = functor_traits<scalar_log_op<T>>::Cost + 2 * NumTraits<T>::AddCost, PacketAccess = packet_traits<T>::HasLog };
};

}  // namespace Eigen::internal
