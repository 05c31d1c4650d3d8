// examples/char_lm.cpp — a tiny character-level language model: read a text, learn to predict its
// next character, then write new lines in its style.
//
// Data. Every distinct byte of the text is one token (the vocabulary, sorted: for the shipped
// Shakespeare sonnets, examples/data/sonnets.txt, 60 characters). The first 90% of the text is the
// training split, the last 10% the validation split: validation loss measures how well the model
// predicts text it never trained on. A batch is B windows of T + 1 characters at random offsets of
// the training split; inputs are characters 0 .. T-1 of a window, targets characters 1 .. T (the
// next character at every position), so one window teaches T predictions at once.
//
// Model. The dense decoder of nn/decoder.h: embedding, L pre-norm blocks (RoPE self-attention and a
// ReLU MLP), final RMSNorm, LM head; logits [B, T, V]. Causal attention means position t sees only
// characters 0 .. t, so predicting character t + 1 is never cheating.
//
// Loss. Mean cross-entropy of the next character, in nats. A model that knows nothing assigns 1/V
// to every character: loss ln V (4.09 for V = 60). One that knows only how often each character
// occurs (a unigram model) gets about 3.1 on the sonnets; both baselines are printed at the start.
// Going below them means the model has learned spelling, words and metre from context.
//
// Training. AdamW (nn/optim/adam.h) with two parameter groups: weight decay 0.1 on the matrices
// (embedding, attention and MLP weights, head), none on the RMSNorm weights (decaying a norm's
// gain toward 0 would only fight the norm). The learning rate warms up linearly for 10% of the
// steps and then follows a cosine down to 10% of its peak (nn/optim/schedule.h); the gradient's
// global norm is clipped at 1.0 (nn/optim/clip.h). Every --print-every steps: step, training
// loss (mean since the last line), learning rate, tokens per second and time left; every
// --eval-every steps and at the end: the validation loss over the whole validation split.
//
// Sampling. generate_sample (nn/generate.h) extends a prompt one character at a time, drawing each
// from softmax(logits / temperature), with a KV cache so each step runs one position. The model
// was trained on windows of T characters and never saw a position past T, so long samples slide
// a window: each call continues the last T/2 characters by up to T/2 new ones.
//
//   build/char_lm                          # defaults: d 64, 2 layers, 4 heads, T 64, B 32, 600 steps
//   build/char_lm --steps 300 --temperature 0.6 --save runs/char_lm.safetensors
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "core/openmp_wait.h"
#include "core/parallel.h"
#include "nn/io/checkpoint.h"
#include "nn/nn.h"
#include "nn/optim/adam.h"
#include "nn/optim/schedule.h"
#include "nn/train_loop.h"

#ifndef MOELAB_SOURCE_DIR
#define MOELAB_SOURCE_DIR "."
#endif

using namespace moelab;

namespace {

struct Options {
  std::string text = std::string(MOELAB_SOURCE_DIR) + "/examples/data/sonnets.txt";
  std::int64_t steps = 600, d = 64, layers = 2, heads = 4, seq = 64, batch = 32;
  double lr = 3e-3, weight_decay = 0.1, clip = 1.0;
  std::uint64_t seed = 0;
  int threads = num_threads();
  std::int64_t print_every = 50, eval_every = 200;
  std::int64_t samples = 3, sample_tokens = 240, top_k = 0;
  double temperature = 0.8;
  std::string prompt = "When I";
  std::string save;
  double require_val_loss = -1;  // < 0: not checked
};

// The program's own errors: Failure (exit status 1: the text, the run) and BadOption (exit
// status 2: an option, or a combination of options, that cannot work).
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct BadOption : std::runtime_error {
  using std::runtime_error::runtime_error;
};
template <class E, class... Parts>
void require(bool condition, const Parts&... parts) {
  if (condition) return;
  std::ostringstream message;
  (message << ... << parts);
  throw E(message.str());
}

// The text as token ids, and the vocabulary that maps them back.
struct Corpus {
  std::string vocab;  // vocab[id] is the character of token id
  std::vector<std::int32_t> train, val;
  int id_of[256];  // -1 for bytes not in the text

  std::string decode(const std::vector<std::int32_t>& ids) const {
    std::string s;
    for (std::int32_t id : ids) s += vocab[static_cast<std::size_t>(id)];
    return s;
  }
};

Corpus load_corpus(const Options& o) {
  std::ifstream in(o.text, std::ios::binary);
  require<Failure>(in.good(), "cannot open the text file '", o.text, "' (give another with --text)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const std::int64_t n = static_cast<std::int64_t>(text.size()), n_val = n / 10;
  require<Failure>(n_val >= o.seq + 1, "'", o.text, "' has ", n, " characters; with --seq ", o.seq,
                   " it needs at least ", 10 * (o.seq + 1),
                   " (its last 10%, the validation split, must hold one window of seq + 1)");
  Corpus c;
  bool seen[256] = {};
  for (unsigned char ch : text) seen[ch] = true;
  for (int b = 0; b < 256; ++b) {
    c.id_of[b] = seen[b] ? static_cast<int>(c.vocab.size()) : -1;
    if (seen[b]) c.vocab += static_cast<char>(b);
  }
  require<Failure>(c.vocab.size() >= 2, "'", o.text, "' uses only one distinct character; nothing to learn");
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t id = c.id_of[static_cast<unsigned char>(text[static_cast<std::size_t>(i)])];
    (i < n - n_val ? c.train : c.val).push_back(id);
  }
  return c;
}

// B random windows of the training split: inputs [B, T] and targets [B, T] (shifted by one).
std::pair<Tensor, Tensor> sample_batch(const std::vector<std::int32_t>& ids, std::int64_t B, std::int64_t T,
                                       Generator& gen) {
  std::vector<std::int32_t> x, y;
  const auto starts = static_cast<std::uint32_t>(ids.size() - static_cast<std::size_t>(T));  // windows of T + 1
  for (std::int64_t b = 0; b < B; ++b) {
    const auto s = ids.begin() + gen.next_below(starts);
    x.insert(x.end(), s, s + T);
    y.insert(y.end(), s + 1, s + T + 1);
  }
  return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

// Mean next-character loss over the whole validation split, in non-overlapping windows of T + 1
// (batched B at a time; every window has T predictions, so the mean of window means is exact).
double validation_loss(Decoder& model, const std::vector<std::int32_t>& ids, std::int64_t B, std::int64_t T) {
  NoGradGuard no_grad;
  model.eval();
  const std::int64_t windows = (static_cast<std::int64_t>(ids.size()) - 1) / T;
  double total = 0;
  for (std::int64_t w0 = 0; w0 < windows; w0 += B) {
    const std::int64_t rows = std::min(B, windows - w0);
    std::vector<std::int32_t> x, y;
    for (std::int64_t w = w0; w < w0 + rows; ++w) {
      const auto s = ids.begin() + w * T;
      x.insert(x.end(), s, s + T);
      y.insert(y.end(), s + 1, s + T + 1);
    }
    const Variable logits = model.forward(from_vector(x, {rows, T}));
    total += static_cast<double>(nn::cross_entropy(logits, from_vector(y, {rows, T})).data().item<float>()) *
             static_cast<double>(rows);
  }
  model.train();
  return total / static_cast<double>(windows);
}

// The prompt as token ids; checked before training, so a bad one costs no training time.
std::vector<std::int32_t> encode_prompt(const Corpus& c, const Options& o) {
  require<BadOption>(!o.prompt.empty(), "--prompt must not be empty");
  std::vector<std::int32_t> prompt;
  for (unsigned char ch : o.prompt) {
    require<BadOption>(c.id_of[ch] >= 0, "--prompt: the character '", static_cast<char>(ch),
                       "' never occurs in the text, so the model has no token for it");
    prompt.push_back(c.id_of[ch]);
  }
  return prompt;
}

// `rows` continuations of `prompt`, each `n` characters, generated T/2 at a time from the last T/2.
std::vector<std::string> sample_text(Decoder& model, const Corpus& c, const Options& o, Generator& gen) {
  const std::vector<std::int32_t> prompt = encode_prompt(c, o);
  std::vector<std::vector<std::int32_t>> text(static_cast<std::size_t>(o.samples), prompt);
  const std::int64_t context = std::max<std::int64_t>(1, o.seq / 2);
  model.eval();
  for (std::int64_t made = 0; made < o.sample_tokens;) {
    const std::int64_t P = std::min<std::int64_t>(context, static_cast<std::int64_t>(text[0].size()));
    const std::int64_t N = std::min(o.sample_tokens - made, o.seq - P);
    std::vector<std::int32_t> window;
    for (const auto& row : text) window.insert(window.end(), row.end() - P, row.end());
    const Tensor tokens =
        generate_sample(model, from_vector(window, {o.samples, P}), N, o.temperature, o.top_k, gen).tokens;
    const std::vector<std::int32_t> t = tokens.to_vector<std::int32_t>();  // [samples, N]
    for (std::size_t r = 0; r < text.size(); ++r)
      text[r].insert(text[r].end(), t.begin() + static_cast<std::ptrdiff_t>(r) * N,
                     t.begin() + static_cast<std::ptrdiff_t>(r + 1) * N);
    made += N;
  }
  model.train();
  std::vector<std::string> out;
  for (const auto& row : text) out.push_back(c.decode(row));
  return out;
}

// The unigram baseline: validation loss when every character is predicted by its (add-one
// smoothed) frequency in the training split, ignoring all context.
double unigram_loss(const Corpus& c) {
  std::vector<double> count(c.vocab.size(), 1.0);
  for (std::int32_t id : c.train) count[static_cast<std::size_t>(id)] += 1;
  const double total = static_cast<double>(c.train.size() + c.vocab.size());
  double loss = 0;
  for (std::int32_t id : c.val) loss -= std::log(count[static_cast<std::size_t>(id)] / total);
  return loss / static_cast<double>(c.val.size());
}

std::string duration(double seconds) {
  char buf[32];
  const long s = std::lround(seconds);
  if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

int run(const Options& o) {
  const Corpus c = load_corpus(o);
  const auto V = static_cast<std::int64_t>(c.vocab.size());
  DecoderConfig config;
  config.vocab = V, config.d = o.d, config.layers = o.layers, config.heads = o.heads, config.max_seq = o.seq;
  try {
    config.validate();  // e.g. d not divisible by heads: a bad combination of options
  } catch (const Error& e) {
    throw BadOption(e.what());
  }
  require<BadOption>(o.top_k <= V, "--top-k ", o.top_k, " exceeds the vocabulary of ", V, " characters");
  if (o.samples > 0) encode_prompt(c, o);
  Generator init_gen(o.seed), data_gen(o.seed + 1), sample_gen(o.seed + 2);  // three independent streams
  Decoder model(config, init_gen);

  // Two parameter groups: decay the matrices, not the norm gains (the only rank-1 parameters).
  ParamGroup decay{.params = {}, .lr = o.lr, .base_lr = o.lr, .weight_decay = o.weight_decay};
  ParamGroup no_decay{.params = {}, .lr = o.lr, .base_lr = o.lr, .weight_decay = 0.0};
  for (const Variable& p : model.parameters()) (p.rank() >= 2 ? decay : no_decay).params.push_back(p);
  AdamW opt({decay, no_decay});
  const auto schedule = make_schedule("warmup-cosine", o.steps, warmup_steps_for(o.steps, 0.1), 0.1);

  std::printf("text %s: %zu characters, vocabulary %lld, train %zu / validation %zu\n", o.text.c_str(),
              c.train.size() + c.val.size(), static_cast<long long>(V), c.train.size(), c.val.size());
  std::printf(
      "decoder d %lld, %lld layers, %lld heads, seq %lld: %lld parameters; batch %lld, %lld steps, "
      "AdamW lr %g, %d threads\n",
      static_cast<long long>(o.d), static_cast<long long>(o.layers), static_cast<long long>(o.heads),
      static_cast<long long>(o.seq), static_cast<long long>(model.num_parameters()), static_cast<long long>(o.batch),
      static_cast<long long>(o.steps), o.lr, num_threads());
  std::printf("validation loss baselines: uniform ln(%lld) = %.3f, unigram %.3f; untrained model %.3f\n",
              static_cast<long long>(V), std::log(static_cast<double>(V)), unigram_loss(c),
              validation_loss(model, c.val, o.batch, o.seq));

  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto window_start = start;
  double window_loss = 0, val = 0;
  std::int64_t window_steps = 0;
  // The one training loop (nn/train_loop.h): schedule, backward, clipping, AdamW step,
  // a check that the loss is finite; this program says what a step's loss is and what to print.
  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    const auto [x, y] = sample_batch(c.train, o.batch, o.seq, data_gen);
    StepLoss s;
    s.loss = nn::cross_entropy(model.forward(x), y);  // logits [B, T, V] vs targets [B, T]
    return s;
  };
  hooks.on_step = [&](const LoopState& state, double value) {
    window_loss += value, ++window_steps;
    const std::int64_t done = state.step;
    if (done % o.print_every == 0 || done == o.steps) {
      const double elapsed = since(start),
                   rate = static_cast<double>(window_steps * o.batch * o.seq) / since(window_start);
      std::printf("step %5lld/%lld  loss %.4f  lr %.2e  %6.0f tok/s  %s left\n", static_cast<long long>(done),
                  static_cast<long long>(o.steps), window_loss / static_cast<double>(window_steps), opt.groups()[0].lr,
                  rate, duration(elapsed / static_cast<double>(done) * static_cast<double>(o.steps - done)).c_str());
      std::fflush(stdout);
      window_loss = 0, window_steps = 0, window_start = std::chrono::steady_clock::now();
    }
  };
  hooks.evaluate = [&](const LoopState& state) {
    val = validation_loss(model, c.val, o.batch, o.seq);
    std::printf("step %5lld  validation loss %.4f\n", static_cast<long long>(state.step), val);
    window_start = std::chrono::steady_clock::now();  // evaluation time is not training throughput
    return false;
  };
  train_loop(model, opt,
             LoopOptions{.steps = o.steps, .schedule = schedule.get(), .clip = o.clip, .eval_every = o.eval_every,
                         .loss_name = "cross-entropy"},
             hooks);
  std::printf("trained in %s: validation loss %.4f (uniform %.3f, unigram %.3f)\n", duration(since(start)).c_str(), val,
              std::log(static_cast<double>(V)), unigram_loss(c));

  if (!o.save.empty()) {
    const std::map<std::string, std::string> extra = {
        {"char_lm.vocab", c.vocab},
        {"char_lm.config", "{\"vocab\": " + std::to_string(V) + ", \"d\": " + std::to_string(o.d) +
                               ", \"layers\": " + std::to_string(o.layers) + ", \"heads\": " + std::to_string(o.heads) +
                               ", \"seq\": " + std::to_string(o.seq) + "}"}};
    save_checkpoint(o.save, model, &opt, o.steps, &data_gen, extra);
    std::printf("saved checkpoint %s\n", o.save.c_str());
  }
  if (o.samples > 0 && o.sample_tokens > 0) {
    std::printf("\nsamples: %lld, temperature %g%s, from the prompt \"%s\":\n", static_cast<long long>(o.samples),
                o.temperature, o.top_k > 0 ? (", top-k " + std::to_string(o.top_k)).c_str() : "", o.prompt.c_str());
    for (const std::string& s : sample_text(model, c, o, sample_gen)) std::printf("----\n%s\n", s.c_str());
    std::printf("----\n");
  }
  if (o.require_val_loss >= 0 && !(val <= o.require_val_loss)) {
    std::fprintf(stderr, "char_lm: validation loss %.4f is above the required %.4f\n", val, o.require_val_loss);
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  moelab::wait_passively_unless_set(argv);  // OpenMP threads sleep between regions (core/openmp_wait.h)
  CLI::App app{"char_lm: a tiny character-level language model learns a text, then writes a few lines in its style"};
  Options o;
  const auto positive = CLI::Range(std::int64_t{1}, std::int64_t{1} << 40);
  app.add_option("--text", o.text, "the text to learn (plain bytes; the last 10% is held out)")->capture_default_str();
  app.add_option("--steps", o.steps, "training steps")->check(positive)->capture_default_str();
  app.add_option("--d", o.d, "model width")->check(positive)->capture_default_str();
  app.add_option("--layers", o.layers, "decoder blocks")->check(positive)->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads (d / heads must be even)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--seq", o.seq, "characters per training window (context length)")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "windows per step")->check(positive)->capture_default_str();
  app.add_option("--lr", o.lr, "peak learning rate")->check(CLI::Range(1e-9, 10.0))->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay on matrices")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  app.add_option("--clip", o.clip, "gradient clipping: max global norm")
      ->check(CLI::Range(1e-9, 1e9))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed for weights, batches and sampling")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (default: every core)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--print-every", o.print_every, "print a progress line every N steps")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--eval-every", o.eval_every, "print the validation loss every N steps")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--samples", o.samples, "lines of text to sample at the end (0: none)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000}))
      ->capture_default_str();
  app.add_option("--sample-tokens", o.sample_tokens, "characters to generate per sample")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--temperature", o.temperature, "sampling temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--top-k", o.top_k, "sample among the k likeliest characters only (0: all)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{256}))
      ->capture_default_str();
  app.add_option("--prompt", o.prompt, "the text every sample starts from")->capture_default_str();
  app.add_option("--save", o.save, "write a checkpoint (safetensors: model, optimizer, vocabulary) here at the end");
  app.add_option("--require-val-loss", o.require_val_loss,
                 "exit with status 3 if the final validation loss is above this (ctest uses it)")
      ->check(CLI::Range(0.0, 1e9));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad option or value exits 2
  }
  set_num_threads(o.threads);
  try {
    return run(o);
  } catch (const BadOption& e) {
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // Failure, or moelab::Error ("moelab::<op>: ...")
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return 1;
  }
}
