// tests/test_pretrain_corpus.cpp — the synthetic pre-training corpus (tasks/pretrain/): the
// invariants the Section 5 experiment rests on, at toy size. Held-out people's questions never
// reach the training text while their bios do; math test problems never occur in training; every
// math answer is right; names are unique; the corpus is a pure function of the seed; the tokenizer
// round-trips and refuses foreign characters; bad settings are UsageErrors naming the key; packing
// keeps every token in order and the math share of tokens; the answer extractor is strict.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "runner/settings.h"
#include "tasks/pretrain/corpus.h"
#include "tasks/pretrain/tokenizer.h"

using namespace moelab;
using namespace moelab::pretrain;

namespace {

CorpusConfig toy_config() {
  CorpusConfig c;
  c.people = 40;
  c.bios_per_person = 3;
  c.qa_test_questions = 60;       // of 20 held-out people x 6
  c.qa_train_eval_questions = 30;
  c.math_train_problems = 300;
  c.math_test_problems = 100;
  c.math_train_eval_problems = 40;
  c.validation_documents = 60;
  return c;
}

// Every training document, each followed by a newline (no template writes one), as one text.
std::string training_text(const Corpus& c) {
  std::string text;
  for (const std::string& d : training_documents(c)) text += d + "\n";
  return text;
}

bool occurs(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("people: unique names, attributes from their vocabularies, employer city fixed by the employer") {
  Generator gen(3);
  const std::vector<Person> people = make_people(max_people(), gen);  // half the name space: rejection works
  CHECK(name_space() == 10000);
  std::set<std::string> names;
  std::map<std::string, std::string> city_of_employer;
  for (const Person& p : people) {
    names.insert(p.full_name());
    for (Attribute a : kAllAttributes) CHECK_FALSE(p.value(a).empty());
    const auto [it, inserted] = city_of_employer.emplace(p.value(Attribute::Employer), p.value(Attribute::EmployerCity));
    CHECK(it->second == p.value(Attribute::EmployerCity));
  }
  CHECK(names.size() == people.size());
  CHECK(city_of_employer.size() == 32);  // 5000 draws reach every company
  CHECK_THROWS_AS(make_people(0, gen), Error);
  CHECK_THROWS_AS(make_people(max_people() + 1, gen), Error);
}

TEST_CASE("attribute_bits: log2 of the values each attribute is drawn from, as 5000 people show them") {
  Generator gen(5);
  const std::vector<Person> people = make_people(max_people(), gen);
  std::map<Attribute, std::set<std::string>> seen;
  std::set<std::string> months, days, years;  // a date is three independent draws
  for (const Person& p : people) {
    for (Attribute a : kAllAttributes) seen[a].insert(p.value(a));
    const std::string& date = p.value(Attribute::BirthDate);  // "March 7, 1961"
    const std::size_t space = date.find(' '), comma = date.find(',');
    months.insert(date.substr(0, space)), days.insert(date.substr(space + 1, comma - space - 1));
    years.insert(date.substr(comma + 2));
  }
  for (Attribute a : {Attribute::BirthCity, Attribute::University, Attribute::Major, Attribute::Employer}) {
    INFO(attribute_name(a));
    CHECK(attribute_bits(a) == doctest::Approx(std::log2(static_cast<double>(seen[a].size()))));
  }
  CHECK(attribute_bits(Attribute::BirthDate) ==
        doctest::Approx(std::log2(static_cast<double>(months.size() * days.size() * years.size()))));
  CHECK(attribute_bits(Attribute::EmployerCity) == 0.0);  // the employer's: no bit of its own
  double sum = 0;
  for (Attribute a : kAllAttributes) sum += attribute_bits(a);
  CHECK(person_bits() == doctest::Approx(sum));
  CHECK(person_bits() == doctest::Approx(34.8).epsilon(0.01));  // what the settings' help says
}

TEST_CASE("bios: six sentences, every template used, different bios, exclusions respected") {
  Generator gen(5);
  const Person p = make_people(1, gen)[0];
  const std::vector<std::string> bios = make_bios(p, 50, kBioTemplatesPerSentence, gen);
  CHECK(std::set<std::string>(bios.begin(), bios.end()).size() == 50);
  std::set<std::string> sentences_seen;
  std::set<std::string> first_sentences;
  for (const std::string& bio : bios) {
    std::size_t count = 0;
    for (std::size_t at = bio.find(p.full_name()); at != std::string::npos; at = bio.find(p.full_name(), at + 1)) ++count;
    CHECK(count == 6);  // every sentence names the person in full
    for (Attribute a : kAllAttributes) CHECK(occurs(bio, p.value(a)));
    first_sentences.insert(bio.substr(0, bio.find('.')));
    for (Attribute a : kAllAttributes)
      for (const std::string& t : bio_templates(a)) {
        std::string s = t;
        s.replace(s.find("{name}"), 6, p.full_name());
        s.replace(s.find("{value}"), 7, p.value(a));
        if (occurs(bio, s)) sentences_seen.insert(s);
      }
  }
  CHECK(sentences_seen.size() == 6 * kBioTemplatesPerSentence);  // 50 bios use all 24 sentence forms
  CHECK(first_sentences.size() > 6);                                // orders are permuted

  // One template per sentence: only the order varies, and excluded bios never come back.
  const std::vector<std::string> plain = make_bios(p, 10, 1, gen);
  const std::set<std::string> exclude(plain.begin(), plain.end());
  for (const std::string& b : make_bios(p, 20, 1, gen, &exclude)) CHECK(exclude.count(b) == 0);
  CHECK_THROWS_AS(make_bios(p, 0, 1, gen), Error);
  CHECK_THROWS_AS(make_bio(p, 0, gen), Error);
  CHECK_THROWS_AS(make_bio(p, kBioTemplatesPerSentence + 1, gen), Error);
}

TEST_CASE("knowledge split: held-out people's bios are in training, their questions never are") {
  const Corpus c = make_corpus(toy_config(), 11);
  const std::string text = training_text(c);
  const std::set<std::string> docs(c.knowledge_documents.begin(), c.knowledge_documents.end());
  REQUIRE(c.people.size() == 40);
  CHECK(c.trained_people == 20);
  CHECK(c.train_qa.size() == 20 * 6);
  CHECK(c.knowledge_documents.size() == 40 * 3 + 20 * 6);
  for (std::int64_t i = 0; i < 40; ++i) {
    const auto& person_bios = c.bios[static_cast<std::size_t>(i)];
    REQUIRE(person_bios.size() == 3);
    for (const std::string& bio : person_bios) CHECK(docs.count(bio) == 1);  // every person's bios are trained
    for (Attribute a : kAllAttributes) {
      const QaPair qa = make_qa(c.people, i, a);
      CHECK(qa.prompt.substr(qa.prompt.size() - 2) == "? ");
      // The trained half's questions are in the text (the search is not vacuous), the others' never.
      CHECK(occurs(text, qa.question()) == !c.is_held_out(i));
      CHECK(occurs(text, qa.text() + "\n") == !c.is_held_out(i));
    }
  }
  // The evaluation sets: held-out pairs only, no pair twice; train-eval pairs are verbatim training documents.
  CHECK(c.qa_test.size() == 60);
  std::set<std::string> prompts;
  for (const QaPair& qa : c.qa_test) {
    CHECK(c.is_held_out(qa.person));
    CHECK(qa.answer == c.people[static_cast<std::size_t>(qa.person)].value(qa.attribute));
    CHECK_FALSE(occurs(text, qa.prompt));
    prompts.insert(qa.prompt);
  }
  CHECK(prompts.size() == 60);
  CHECK(c.qa_train_eval.size() == 30);
  for (const QaPair& qa : c.qa_train_eval) {
    CHECK_FALSE(c.is_held_out(qa.person));
    CHECK(docs.count(qa.text()) == 1);
  }
  CHECK(make_qa(c.people, 0, Attribute::BirthCity).text() ==
        "What is the birth city of " + c.people[0].full_name() + "? " + c.people[0].value(Attribute::BirthCity));
  CHECK_THROWS_AS(make_qa(c.people, 40, Attribute::Major), Error);
}

TEST_CASE("math: answers recomputed from the operations, test problems never in training") {
  const Corpus c = make_corpus(toy_config(), 12);
  const std::string text = training_text(c);
  REQUIRE(c.math_train.size() == 300);
  std::set<std::string> train_questions;
  std::set<std::int64_t> op_counts;
  for (const MathProblem& p : c.math_train) {
    check_math_problem(p);  // throws on any wrong equation or answer
    CHECK(recompute_answer(p) == p.answer);
    CHECK(extract_answer(p.solution) == p.answer);
    CHECK(static_cast<std::int64_t>(p.solution.size()) <= kMaxSolutionLength);
    op_counts.insert(static_cast<std::int64_t>(p.steps.size()));
    train_questions.insert(p.question);
  }
  CHECK(train_questions.size() == 300);  // distinct
  CHECK(op_counts == std::set<std::int64_t>{2, 3, 4, 5});
  REQUIRE(c.math_test.size() == 100);
  for (const MathProblem& p : c.math_test) {
    check_math_problem(p);
    CHECK_FALSE(occurs(text, p.question));
  }
  REQUIRE(c.math_train_eval.size() == 40);
  for (const MathProblem& p : c.math_train_eval) CHECK(occurs(text, p.text() + "\n"));

  // A worked problem: the text, and the checker catching a wrong answer and a wrong equation.
  MathProblem p;
  p.name = "Mia";
  p.object = "marbles";
  p.start = 12;
  p.steps = {{Operation::Add, 5}, {Operation::Multiply, 3}, {Operation::Subtract, 4}};
  p.answer = 47;
  p.question = "Mia has 12 marbles. Mia buys 5 more marbles. Mia ends up with 3 times as many marbles. "
               "Mia gives away 4 marbles. How many marbles does Mia have now?";
  p.solution = "12 + 5 = 17. 17 * 3 = 51. 51 - 4 = 47. The answer is 47.";
  check_math_problem(p);
  MathProblem wrong = p;
  wrong.answer = 48;
  CHECK_THROWS_AS(check_math_problem(wrong), Error);
  wrong = p;
  wrong.solution = "12 + 5 = 17. 17 * 3 = 52. 52 - 4 = 48. The answer is 47.";
  CHECK_THROWS_AS(check_math_problem(wrong), Error);
  wrong = p;
  wrong.steps[2] = {Operation::Subtract, 60};  // the count would go negative
  CHECK_THROWS_AS(recompute_answer(wrong), Error);
  Generator gen(0);
  CHECK_THROWS_AS(make_math_problem(3, 2, gen), Error);
  CHECK_THROWS_AS(make_math_problem(1, kMaxOperations + 1, gen), Error);
  for (int i = 0; i < 2000; ++i) check_math_problem(make_math_problem(1, kMaxOperations, gen));
}

TEST_CASE("held-out equations: no training, in-distribution or validation problem holds one; every unseen one is") {
  CorpusConfig config = toy_config();
  config.min_ops = 1, config.max_ops = 2;
  config.math_range = MathRange{9, 99};  // the cpu preset's numbers: a small table of equations
  config.math_unseen_test_problems = 80;
  const Corpus c = make_corpus(config, 5);
  REQUIRE(c.holdout.share == doctest::Approx(0.2));
  // Every equation "a op b" of a problem, from its start.
  auto equations = [](const MathProblem& p) {
    std::vector<std::string> out;
    std::int64_t v = p.start;
    for (const MathStep& st : p.steps) {
      const char op = st.operation == Operation::Add ? '+' : st.operation == Operation::Subtract ? '-' : '*';
      const std::int64_t next = op == '+' ? v + st.operand : op == '-' ? v - st.operand : v * st.operand;
      out.push_back(std::to_string(v) + " " + op + " " + std::to_string(st.operand) + " = " + std::to_string(next) + ".");
      v = next;
    }
    return out;
  };
  std::set<std::string> trained;  // every equation the training text writes
  for (const MathProblem& p : c.math_train) {
    CHECK_FALSE(c.holdout.any_held_out(p));
    for (const std::string& e : equations(p)) trained.insert(e);
  }
  for (const MathProblem& p : c.math_test) CHECK_FALSE(c.holdout.any_held_out(p));
  REQUIRE(c.math_unseen_test.size() == 80);
  const std::string text = training_text(c);
  for (const MathProblem& p : c.math_unseen_test) {
    check_math_problem(p);
    CHECK(c.holdout.all_held_out(p));
    CHECK_FALSE(occurs(text, p.question));
    for (const std::string& e : equations(p)) {
      INFO(e);
      CHECK(trained.count(e) == 0);
      // Not even as text: " 12 + 5 = 17." appears nowhere in the training documents.
      CHECK_FALSE(occurs(text, " " + e));
    }
  }
  // The held-out share of all equations is about the setting (a fixed hash: this seed's count).
  std::int64_t all = 0, held = 0;
  for (std::int64_t a = 2; a <= 99; ++a)
    for (std::int64_t b = 2; b <= 9; ++b) ++all, held += c.holdout.held_out(a, Operation::Add, b);
  CHECK(static_cast<double>(held) / static_cast<double>(all) == doctest::Approx(0.2).epsilon(0.25));
  // Another seed holds out other equations; share 0 holds out none and the unseen test is empty.
  const Corpus other = make_corpus(config, 6);
  std::int64_t differ = 0;
  for (std::int64_t a = 2; a <= 99; ++a)
    differ += c.holdout.held_out(a, Operation::Add, 3) != other.holdout.held_out(a, Operation::Add, 3);
  CHECK(differ > 0);
  config.math_unseen_share = 0, config.math_unseen_test_problems = 0;
  const Corpus none = make_corpus(config, 5);
  CHECK(none.math_unseen_test.empty());
  for (std::int64_t a = 2; a <= 99; ++a) CHECK_FALSE(none.holdout.held_out(a, Operation::Add, 3));
  // A filter that allows nothing is an error, not an endless loop.
  Generator gen(1);
  CHECK_THROWS_AS(make_filtered_math_problem(1, 2, gen, MathRange{9, 99},
                                             [](std::int64_t, Operation, std::int64_t) { return false; }),
                  Error);
}

TEST_CASE("MathRange: every number within the range, each operation still drawn; defaults unchanged") {
  // The default range is the one the recorded corpora were drawn from: the same draws, bit for bit.
  Generator a(7), b(7);
  for (int i = 0; i < 200; ++i)
    CHECK(make_math_problem(1, 5, a).text() == make_math_problem(1, 5, b, MathRange{}).text());
  // A narrow range: start and addends in [2, 9], every count in [2, 99]; all three operations occur.
  Generator gen(8);
  const MathRange easy{9, 99};
  std::set<Operation> seen;
  std::int64_t largest = 0;
  for (int i = 0; i < 3000; ++i) {
    const MathProblem p = make_math_problem(1, 5, gen, easy);
    check_math_problem(p);
    CHECK(p.start >= 2);
    CHECK(p.start <= 9);
    std::int64_t v = p.start;
    for (const MathStep& s : p.steps) {
      seen.insert(s.operation);
      CHECK(s.operand >= 2);
      CHECK(s.operand <= (s.operation == Operation::Multiply ? 5 : 9));
      v = s.operation == Operation::Add        ? v + s.operand
          : s.operation == Operation::Subtract ? v - s.operand
                                               : v * s.operand;
      CHECK(v >= kMinValue);
      CHECK(v <= 99);
      largest = std::max(largest, v);
    }
  }
  CHECK(seen.size() == 3);
  CHECK(largest > 80);  // the range is used, not just respected
  // The smallest range that always has a move: counts in [2, 5].
  for (int i = 0; i < 500; ++i) check_math_problem(make_math_problem(5, 5, gen, MathRange{2, 5}));
  CHECK_THROWS_AS(make_math_problem(1, 2, gen, MathRange{2, 4}), Error);
  CHECK_THROWS_AS(make_math_problem(1, 2, gen, MathRange{10, 9}), Error);
}

TEST_CASE("extract_answer: the first 'The answer is N.', strictly") {
  CHECK(extract_answer("The answer is 42.") == 42);
  CHECK(extract_answer("3 + 4 = 7. The answer is 7. The answer is 9.") == 7);
  CHECK(extract_answer("The answer is 0.<eos>junk") == 0);
  CHECK_FALSE(extract_answer("3 + 4 = 7.").has_value());
  CHECK_FALSE(extract_answer("The answer is 42").has_value());      // cut short: no '.'
  CHECK_FALSE(extract_answer("The answer is four.").has_value());
  CHECK_FALSE(extract_answer("The answer is -3.").has_value());
  CHECK_FALSE(extract_answer("The answer is 1234567890.").has_value());  // more than 9 digits
  CHECK_FALSE(extract_answer("").has_value());
  CHECK_FALSE(extract_answer("the answer is 42.").has_value());
}

TEST_CASE("make_corpus: same seed, same corpus; another seed, another; parts drawn independently") {
  const Corpus a = make_corpus(toy_config(), 7), b = make_corpus(toy_config(), 7), d = make_corpus(toy_config(), 8);
  CHECK(training_documents(a) == training_documents(b));
  CHECK(a.validation_documents == b.validation_documents);
  CHECK(a.math_test.size() == b.math_test.size());
  for (std::size_t i = 0; i < a.math_test.size(); ++i) CHECK(a.math_test[i].text() == b.math_test[i].text());
  for (std::size_t i = 0; i < a.qa_test.size(); ++i) CHECK(a.qa_test[i].text() == b.qa_test[i].text());
  CHECK(training_documents(a) != training_documents(d));
  CHECK(a.validation_documents != d.validation_documents);

  // Changing the math settings leaves the people and their bios as they were.
  CorpusConfig more_math = toy_config();
  more_math.math_train_problems = 50;
  more_math.math_train_eval_problems = 10;
  more_math.max_ops = 3;
  const Corpus m = make_corpus(more_math, 7);
  CHECK(m.bios == a.bios);
  CHECK(m.math_documents != a.math_documents);
}

TEST_CASE("validation text: the training mix, never verbatim in training") {
  const Corpus c = make_corpus(toy_config(), 13);
  const std::vector<std::string> train = training_documents(c);
  const std::set<std::string> train_set(train.begin(), train.end());
  std::set<std::string> test_questions;
  for (const MathProblem& p : c.math_test) test_questions.insert(p.question);
  REQUIRE(c.validation_documents.size() == 60);
  REQUIRE(c.validation_kinds.size() == 60);
  std::int64_t math_tokens = 0, total_tokens = 0;
  for (std::size_t i = 0; i < c.validation_documents.size(); ++i) {
    const std::string& v = c.validation_documents[i];
    CHECK(train_set.count(v) == 0);
    if (c.validation_kinds[i] == DocumentKind::Knowledge) {
      CHECK_FALSE(occurs(v, "?"));  // a bio, never a question-answer pair
      CHECK(occurs(v, " was born on ") + occurs(v, " came into this world ") + occurs(v, "'s life began ") +
                occurs(v, "The birth of ") ==
            1);
    } else {
      const std::string question = v.substr(0, v.find("? ") + 1);
      CHECK(test_questions.count(question) == 0);
      CHECK(extract_answer(v).has_value());
      math_tokens += static_cast<std::int64_t>(v.size()) + 2;
    }
    total_tokens += static_cast<std::int64_t>(v.size()) + 2;
  }
  CHECK(std::set<std::string>(c.validation_documents.begin(), c.validation_documents.end()).size() == 60);
  CHECK(std::abs(static_cast<double>(math_tokens) / static_cast<double>(total_tokens) - 0.5) < 0.05);
}

TEST_CASE("tokenizer: the fixed vocabulary, round trips, refusal of foreign characters") {
  CHECK(kVocab == 82);
  CHECK(token_of(' ') == 3);
  CHECK(token_of('a') == 4);
  CHECK(token_of('A') == 30);
  CHECK(token_of('0') == 56);
  CHECK(token_of('.') == 66);
  CHECK(token_of('\n') == kVocab - 1);
  CHECK(encode("Mia has 12.") == std::vector<std::int32_t>{42, 12, 4, 3, 11, 4, 22, 3, 57, 58, 66});
  CHECK(encode_document("Mia") == std::vector<std::int32_t>{kBos, 42, 12, 4, kEos});
  CHECK(decode({kBos, 42, 12, 4, kEos, kPad, 99}) == "<bos>Mia<eos><pad><?99>");
  CHECK(decode_until_eos({42, 12, 4, kEos, 43}) == "Mia");
  CHECK(decode_until_eos({42, 12}) == "Mi");

  // Every character of the alphabet, and every document of a corpus, round-trips.
  const std::string alphabet(kAlphabet);
  CHECK(decode(encode(alphabet)) == alphabet);
  std::set<std::int32_t> ids;
  for (std::int32_t t : encode(alphabet)) ids.insert(t);
  CHECK(ids.size() == kAlphabet.size());
  const Corpus c = make_corpus(toy_config(), 14);
  for (const std::string& d : training_documents(c)) CHECK(decode(encode(d)) == d);
  for (const std::string& d : c.validation_documents) CHECK(decode(encode(d)) == d);

  for (const char* bad : {"Mia has #3", "tab\there", "caf\xc3\xa9"}) CHECK_THROWS_AS(encode(bad), Error);
  try {
    encode("Mia has #3");
    FAIL("encode accepted '#'");
  } catch (const Error& e) {
    CHECK(occurs(e.what(), "'#'"));
    CHECK(occurs(e.what(), "position 8"));
  }
  CHECK_THROWS_AS(token_of('~'), Error);
  CHECK_FALSE(in_alphabet('@'));
  CHECK(in_alphabet('?'));
}

TEST_CASE("CorpusConfig::validate: a UsageError naming the key") {
  const auto rejects = [](const char* key, auto change) {
    CorpusConfig c = toy_config();
    change(c);
    try {
      c.validate();
      const std::string what = "validate accepted a bad value of " + std::string(key);
      FAIL(what);
    } catch (const UsageError& e) {
      CHECK_MESSAGE(occurs(e.what(), std::string("'") + key + "'"), e.what());
    }
    CHECK_THROWS_AS(make_corpus(c, 0), UsageError);
  };
  CHECK_NOTHROW(toy_config().validate());
  CHECK_NOTHROW(CorpusConfig{}.validate());
  rejects("people", [](CorpusConfig& c) { c.people = 0; });
  rejects("people", [](CorpusConfig& c) { c.people = 1; });
  rejects("people", [](CorpusConfig& c) { c.people = max_people() + 1; });
  rejects("bios_per_person", [](CorpusConfig& c) { c.bios_per_person = 0; });
  rejects("templates_per_sentence", [](CorpusConfig& c) { c.templates_per_sentence = 0; });
  rejects("templates_per_sentence", [](CorpusConfig& c) { c.templates_per_sentence = kBioTemplatesPerSentence + 1; });
  rejects("qa_test_questions", [](CorpusConfig& c) { c.qa_test_questions = 20 * 6 + 1; });
  rejects("qa_train_eval_questions", [](CorpusConfig& c) { c.qa_train_eval_questions = -1; });
  rejects("max_ops", [](CorpusConfig& c) { c.max_ops = kMaxOperations + 1; });
  rejects("min_ops", [](CorpusConfig& c) { c.min_ops = 4; c.max_ops = 3; });
  rejects("math_max_value", [](CorpusConfig& c) { c.math_range.max_value = 4; });
  rejects("math_max_value", [](CorpusConfig& c) { c.math_range.max_value = kMaxValue + 1; });
  rejects("math_max_operand", [](CorpusConfig& c) { c.math_range.max_operand = 1; });
  rejects("math_max_operand", [](CorpusConfig& c) { c.math_range.max_value = 20; c.math_range.max_operand = 21; });
  rejects("min_ops", [](CorpusConfig& c) { c.min_ops = 0; });
  rejects("math_fraction", [](CorpusConfig& c) { c.math_fraction = 1.5; });
  rejects("math_fraction", [](CorpusConfig& c) { c.math_fraction = -0.1; });
  rejects("math_fraction", [](CorpusConfig& c) { c.math_fraction = std::nan(""); });
  rejects("math_train_problems", [](CorpusConfig& c) { c.math_train_problems = 0; c.math_train_eval_problems = 0; });
  rejects("math_train_eval_problems", [](CorpusConfig& c) { c.math_train_eval_problems = 301; });
  rejects("math_test_problems", [](CorpusConfig& c) { c.math_test_problems = -5; });
  rejects("validation_documents", [](CorpusConfig& c) { c.validation_documents = 0; });
  // No math at all is a valid corpus when math_fraction is 0.
  CorpusConfig knowledge_only = toy_config();
  knowledge_only.math_fraction = 0;
  knowledge_only.math_train_problems = knowledge_only.math_train_eval_problems = 0;
  CHECK(make_corpus(knowledge_only, 1).math_documents.empty());
}

TEST_CASE("packing: windows of seq tokens overlapping by one keep every document in order") {
  const Corpus c = make_corpus(toy_config(), 15);
  constexpr std::int64_t kSeq = 65;

  // The training stream: the documents next_document draws, from the same generator state.
  TrainingStream by_doc(c, kSeq), by_seq(c, kSeq);
  Generator g1(99), g2(99);
  std::vector<std::int32_t> expected;
  std::set<const std::string*> knowledge_seen;
  for (int i = 0; i < 800; ++i) {
    const TrainingStream::Document d = by_doc.next_document(g1);
    if (d.kind == DocumentKind::Knowledge && i < 200) knowledge_seen.insert(d.text);
    const std::vector<std::int32_t> t = encode_document(*d.text);
    expected.insert(expected.end(), t.begin(), t.end());
  }
  // Math is half the tokens, up to one document (the longest of the corpus).
  std::size_t longest = 0;
  for (const std::string& d : training_documents(c)) longest = std::max(longest, d.size() + 2);
  CHECK(std::abs(static_cast<double>(by_doc.math_tokens()) - 0.5 * static_cast<double>(by_doc.total_tokens())) <=
        static_cast<double>(longest));
  CHECK(by_doc.math_tokens() > 0);
  CHECK(knowledge_seen.size() > 80);  // an epoch of shuffled documents, not one repeated

  std::vector<std::int32_t> rebuilt;
  for (int w = 0; static_cast<std::int64_t>(rebuilt.size()) + kSeq < static_cast<std::int64_t>(expected.size()); ++w) {
    const std::vector<std::int32_t> s = by_seq.next_sequence(g2);
    REQUIRE(static_cast<std::int64_t>(s.size()) == kSeq);
    for (std::int32_t t : s) CHECK((t >= kBos && t < kVocab));  // never padding inside a training window
    if (w > 0) CHECK(s.front() == rebuilt.back());               // the one-token overlap
    rebuilt.insert(rebuilt.end(), s.begin() + (w == 0 ? 0 : 1), s.end());
  }
  REQUIRE(rebuilt.size() > 1000);
  CHECK(std::vector<std::int32_t>(expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(rebuilt.size())) ==
        rebuilt);

  // pack_documents: the same cut of a fixed list, the last window shorter.
  const std::vector<std::string> docs = {"Mia has 12.", "Ok.", "What is the birth city of Anya Forger? Kyoto"};
  const std::vector<std::vector<std::int32_t>> windows = pack_documents(docs, 8);
  std::vector<std::int32_t> stream;
  for (const std::string& d : docs) {
    const std::vector<std::int32_t> t = encode_document(d);
    stream.insert(stream.end(), t.begin(), t.end());
  }
  std::vector<std::int32_t> joined = windows[0];
  for (std::size_t w = 1; w < windows.size(); ++w) {
    CHECK(windows[w].front() == joined.back());
    joined.insert(joined.end(), windows[w].begin() + 1, windows[w].end());
  }
  CHECK(joined == stream);
  for (std::size_t w = 0; w + 1 < windows.size(); ++w) CHECK(windows[w].size() == 8);
  CHECK(windows.back().size() >= 2);
  CHECK(windows.back().size() <= 8);
  CHECK(pack_documents({}, 8).empty());
  CHECK(pack_documents(c.validation_documents, 129).size() > 10);
  CHECK_THROWS_AS(pack_documents(docs, 1), Error);
  CHECK_THROWS_AS(TrainingStream(c, 1), Error);
  CHECK_THROWS_AS(pack_documents({"bad # doc"}, 8), Error);

  // math_fraction 1 and 0: one pool only.
  for (const double f : {0.0, 1.0}) {
    CorpusConfig one_pool = toy_config();
    one_pool.math_fraction = f;
    const Corpus o = make_corpus(one_pool, 15);
    TrainingStream s(o, kSeq);
    Generator g(1);
    for (int i = 0; i < 50; ++i) CHECK((s.next_document(g).kind == DocumentKind::Math) == (f == 1.0));
  }
}
