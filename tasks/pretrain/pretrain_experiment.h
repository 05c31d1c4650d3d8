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
// step-by-step solutions, a share of all equations held out of them, mixed by tokens
// (math_fraction). Word pieces or characters are the tokens (tokenizer.h). Measured after training
// (evaluate.h):
//   knowledge_train  exact match on questions that were in the training text: stored facts, what
//                    world-knowledge benchmarks ask (the claims are judged on it); stored_bits =
//                    the facts answered in bits (knowledge.h), stored_bits_per_param per parameter
//   knowledge_test   the same on the held-out people's questions (bios seen, questions never):
//                    extraction, the claims' second row
//   math_unseen      exact match of the answer on fresh problems every equation of which was held
//                    out of training (the claims are judged on it); math_test on fresh problems
//                    drawn as the training ones (seen equations; the second row)
//   math_train       the same on problems that were in the training text; math_unseen_gap =
//                    train - unseen, math_gap = train - test
//   perplexity       on held-out text of the same mixture (fresh bios and problems), after the last
//                    step and the lowest every perplexity_every steps (best_perplexity)
//
// The sweep. Every load of `people` (a corpus size: corpus_bits = people x 34.8 bits), every model
// of the grid (dense widths x FFN factors; MoE widths x expert counts, top-k token choice with
// Mixtral gates and no dropping, FFN width d; or the `router` setting's scheme) and every seed of
// `seeds` is a point "<model>-p<people>-seed<t>": the seed draws the corpus (the same corpus for
// every model of a load and seed; a larger load's first people are a smaller one's), the initial
// weights and the order of the documents. Training: `steps` AdamW steps, or with `passes` > 0 the
// steps that read the knowledge text that many times at each load (weight decay on the matrices,
// warmup then linear decay, clipping: tasks/common/train.h) on `batch` windows of `seq` tokens cut
// from the endless document stream.
//
// Jobs (runner/job_grid.h; docs/jobs.md): mode=all (default) runs the missing points and
// reports; mode=list prints a command per missing point; mode=point runs one; mode=report gathers.
// A point saves itself after every evaluation (points/<point>.resume.safetensors: tasks/common/
// train.h's TrainResume, with the document stream, the best perplexity and the routing log) and a
// point run again after a crash or a stop goes on from its last save, bitwise as it would have.
//
// Outputs in the run folder (the report, tasks/pretrain/pretrain_report.h): results.csv (one row
// per point), metrics.csv (the training curves), models.csv (per load and model: means and spreads
// over the seeds), the plots (pretrain_report.h), and summary.md; the claims are
// pretrain_claims.h's.
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment pretrain_experiment();

}  // namespace moelab
