// tasks/common/train.h — the decoder experiments' training recipe, run by the one training loop
// (nn/train_loop.h).
//
// As in the Mixture of Parrots paper: AdamW (weight decay on the matrices, none on the norm
// gains), the learning rate warmed up linearly over the first 20% of the steps and then decayed
// linearly to 0 ("warmup-linear", nn/optim/schedule.h), gradients clipped to a global norm. One
// step:
//   batch = next_batch(data_gen)                      inputs, targets int32 [B, T] (tasks/common/batch.h)
//   loss  = cross_entropy(model(inputs), targets)     mean over the counted targets
//         + the MoE layers' aux losses, if any
//   backward, clip, AdamW step with the scheduled learning rate
// Every eval_every steps (and after the last) `evaluate(model)` returns named metrics (exact
// match, ...); each is written to the metrics CSV in long form (job, step, metric, value), with
// the mean training loss and the throughput, so a plot of any metric over time is one filter away.
// stop_when(metrics) may end training early (a phone-book already recalled perfectly).
//
// A total loss (aux losses included) that becomes NaN or infinite stops the run with a
// moelab::Error naming the step and the part, rather than training on garbage (train_loop.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "nn/decoder.h"
#include "tasks/common/batch.h"
#include "runner/run_dir.h"

namespace moelab {

struct TrainConfig {
  std::int64_t steps = 1000;
  double lr = 3e-3;
  double weight_decay = 0.1;
  double warmup_fraction = 0.2;
  std::string schedule = "warmup-linear";
  double clip = 1.0;            // 0: no clipping
  std::int64_t eval_every = 0;  // 0: evaluate only after the last step
};

using BatchSource = std::function<TokenBatch(Generator& data_gen)>;
// step: the steps done when it is called (the last call: steps done in all, = config.steps unless stopped early).
using Evaluation = std::function<std::map<std::string, double>(Decoder& model, std::int64_t step)>;

struct TrainReport {
  std::int64_t steps_done = 0;
  double final_loss = 0;        // mean training loss over the last 10% of the steps done
  double seconds = 0;           // training time, evaluations excluded
  double tokens_per_second = 0; // input positions per second of training time
  std::map<std::string, double> metrics;  // the last evaluation
  bool stopped_early = false;
};

// Saving a run at its evaluations and resuming it there (a crash, a stopped job, a machine that
// went away). After every evaluation and its metrics rows, train_decoder writes a checkpoint to
// `path` (nn/io/checkpoint.h: the model's parameters and buffers, the optimizer and data_gen,
// written whole and renamed, so a crash while it is written leaves the previous one) that also
// holds the loop's own state (the steps done, the losses final_loss averages, the time trained),
// the metrics CSV's text and what save() returns: the caller's own state (its data stream, its
// best values, its other logs). A call that finds the file goes on from it: it loads the model,
// the optimizer and data_gen, puts the metrics CSV back as it was, hands save()'s JSON to
// restore(), and trains the steps left, bitwise as the run would have gone on
// (tests/test_train_resume.cpp). The caller builds model, batches and logs as for a new run
// before the call, and removes the file once its result is written.
struct TrainResume {
  std::filesystem::path path;
  std::function<nlohmann::json()> save;                // the caller's state; empty: none
  std::function<void(const nlohmann::json&)> restore;  // takes back what save() returned
};

// Numbers in a resume state, NaN and the infinities included (a metric that could not be measured
// is NaN; JSON numbers cannot hold these, and nlohmann would write null): a finite value as a JSON
// number (nlohmann writes the shortest text that reads back to the same bits), the others as
// "nan", "inf", "-inf". The map forms carry a metrics map.
nlohmann::json resume_number(double value);
double resume_number(const nlohmann::json& j);
nlohmann::json resume_numbers(const std::map<std::string, double>& values);
std::map<std::string, double> resume_numbers_from(const nlohmann::json& j);

// Fault injection, for tests (as runner/checked_file.h's simulate_full_disk_after): train_decoder
// throws moelab::Error right after writing the n-th checkpoint from now on, as a run killed there
// would stop; n < 0 ends it. Nothing else calls it.
void simulate_stop_after_checkpoints(int n);

// `label` names the job on the progress line and in the metrics CSV (may be null: no CSV).
// `resume` (may be null): save checkpoints and resume from one, see TrainResume.
TrainReport train_decoder(Decoder& model, const TrainConfig& config, const BatchSource& next_batch,
                          Generator& data_gen, const Evaluation& evaluate, const std::string& label,
                          CsvFile* metrics = nullptr,
                          const std::function<bool(const std::map<std::string, double>&)>& stop_when = {},
                          const TrainResume* resume = nullptr);

}  // namespace moelab
