// nn/io/checkpoint.cpp — checkpoints and weight files on top of nn/io/safetensors: what goes in
// (see nn/io/checkpoint.h for the layout), the name/shape/dtype matching that reports every
// mismatch at once, and the order of a load that leaves everything untouched when it fails.
#include "nn/io/checkpoint.h"

#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/kernels.h"

namespace moelab {
namespace {

constexpr const char* kFormat = "moelab.checkpoint.v1";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";
const char* const kReservedKeys[] = {"format", "step", "optimizer.steps_taken", "generator.seed", "generator.counter"};

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// A metadata value as a decimal integer; throws naming the file and the key.
template <class Int>
Int metadata_integer(const SafetensorsFile& file, const std::string& key, const char* op, const char* missing_hint) {
  const auto it = file.metadata.find(key);
  MOELAB_CHECK(it != file.metadata.end(), op, "'", file.path, "' has no metadata '", key, "'", missing_hint);
  const std::string& text = it->second;
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  MOELAB_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(), op, "'", file.path,
               "': metadata '", key, "' = '", text, "' is not a decimal integer in range");
  return value;
}

// The parameters' data, then the buffers, by dotted name: what a model's state is.
std::vector<std::pair<std::string, Tensor>> named_state(const Module& model) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : model.named_parameters()) out.emplace_back(name, p.data());
  for (const auto& [name, b] : model.named_buffers()) out.emplace_back(name, b);
  return out;
}

// One parameter to overwrite: its storage (a handle sharing the parameter's) and the loaded value.
struct Copy {
  Tensor dst;
  Tensor src;
};

// Matches the file's tensors named prefix + <parameter name> against the model's parameters and
// returns the copies to make, or throws one error listing every mismatch.
// True when every element of a float tensor (on the host) is finite; integer tensors always are.
bool all_finite(const Tensor& t) {
  if (t.dtype() == DType::Float32) {
    const float* v = t.data<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(v[i])) return false;
  } else if (t.dtype() == DType::Float64) {
    const double* v = t.data<double>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(v[i])) return false;
  }
  return true;
}

std::vector<Copy> match_parameters(const SafetensorsFile& file, const Module& model, const std::string& prefix,
                                   bool strict, const char* op, bool allow_non_finite) {
  std::map<std::string, const Tensor*> stored;  // parameter name -> tensor in the file
  for (const auto& [name, t] : file.tensors)
    if (starts_with(name, prefix)) stored[name.substr(prefix.size())] = &t;

  std::vector<Copy> copies;
  std::vector<std::string> missing, mismatched;
  std::set<std::string> known;
  for (const auto& [name, p] : named_state(model)) {
    known.insert(name);
    const auto it = stored.find(name);
    if (it == stored.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& src = *it->second;
    const bool same_shape = src.shape() == p.shape(), same_dtype = src.dtype() == p.dtype();
    if (!same_shape)
      mismatched.push_back(name + ": shape " + src.shape().str() + " in the file, " + p.shape().str() + " in the model");
    if (!same_dtype)
      mismatched.push_back(name + ": dtype " + dtype_name(src.dtype()) + " in the file, " + dtype_name(p.dtype()) +
                           " in the model");
    // A NaN or inf weight would make every later loss NaN, far from its cause.
    if (same_shape && same_dtype && !allow_non_finite && !all_finite(src))
      mismatched.push_back(name + ": holds NaN or infinite values (saved from a run that diverged?); load it with "
                                  "allow_non_finite to inspect it anyway");
    else if (same_shape && same_dtype)
      copies.push_back({p, src});
  }
  std::vector<std::string> unexpected;
  if (strict)
    for (const auto& [name, t] : stored)
      if (!known.count(name)) unexpected.push_back(name);

  const std::size_t problems = missing.size() + unexpected.size() + mismatched.size();  // one per line
  if (problems == 0) return copies;
  std::ostringstream msg;
  msg << "'" << file.path << "' does not match the model (" << problems << (problems == 1 ? " problem" : " problems");
  if (!prefix.empty()) msg << "; parameters are stored under '" << prefix << "'";
  msg << "):";
  if (!missing.empty()) msg << "\n  missing in the file (" << missing.size() << "): " << join(missing);
  if (!unexpected.empty()) msg << "\n  not in the model (" << unexpected.size() << "): " << join(unexpected);
  for (const auto& m : mismatched) msg << "\n  " << m;
  fail(op, msg.str());
}

void apply(std::vector<Copy>& copies) {
  for (auto& c : copies) kernels::copy(c.dst, c.src);
}

std::vector<std::pair<std::string, Tensor>> parameter_tensors(const Module& model, const std::string& prefix) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : named_state(model)) out.emplace_back(prefix + name, t);
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const Module& model, const Optimizer* optimizer, std::int64_t step,
                     const Generator* generator, const std::map<std::string, std::string>& extra) {
  MOELAB_CHECK(step >= 0, "save_checkpoint", "step must be >= 0, got ", step);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : extra) {
    for (const char* reserved : kReservedKeys)
      MOELAB_CHECK(key != reserved, "save_checkpoint", "metadata key '", key, "' is reserved for the checkpoint itself");
    metadata[key] = value;
  }
  metadata["format"] = kFormat;
  metadata["step"] = std::to_string(step);

  auto tensors = parameter_tensors(model, kModelPrefix);
  if (optimizer) {
    for (auto& [name, t] : optimizer->state_tensors()) tensors.emplace_back(kOptimizerPrefix + name, t);
    metadata["optimizer.steps_taken"] = std::to_string(optimizer->steps_taken());
  }
  if (generator) {
    metadata["generator.seed"] = std::to_string(generator->seed());
    metadata["generator.counter"] = std::to_string(generator->counter());
  }
  write_safetensors(path, tensors, metadata);
}

std::int64_t load_checkpoint(const std::string& path, Module& model, Optimizer* optimizer, Generator* generator,
                             std::map<std::string, std::string>* metadata, bool allow_non_finite) {
  const char* op = "load_checkpoint";
  const SafetensorsFile file = read_safetensors(path);

  // 1. Everything that can fail is checked before anything is changed.
  const auto format = file.metadata.find("format");
  MOELAB_CHECK(format != file.metadata.end() && format->second == kFormat, op, "'", path,
               "' is not a moelab checkpoint (metadata 'format' is ",
               format == file.metadata.end() ? std::string("missing") : "'" + format->second + "'",
               "); weights saved by save_parameters load with load_parameters");
  std::vector<std::string> stray;
  for (const auto& [name, t] : file.tensors)
    if (!starts_with(name, kModelPrefix) && !starts_with(name, kOptimizerPrefix)) stray.push_back(name);
  MOELAB_CHECK(stray.empty(), op, "'", path, "' has tensors that are neither 'model.*' nor 'optimizer.*': ", join(stray));

  const auto step = metadata_integer<std::int64_t>(file, "step", op, "");
  MOELAB_CHECK(step >= 0, op, "'", path, "': metadata 'step' = ", step,
               " is negative (save_checkpoint writes only steps >= 0; the file is damaged)");
  std::int64_t steps_taken = 0;
  std::vector<std::pair<std::string, Tensor>> state;
  if (optimizer) {
    steps_taken = metadata_integer<std::int64_t>(file, "optimizer.steps_taken", op,
                                                 " (it was saved without an optimizer; pass a null optimizer)");
    MOELAB_CHECK(steps_taken >= 0, op, "'", path, "': metadata 'optimizer.steps_taken' = ", steps_taken,
                 " is negative (an optimizer never takes fewer than 0 steps; the file is damaged)");
    for (const auto& [name, t] : file.tensors)
      if (starts_with(name, kOptimizerPrefix)) state.emplace_back(name.substr(std::string(kOptimizerPrefix).size()), t);
  }
  std::uint64_t seed = 0, counter = 0;
  if (generator) {
    const char* hint = " (it was saved without a generator; pass a null generator)";
    seed = metadata_integer<std::uint64_t>(file, "generator.seed", op, hint);
    counter = metadata_integer<std::uint64_t>(file, "generator.counter", op, hint);
  }
  std::vector<Copy> copies = match_parameters(file, model, kModelPrefix, /*strict=*/true, op, allow_non_finite);

  // 2. The optimizer checks its own state (names, shapes, dtypes) before it restores it.
  if (optimizer) {
    try {
      optimizer->load_state_tensors(state);
    } catch (const Error& e) {
      fail(op, "'", path, "': the optimizer state does not match the optimizer: ", e.what());
    }
    optimizer->set_steps_taken(steps_taken);
  }
  // 3. Nothing below can fail on a well-formed model.
  apply(copies);
  if (generator) generator->set_state(seed, counter);
  if (metadata) *metadata = file.metadata;
  return step;
}

void save_parameters(const std::string& path, const Module& model, const std::map<std::string, std::string>& metadata) {
  write_safetensors(path, parameter_tensors(model, ""), metadata);
}

void load_parameters(const std::string& path, Module& model, bool allow_non_finite) {
  load_parameters(read_safetensors(path), model, "", true, allow_non_finite);
}

void load_parameters(const SafetensorsFile& file, Module& model, const std::string& prefix, bool strict,
                     bool allow_non_finite) {
  std::vector<Copy> copies = match_parameters(file, model, prefix, strict, "load_parameters", allow_non_finite);
  apply(copies);
}

}  // namespace moelab
