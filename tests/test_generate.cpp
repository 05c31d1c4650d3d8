// tests/test_generate.cpp — sampling with a temperature and top-k (nn/generate.h): the limits that
// must give greedy's tokens (temperature 0 or near it, top_k 1), the same seed giving the same
// tokens, the cached logits equal to one full forward over the sampled sequence, the empirical
// distribution of many draws against softmax(z / temperature) (with and without a top-k cut), and
// argument checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"
#include "nn/nn.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

constexpr std::int64_t kVocab = 16;

DecoderConfig small_config() {
  DecoderConfig c;
  c.vocab = kVocab;
  c.d = 32;
  c.layers = 2;
  c.heads = 4;
  c.max_seq = 64;
  return c;
}

Tensor random_ids(const Shape& shape, Generator& gen) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(shape.numel()));
  for (auto& id : v) id = static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(kVocab)));
  return from_vector(v, shape);
}

std::vector<std::int32_t> ids(const Tensor& t) { return t.to_vector<std::int32_t>(); }

}  // namespace

TEST_CASE("sampling limits give greedy's tokens: temperature 0, temperature near 0, top_k 1") {
  Generator init(1), data(2);
  Decoder model(small_config(), init);
  const Tensor prompts = random_ids({3, 4}, data);
  const std::vector<std::int32_t> greedy = ids(generate_greedy(model, prompts, 20).tokens);

  Generator g0(5), g1(5), g2(5);
  CHECK(ids(generate_sample(model, prompts, 20, 0.0, 0, g0).tokens) == greedy);
  CHECK(g0.counter() == 0);  // temperature 0 draws nothing
  CHECK(ids(generate_sample(model, prompts, 20, 1e-6, 0, g1).tokens) == greedy);
  CHECK(ids(generate_sample(model, prompts, 20, 5.0, 1, g2).tokens) == greedy);  // only the argmax is kept
  CHECK(g2.counter() > 0);  // one draw per row per step even when the choice is forced

  // At temperature 1 over the whole vocabulary the tokens do differ from greedy's (else the
  // comparisons above would prove nothing).
  Generator g3(5);
  CHECK(ids(generate_sample(model, prompts, 20, 1.0, 0, g3).tokens) != greedy);
}

TEST_CASE("the same seed gives the same tokens; another seed other tokens; rows are independent") {
  Generator init(3), data(4);
  Decoder model(small_config(), init);
  const Tensor prompts = random_ids({4, 3}, data);
  Generator a(11), b(11), c(12);
  const std::vector<std::int32_t> first = ids(generate_sample(model, prompts, 24, 0.9, 8, a).tokens);
  CHECK(ids(generate_sample(model, prompts, 24, 0.9, 8, b).tokens) == first);
  CHECK(a.counter() == b.counter());
  CHECK(ids(generate_sample(model, prompts, 24, 0.9, 8, c).tokens) != first);

  // Rows draw in row order, one draw each per step: a batch of one row with the same stream gives
  // the same first token as row 0 of the batch (later tokens differ: the streams then diverge).
  Generator d(11);
  const std::vector<std::int32_t> row0 =
      ids(generate_sample(model, kernels::narrow(prompts, 0, 0, 1), 1, 0.9, 8, d).tokens);
  CHECK(row0[0] == first[0]);
}

TEST_CASE("the logits kept while sampling equal one full forward over the prompt and sampled tokens") {
  Generator init(5), data(6), draw(7);
  Decoder model(small_config(), init);
  const std::int64_t B = 3, P = 5, N = 10;
  const Tensor prompts = random_ids({B, P}, data);
  const Generation g = generate_sample(model, prompts, N, 1.0, 0, draw, /*keep_logits=*/true);
  REQUIRE(g.logits.shape() == Shape{B, N, kVocab});
  // The sequence the model saw: the prompt and every sampled token but the last: [B, P + N - 1].
  const Tensor seen = kernels::concat({prompts, kernels::narrow(g.tokens, 1, 0, N - 1)}, 1);
  const Tensor full = model.forward(seen).data();  // [B, P + N - 1, V]
  CHECK(max_error(to_doubles(kernels::narrow(full, 1, P - 1, N)), to_doubles(g.logits)) < 1e-5);
}

TEST_CASE("many draws follow softmax(z / temperature), restricted to the top k when asked") {
  Generator init(9), data(10);
  Decoder model(small_config(), init);
  const std::int64_t rows = 6000;
  // One prompt repeated: every row draws its first token from the same distribution.
  const std::vector<std::int32_t> prompt = ids(random_ids({1, 4}, data));
  std::vector<std::int32_t> repeated;
  for (std::int64_t r = 0; r < rows; ++r) repeated.insert(repeated.end(), prompt.begin(), prompt.end());
  const Tensor prompts = from_vector(repeated, {rows, 4});
  const Tensor z = kernels::narrow(model.forward(from_vector(prompt, {1, 4})).data(), 1, 3, 1).reshape({kVocab});
  const std::vector<double> logits = to_doubles(z);

  for (const auto& [temperature, top_k] :
       std::vector<std::pair<double, std::int64_t>>{{0.25, 0}, {0.25, 3}, {2.0, 0}}) {
    CAPTURE(temperature);
    CAPTURE(top_k);
    // Expected probabilities: softmax over the kept ids (the top_k largest logits, or all).
    std::vector<std::int32_t> order = ids(kernels::topk(z, static_cast<int>(kVocab)).indices);
    const std::size_t kept = top_k == 0 ? static_cast<std::size_t>(kVocab) : static_cast<std::size_t>(top_k);
    std::vector<double> p(kVocab, 0.0);
    double norm = 0;
    for (std::size_t j = 0; j < kept; ++j) norm += std::exp((logits[order[j]] - logits[order[0]]) / temperature);
    for (std::size_t j = 0; j < kept; ++j)
      p[order[j]] = std::exp((logits[order[j]] - logits[order[0]]) / temperature) / norm;

    Generator draw(100);
    const std::vector<std::int32_t> tokens = ids(generate_sample(model, prompts, 1, temperature, top_k, draw).tokens);
    std::vector<double> count(kVocab, 0.0);
    for (std::int32_t t : tokens) count[static_cast<std::size_t>(t)] += 1;
    for (std::int64_t v = 0; v < kVocab; ++v) {
      CAPTURE(v);
      const double freq = count[v] / rows, sigma = std::sqrt(p[v] * (1 - p[v]) / rows);
      if (p[v] == 0)
        CHECK(count[v] == 0);  // outside the top k: never drawn
      else
        CHECK(std::abs(freq - p[v]) <= 5 * sigma + 1e-9);
    }
  }
}

TEST_CASE("sampling argument checks") {
  Generator init(12), draw(13);
  DecoderConfig c = small_config();
  c.max_seq = 10;
  Decoder model(c, init);
  const Tensor prompts = zeros({2, 4}, DType::Int32);
  CHECK(generate_sample(model, prompts, 6, 1.0, kVocab, draw).tokens.shape() == Shape{2, 6});
  CHECK_THROWS_WITH_AS(generate_sample(model, prompts, 7, 1.0, 0, draw), doctest::Contains("max_seq"), Error);
  CHECK_THROWS_WITH_AS(generate_sample(model, prompts, 0, 1.0, 0, draw), doctest::Contains("generate_sample"), Error);
  CHECK_THROWS_WITH_AS(generate_sample(model, prompts, 2, -0.5, 0, draw), doctest::Contains("temperature"), Error);
  CHECK_THROWS_WITH_AS(generate_sample(model, prompts, 2, std::nan(""), 0, draw), doctest::Contains("temperature"),
                       Error);
  CHECK_THROWS_WITH_AS(generate_sample(model, prompts, 2, 1.0, kVocab + 1, draw), doctest::Contains("top_k"), Error);
  CHECK_THROWS_WITH_AS(generate_sample(model, prompts, 2, 1.0, -1, draw), doctest::Contains("top_k"), Error);
  CHECK_THROWS_WITH_AS(generate_sample(model, zeros({2, 4}), 2, 1.0, 0, draw), doctest::Contains("generate_sample"),
                       Error);
}
