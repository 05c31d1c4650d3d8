// tests/test_schedule.cpp — every schedule's factor at its boundary steps (first step, end of
// warmup, middle, last step, T and beyond), the make_schedule factory, and its errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>

#include "core/error.h"
#include "nn/optim/schedule.h"

using namespace moelab;
using doctest::Approx;

namespace {

void throws_with(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find(needle) != std::string::npos, what);
    return;
  }
  FAIL("no moelab::Error containing '" << needle << "'");
}

}  // namespace

TEST_CASE("constant") {
  auto s = make_schedule("constant", 10);
  CHECK(s->name() == "constant");
  for (std::int64_t step : {0, 1, 9, 10, 1000}) CHECK(s->factor(step) == 1.0);
}

TEST_CASE("warmup-linear: (s+1)/W, then (T-s)/(T-W) down to 0 at T") {
  // T = 10, W = 2 (20%).
  auto s = make_schedule("warmup-linear", 10, warmup_steps_for(10, 0.2));
  CHECK(s->name() == "warmup-linear");
  CHECK(s->factor(0) == 0.5);   // first step: 1/W, not 0
  CHECK(s->factor(1) == 1.0);   // last warmup step reaches 1
  CHECK(s->factor(2) == 1.0);   // first decay step: (10-2)/8
  CHECK(s->factor(3) == Approx(7.0 / 8.0));
  CHECK(s->factor(9) == Approx(1.0 / 8.0));  // last step of training
  CHECK(s->factor(10) == 0.0);
  CHECK(s->factor(50) == 0.0);
  // W = 0: pure linear decay; W = T: pure warmup.
  auto decay = make_schedule("warmup-linear", 4, 0);
  CHECK(decay->factor(0) == 1.0);
  CHECK(decay->factor(3) == 0.25);
  auto warm = make_schedule("warmup-linear", 4, 4);
  CHECK(warm->factor(0) == 0.25);
  CHECK(warm->factor(3) == 1.0);
  CHECK(warm->factor(4) == 0.0);
}

TEST_CASE("cosine: 1 at step 0, the minimum at T") {
  auto s = make_schedule("cosine", 100);
  CHECK(s->name() == "cosine");
  CHECK(s->factor(0) == 1.0);
  CHECK(s->factor(50) == Approx(0.5));
  CHECK(s->factor(25) == Approx(0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(s->factor(99) == Approx(0.5 * (1 + std::cos(std::numbers::pi * 0.99))));
  CHECK(s->factor(100) == Approx(0.0).epsilon(1e-15));
  CHECK(s->factor(1000) == 0.0);
  auto floor = make_schedule("cosine", 100, 0, 0.1);
  CHECK(floor->factor(0) == 1.0);
  CHECK(floor->factor(50) == Approx(0.55));
  CHECK(floor->factor(100) == Approx(0.1));
  CHECK(floor->factor(200) == 0.1);
}

TEST_CASE("warmup-cosine: (s+1)/W, then cosine from 1 at W to the minimum at T") {
  auto s = make_schedule("warmup-cosine", 10, 2, 0.2);
  CHECK(s->name() == "warmup-cosine");
  CHECK(s->factor(0) == 0.5);
  CHECK(s->factor(1) == 1.0);
  CHECK(s->factor(2) == 1.0);
  CHECK(s->factor(6) == Approx(0.2 + 0.8 * 0.5));  // halfway through [2, 10]
  CHECK(s->factor(9) == Approx(0.2 + 0.8 * 0.5 * (1 + std::cos(std::numbers::pi * 7.0 / 8.0))));
  CHECK(s->factor(10) == Approx(0.2));
  CHECK(s->factor(11) == 0.2);
  // Factors never leave [min, 1] and the decay is monotone.
  double prev = 2.0;
  for (std::int64_t step = 2; step <= 12; ++step) {
    const double f = s->factor(step);
    CHECK(f <= prev);
    CHECK(f >= 0.2 - 1e-15);
    prev = f;
  }
}

TEST_CASE("warmup_steps_for rounds fraction * T") {
  CHECK(warmup_steps_for(1000, 0.2) == 200);
  CHECK(warmup_steps_for(7, 0.2) == 1);  // 1.4
  CHECK(warmup_steps_for(8, 0.2) == 2);  // 1.6
  CHECK(warmup_steps_for(5, 0.0) == 0);
  CHECK(warmup_steps_for(5, 1.0) == 5);
  throws_with([] { warmup_steps_for(5, 1.5); }, "fraction must be in [0, 1]");
  throws_with([] { warmup_steps_for(0, 0.2); }, "total_steps must be >= 1");
}

TEST_CASE("schedule errors say what is wrong") {
  throws_with([] { make_schedule("linear", 10); }, "unknown schedule 'linear'; known schedules: constant, warmup-linear");
  throws_with([] { make_schedule("cosine", 0); }, "total_steps must be >= 1");
  throws_with([] { make_schedule("warmup-linear", 10, 11); }, "warmup_steps must be in [0, total_steps = 10]");
  throws_with([] { make_schedule("warmup-cosine", 10, -1); }, "warmup_steps must be in");
  throws_with([] { make_schedule("cosine", 10, 2); }, "'cosine' takes no warmup");
  throws_with([] { make_schedule("constant", 10, 2); }, "'constant' takes no warmup");
  throws_with([] { make_schedule("warmup-linear", 10, 2, 0.1); }, "takes no min_factor");
  throws_with([] { make_schedule("warmup-cosine", 10, 2, 1.5); }, "min_factor must be in [0, 1]");
  throws_with([] { make_schedule("cosine", 10, 0, -0.1); }, "min_factor must be in [0, 1]");
  auto s = make_schedule("warmup-cosine", 10, 2);
  throws_with([&] { s->factor(-1); }, "step must be >= 0");
  CHECK(schedule_names().size() == 4);
}
