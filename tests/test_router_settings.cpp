// tests/test_router_settings.cpp — the experiments' `router` and `router_options` settings
// (tasks/common/router_settings.h): the options list's parser, the checks that turn an unknown
// name or option into a UsageError before any work, the model names, and that the defaults build
// exactly the models the experiments built before the settings existed (phonebook and
// shortest-path decoders, the teacher-student student), bit for bit.
#include <doctest/doctest.h>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/top_p_router.h"
#include "tasks/common/models.h"
#include "tasks/common/router_settings.h"
#include "tasks/phonebook/phonebook_experiment.h"
#include "tasks/teacher_student/teacher_student.h"
#include "tasks/teacher_student/teacher_student_experiment.h"

using namespace moelab;

namespace {

using Options = std::map<std::string, std::string>;

// Every parameter of two modules, bitwise equal (same names, shapes and values).
bool same_parameters(const Module& a, const Module& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (pa[i].first != pb[i].first || pa[i].second.data().to_vector<float>() != pb[i].second.data().to_vector<float>())
      return false;
  return true;
}

// A spec by assignment: designated initializers would leave router_options unnamed (a warning).
ModelSpec spec_of(std::int64_t d, std::int64_t experts, std::int64_t k = 2, std::int64_t layers = 2,
                  std::int64_t heads = 4) {
  ModelSpec s;
  s.d = d, s.experts = experts, s.k = k, s.layers = layers, s.heads = heads;
  return s;
}

Settings with(const Experiment& e, std::vector<std::string> sets) {
  Settings s = e.settings();
  for (const std::string& kv : sets) s.set_assignment(kv);
  return s;
}

}  // namespace

TEST_CASE("router_options: key:value,key:value; empty is none; anything else is a usage error") {
  CHECK(parse_router_options("").empty());
  CHECK(parse_router_options("threshold:0.5") == Options{{"threshold", "0.5"}});
  CHECK(parse_router_options("threshold:0.5,gates:renorm") == Options{{"gates", "renorm"}, {"threshold", "0.5"}});
  CHECK(parse_router_options("seed:1:2") == Options{{"seed", "1:2"}});  // the first ':' splits
  for (const char* bad : {"threshold", ":0.5", "threshold:", "a:1,", "a:1,,b:2", ","})
    CHECK_THROWS_AS(parse_router_options(bad), UsageError);
  CHECK_THROWS_WITH_AS(parse_router_options("threshold=0.5"), doctest::Contains("'threshold=0.5' is not key:value"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_router_options("a:1,a:2"), doctest::Contains("'a' is given twice"), UsageError);
  CHECK(router_options_text({{"threshold", "0.5"}, {"gates", "renorm"}}) == "gates:renorm,threshold:0.5");
}

TEST_CASE("the router setting takes registered names only, and lists them") {
  const Experiment e = phonebook_experiment();
  Settings s = e.settings();
  CHECK(s.text("router") == "topk");
  CHECK(s.text("router_options").empty());
  CHECK_NOTHROW(s.set("router", "top-p"));
  CHECK_NOTHROW(s.set("router_options", ""));  // "" is a value here (no options)
  CHECK_THROWS_WITH_AS(s.set("router", "hash"), doctest::Contains("aux-free, balanced, expert-choice, relu, token-hash, top-p, topk"),
                       UsageError);
  // --help says which schemes see the future in a decoder, and what balanced costs.
  const std::string help = s.describe();
  CHECK(help.find("expert-choice and balanced rank the whole batch") != std::string::npos);
  CHECK(help.find("reads the scores back to the host") != std::string::npos);
}

TEST_CASE("a router or option the factory refuses is a usage error at validation, naming it") {
  CHECK_NOTHROW(check_router("top-p", {{"threshold", "0.5"}}, 16, 4, 2));
  CHECK_THROWS_WITH_AS(check_router("top-p", {{"p", "0.5"}}, 16, 4, 2),
                       doctest::Contains("router 'top-p' with options 'p:0.5' for d = 16, 4 experts, k = 2"),
                       UsageError);
  CHECK_THROWS_WITH_AS(check_router("top-p", {{"p", "0.5"}}, 16, 4, 2), doctest::Contains("known options"), UsageError);
  CHECK_THROWS_WITH_AS(check_router("topk", {{"load_balance", "lots"}}, 16, 4, 2),
                       doctest::Contains("must be a number"), UsageError);
  CHECK_THROWS_WITH_AS(check_router("no-such", {}, 16, 4, 2), doctest::Contains("registered routers"), UsageError);

  const Experiment pb = phonebook_experiment();
  CHECK_NOTHROW(pb.validate(with(pb, {"router=top-p", "router_options=threshold:0.5"})));
  CHECK_THROWS_WITH_AS(pb.validate(with(pb, {"router=top-p", "router_options=bogus:1"})),
                       doctest::Contains("unknown option 'bogus'"), UsageError);
  CHECK_THROWS_WITH_AS(pb.validate(with(pb, {"router_options=threshold"})), doctest::Contains("is not key:value"),
                       UsageError);
}

TEST_CASE("model names show the router only when it is not topk") {
  ModelSpec moe = spec_of(64, 8);
  CHECK(moe.name() == "moe-d64-8e");
  moe.router = "top-p";
  moe.router_options = {{"threshold", "0.5"}};
  CHECK(moe.name() == "moe-d64-8e-top-p");
  ModelSpec dense = spec_of(64, 0);
  dense.router = "top-p";  // a dense model has no router: nothing to name
  CHECK(dense.name() == "dense-d64");
}

TEST_CASE("build_decoder: the default spec builds the decoder it built before routers could be chosen, bitwise") {
  const ModelSpec spec = spec_of(16, 4, 2, /*layers=*/2, /*heads=*/2);
  Generator g1(3), g2(3);
  const std::unique_ptr<Decoder> now = build_decoder(spec, 20, 12, g1);
  // What build_decoder did before: MoEConfig with experts, k and ffn only (router topk, no options).
  DecoderConfig config;
  config.vocab = 20, config.d = 16, config.layers = 2, config.heads = 2, config.max_seq = 12;
  MoEConfig moe;
  moe.experts = 4, moe.k = 2;
  Decoder before(config, g2, moe_feed_forward(moe));
  CHECK(same_parameters(*now, before));
  NoGradGuard no_grad;
  const Tensor ids = from_vector(std::vector<std::int32_t>{1, 5, 7, 2, 9, 11}, {1, 6});
  CHECK(now->forward(ids).data().to_vector<float>() == before.forward(ids).data().to_vector<float>());

  // Another router reaches every MoE layer with its options.
  ModelSpec top_p = spec;
  top_p.router = "top-p", top_p.router_options = {{"threshold", "0.5"}};
  Generator g3(3);
  const std::unique_ptr<Decoder> m = build_decoder(top_p, 20, 12, g3);
  for (std::int64_t i = 0; i < 2; ++i) {
    const auto* layer = dynamic_cast<const MoELayer*>(&m->layer(i).ffn());
    REQUIRE(layer != nullptr);
    CHECK(layer->config().router == "top-p");
    CHECK(layer->config().router_options == Options{{"threshold", "0.5"}});
    CHECK(dynamic_cast<const TopPRouter*>(&layer->router()) != nullptr);
  }
}

TEST_CASE("teacher-student: the default student is the paper's (topk, softmax over the k selected), bitwise") {
  namespace ts = teacher_student;
  ts::MoESpec spec = ts::spec_for(2, 2, 8, 6);
  spec.router_bias = true;
  const MoEConfig c = spec.config();
  CHECK(c.router == "topk");
  CHECK(c.router_options == Options{{"gates", "topk-softmax"}, {"bias", "true"}});
  // What config() built before the router setting existed, drawn from the same seed: the same bits.
  MoEConfig old;
  old.d = 6, old.experts = 4, old.k = 2, old.ffn = 4, old.router = "topk", old.bias = true;
  old.router_options = {{"gates", "topk-softmax"}, {"bias", "true"}};
  Generator g1(5), g2(5);
  CHECK(same_parameters(*ts::make_student(spec, g1), MoELayer(old, g2)));

  // Another scheme gets its own options, and bias from router_bias; topk's gates are not passed.
  spec.router = "top-p", spec.router_options = {{"threshold", "0.5"}};
  CHECK(spec.config().router == "top-p");
  CHECK(spec.config().router_options == Options{{"bias", "true"}, {"threshold", "0.5"}});

  const Experiment e = teacher_student_experiment();
  const std::vector<std::string> toy = {"d=8", "teacher_k=2", "teacher_active=8", "student_k=2", "student_active=8"};
  auto settings = [&](std::vector<std::string> more) {
    more.insert(more.begin(), toy.begin(), toy.end());
    return with(e, more);
  };
  CHECK_NOTHROW(e.validate(settings({"router=top-p", "router_options=threshold:0.5"})));
  CHECK_NOTHROW(e.validate(settings({"router=aux-free", "student_router_bias=true"})));
  CHECK_THROWS_WITH_AS(e.validate(settings({"router=balanced", "student_router_bias=true"})),
                       doctest::Contains("unknown option 'bias'"), UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"router_options=bias:true"})), doctest::Contains("student_router_bias"),
                       UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"router_options=gates:equal"})), doctest::Contains("student_gates"),
                       UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"router=top-p", "student_gates=equal"})),
                       doctest::Contains("is a gate mode of the topk router"), UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"router=top-p", "router_options=threshold:2x"})),
                       doctest::Contains("must be a number"), UsageError);
}
