// tests/test_pretrain_tokenizer.cpp — the word tokenizer of the pre-training corpus
// (tasks/pretrain/tokenizer.h, `--set tokens=word`): where it cuts, that its vocabulary is a pure
// function of the documents' words, that every text round-trips, that unseen words fall back to
// characters, that a stream and the evaluation read the same tokens, and that the character
// Tokenizer is exactly the free functions. (The free character functions: test_pretrain_corpus.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "tasks/pretrain/corpus.h"
#include "tasks/pretrain/tokenizer.h"

using namespace moelab;
using namespace moelab::pretrain;

namespace {

std::vector<std::string> pieces(const Tokenizer& t, const std::string& text) {
  std::vector<std::string> out;
  for (std::int32_t id : t.encode(text)) out.push_back(t.piece(id));
  return out;
}

CorpusConfig small_config() {
  CorpusConfig c;
  c.people = 20;
  c.bios_per_person = 2;
  c.qa_test_questions = 30;
  c.qa_train_eval_questions = 30;
  c.math_train_problems = 100;
  c.math_test_problems = 40;
  c.math_train_eval_problems = 20;
  c.validation_documents = 20;
  return c;
}

}  // namespace

TEST_CASE("word tokenizer: pieces are letter runs with their space; digits and punctuation stay characters") {
  const Tokenizer t = Tokenizer::words({"Anya Forger was born in Kyoto.", "Mia has 12 apples. A friend gives 5."});
  CHECK(t.kind() == Tokenizer::Kind::Words);
  CHECK(pieces(t, "Anya Forger was born in Kyoto.") ==
        std::vector<std::string>{"Anya", " Forger", " was", " born", " in", " Kyoto", "."});
  CHECK(pieces(t, "Mia has 12 apples.") == std::vector<std::string>{"Mia", " has", " ", "1", "2", " apples", "."});
  // " A" (one letter after a space) is a piece; "A" alone at a document's start is a character.
  CHECK(pieces(t, "A friend") == std::vector<std::string>{"A", " friend"});
  CHECK(pieces(t, "Mia, A") == std::vector<std::string>{"Mia", ",", " A"});
  // A word the documents never had: its characters, with its space as a character.
  CHECK(pieces(t, "Mia sold") == std::vector<std::string>{"Mia", " ", "s", "o", "l", "d"});
  // "Forger" without its space was never seen either (only " Forger" was).
  CHECK(pieces(t, "Forger") == std::vector<std::string>{"F", "o", "r", "g", "e", "r"});
  // Character ids are those of the free functions; words come after them, sorted.
  CHECK(t.encode("7") == encode("7"));
  // Anya, " Forger", " was", " born", " in", " Kyoto", Mia, " has", " apples", " A", " friend", " gives"
  CHECK(t.vocab_size() == kVocab + 12);
  std::vector<std::string> words;
  for (std::int32_t id = kVocab; id < t.vocab_size(); ++id) words.push_back(t.piece(id));
  CHECK(std::is_sorted(words.begin(), words.end()));
  CHECK(t.piece(kBos) == "<bos>");
  CHECK_THROWS_AS(t.piece(t.vocab_size()), Error);
  CHECK_THROWS_AS(t.encode("Mia has #3"), Error);
  CHECK(t.decode({kBos, t.encode(" Kyoto")[0], kEos, 100000}) == "<bos> Kyoto<eos><?100000>");
  CHECK(t.decode_until_eos({t.encode("Mia")[0], kEos, t.encode(" has")[0]}) == "Mia");
  CHECK(t.encode_document("Mia") == std::vector<std::int32_t>{kBos, t.encode("Mia")[0], kEos});
}

TEST_CASE("word tokenizer: the vocabulary depends on the set of words only, and every corpus text round-trips") {
  const Corpus c = make_corpus(small_config(), 3);
  std::vector<std::string> docs = training_documents(c);
  const Tokenizer t = Tokenizer::words(docs);
  std::reverse(docs.begin(), docs.end());
  const Tokenizer reversed = Tokenizer::words(docs);
  REQUIRE(reversed.vocab_size() == t.vocab_size());
  for (std::int32_t id = 0; id < t.vocab_size(); ++id) CHECK(reversed.piece(id) == t.piece(id));
  // A few hundred words (names, cities, template words), far fewer tokens than characters.
  CHECK(t.vocab_size() > kVocab + 100);
  CHECK(t.vocab_size() < kVocab + 1000);
  std::int64_t chars = 0, tokens = 0;
  for (const std::string& d : docs) {
    CHECK(t.decode(t.encode(d)) == d);
    chars += static_cast<std::int64_t>(d.size());
    tokens += static_cast<std::int64_t>(t.encode(d).size());
  }
  CHECK(tokens * 2 < chars);
  for (const std::string& d : c.validation_documents) CHECK(t.decode(t.encode(d)) == d);
  // Every word of a held-out person's answer was in training (their bios are), with its space.
  for (const QaPair& qa : c.qa_test)
    for (std::int32_t id : t.encode(" " + qa.answer)) CHECK((id >= kVocab || !std::isalpha(t.piece(id)[0])));
}

TEST_CASE("the character Tokenizer is the free functions; streams and packing count the tokenizer's tokens") {
  const Tokenizer chars = Tokenizer::characters();
  CHECK(chars.kind() == Tokenizer::Kind::Characters);
  CHECK(chars.vocab_size() == kVocab);
  const Corpus c = make_corpus(small_config(), 4);
  for (const std::string& d : c.validation_documents) {
    CHECK(chars.encode(d) == encode(d));
    CHECK(chars.decode(chars.encode_document(d)) == decode(encode_document(d)));
  }
  CHECK(pack_documents(c.validation_documents, 33, chars) == pack_documents(c.validation_documents, 33));

  const Tokenizer words = Tokenizer::words(training_documents(c));
  const auto windows = pack_documents(c.validation_documents, 33, words);
  std::vector<std::int32_t> joined, expected;
  for (const auto& w : windows) joined.insert(joined.end(), w.begin() + (joined.empty() ? 0 : 1), w.end());
  for (const std::string& d : c.validation_documents) {
    const auto t = words.encode_document(d);
    expected.insert(expected.end(), t.begin(), t.end());
  }
  CHECK(joined == expected);

  // The stream's mixture counts word tokens: math stays half of the tokens it hands out.
  TrainingStream stream(c, 65, words);
  Generator gen(9);
  for (int i = 0; i < 200; ++i) {
    const std::vector<std::int32_t> s = stream.next_sequence(gen);
    CHECK(s.size() == 65);
    for (std::int32_t id : s) CHECK((id >= kBos && id < words.vocab_size()));
  }
  CHECK(std::abs(static_cast<double>(stream.math_tokens()) / static_cast<double>(stream.total_tokens()) - 0.5) < 0.05);
}
