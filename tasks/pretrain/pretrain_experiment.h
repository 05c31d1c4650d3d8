// tasks/pretrain/pretrain_experiment.h — `moelab pretrain`: the Mixture of Parrots paper's
// pre-training experiment (Section 5, Figures 1, 5 and 6) as a synthetic analogue at CPU scale.
//
// Question: when dense and MoE language models are pre-trained on one mixture of world knowledge
// and math, what do more experts buy on each? The paper (63B tokens, real benchmarks) finds that
// knowledge accuracy follows TOTAL parameters and math accuracy follows ACTIVE parameters; that at
// fixed total parameters MoEs have a larger math train-test gap (Figure 5, "suggestive of
// memorization"); and that at a fixed validation perplexity MoEs do better on knowledge and tie on
// math (Figure 6).
//
// The analogue. A corpus generated from the seed (tasks/pretrain/corpus.h): synthetic people's
// biographies in several paraphrases with the question-answer pairs of half of them (Physics of
// Language Models 3.1's "mixed training"), and templated multi-step arithmetic word problems with
// step-by-step solutions, mixed by tokens (math_fraction). Characters are the tokens
// (tokenizer.h). Measured after training (evaluate.h):
//   knowledge_test   exact match on the questions of the held-out people (bios seen, questions never)
//   knowledge_train  the same on questions that were in the training text
//   math_test        exact match of the answer on fresh problems (in no training text)
//   math_train       the same on problems that were in the training text; math_gap = train - test
//   perplexity       on held-out text of the same mixture (fresh bios and problems)
//
// The sweep. Every model of the grid (dense widths x FFN factors; MoE widths x expert counts,
// top-k token choice with Mixtral gates and no dropping, FFN width d; or the `router` setting's
// scheme) and every seed of `seeds` is a point "<model>-seed<t>": the seed draws the corpus (the
// same corpus for every model of a seed), the initial weights and the order of the documents.
// Training: `steps` AdamW steps (weight decay on the matrices, warmup then linear decay, clipping:
// tasks/common/train.h) on `batch` windows of `seq` tokens cut from the endless document stream.
//
// Jobs (tasks/common/job_grid.h; docs/jobs.md): mode=all (default) runs the missing points and
// reports; mode=list prints a command per missing point; mode=point runs one; mode=report gathers.
//
// Outputs in the run folder (the report, tasks/pretrain/pretrain_report.h): results.csv (one row
// per point), metrics.csv (the training curves), models.csv (per model: means and spreads over the
// seeds), the plots fig1_knowledge_{total,active}.png, fig1_math_{total,active}.png,
// fig5_gap_{total,active}.png, fig6_knowledge.png and fig6_math.png, and summary.md with the verdict.
#pragma once

#include "tasks/common/experiment.h"

namespace moelab {

Experiment pretrain_experiment();

}  // namespace moelab
