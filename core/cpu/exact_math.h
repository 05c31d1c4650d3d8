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
// vector code (for float exp on SSE and AVX, a copy of it with a cheaper last step and the same
// bits: pexp_float_in_range below) and then check, for the whole vector at once, whether any input
// lies outside the range where that code is exact to its usual accuracy:
//
//   exp:  float [-87, 88]   double [-708, 709]   (results stay normal numbers, no overflow)
//   log:  [smallest normal, largest finite]
//
// Lanes outside it (and NaN) are recomputed with std::exp / std::log, which underflow to exactly
// 0, overflow to inf, give subnormals where IEEE does, and propagate NaN. In-range inputs, nearly
// all of them in practice, cost one compare per vector. Scalar elements (Eigen's head and tail)
// take the same vector code, one lane of it, so that an element's bits never depend on where it
// sits in its array (see scalar_like_lanes below).
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
#include <cstdint>
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

// Eigen's float exp on SSE and AVX packets (pexp_float, Eigen 3.4's
// arch/Default/GenericPacketMathFunctions.h) step for step, but for its last step. Eigen ends with
// pldexp(y, m) = y * 2^m in its general form, which splits 2^m into four factors so that any m
// works (about a third of the function's instructions); here 2^m is built from m's bits and
// multiplied once. For every input ExactExp keeps, [-87, 88], m lies in [-125, 127] and y * 2^m is
// a normal float, so both forms multiply by powers of two without rounding: the same bits.
// Checked on every one of the 2^32 float bit patterns through ExactExp, new against old, in the
// x86-64-v3 and SSE2 builds (a throwaway program, 2026-12-03: no lane differs, NaNs' bits
// included); tests/test_extremes.cpp compares 35 million inputs of [-87, 88] with Eigen's pexp in
// every build. Other lanes may differ and are recomputed by fix_out_of_range. The exp runs 1.46x
// as fast on long float arrays (x86-64-v3 on a Zen 5: 3.93 -> 2.69 ns per 8 floats), and the
// 64-expert step's exp_shifted went from 4.0% of its samples to 2.7-2.8%. AVX-512 packets have
// Eigen's own exp (pexp<Packet16f>, already one multiplication), kept.
template <class Packet>
Packet pexp_float_in_range(const Packet& _x) {
  using namespace Eigen::internal;
  using PacketI = typename unpacket_traits<Packet>::integer_packet;
  const Packet cst_1 = pset1<Packet>(1.0f);
  const Packet cst_half = pset1<Packet>(0.5f);
  const Packet cst_exp_hi = pset1<Packet>(88.723f);
  const Packet cst_exp_lo = pset1<Packet>(-88.723f);
  const Packet cst_cephes_LOG2EF = pset1<Packet>(1.44269504088896341f);
  const Packet cst_cephes_exp_p0 = pset1<Packet>(1.9875691500E-4f);
  const Packet cst_cephes_exp_p1 = pset1<Packet>(1.3981999507E-3f);
  const Packet cst_cephes_exp_p2 = pset1<Packet>(8.3334519073E-3f);
  const Packet cst_cephes_exp_p3 = pset1<Packet>(4.1665795894E-2f);
  const Packet cst_cephes_exp_p4 = pset1<Packet>(1.6666665459E-1f);
  const Packet cst_cephes_exp_p5 = pset1<Packet>(5.0000001201E-1f);
  const Packet x = pmax(pmin(_x, cst_exp_hi), cst_exp_lo);
  const Packet m = pfloor(pmadd(x, cst_cephes_LOG2EF, cst_half));  // exp(x) = 2^m exp(r)
  const Packet cst_cephes_exp_C1 = pset1<Packet>(-0.693359375f);
  const Packet cst_cephes_exp_C2 = pset1<Packet>(2.12194440e-4f);
  Packet r = pmadd(m, cst_cephes_exp_C1, x);
  r = pmadd(m, cst_cephes_exp_C2, r);
  const Packet r2 = pmul(r, r);
  const Packet r3 = pmul(r2, r);
  Packet y = pmadd(cst_cephes_exp_p0, r, cst_cephes_exp_p1);
  Packet y1 = pmadd(cst_cephes_exp_p3, r, cst_cephes_exp_p4);
  const Packet y2 = padd(r, cst_1);
  y = pmadd(y, r, cst_cephes_exp_p2);
  y1 = pmadd(y1, r, cst_cephes_exp_p5);
  y = pmadd(y, r3, y1);
  y = pmadd(y, r2, y2);
  const PacketI biased_m = padd(pcast<Packet, PacketI>(m), pset1<PacketI>(127));
  const Packet two_to_m = preinterpret<Packet>(plogical_shift_left<23>(biased_m));
  return pmax(pmul(y, two_to_m), _x);
}

// The packets whose Eigen exp is pexp_float.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"  // __m128 / __m256 as template arguments: Eigen's own types
template <class Packet>
inline constexpr bool kGenericFloatExp = false;
#ifdef EIGEN_VECTORIZE_SSE
template <>
inline constexpr bool kGenericFloatExp<Eigen::internal::Packet4f> = true;
#endif
#ifdef EIGEN_VECTORIZE_AVX
template <>
inline constexpr bool kGenericFloatExp<Eigen::internal::Packet8f> = true;
#endif
#pragma GCC diagnostic pop

// The vector exp ExactExp starts from: Eigen's, through pexp_float_in_range where Eigen's is pexp_float.
template <class Packet>
Packet vector_exp(const Packet& x) {
  if constexpr (kGenericFloatExp<Packet>)
    return pexp_float_in_range(x);
  else
    return Eigen::internal::pexp(x);
}

// A scalar element (Eigen's head and tail of an array) as the vector lanes compute it: through the
// packet code, lane 0 of a broadcast, in every build. Eigen cuts an array into a scalar head (up to
// the first aligned address), a vector body and a scalar tail, and its vector exp and log are
// polynomials of their own, not std::exp and std::log: the packet exp and std::exp disagree in
// the last bit on 77,491,069 of the 4,278,190,082 non-NaN floats on an x86-64-v3 build (8 lanes,
// FMA) and on 77,560,715 on an SSE2 one (an exhaustive comparison, 2026-12-03; exp(2^-24) is
// 1 from the vectors and 1 + 2^-23 from std::exp, which rounds it correctly), and the
// AVX-512 build's 16-lane code rounds differently again. With std::exp for the scalars an element's
// bits depended on where it sat: in a [8, 10] softmax of eight identical rows, 72% of random batches
// gave rows that differed (8% of the elements), and a scratch buffer's heap address could leak
// into results (tests/test_determinism.cpp's background). Until 2026-12-03 only the AVX-512 build
// did this; the x86-64-v3 and SSE builds kept std::exp / std::log for the scalars, so their runs'
// bits from before then differ in those elements. tests/test_extremes.cpp places random inputs at
// every position and requires the same bits at each.
template <class Functor, class T>
T scalar_like_lanes(const Functor& f, T x) {
  using Packet = typename Eigen::internal::packet_traits<T>::type;
  return Eigen::internal::pfirst(f.packetOp(Eigen::internal::pset1<Packet>(x)));
}

}  // namespace exact_math_detail

template <class T>
struct ExactExp {
  static constexpr T lo = sizeof(T) == 4 ? T(-87) : T(-708);
  static constexpr T hi = sizeof(T) == 4 ? T(88) : T(709);
  static constexpr T zero_below = sizeof(T) == 4 ? T(-104) : T(-746);  // exp(x) rounds to +0 below
  T operator()(const T& x) const { return exact_math_detail::scalar_like_lanes(*this, x); }
  template <class Packet>
  Packet packetOp(const Packet& x) const {
    return exact_math_detail::fix_out_of_range(x, exact_math_detail::vector_exp(x), lo, hi,
                                               [](T v) { return std::exp(v); }, zero_below);
  }
};

template <class T>
struct ExactLog {
  static constexpr T lo = std::numeric_limits<T>::min();  // smallest normal
  static constexpr T hi = std::numeric_limits<T>::max();
  T operator()(const T& x) const { return exact_math_detail::scalar_like_lanes(*this, x); }
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

// y[i] = exp(x[i] - shift) for i < n, as exact_exp(row - shift) computes it (the same bits: every
// element through the vector code, whichever lane it takes), in whole vectors from x's first
// element and one partial vector for the rest, instead of one vector's work per element of the
// unaligned head and tail. Softmax rows are short (a causal attention row sees 1 .. T keys), so
// many of their elements sat in those ends. The partial vector is a masked load and store where
// Eigen has them (float on AVX and AVX-512: the lanes past n are neither read nor written), else
// a copy into a padded buffer (double, SSE). x and y may be the same array.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"  // unpacket_traits<__m256>: Eigen's own traits
template <class T>
void exp_shifted(const T* x, T shift, T* y, std::int64_t n) {
  using namespace Eigen::internal;
  using Packet = typename packet_traits<T>::type;
  constexpr std::int64_t lanes = packet_traits<T>::size;
  const ExactExp<T> f;
  const Packet s = pset1<Packet>(shift);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) pstoreu(y + i, f.packetOp(psub(ploadu<Packet>(x + i), s)));
  if (i == n) return;
  if constexpr (unpacket_traits<Packet>::masked_load_available && unpacket_traits<Packet>::masked_store_available) {
    using Mask = typename unpacket_traits<Packet>::mask_t;
    const Mask mask = static_cast<Mask>((std::uint64_t{1} << (n - i)) - 1);
    // (The lanes past n hold exp(0 - shift): computed, never stored.)
    pstoreu(y + i, f.packetOp(psub(ploadu<Packet>(x + i, mask), s)), mask);
  } else {
    T part[lanes];  // the rest, padded with `shift` (exp(0) = 1: computed, never stored)
    for (std::int64_t j = 0; j < lanes; ++j) part[j] = j < n - i ? x[i + j] : shift;
    pstoreu(part, f.packetOp(psub(ploadu<Packet>(part), s)));
    for (std::int64_t j = 0; j < n - i; ++j) y[i + j] = part[j];
  }
}
#pragma GCC diagnostic pop

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
