// tests/test_routing_tape.cpp — recording every MoE layer's experts over a run and replaying them
// (nn/moe/routing_tape.h).
//
//   - a replay of a router's own recording trains bit for bit as the recording did (topk, topk with
//     a capacity that drops, aux-free), the evaluation forwards between steps left untouched
//   - replay forces the recorded experts on a model initialised otherwise (whose own choice differs)
//   - with a capacity the tape holds the selection before the drops, so the replaying router drops
//     again by its own capacity
//   - the RL use case: experts recorded in an evaluation forward come back in a training forward
//     over the same tokens, although training's router noise would choose otherwise
//   - refusals naming the cause: a scheme that cannot replay, a tape too short, another batch size,
//     a file cut short, a file that is no tape, a link at the replayed path; a link at the recorded
//     path is replaced, its target untouched; an unfinished recording leaves no file
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/routing_tape.h"
#include "nn/moe/top_k_router.h"
#include "nn/optim/adam.h"
#include "temp_dir.h"

using namespace moelab;
using moelab::testing::TempDir;

namespace {

constexpr std::int64_t kVocab = 11, kBatch = 3, kSeq = 5, kLayers = 2, kExperts = 4;
using Phase = RoutingTape::Phase;

std::unique_ptr<Decoder> make_model(std::uint64_t seed, const std::string& router,
                                    std::map<std::string, std::string> options = {}) {
  Generator gen(seed);
  DecoderConfig c{.vocab = kVocab, .d = 8, .layers = kLayers, .heads = 2};
  return std::make_unique<Decoder>(
      c, gen, moe_feed_forward(MoEConfig{.experts = kExperts, .k = 2, .router = router, .router_options = options}));
}

MoELayer& moe(Decoder& m, std::int64_t i) { return dynamic_cast<MoELayer&>(m.layer(i).ffn()); }

Tensor random_ids(Generator& g, std::int64_t batch = kBatch) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(batch * kSeq));
  for (auto& x : v) x = static_cast<std::int32_t>(g.next_u32() % kVocab);
  return from_vector(v, {batch, kSeq});
}

struct Trace {
  std::vector<double> losses;
  std::vector<std::vector<std::int32_t>> experts;  // every training forward's layers, in order
};

// `steps` AdamW steps of next-token loss on random batches (data seed 7), an evaluation forward
// after each; `tape` (may be null) attached to every MoE layer.
Trace train(Decoder& model, std::int64_t steps, const std::shared_ptr<RoutingTape>& tape) {
  if (tape) attach_routing_tape(model, tape);
  AdamW opt(model.parameters(), AdamOptions{.lr = 3e-2});
  Generator data(7);
  Trace t;
  for (std::int64_t s = 0; s < steps; ++s) {
    const Tensor ids = random_ids(data);
    AuxLosses aux;
    const Variable logits = model.forward(ids, aux);
    const Variable loss = aux.added_to(nn::cross_entropy(logits, ids));
    opt.zero_grad();
    loss.backward();
    opt.step();
    t.losses.push_back(loss.data().to_vector<float>()[0]);
    for (std::int64_t l = 0; l < kLayers; ++l) t.experts.push_back(moe(model, l).last_experts().to_vector<std::int32_t>());
    model.eval();
    {
      NoGradGuard no_grad;
      model.forward(random_ids(data, 2));  // another batch size: must not touch the tape
    }
    model.train();
  }
  if (tape) tape->finish();
  return t;
}

}  // namespace

TEST_CASE("a replay of a router's own recording trains bit for bit as the recording did") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> cases = {
      {"topk", {}}, {"topk", {{"capacity_factor", "0.5"}}}, {"aux-free", {}}};
  for (const auto& [router, options] : cases) {
    CAPTURE(router);
    CAPTURE(options.size());
    const std::string path = (dir.path() / (router + std::to_string(options.size()) + ".tape.gz")).string();
    auto recorder = RoutingTape::record(path, Phase::Training);
    const Trace recorded = train(*make_model(1, router, options), 6, recorder);
    CHECK(recorder->entries() == 6 * kLayers);  // training forwards only, not the evaluations
    auto player = RoutingTape::replay(path, Phase::Training);
    const Trace replayed = train(*make_model(1, router, options), 6, player);
    CHECK(player->entries() == 6 * kLayers);
    CHECK(replayed.losses == recorded.losses);  // bitwise
    CHECK(replayed.experts == recorded.experts);
    bool dropped = false;
    for (const auto& e : recorded.experts) dropped |= std::count(e.begin(), e.end(), kDroppedSlot) > 0;
    CHECK(dropped == !options.empty());  // the capacity case does drop, so its replay drops again
  }
}

TEST_CASE("replay forces the recorded experts on a model that would choose others") {
  TempDir dir;
  const std::string path = (dir.path() / "a.tape.gz").string();
  const Trace a = train(*make_model(1, "topk"), 4, RoutingTape::record(path, Phase::Training));
  const Trace b_own = train(*make_model(2, "topk"), 4, nullptr);
  CHECK(b_own.experts != a.experts);  // otherwise the replay below would prove nothing
  const Trace b = train(*make_model(2, "topk"), 4, RoutingTape::replay(path, Phase::Training));
  CHECK(b.experts == a.experts);
  CHECK(b.losses != a.losses);  // its own weights, the recorded routing
}

TEST_CASE("with a capacity the tape holds the selection before the drops") {
  TempDir dir;
  const std::string path = (dir.path() / "cap.tape.gz").string();
  const Trace a = train(*make_model(1, "topk", {{"capacity_factor", "0.5"}}), 2, RoutingTape::record(path, Phase::Training));
  auto tape = RoutingTape::replay(path, Phase::Training);
  for (std::size_t f = 0; f < a.experts.size(); ++f) {
    const std::vector<std::int32_t> selected =
        tape->next(static_cast<std::int64_t>(f) % kLayers, kBatch * kSeq, 2, Device::cpu()).to_vector<std::int32_t>();
    REQUIRE(selected.size() == a.experts[f].size());
    for (std::size_t i = 0; i < selected.size(); ++i) {
      CHECK(selected[i] >= 0);
      if (a.experts[f][i] >= 0) CHECK(selected[i] == a.experts[f][i]);  // kept slots agree
    }
  }
}

TEST_CASE("the RL use case: an evaluation forward's experts replayed in a training forward") {
  // Training-time router noise (jitter) changes the choice of some tokens; the replay gives the
  // evaluation's experts back with gradients on.
  TempDir dir;
  const std::string path = (dir.path() / "rollout.tape.gz").string();
  auto model = make_model(3, "topk", {{"jitter", "0.9"}});
  Generator data(5);
  const Tensor tokens = random_ids(data);
  auto recorder = RoutingTape::record(path, Phase::Eval);
  attach_routing_tape(*model, recorder);
  model->eval();
  {
    NoGradGuard no_grad;
    model->forward(tokens);
  }
  recorder->finish();
  const std::vector<std::int32_t> rollout = moe(*model, 1).last_experts().to_vector<std::int32_t>();
  model->train();
  attach_routing_tape(*model, nullptr);
  bool noise_changes_something = false;
  for (int trial = 0; trial < 5 && !noise_changes_something; ++trial) {
    model->forward(tokens);
    noise_changes_something = moe(*model, 1).last_experts().to_vector<std::int32_t>() != rollout;
  }
  CHECK(noise_changes_something);
  attach_routing_tape(*model, RoutingTape::replay(path, Phase::Training));
  AuxLosses aux;
  const Variable loss = aux.added_to(nn::cross_entropy(model->forward(tokens, aux), tokens));
  CHECK(moe(*model, 1).last_experts().to_vector<std::int32_t>() == rollout);
  loss.backward();
  const auto& router = dynamic_cast<TopKRouter&>(moe(*model, 1).router());
  CHECK(router.weight().grad().defined());
}

TEST_CASE("routing tapes refuse what they cannot replay, naming the cause") {
  TempDir dir;
  const std::string path = (dir.path() / "t.tape.gz").string();
  train(*make_model(1, "topk"), 2, RoutingTape::record(path, Phase::Training));

  auto top_p = make_model(1, "top-p");
  CHECK_THROWS_WITH_AS(attach_routing_tape(*top_p, RoutingTape::replay(path, Phase::Training)),
                       doctest::Contains("(TopPRouter) cannot replay recorded experts: top-p uses a varying number"), Error);
  // A longer run than the recording.
  CHECK_THROWS_WITH_AS(train(*make_model(1, "topk"), 3, RoutingTape::replay(path, Phase::Training)),
                       doctest::Contains("holds 4 entries and this run asks for more"), Error);
  // Another batch size.
  {
    auto model = make_model(1, "topk");
    attach_routing_tape(*model, RoutingTape::replay(path, Phase::Training));
    Generator data(7);
    CHECK_THROWS_WITH_AS(model->forward(random_ids(data, 2)), doctest::Contains("routes 10 tokens x 2"), Error);
  }
  // A file cut short: the gzip stream ends inside an entry.
  {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string cut = (dir.path() / "cut.tape.gz").string();
    std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    CHECK_THROWS_AS(train(*make_model(1, "topk"), 2, RoutingTape::replay(cut, Phase::Training)), Error);
  }
  // Not a tape; a link where the tape should be.
  const std::string other = (dir.path() / "notes.txt").string();
  std::ofstream(other) << "hello\n";
  CHECK_THROWS_WITH_AS(RoutingTape::replay(other, Phase::Training), doctest::Contains("is not a moelab routing tape"),
                       Error);
  const std::string link = (dir.path() / "link.tape.gz").string();
  std::filesystem::create_symlink(path, link);
  CHECK_THROWS_WITH_AS(RoutingTape::replay(link, Phase::Training), doctest::Contains("symbolic link"), Error);
  // A dense model has nothing to record.
  Generator gen(1);
  Decoder dense(DecoderConfig{.vocab = kVocab, .d = 8, .layers = 1, .heads = 2}, gen);
  CHECK_THROWS_WITH_AS(attach_routing_tape(dense, RoutingTape::record((dir.path() / "d").string(), Phase::Training)),
                       doctest::Contains("no MoE layer"), Error);
}

TEST_CASE("recording never writes through a link and leaves no half file") {
  TempDir dir;
  const std::string victim = (dir.path() / "victim.txt").string();
  std::ofstream(victim) << "precious\n";
  const std::string path = (dir.path() / "r.tape.gz").string();
  std::filesystem::create_symlink(victim, path);
  train(*make_model(1, "topk"), 1, RoutingTape::record(path, Phase::Training));
  CHECK_FALSE(std::filesystem::is_symlink(path));  // the finished tape replaced the link
  std::ifstream in(victim);
  std::string text;
  std::getline(in, text);
  CHECK(text == "precious");
  // Destroyed unfinished: neither the temporary file nor the path is left.
  const std::string unfinished = (dir.path() / "u.tape.gz").string();
  {
    auto tape = RoutingTape::record(unfinished, Phase::Training);
    auto model = make_model(1, "topk");
    attach_routing_tape(*model, tape);
    Generator data(7);
    model->forward(random_ids(data));
    attach_routing_tape(*model, nullptr);
  }
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) files += entry.path().filename() != "victim.txt" && entry.path().filename() != "r.tape.gz";
  CHECK(files == 0);
}
