// tests/test_epoch_sampler.cpp — tasks/common/epoch_sampler.h, the batches of every finite-data
// experiment.
//
//   - epochs: every index seen exactly once per epoch, the last batch short when batch does not
//     divide the size (10 = 4 + 4 + 2), no batch straddling two epochs
//   - a different order each epoch; the same orders for the same seed, others for another seed
//   - batch > size: each epoch is one batch of the whole set
//   - replacement: full batches of in-range indices, reproducible, repeats within an epoch's worth
//     (the old recipe), the old step count for an epoch budget
//   - steps_for_epochs / batches_per_epoch; bad sizes, batches and names throw moelab::Error
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "tasks/common/epoch_sampler.h"

using namespace moelab;

namespace {

// The indices of `epochs` whole epochs, one vector per epoch, checking the batch sizes on the way.
std::vector<std::vector<std::int64_t>> draw_epochs(EpochSampler& sampler, Generator& gen, int epochs) {
  std::vector<std::vector<std::int64_t>> out;
  const std::int64_t n = sampler.size(), b = sampler.batch();
  for (int e = 0; e < epochs; ++e) {
    std::vector<std::int64_t> epoch;
    for (std::int64_t step = 0; step < sampler.batches_per_epoch(); ++step) {
      const std::vector<std::int64_t> idx = sampler.next(gen);
      const std::int64_t left = n - static_cast<std::int64_t>(epoch.size());
      CHECK(static_cast<std::int64_t>(idx.size()) == std::min(b, left));  // full, or the short remainder
      epoch.insert(epoch.end(), idx.begin(), idx.end());
    }
    CHECK(sampler.epochs_started() == e + 1);
    out.push_back(epoch);
  }
  return out;
}

bool is_permutation_of_range(std::vector<std::int64_t> v, std::int64_t n) {
  std::sort(v.begin(), v.end());
  for (std::int64_t i = 0; i < n; ++i)
    if (static_cast<std::int64_t>(v.size()) != n || v[static_cast<std::size_t>(i)] != i) return false;
  return true;
}

}  // namespace

TEST_CASE("EpochSampler: every entry exactly once per epoch, the last batch short") {
  for (const auto& [n, b] : std::vector<std::pair<std::int64_t, std::int64_t>>{{10, 4}, {12, 4}, {1000, 128}, {7, 1}}) {
    INFO("size ", n, " batch ", b);
    EpochSampler sampler(n, b, Sampling::Epochs);
    CHECK(sampler.batches_per_epoch() == (n + b - 1) / b);
    CHECK(sampler.epochs_started() == 0);
    Generator gen(3);
    for (const std::vector<std::int64_t>& epoch : draw_epochs(sampler, gen, 4))
      CHECK(is_permutation_of_range(epoch, n));
  }
  // 10 = 4 + 4 + 2: the third batch holds the two left; the fourth starts the next epoch.
  EpochSampler s(10, 4, Sampling::Epochs);
  Generator gen(4);
  const std::vector<std::size_t> sizes{s.next(gen).size(), s.next(gen).size(), s.next(gen).size(), s.next(gen).size()};
  CHECK(sizes == std::vector<std::size_t>{4, 4, 2, 4});
  CHECK(s.epochs_started() == 2);
}

TEST_CASE("EpochSampler: a new order each epoch, the same orders for the same seed") {
  const std::int64_t n = 100, b = 16;
  EpochSampler a(n, b, Sampling::Epochs), same(n, b, Sampling::Epochs), other(n, b, Sampling::Epochs);
  Generator ga(7), gsame(7), gother(8);
  const auto ea = draw_epochs(a, ga, 3), esame = draw_epochs(same, gsame, 3), eother = draw_epochs(other, gother, 3);
  CHECK(ea == esame);        // deterministic: the seed decides everything
  CHECK(ea[0] != ea[1]);     // reshuffled each epoch
  CHECK(ea[1] != ea[2]);
  CHECK(ea[0] != eother[0]); // another seed, another order
  std::vector<std::int64_t> identity(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) identity[static_cast<std::size_t>(i)] = i;
  CHECK(ea[0] != identity);  // shuffled at all
}

TEST_CASE("EpochSampler: a batch larger than the set is the whole set, reshuffled") {
  EpochSampler s(5, 64, Sampling::Epochs);
  CHECK(s.batches_per_epoch() == 1);
  CHECK(s.steps_for_epochs(3) == 3);
  Generator gen(9);
  std::vector<std::vector<std::int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    epochs.push_back(s.next(gen));
    CHECK(is_permutation_of_range(epochs.back(), 5));
  }
  CHECK((epochs[0] != epochs[1] || epochs[1] != epochs[2]));
}

TEST_CASE("EpochSampler with replacement: the old recipe's draws and step count") {
  const std::int64_t n = 50, b = 64;
  EpochSampler s(n, b, Sampling::Replacement);
  Generator gen(11), again(11), direct(11);
  const std::vector<std::int64_t> idx = s.next(gen);
  CHECK(idx.size() == static_cast<std::size_t>(b));  // always full batches
  for (std::int64_t i : idx) CHECK((i >= 0 && i < n));
  CHECK(std::set<std::int64_t>(idx.begin(), idx.end()).size() < idx.size());  // 64 draws of 50: repeats
  EpochSampler s2(n, b, Sampling::Replacement);
  CHECK(s2.next(again) == idx);                                            // reproducible
  for (std::int64_t i : idx) CHECK(i == direct.next_below(static_cast<std::uint32_t>(n)));  // next_below(N) each
  CHECK(s.next(gen) != idx);
  CHECK(s.epochs_started() == 0);
  // An epoch budget: ceil(E * N / batch) steps, as before epochs were the default.
  EpochSampler r(2000, 128, Sampling::Replacement), e(2000, 128, Sampling::Epochs);
  CHECK(r.steps_for_epochs(2) == 32);   // ceil(4000 / 128)
  CHECK(e.steps_for_epochs(2) == 32);   // 2 * ceil(2000 / 128) = 2 * 16
  CHECK(EpochSampler(1000, 128, Sampling::Replacement).steps_for_epochs(3) == 24);  // ceil(3000 / 128)
  CHECK(EpochSampler(1000, 128, Sampling::Epochs).steps_for_epochs(3) == 24);       // 3 * 8
  CHECK(EpochSampler(1100, 128, Sampling::Epochs).steps_for_epochs(3) == 27);       // 3 * 9, not ceil(3300/128) = 26
}

TEST_CASE("EpochSampler: names, and bad sizes and batches throw moelab::Error") {
  CHECK(parse_sampling("epochs") == Sampling::Epochs);
  CHECK(parse_sampling("replacement") == Sampling::Replacement);
  CHECK(sampling_name(Sampling::Epochs) == "epochs");
  CHECK(sampling_name(Sampling::Replacement) == "replacement");
  CHECK(sampling_choices() == std::vector<std::string>{"epochs", "replacement"});
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(message([] { parse_sampling("shuffle"); }).find("moelab::EpochSampler:") == 0);
  CHECK(message([] { parse_sampling("shuffle"); }).find("epochs or replacement") != std::string::npos);
  CHECK(message([] { EpochSampler(0, 4, Sampling::Epochs); }).find("moelab::EpochSampler:") == 0);
  CHECK(message([] { EpochSampler(10, 0, Sampling::Epochs); }).find("batch must be >= 1, got 0") != std::string::npos);
  CHECK(message([] { EpochSampler(0x100000000ll, 4, Sampling::Replacement); }).find("2^32") != std::string::npos);
  CHECK(message([] { EpochSampler(10, 4, Sampling::Epochs).steps_for_epochs(-1); }).find("moelab::EpochSampler:") == 0);
}
