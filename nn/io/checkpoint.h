// nn/io/checkpoint.h — saving and restoring training state (model, optimizer, step, generator)
// and plain model weights, as safetensors files (nn/io/safetensors.h).
//
// A checkpoint is one safetensors file:
//   tensors   "model.<dotted parameter name>"   every parameter, e.g. "model.layers.0.attn.q.weight",
//             "model.<dotted buffer name>"      then every buffer (Module::register_buffer), e.g.
//                                               "model.layers.0.ffn.router.expert_bias"
//             "optimizer.<buffer>.<i>"          every optimizer buffer (Optimizer::state_tensors),
//                                               e.g. "optimizer.exp_avg.3"
//   metadata  "format"                  "moelab.checkpoint.v1"
//             "step"                    the training step the caller passed (decimal)
//             "optimizer.steps_taken"   Optimizer::steps_taken()   (only when an optimizer was saved)
//             "generator.seed"          Generator::seed()          (only when a generator was saved)
//             "generator.counter"       Generator::counter()       (only when a generator was saved)
//             + any extra string pairs the caller adds (a run name, the config as JSON, ...)
// The "model." / "optimizer." prefixes keep the two namespaces apart in one flat file. Weights
// alone (save_parameters) are stored under their plain dotted names, as the PyTorch reference
// fixtures and `model.state_dict()` are: no prefix, no metadata beyond what the caller adds.
//
// Loading copies into the existing parameters' storage (kernels::copy, any device), so every
// handle to a parameter — the optimizer's included — sees the loaded values. Before anything is
// copied, names, shapes and dtypes are checked against the model, and one moelab::Error lists
// every problem (missing names, unexpected names, each shape and dtype mismatch). The metadata is
// held to what save_checkpoint writes: "step" and "optimizer.steps_taken" must be decimal integers
// >= 0, the generator's two numbers unsigned 64-bit. A load that throws leaves the model,
// optimizer and generator as they were.
//
// Buffers count as parameters everywhere below (save_parameters and load_parameters too, as in a
// PyTorch state_dict): a model's state is its parameters and its buffers.
//
// Resuming: restoring the parameters and buffers, the optimizer's buffers and steps_taken, and the
// generator's (seed, counter) continues training bitwise as if it had never stopped, provided the
// model keeps every random number it draws in a buffer (nn/random_stream.h), as every built-in
// router does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "nn/io/safetensors.h"
#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace moelab {

// Writes a checkpoint atomically (temp file + rename). optimizer and generator may be null (then
// not saved). `extra` keys must not be one of the reserved keys above.
void save_checkpoint(const std::string& path, const Module& model, const Optimizer* optimizer, std::int64_t step,
                     const Generator* generator, const std::map<std::string, std::string>& extra = {});

// Restores a checkpoint into `model` and, when not null, `optimizer` and `generator` (which the
// file must then contain); returns the saved step. With `metadata` not null, it receives the
// file's whole metadata (extras included). A null optimizer or generator skips that part.
// A parameter or buffer holding NaN or inf is refused (listed with the other mismatches) unless
// allow_non_finite: such weights come from a run that diverged, and would make every loss NaN.
std::int64_t load_checkpoint(const std::string& path, Module& model, Optimizer* optimizer, Generator* generator,
                             std::map<std::string, std::string>* metadata = nullptr, bool allow_non_finite = false);

// Writes just the module's parameters under their plain dotted names.
void save_parameters(const std::string& path, const Module& model, const std::map<std::string, std::string>& metadata = {});
// Loads parameters saved by save_parameters (or by PyTorch's safetensors.torch.save_file of a
// state_dict with the same names); the file must hold exactly the module's parameters.
// Non-finite values are refused unless allow_non_finite, as in load_checkpoint.
void load_parameters(const std::string& path, Module& model, bool allow_non_finite = false);
// Loads the parameters from an already read file, from the tensors named prefix + <dotted name>.
// Tensors whose names do not start with `prefix` are ignored; with strict, a tensor under the
// prefix that is not a parameter is an error, without it it is ignored too (useful for a fixture
// file that also holds inputs and expected outputs). Missing parameters are always an error.
void load_parameters(const SafetensorsFile& file, Module& model, const std::string& prefix = "", bool strict = true,
                     bool allow_non_finite = false);

}  // namespace moelab
