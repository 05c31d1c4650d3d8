// tasks/pretrain/math_problems.h — the math half of the synthetic pre-training corpus (Mixture of
// Parrots, Section 5, at CPU scale): GSM8k-style multi-step arithmetic word problems.
//
// A problem is a person (one of 32 first names), an object (one of 32 plural nouns), a starting
// count and 1..kMaxOperations operations, each written as a sentence with one of three templates:
//   add       k in [2, 30]   "Mia buys 5 more marbles."           (also "finds", "A friend gives")
//   subtract  k in [2, 30]   "Mia gives away 4 marbles."          (also "loses", "sells")
//   multiply  m in [2, 5]    "Mia ends up with 3 times as many marbles."   (and two other forms)
// The count starts in [2, 30] and every count along the way stays in [kMinValue, kMaxValue] =
// [2, 999] (the 30s and the 999 are MathRange's defaults; a MathRange narrows them): an operation
// is drawn uniformly among those that keep it there (add always can below 998, subtract needs a
// count >= 4, multiply a product <= 999), then its operand uniformly among the allowed ones. The question asks for the final count.
//
// A problem's text (question) and its solution, one equation per operation and the answer line:
//   question: "Mia has 12 marbles. Mia buys 5 more marbles. Mia ends up with 3 times as many
//              marbles. Mia gives away 4 marbles. How many marbles does Mia have now?"
//   solution: "12 + 5 = 17. 17 * 3 = 51. 51 - 4 = 47. The answer is 47."
// As a training document a problem is prompt() + solution, prompt() being the question and one
// space. Evaluation gives the model BOS + prompt(); it must write the whole solution and the answer
// line; extract_answer reads N from the first "The answer is N." of what it wrote (up to EOS), and the problem
// counts as solved when N equals `answer` (exact match on the number, as GSM8k is scored).
//
// There are far more distinct problems than any corpus uses (32 names x 32 objects x 3 openings
// x 29 starts x thousands of operation sequences), so fresh test problems are cheap to draw;
// make_math_problems rejects a problem whose question is already drawn or in `exclude`.
//
//   Generator gen(1);
//   MathProblem p = make_math_problem(2, 5, gen);
//   check_math_problem(p);                         // throws if any equation or the answer is wrong
//   extract_answer("17 * 3 = 51. The answer is 51.")  ->  51;   extract_answer("51 apples") -> nullopt
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"

namespace moelab::pretrain {

constexpr std::int64_t kMaxOperations = 5;
constexpr std::int64_t kMinValue = 2;    // every count of a problem is in [kMinValue, kMaxValue]
constexpr std::int64_t kMaxValue = 999;

enum class Operation { Add, Subtract, Multiply };

struct MathStep {
  Operation operation = Operation::Add;
  std::int64_t operand = 0;  // k added or subtracted, or the factor m
};

struct MathProblem {
  std::string name;    // "Mia"
  std::string object;  // "marbles"
  std::int64_t start = 0;
  std::vector<MathStep> steps;  // 1..kMaxOperations
  std::int64_t answer = 0;      // the count after every step
  std::string question;         // the problem text, ending with '?'
  std::string solution;         // "12 + 5 = 17. ... The answer is 47."

  std::string prompt() const { return question + " "; }
  std::string text() const { return prompt() + solution; }  // the training document
};

// The sizes of the numbers (the defaults are the ranges above). A smaller range makes easier
// problems for small models: MathRange{9, 99} starts at 2..9, adds or subtracts 2..9 and keeps
// every count in [2, 99], so each equation is a one- or two-digit sum.
struct MathRange {
  std::int64_t max_operand = 30;      // start and added / subtracted k in [2, max_operand]
  std::int64_t max_value = kMaxValue; // every count in [kMinValue, max_value]

  // moelab::Error unless 2 <= max_operand <= max_value and 5 <= max_value <= kMaxValue (from 5 on,
  // every count admits an addition or a subtraction).
  void check() const;
};

// One problem with min_ops..max_ops operations (1 <= min_ops <= max_ops <= kMaxOperations, else
// moelab::Error), the count drawn uniformly in that range.
MathProblem make_math_problem(std::int64_t min_ops, std::int64_t max_ops, Generator& gen, const MathRange& range = {});

// Held-out equations: a share of all the equations a problem can hold ("a op b", the result
// following) is kept out of the training text, so that a test can ask for arithmetic no training
// problem wrote (the corpus's math_unseen test, corpus.h). Whether an equation is held out is a
// pure function of (seed, a, op, b): a splitmix64 hash of the four, below share * 2^64. Every
// problem's equations are its steps from its start: (start, op1, b1), (start op1 b1, op2, b2), ...
//   EquationHoldout h{seed, 0.2};   // about a fifth of the equations held out
//   h.held_out(12, Operation::Add, 5)  -> true or false, the same for every call with this seed
struct EquationHoldout {
  std::uint64_t seed = 0;
  double share = 0;  // [0, 1]: 0 holds out nothing

  bool held_out(std::int64_t a, Operation op, std::int64_t b) const;
  bool any_held_out(const MathProblem& p) const;  // some equation of p is held out
  bool all_held_out(const MathProblem& p) const;  // every equation of p is held out
};

// Which equations a problem may use (a: the count before the step, op, its operand b).
using EquationFilter = std::function<bool(std::int64_t a, Operation op, std::int64_t b)>;

// make_math_problem with every equation passing `allowed`: at each step the operation is drawn
// uniformly among those with at least one allowed operand, then the operand uniformly among the
// allowed ones; a problem that reaches a count with no allowed step is drawn again from the start
// (moelab::Error after 100,000 such restarts: the filter leaves too little).
MathProblem make_filtered_math_problem(std::int64_t min_ops, std::int64_t max_ops, Generator& gen,
                                       const MathRange& range, const EquationFilter& allowed);

// `count` >= 0 problems with pairwise different questions, none of them in `exclude` (a set of
// question texts) and each passing `accept` when given (a draw that does not is drawn again);
// moelab::Error when 100,000 draws in a row bring no new one. `allowed`, when given, builds each
// draw with make_filtered_math_problem instead of make_math_problem.
std::vector<MathProblem> make_math_problems(std::int64_t count, std::int64_t min_ops, std::int64_t max_ops,
                                            Generator& gen, const std::set<std::string>* exclude = nullptr,
                                            const MathRange& range = {},
                                            const std::function<bool(const MathProblem&)>& accept = {},
                                            const EquationFilter& allowed = {});

// The answer recomputed from start and steps alone; moelab::Error when a count leaves
// [kMinValue, kMaxValue] or there are no steps or more than kMaxOperations.
std::int64_t recompute_answer(const MathProblem& p);

// Checks a problem end to end, throwing moelab::Error with what is wrong: recompute_answer equals
// `answer`; the solution holds exactly one right equation "a op b = c" per step, chained from
// `start`; extract_answer(solution) is `answer`; the question ends with '?'.
void check_math_problem(const MathProblem& p);

// The N of "The answer is N." at the first "The answer is " in text (N: 1 to 9 digits, then a
// '.'); nullopt when the phrase is missing or what follows its first occurrence is not a number
// and a '.' ("The answer is 4" cut short, "The answer is four."). Text after the '.' is ignored.
std::optional<std::int64_t> extract_answer(std::string_view text);

}  // namespace moelab::pretrain
