// tasks/common/epoch_sampler.h — which training examples each batch takes, for every experiment
// that trains on a finite training set (the phone-book, the Soft MoE MNIST network).
//
// Two ways to draw the B indices of a batch from a training set of N examples:
//
//   Sampling::Epochs (the default; what the papers' code does, through PyTorch's DataLoader with
//   shuffle=True): the training set is shuffled (Fisher-Yates from the run's seeded Generator)
//   and taken in order, B at a time; when it is used up, a new epoch starts with a fresh shuffle.
//   Every example is shown exactly once per epoch, in a different order each epoch.
//
//   Sampling::Replacement: every index drawn uniformly and independently (gen.next_below(N)).
//   Epoch-free, but after E epochs' worth of batches a fraction of about e^-E of the set has never
//   been shown (13.5% after 2): a memorization task cannot recall what it never saw. Kept to
//   compare with results recorded before epochs were the default (it draws exactly what the old
//   recipe drew, so those runs reproduce).
//
// The partial last batch. When B does not divide N, the last batch of an epoch is SHORT: it holds
// the N mod B examples left, and the next batch starts the next epoch's shuffle. This is
// PyTorch's DataLoader with drop_last=False (its default). We do not drop it (N mod B examples,
// different ones each epoch, would go unseen in that epoch) and do not carry it into the next
// epoch (a batch straddling two epochs can hold the same example twice, and "an epoch" would no
// longer be a whole number of steps). The cost: once per epoch, one optimizer step averages over
// fewer examples. An epoch is therefore ceil(N / B) steps: batches_per_epoch().
//
// Shapes and state: the sampler keeps the current epoch's order ([N] indices) and the position in
// it; the Generator is the caller's (train_decoder's data_gen), drawn from only when an epoch
// starts (N - 1 draws) or, with replacement, B draws per batch. Same generator state => the same
// batches, bitwise.
//
//   EpochSampler sampler(book.size(), 128, parse_sampling("epochs"));
//   Generator gen(seed);
//   std::vector<std::int64_t> idx = sampler.next(gen);   // 128 indices (fewer at an epoch's end)
//   std::int64_t steps = sampler.steps_for_epochs(2);     // 2 * ceil(N / 128): two whole passes
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/random.h"

namespace moelab {

enum class Sampling { Epochs, Replacement };

// "epochs" -> Epochs, "replacement" -> Replacement; anything else throws moelab::Error.
Sampling parse_sampling(const std::string& name);
// The inverse: "epochs" or "replacement".
std::string sampling_name(Sampling sampling);
// The names parse_sampling accepts, for a Settings text key with choices.
inline std::vector<std::string> sampling_choices() { return {"epochs", "replacement"}; }
// The help line of that key, the same in every experiment.
inline constexpr char kSamplingHelp[] =
    "training batches: epochs (a fresh shuffle of the training set per epoch, taken in order; the last batch "
    "of an epoch may be short) or replacement (indices drawn uniformly with replacement: the old recipe)";

class EpochSampler {
 public:
  // size: examples in the training set, 1 <= size < 2^32; batch >= 1 (may exceed size: then
  // every epoch is one batch of all `size` examples). moelab::Error ("EpochSampler") otherwise.
  EpochSampler(std::int64_t size, std::int64_t batch, Sampling sampling);

  // The next batch's indices in [0, size): `batch` of them, or fewer for the last batch of an
  // epoch (Epochs only). Draws from gen as described above.
  std::vector<std::int64_t> next(Generator& gen);

  // Steps per epoch: ceil(size / batch) with Epochs. With Replacement, the same count (batches of
  // `batch` whose total first reaches `size`), so an epoch budget means the same number of
  // examples either way up to the partial batch.
  std::int64_t batches_per_epoch() const;
  // Steps for `epochs` passes: epochs * batches_per_epoch() with Epochs; with Replacement
  // ceil(epochs * size / batch), the old recipe's count.
  std::int64_t steps_for_epochs(std::int64_t epochs) const;
  // Epochs started so far (Epochs only; 0 before the first next()).
  std::int64_t epochs_started() const { return epochs_started_; }

  // Where the sampler stands, for a checkpoint (tasks/common/train.h, TrainResume): the current
  // epoch's order, the position in it and the epochs started. restore() takes back what state()
  // gave, and the sampler then hands out what it would have; a state that cannot be this
  // sampler's (another size, a position past the order, indices out of range) is a moelab::Error.
  struct State {
    std::vector<std::int64_t> order;
    std::int64_t position = 0, epochs_started = 0;
  };
  State state() const;
  void restore(const State& state);

  std::int64_t size() const { return size_; }
  std::int64_t batch() const { return batch_; }
  Sampling sampling() const { return sampling_; }

 private:
  std::int64_t size_, batch_;
  Sampling sampling_;
  std::vector<std::int64_t> order_;  // [size]: the current epoch's shuffle (Epochs)
  std::size_t position_ = 0;         // next index of order_ to hand out; == size: start an epoch
  std::int64_t epochs_started_ = 0;
};

}  // namespace moelab
