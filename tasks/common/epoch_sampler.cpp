// tasks/common/epoch_sampler.cpp — see epoch_sampler.h.
#include "tasks/common/epoch_sampler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace moelab {

Sampling parse_sampling(const std::string& name) {
  if (name == "epochs") return Sampling::Epochs;
  if (name == "replacement") return Sampling::Replacement;
  fail("EpochSampler", "unknown sampling '", name, "' (expected epochs or replacement)");
}

std::string sampling_name(Sampling sampling) { return sampling == Sampling::Epochs ? "epochs" : "replacement"; }

EpochSampler::EpochSampler(std::int64_t size, std::int64_t batch, Sampling sampling)
    : size_(size), batch_(batch), sampling_(sampling) {
  MOELAB_CHECK(size >= 1 && size <= 0xFFFFFFFFll, "EpochSampler",
               "the training set must hold 1 to 2^32 - 1 examples, got ", size);
  MOELAB_CHECK(batch >= 1, "EpochSampler", "batch must be >= 1, got ", batch);
  if (sampling == Sampling::Epochs) {
    order_.resize(static_cast<std::size_t>(size));
    position_ = order_.size();  // the first next() starts epoch 1
  }
}

std::vector<std::int64_t> EpochSampler::next(Generator& gen) {
  std::vector<std::int64_t> out;
  if (sampling_ == Sampling::Replacement) {
    out.reserve(static_cast<std::size_t>(batch_));
    for (std::int64_t b = 0; b < batch_; ++b) out.push_back(gen.next_below(static_cast<std::uint32_t>(size_)));
    return out;
  }
  if (position_ >= order_.size()) {
    // A new epoch: Fisher-Yates over 0 .. size-1 (from the identity each time, so the order of an
    // epoch depends on the generator only, not on the previous epoch's order).
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
    for (std::size_t i = order_.size() - 1; i > 0; --i)
      std::swap(order_[i], order_[gen.next_below(static_cast<std::uint32_t>(i + 1))]);
    position_ = 0;
    ++epochs_started_;
  }
  // The epoch's next `batch` indices, or the short remainder at its end (see the header).
  const std::size_t take = std::min(static_cast<std::size_t>(batch_), order_.size() - position_);
  out.assign(order_.begin() + static_cast<std::ptrdiff_t>(position_),
             order_.begin() + static_cast<std::ptrdiff_t>(position_ + take));
  position_ += take;
  return out;
}

EpochSampler::State EpochSampler::state() const {
  return {order_, static_cast<std::int64_t>(position_), epochs_started_};
}

void EpochSampler::restore(const State& state) {
  MOELAB_CHECK(state.order.size() == order_.size() && state.position >= 0 &&
                   static_cast<std::size_t>(state.position) <= state.order.size() && state.epochs_started >= 0,
               "EpochSampler", "a saved state of ", state.order.size(), " indices at position ", state.position,
               " does not fit a sampler of ", order_.size());
  for (std::int64_t i : state.order)
    MOELAB_CHECK(i >= 0 && i < size_, "EpochSampler", "a saved index ", i, " is outside [0, ", size_, ")");
  order_ = state.order;
  position_ = static_cast<std::size_t>(state.position);
  epochs_started_ = state.epochs_started;
}

std::int64_t EpochSampler::batches_per_epoch() const { return (size_ + batch_ - 1) / batch_; }

std::int64_t EpochSampler::steps_for_epochs(std::int64_t epochs) const {
  MOELAB_CHECK(epochs >= 0, "EpochSampler", "epochs must be >= 0, got ", epochs);
  if (sampling_ == Sampling::Epochs) return epochs * batches_per_epoch();
  return (epochs * size_ + batch_ - 1) / batch_;
}

}  // namespace moelab
