// tests/fuzz/loader_harness.cpp — the contract of tests/fuzz/loader_harness.h, checked on one
// input at a time; plus the valid seed files the fuzzers start from.
#include "tests/fuzz/loader_harness.h"

#include <zlib.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/factories.h"
#include "core/random.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/module.h"
#include "nn/optim/adam.h"
#include "tasks/softmoe_mnist/idx.h"

namespace moelab::fuzz {

namespace {

[[noreturn]] void breach(Loader loader, const std::string& what) {
  throw ContractViolation(std::string(loader_name(loader)) + " loader: " + what);
}

// Writes a new file. Removing the old one first matters: on ext4, truncating a file that still
// has data on its way to disk makes the truncation wait for it, a hundred times the cost of the
// load itself.
void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  ::unlink(path.c_str());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("fuzz harness: cannot create " + path + ": " + std::strerror(errno));
  const bool ok = (size == 0 || std::fwrite(data, 1, size, f) == size);
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error("fuzz harness: cannot write " + path);
}

Bytes read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("fuzz harness: cannot open " + path);
  Bytes out;
  std::uint8_t buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) out.insert(out.end(), buffer, buffer + n);
  std::fclose(f);
  return out;
}

// The bytes as one gzip member, the way gzip(1) and write_idx make them.
Bytes gzip(const std::uint8_t* data, std::size_t size) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("fuzz harness: deflateInit2 failed");
  Bytes out(deflateBound(&z, static_cast<uLong>(size)) + 32);
  z.next_in = const_cast<std::uint8_t*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (r != Z_STREAM_END) throw std::runtime_error("fuzz harness: deflate failed");
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// ---------------------------------------------------------------- the checkpoint target

// Two float32 parameters and a float64 one, so that shape and dtype mismatches both occur.
class TinyModel : public Module {
 public:
  explicit TinyModel(std::uint64_t seed) {
    Generator gen(seed);
    register_parameter("weight", normal({3, 2}, 0.0, 1.0, gen));
    register_parameter("bias", normal({2}, 0.0, 1.0, gen));
    register_parameter("scale", normal({1}, 1.0, 0.1, gen, DType::Float64));
  }
};

// A model, an AdamW optimizer that has taken `steps` steps (so it has buffers), a generator
// that has drawn a little: the state a load must leave alone when it fails.
struct Target {
  explicit Target(std::uint64_t seed, int steps) : model(seed), optimizer(model.parameters(), AdamOptions{.lr = 0.01}), generator(seed) {
    for (int s = 0; s < steps; ++s) {
      Generator grads(seed + 100 + static_cast<std::uint64_t>(s));
      for (Variable p : model.parameters()) p.set_grad(normal(p.shape(), 0.0, 1.0, grads, p.dtype()));
      optimizer.step();
    }
    for (std::uint64_t i = 0; i < seed % 7; ++i) generator.next_u32();
  }
  TinyModel model;
  AdamW optimizer;
  Generator generator;
};

// Everything a load can change, copied.
struct Snapshot {
  explicit Snapshot(const Target& t)
      : steps_taken(t.optimizer.steps_taken()), seed(t.generator.seed()), counter(t.generator.counter()) {
    for (const auto& [name, p] : t.model.named_parameters()) parameters.emplace_back(name, p.data().clone());
    for (const auto& [name, s] : t.optimizer.state_tensors()) state.emplace_back(name, s.clone());
  }
  // "" when `t` matches the snapshot, else what differs.
  std::string difference(const Target& t) const {
    const Snapshot now(t);
    if (now.steps_taken != steps_taken) return "optimizer steps_taken " + std::to_string(steps_taken) + " -> " + std::to_string(now.steps_taken);
    if (now.seed != seed || now.counter != counter) return "the generator's (seed, counter)";
    std::string changed = list_difference(parameters, now.parameters, "parameter");
    return changed.empty() ? list_difference(state, now.state, "optimizer buffer") : changed;
  }
  static std::string list_difference(const std::vector<std::pair<std::string, Tensor>>& before,
                                     const std::vector<std::pair<std::string, Tensor>>& after, const std::string& kind) {
    if (before.size() != after.size())
      return "the number of " + kind + "s (" + std::to_string(before.size()) + " -> " + std::to_string(after.size()) + ")";
    for (std::size_t i = 0; i < before.size(); ++i)
      if (before[i].first != after[i].first || !bitwise_equal(before[i].second, after[i].second))
        return kind + " '" + before[i].first + "'";
    return "";
  }
  std::vector<std::pair<std::string, Tensor>> parameters, state;
  std::int64_t steps_taken;
  std::uint64_t seed, counter;
};

// Runs f (a load of `path`) and returns "" or its moelab::Error's message, after rules 1 and 2.
template <class F>
std::string load_error(Loader loader, const std::string& path, F&& f) {
  try {
    f();
    return "";
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.empty()) message = "(empty message)";
    if (message.find(path) == std::string::npos) breach(loader, "the error does not name the file: " + message);
    return message;
  } catch (const std::exception& e) {
    breach(loader, std::string("threw an undocumented exception type (not moelab::Error): ") + e.what());
  } catch (...) {
    breach(loader, "threw something that is not a std::exception");
  }
}

// Rule 5: a file that loads must fail with one more byte (0x00) at its end — every format says
// exactly where it ends (safetensors: the last tensor; IDX: the sizes; gzip: its last member).
template <class F>
void check_longer_fails(Loader loader, const std::string& path, const std::uint8_t* data, std::size_t size, F&& load) {
  Bytes longer(data, data + size);
  longer.push_back(0);
  write_file(path, longer.data(), longer.size());
  if (load_error(loader, path, load).empty()) breach(loader, "a file that loads still loads with a byte appended");
}

}  // namespace

// ---------------------------------------------------------------- names and seeds

const char* loader_name(Loader loader) {
  switch (loader) {
    case Loader::Safetensors: return "safetensors";
    case Loader::Checkpoint: return "checkpoint";
    case Loader::Idx: return "idx";
  }
  return "?";
}

Loader loader_from_name(const std::string& name) {
  for (Loader l : kLoaders)
    if (name == loader_name(l)) return l;
  throw std::invalid_argument("unknown loader '" + name + "': expected safetensors, checkpoint or idx");
}

struct LoaderHarness::Dir {
  std::filesystem::path path;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

LoaderHarness::LoaderHarness() : dir_(std::make_unique<Dir>()) {
  std::string pattern = (std::filesystem::temp_directory_path() / "moelab-fuzz-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("fuzz harness: cannot make a temporary directory");
  dir_->path = pattern;
}

LoaderHarness::~LoaderHarness() {
  std::error_code ec;
  std::filesystem::remove_all(dir_->path, ec);
}

std::vector<std::pair<std::string, Bytes>> hostile_files(Loader loader) {
  // A safetensors file from its header text alone (no data).
  const auto raw = [](const std::string& header) {
    Bytes out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    return out;
  };
  // Nested 100,000 deep (200 KB): a stack overflow in the JSON DOM once (core/json_guard.h).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  switch (loader) {
    case Loader::Safetensors: return {{"deep-tensor", raw("{\"a\":" + deep + "}")}};
    case Loader::Checkpoint: return {{"deep-metadata", raw("{\"__metadata__\":{\"format\":" + deep + "}}")}};
    case Loader::Idx: return {};
  }
  return {};
}

std::vector<std::pair<std::string, Bytes>> seed_files(Loader loader) {
  const LoaderHarness scratch;  // for its temporary directory, removed however this returns
  const std::filesystem::path dir = scratch.dir_->path;
  std::vector<std::pair<std::string, Bytes>> seeds;
  const auto keep = [&](const std::string& name) { seeds.emplace_back(name, read_file((dir / name).string())); };

  switch (loader) {
    case Loader::Safetensors: {
      write_safetensors((dir / "mixed").string(),
                        {{"f32", from_vector(std::vector<float>{1.5f, -0.0f, 3.0f, 1e-3f, -7.0f, 2.0f}, {2, 3})},
                         {"f64", from_vector(std::vector<double>{3.25, -1e300}, {2})},
                         {"i32", from_vector(std::vector<std::int32_t>{0, -1, 7}, {3, 1})},
                         {"scalar", from_vector(std::vector<float>{2.5f}, Shape{})},
                         {"empty", Tensor::empty({0, 4}, DType::Float32)}},
                        {{"step", "100"}, {"note", "seed"}});
      keep("mixed");
      write_safetensors((dir / "one").string(), {{"w", ones({4})}});
      keep("one");
      // As PyTorch writes it: an I64 tensor, no padding, the header in another order.
      const std::string header = R"({"b":{"dtype":"I64","shape":[2],"data_offsets":[4,20]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
      Bytes torch;
      for (int i = 0; i < 8; ++i) torch.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
      torch.insert(torch.end(), header.begin(), header.end());
      const float a = 0.5f;
      const std::int64_t b[2] = {-3, 1'000'000};
      torch.insert(torch.end(), reinterpret_cast<const std::uint8_t*>(&a), reinterpret_cast<const std::uint8_t*>(&a) + 4);
      torch.insert(torch.end(), reinterpret_cast<const std::uint8_t*>(b), reinterpret_cast<const std::uint8_t*>(b) + 16);
      seeds.emplace_back("torch-i64", torch);
      break;
    }
    case Loader::Checkpoint: {
      const Target saved(/*seed=*/3, /*steps=*/2);
      save_checkpoint((dir / "full").string(), saved.model, &saved.optimizer, 2, &saved.generator, {{"run", "seed"}});
      keep("full");
      save_checkpoint((dir / "model-only").string(), saved.model, nullptr, 7, nullptr);
      keep("model-only");
      const Target fresh(/*seed=*/4, /*steps=*/0);  // an optimizer without buffers yet
      save_checkpoint((dir / "no-buffers").string(), fresh.model, &fresh.optimizer, 0, &fresh.generator);
      keep("no-buffers");
      break;
    }
    case Loader::Idx: {
      IdxArray images;
      images.dims = {2, 3, 2};
      for (int i = 0; i < 12; ++i) images.data.push_back(static_cast<std::uint8_t>(i * 20));
      IdxArray labels;
      labels.dims = {5};
      labels.data = {7, 0, 9, 1, 3};
      IdxArray four;
      four.dims = {1, 2, 2, 2};
      four.data = {1, 2, 3, 4, 5, 6, 7, 8};
      for (bool gz : {false, true}) {
        const std::string suffix = gz ? ".gz" : "";
        write_idx((dir / ("images" + suffix)).string(), images, gz);
        keep("images" + suffix);
        write_idx((dir / ("labels" + suffix)).string(), labels, gz);
        keep("labels" + suffix);
      }
      write_idx((dir / "four").string(), four, false);
      keep("four");
      // Two gzip members that together hold one file (cat a.gz b.gz).
      const Bytes plain = read_file((dir / "images").string());
      Bytes joined = gzip(plain.data(), 10);
      const Bytes second = gzip(plain.data() + 10, plain.size() - 10);
      joined.insert(joined.end(), second.begin(), second.end());
      seeds.emplace_back("two-members.gz", joined);
      break;
    }
  }
  return seeds;
}

// ---------------------------------------------------------------- one input

Outcome LoaderHarness::run(Loader loader, const std::uint8_t* data, std::size_t size) {
  Outcome outcome;
  switch (loader) {
    case Loader::Safetensors: {
      const std::string path = dir_->file("input.safetensors");
      write_file(path, data, size);
      outcome.error = load_error(loader, path, [&] {
        const SafetensorsFile file = read_safetensors(path);
        for (const auto& [name, t] : file.tensors)
          if (name.empty() || !t.defined()) breach(loader, "loaded a tensor with an empty name or no data");
      });
      if (outcome.error.empty()) check_longer_fails(loader, path, data, size, [&] { (void)read_safetensors(path); });
      break;
    }
    case Loader::Checkpoint: {
      const std::string path = dir_->file("input.safetensors");
      write_file(path, data, size);
      // Into everything, then into the model alone (other checks, other success paths).
      Target full(/*seed=*/11, /*steps=*/1);
      const Snapshot before(full);
      std::int64_t step = -1;
      outcome.error = load_error(loader, path, [&] { step = load_checkpoint(path, full.model, &full.optimizer, &full.generator); });
      if (!outcome.error.empty()) {
        const std::string changed = before.difference(full);
        if (!changed.empty()) breach(loader, "a failed load changed " + changed + " (error: " + outcome.error + ")");
      } else if (step < 0 || full.optimizer.steps_taken() < 0) {
        breach(loader, "loaded a negative step (" + std::to_string(step) + ") or steps_taken (" +
                           std::to_string(full.optimizer.steps_taken()) + "), which save_checkpoint refuses");
      }
      Target alone(/*seed=*/12, /*steps=*/0);
      const Snapshot alone_before(alone);
      std::string error;
      error = load_error(loader, path, [&] { step = load_checkpoint(path, alone.model, nullptr, nullptr); });
      if (!error.empty()) {
        const std::string changed = alone_before.difference(alone);
        if (!changed.empty()) breach(loader, "a failed model-only load changed " + changed + " (error: " + error + ")");
      } else if (step < 0) {
        breach(loader, "a model-only load returned the negative step " + std::to_string(step));
      }
      if (error.empty()) outcome.error.clear();  // loaded in one of the two ways
      break;
    }
    case Loader::Idx: {
      const std::string path = dir_->file("input.idx");
      write_file(path, data, size);
      IdxArray array;
      outcome.error = load_error(loader, path, [&] { array = read_idx(path); });
      if (outcome.error.empty()) {
        std::int64_t count = 1;
        for (std::int64_t d : array.dims) count = d >= 1 ? count * d : -1;
        if (array.dims.empty() || array.dims.size() > 4 || count < 1 || static_cast<std::int64_t>(array.data.size()) != count)
          breach(loader, "loaded sizes that do not describe the data");
        check_longer_fails(loader, path, data, size, [&] { (void)read_idx(path); });
      }
      // Not gzip: the same bytes gzipped must load the same way.
      if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) {
        const std::string gz_path = dir_->file("input.idx.gz");
        const Bytes zipped = gzip(data, size);
        write_file(gz_path, zipped.data(), zipped.size());
        IdxArray unzipped;
        const std::string gz_error = load_error(loader, gz_path, [&] { unzipped = read_idx(gz_path); });
        if (gz_error.empty() != outcome.error.empty())
          breach(loader, "plain and gzipped disagree: plain " + (outcome.error.empty() ? "loads" : "fails (" + outcome.error + ")") +
                             ", gzipped " + (gz_error.empty() ? "loads" : "fails (" + gz_error + ")"));
        if (gz_error.empty() && (unzipped.dims != array.dims || unzipped.data != array.data))
          breach(loader, "plain and gzipped load different arrays");
      }
      break;
    }
  }
  outcome.loaded = outcome.error.empty();
  return outcome;
}

}  // namespace moelab::fuzz
