// tasks/pretrain/math_problems.cpp — see math_problems.h.
#include "tasks/pretrain/math_problems.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace moelab::pretrain {

namespace {

// The fixed vocabularies and templates. Changing any of them changes every corpus drawn from them.
const std::vector<std::string> kNames = {"Mia",  "Liam", "Ava",  "Noah",  "Emma", "Omar", "Lily",  "Ravi",
                                         "Zoe",  "Finn", "Ines", "Theo",  "Maya", "Hugo", "Nina",  "Ezra",
                                         "Ruth", "Ivan", "Cleo", "Amir",  "Jade", "Owen", "Leah",  "Kai",
                                         "Rosa", "Axel", "Tara", "Milo",  "Iris", "Sami", "Vera",  "Jon"};
const std::vector<std::string> kObjects = {
    "marbles", "apples",   "stickers", "books",   "pencils", "cookies", "stamps",  "shells",
    "coins",   "buttons",  "cards",    "crayons", "candles", "beads",   "cupcakes", "flowers",
    "kites",   "balloons", "ribbons",  "puzzles", "oranges", "eggs",    "toy cars", "feathers",
    "rocks",   "socks",    "plates",   "lemons",  "jars",    "tickets", "boxes",    "pebbles"};
const std::vector<std::string> kOpenings = {"{name} has {n} {object}.", "{name} starts with {n} {object}.",
                                            "{name} owns {n} {object}."};
const std::vector<std::string> kAddForms = {"{name} buys {n} more {object}.", "{name} finds {n} more {object}.",
                                            "A friend gives {name} {n} more {object}."};
const std::vector<std::string> kSubtractForms = {"{name} gives away {n} {object}.", "{name} loses {n} {object}.",
                                                 "{name} sells {n} {object}."};
const std::vector<std::string> kMultiplyForms = {"{name} ends up with {n} times as many {object}.",
                                                 "The number of {object} that {name} has grows {n} times.",
                                                 "{name} multiplies the {object} by {n}."};
const std::string kQuestion = "How many {object} does {name} have now?";
const std::string kAnswerPhrase = "The answer is ";

constexpr std::int64_t kMaxFactor = 5;     // multiply by m in [2, kMaxFactor]

std::uint32_t below(std::int64_t n, Generator& gen) { return gen.next_below(static_cast<std::uint32_t>(n)); }

std::string fill(std::string text, const std::string& key, const std::string& value) {
  const std::string marker = "{" + key + "}";
  for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + value.size()))
    text.replace(at, marker.size(), value);
  return text;
}
std::string sentence(const std::string& form, const MathProblem& p, std::int64_t n) {
  return fill(fill(fill(form, "name", p.name), "object", p.object), "n", std::to_string(n));
}

const char* symbol(Operation op) {
  switch (op) {
    case Operation::Add: return "+";
    case Operation::Subtract: return "-";
    case Operation::Multiply: return "*";
  }
  return "?";
}
std::int64_t apply(Operation op, std::int64_t a, std::int64_t b) {
  switch (op) {
    case Operation::Add: return a + b;
    case Operation::Subtract: return a - b;
    case Operation::Multiply: return a * b;
  }
  return -1;
}

// The largest operand an operation may take at count v (keeping the result in [kMinValue,
// kMaxValue]); below 2 means the operation is not possible.
std::int64_t largest_operand(Operation op, std::int64_t v, const MathRange& r) {
  switch (op) {
    case Operation::Add: return std::min(r.max_operand, r.max_value - v);
    case Operation::Subtract: return std::min(r.max_operand, v - kMinValue);
    case Operation::Multiply: return std::min(kMaxFactor, r.max_value / v);
  }
  return 0;
}

// Reads a whole number of 1 to 9 digits at text[at...]; advances `at` past it.
std::optional<std::int64_t> read_number(std::string_view text, std::size_t& at) {
  std::size_t end = at;
  while (end < text.size() && end - at < 10 && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == at || end - at > 9) return std::nullopt;
  std::int64_t n = 0;
  for (std::size_t i = at; i < end; ++i) n = 10 * n + (text[i] - '0');
  at = end;
  return n;
}
// True (and `at` advanced) when text continues with `expected` at `at`.
bool read_literal(std::string_view text, std::size_t& at, std::string_view expected) {
  if (text.substr(at, expected.size()) != expected) return false;
  at += expected.size();
  return true;
}

}  // namespace

void MathRange::check() const {
  MOELAB_CHECK(max_value >= 5 && max_value <= kMaxValue && max_operand >= 2 && max_operand <= max_value,
               "pretrain::MathRange", "need 2 <= max_operand <= max_value and 5 <= max_value <= ", kMaxValue,
               ", got max_operand = ", max_operand, ", max_value = ", max_value);
}

MathProblem make_math_problem(std::int64_t min_ops, std::int64_t max_ops, Generator& gen, const MathRange& range) {
  MOELAB_CHECK(min_ops >= 1 && min_ops <= max_ops && max_ops <= kMaxOperations, "pretrain::make_math_problem",
               "need 1 <= min_ops <= max_ops <= ", kMaxOperations, ", got min_ops = ", min_ops, ", max_ops = ", max_ops);
  range.check();
  MathProblem p;
  p.name = kNames[below(static_cast<std::int64_t>(kNames.size()), gen)];
  p.object = kObjects[below(static_cast<std::int64_t>(kObjects.size()), gen)];
  p.start = kMinValue + below(range.max_operand - kMinValue + 1, gen);
  p.question = sentence(kOpenings[below(static_cast<std::int64_t>(kOpenings.size()), gen)], p, p.start);
  const std::int64_t ops = min_ops + below(max_ops - min_ops + 1, gen);
  std::int64_t v = p.start;
  for (std::int64_t i = 0; i < ops; ++i) {
    std::vector<Operation> possible;
    for (Operation op : {Operation::Add, Operation::Subtract, Operation::Multiply})
      if (largest_operand(op, v, range) >= 2) possible.push_back(op);
    // Add is possible below max_value - 1, subtract from kMinValue + 2: with max_value >= 5 one is.
    const Operation op = possible[below(static_cast<std::int64_t>(possible.size()), gen)];
    const std::int64_t operand = 2 + below(largest_operand(op, v, range) - 1, gen);
    const std::vector<std::string>& forms =
        op == Operation::Add ? kAddForms : op == Operation::Subtract ? kSubtractForms : kMultiplyForms;
    p.question += " " + sentence(forms[below(static_cast<std::int64_t>(forms.size()), gen)], p, operand);
    const std::int64_t next = apply(op, v, operand);
    p.solution += std::to_string(v) + " " + symbol(op) + " " + std::to_string(operand) + " = " + std::to_string(next) + ". ";
    p.steps.push_back({op, operand});
    v = next;
  }
  p.question += " " + fill(fill(kQuestion, "name", p.name), "object", p.object);
  p.answer = v;
  p.solution += kAnswerPhrase + std::to_string(v) + ".";
  return p;
}

bool EquationHoldout::held_out(std::int64_t a, Operation op, std::int64_t b) const {
  if (share <= 0) return false;
  if (share >= 1) return true;
  // splitmix64 of the seed and the equation packed in one word (a, b < 2^20; op < 4).
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (1 + ((static_cast<std::uint64_t>(a) << 24) |
                                                         (static_cast<std::uint64_t>(op) << 20) |
                                                         static_cast<std::uint64_t>(b)));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // Compared in 53 bits, exactly: share * 2^53 is exact for a double share.
  return static_cast<double>(z >> 11) < share * 9007199254740992.0;
}

bool EquationHoldout::any_held_out(const MathProblem& p) const {
  std::int64_t v = p.start;
  for (const MathStep& s : p.steps) {
    if (held_out(v, s.operation, s.operand)) return true;
    v = apply(s.operation, v, s.operand);
  }
  return false;
}

bool EquationHoldout::all_held_out(const MathProblem& p) const {
  std::int64_t v = p.start;
  for (const MathStep& s : p.steps) {
    if (!held_out(v, s.operation, s.operand)) return false;
    v = apply(s.operation, v, s.operand);
  }
  return !p.steps.empty();
}

MathProblem make_filtered_math_problem(std::int64_t min_ops, std::int64_t max_ops, Generator& gen,
                                       const MathRange& range, const EquationFilter& allowed) {
  MOELAB_CHECK(min_ops >= 1 && min_ops <= max_ops && max_ops <= kMaxOperations, "pretrain::make_filtered_math_problem",
               "need 1 <= min_ops <= max_ops <= ", kMaxOperations, ", got min_ops = ", min_ops, ", max_ops = ", max_ops);
  range.check();
  constexpr int kMaxRestarts = 100000;
  for (int restart = 0; restart < kMaxRestarts; ++restart) {
    MathProblem p;
    p.name = kNames[below(static_cast<std::int64_t>(kNames.size()), gen)];
    p.object = kObjects[below(static_cast<std::int64_t>(kObjects.size()), gen)];
    p.start = kMinValue + below(range.max_operand - kMinValue + 1, gen);
    p.question = sentence(kOpenings[below(static_cast<std::int64_t>(kOpenings.size()), gen)], p, p.start);
    const std::int64_t ops = min_ops + below(max_ops - min_ops + 1, gen);
    std::int64_t v = p.start;
    bool stuck = false;
    for (std::int64_t i = 0; i < ops && !stuck; ++i) {
      std::vector<std::pair<Operation, std::vector<std::int64_t>>> choices;  // op -> its allowed operands
      for (Operation op : {Operation::Add, Operation::Subtract, Operation::Multiply}) {
        std::vector<std::int64_t> operands;
        for (std::int64_t b = 2; b <= largest_operand(op, v, range); ++b)
          if (allowed(v, op, b)) operands.push_back(b);
        if (!operands.empty()) choices.push_back({op, std::move(operands)});
      }
      if (choices.empty()) {
        stuck = true;
        break;
      }
      const auto& [op, operands] = choices[below(static_cast<std::int64_t>(choices.size()), gen)];
      const std::int64_t operand = operands[below(static_cast<std::int64_t>(operands.size()), gen)];
      const std::vector<std::string>& forms =
          op == Operation::Add ? kAddForms : op == Operation::Subtract ? kSubtractForms : kMultiplyForms;
      p.question += " " + sentence(forms[below(static_cast<std::int64_t>(forms.size()), gen)], p, operand);
      const std::int64_t next = apply(op, v, operand);
      p.solution +=
          std::to_string(v) + " " + symbol(op) + " " + std::to_string(operand) + " = " + std::to_string(next) + ". ";
      p.steps.push_back({op, operand});
      v = next;
    }
    if (stuck) continue;
    p.question += " " + fill(fill(kQuestion, "name", p.name), "object", p.object);
    p.answer = v;
    p.solution += kAnswerPhrase + std::to_string(v) + ".";
    return p;
  }
  fail("pretrain::make_filtered_math_problem", "no problem in ", kMaxRestarts,
       " tries: the allowed equations leave no path of ", min_ops, " to ", max_ops, " steps");
}

std::vector<MathProblem> make_math_problems(std::int64_t count, std::int64_t min_ops, std::int64_t max_ops,
                                            Generator& gen, const std::set<std::string>* exclude,
                                            const MathRange& range, const std::function<bool(const MathProblem&)>& accept,
                                            const EquationFilter& allowed) {
  MOELAB_CHECK(count >= 0, "pretrain::make_math_problems", "count must be >= 0, got ", count);
  constexpr int kMaxFailedDraws = 100000;
  std::vector<MathProblem> problems;
  problems.reserve(static_cast<std::size_t>(count));
  std::set<std::string> drawn;
  for (int failed = 0; static_cast<std::int64_t>(problems.size()) < count;) {
    MathProblem p = allowed ? make_filtered_math_problem(min_ops, max_ops, gen, range, allowed)
                            : make_math_problem(min_ops, max_ops, gen, range);
    if (!(exclude && exclude->count(p.question)) && (!accept || accept(p)) && drawn.insert(p.question).second) {
      problems.push_back(std::move(p));
      failed = 0;
    } else if (++failed == kMaxFailedDraws) {
      fail("pretrain::make_math_problems", "no new problem in ", kMaxFailedDraws, " draws (", problems.size(), " of ",
           count, " found)");
    }
  }
  return problems;
}

std::int64_t recompute_answer(const MathProblem& p) {
  MOELAB_CHECK(!p.steps.empty() && static_cast<std::int64_t>(p.steps.size()) <= kMaxOperations,
               "pretrain::recompute_answer", "a problem has 1 to ", kMaxOperations, " steps, this one ", p.steps.size());
  MOELAB_CHECK(p.start >= kMinValue && p.start <= kMaxValue, "pretrain::recompute_answer", "the start ", p.start,
               " is outside [", kMinValue, ", ", kMaxValue, "]");
  std::int64_t v = p.start;
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    v = apply(p.steps[i].operation, v, p.steps[i].operand);
    MOELAB_CHECK(v >= kMinValue && v <= kMaxValue, "pretrain::recompute_answer", "step ", i + 1, " gives ", v,
                 ", outside [", kMinValue, ", ", kMaxValue, "]");
  }
  return v;
}

void check_math_problem(const MathProblem& p) {
  const std::int64_t answer = recompute_answer(p);
  MOELAB_CHECK(answer == p.answer, "pretrain::check_math_problem", "the answer is ", p.answer,
               " but the steps give ", answer, " in '", p.question, "'");
  MOELAB_CHECK(!p.question.empty() && p.question.back() == '?', "pretrain::check_math_problem",
               "the question does not end with '?': '", p.question, "'");
  // The solution, read as text: "a op b = c. " per step, chained from start, then the answer line.
  const std::string_view s = p.solution;
  std::size_t at = 0;
  std::int64_t v = p.start;
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    const auto bad = [&](const char* what) {
      fail("pretrain::check_math_problem", "equation ", i + 1, " of '", p.solution, "': ", what);
    };
    const std::optional<std::int64_t> a = read_number(s, at);
    if (a != v) bad("does not start from the previous count");
    if (!read_literal(s, at, std::string(" ") + symbol(p.steps[i].operation) + " ")) bad("wrong operation");
    const std::optional<std::int64_t> b = read_number(s, at);
    if (b != p.steps[i].operand) bad("wrong operand");
    if (!read_literal(s, at, " = ")) bad("no ' = '");
    const std::optional<std::int64_t> c = read_number(s, at);
    if (!c || *c != apply(p.steps[i].operation, v, p.steps[i].operand)) bad("wrong result");
    if (!read_literal(s, at, ". ")) bad("no '. ' after the result");
    v = *c;
  }
  MOELAB_CHECK(extract_answer(s.substr(at)) == answer && s.substr(at) == kAnswerPhrase + std::to_string(answer) + ".",
               "pretrain::check_math_problem", "the solution '", p.solution, "' does not end with '", kAnswerPhrase,
               answer, ".'");
}

std::optional<std::int64_t> extract_answer(std::string_view text) {
  std::size_t at = text.find(kAnswerPhrase);
  if (at == std::string_view::npos) return std::nullopt;
  at += kAnswerPhrase.size();
  const std::optional<std::int64_t> n = read_number(text, at);
  if (!n || !read_literal(text, at, ".")) return std::nullopt;
  return n;
}

}  // namespace moelab::pretrain
