// tasks/phonebook/phonebook_data.cpp — see phonebook_data.h.
#include "tasks/phonebook/phonebook_data.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "autograd/no_grad.h"
#include "core/error.h"
#include "core/factories.h"
#include "nn/generate.h"

namespace moelab::phonebook {

namespace {

constexpr std::uint32_t kNumberSpace = 100000000u;  // 10^8

bool is_letter(char c) { return c >= 'a' && c <= 'z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Fixed-width base-26 letters / base-10 digits of a code.
std::string name_of(std::uint32_t code) {
  std::string s(static_cast<std::size_t>(kNameLength), 'a');
  for (std::int64_t i = kNameLength - 1; i >= 0; --i, code /= 26) s[static_cast<std::size_t>(i)] = static_cast<char>('a' + code % 26);
  return s;
}
std::string number_of(std::uint32_t code) {
  std::string s(static_cast<std::size_t>(kNumberLength), '0');
  for (std::int64_t i = kNumberLength - 1; i >= 0; --i, code /= 10) s[static_cast<std::size_t>(i)] = static_cast<char>('0' + code % 10);
  return s;
}

}  // namespace

std::vector<Entry> make_book(std::int64_t size, Generator& gen) {
  MOELAB_CHECK(size >= 1 && size <= kMaxBookSize, "phonebook::make_book", "size must be in [1, ", kMaxBookSize,
               "] (half of the 26^5 possible names), got ", size);
  std::unordered_set<std::uint32_t> names, numbers;
  names.reserve(static_cast<std::size_t>(size));
  numbers.reserve(static_cast<std::size_t>(size));
  std::vector<Entry> book;
  book.reserve(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i) {
    std::uint32_t name = 0, number = 0;
    do name = gen.next_below(static_cast<std::uint32_t>(kNameSpace));
    while (!names.insert(name).second);
    do number = gen.next_below(kNumberSpace);
    while (!numbers.insert(number).second);
    book.push_back({name_of(name), number_of(number)});
  }
  return book;
}

std::int32_t token_of(char c) {
  if (is_letter(c)) return static_cast<std::int32_t>(c - 'a');
  if (is_digit(c)) return kFirstDigit + static_cast<std::int32_t>(c - '0');
  fail("phonebook::token_of", "'", c, "' is neither a letter a-z nor a digit 0-9");
}

std::vector<std::int32_t> encode(const Entry& entry) {
  MOELAB_CHECK(entry.name.size() == static_cast<std::size_t>(kNameLength) &&
                   std::all_of(entry.name.begin(), entry.name.end(), is_letter),
               "phonebook::encode", "name '", entry.name, "' is not ", kNameLength, " letters a-z");
  MOELAB_CHECK(entry.number.size() == static_cast<std::size_t>(kNumberLength) &&
                   std::all_of(entry.number.begin(), entry.number.end(), is_digit),
               "phonebook::encode", "number '", entry.number, "' is not ", kNumberLength, " digits 0-9");
  std::vector<std::int32_t> t;
  t.reserve(static_cast<std::size_t>(kSequenceLength));
  t.push_back(kBos);
  for (char c : entry.name) t.push_back(token_of(c));
  t.push_back(kSep);
  for (char c : entry.number) t.push_back(token_of(c));
  t.push_back(kEos);
  return t;
}

std::string decode(const std::vector<std::int32_t>& tokens) {
  std::string s;
  for (std::int32_t t : tokens) {
    if (t >= 0 && t < 26) s += static_cast<char>('a' + t);
    else if (t >= kFirstDigit && t < kFirstDigit + 10) s += static_cast<char>('0' + (t - kFirstDigit));
    else if (t == kBos) s += "<bos>";
    else if (t == kEos) s += "<eos>";
    else if (t == kSep) s += "<sep>";
    else s += "<?" + std::to_string(t) + ">";
  }
  return s;
}

Entry decode_entry(const std::vector<std::int32_t>& tokens) {
  const auto bad = [&](const char* what) {
    fail("phonebook::decode_entry", what, " in '", decode(tokens), "' (want <bos> 5 letters <sep> 8 digits <eos>)");
  };
  if (tokens.size() != static_cast<std::size_t>(kSequenceLength)) bad("wrong length");
  if (tokens[0] != kBos) bad("no <bos> first");
  if (tokens[static_cast<std::size_t>(1 + kNameLength)] != kSep) bad("no <sep> after the name");
  if (tokens.back() != kEos) bad("no <eos> last");
  Entry e;
  for (std::int64_t i = 1; i <= kNameLength; ++i) {
    const std::int32_t t = tokens[static_cast<std::size_t>(i)];
    if (t < 0 || t >= 26) bad("a name token that is not a letter");
    e.name += static_cast<char>('a' + t);
  }
  for (std::int64_t i = kPromptLength; i < kPromptLength + kNumberLength; ++i) {
    const std::int32_t t = tokens[static_cast<std::size_t>(i)];
    if (t < kFirstDigit || t >= kFirstDigit + 10) bad("a number token that is not a digit");
    e.number += static_cast<char>('0' + (t - kFirstDigit));
  }
  return e;
}

TokenBatch training_batch(const std::vector<Entry>& book, const std::vector<std::int64_t>& indices) {
  MOELAB_CHECK(!indices.empty(), "phonebook::training_batch", "no entries to batch");
  std::vector<std::vector<std::int32_t>> seqs;
  seqs.reserve(indices.size());
  for (std::int64_t i : indices) {
    MOELAB_CHECK(i >= 0 && i < static_cast<std::int64_t>(book.size()), "phonebook::training_batch", "index ", i,
                 " is outside the book of ", book.size(), " entries");
    seqs.push_back(encode(book[static_cast<std::size_t>(i)]));
  }
  return make_lm_batch(seqs, kEos);  // all sequences are 16 tokens: no padding, every target counts
}

std::vector<std::int64_t> test_indices(std::int64_t book_size, std::int64_t count, Generator& gen) {
  MOELAB_CHECK(book_size >= 1 && book_size <= 0xFFFFFFFFll, "phonebook::test_indices",
               "book_size must be in [1, 2^32), got ", book_size);
  MOELAB_CHECK(count >= 1, "phonebook::test_indices", "count must be >= 1, got ", count);
  std::vector<std::int64_t> out;
  if (count >= book_size) {
    out.resize(static_cast<std::size_t>(book_size));
    std::iota(out.begin(), out.end(), std::int64_t{0});
    return out;
  }
  const auto n = static_cast<std::uint32_t>(book_size);
  if (2 * count <= book_size) {
    // Few of many: rejection (fewer than 2 draws per index on average), memory O(count).
    std::unordered_set<std::int64_t> seen;
    seen.reserve(static_cast<std::size_t>(count));
    while (static_cast<std::int64_t>(out.size()) < count) {
      const std::int64_t i = gen.next_below(n);
      if (seen.insert(i).second) out.push_back(i);
    }
  } else {
    // Most of them: a partial Fisher-Yates shuffle of 0 .. book_size - 1.
    std::vector<std::int64_t> all(static_cast<std::size_t>(book_size));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t j = k + gen.next_below(static_cast<std::uint32_t>(book_size - k));
      std::swap(all[static_cast<std::size_t>(k)], all[static_cast<std::size_t>(j)]);
    }
    out.assign(all.begin(), all.begin() + count);
  }
  std::sort(out.begin(), out.end());
  return out;
}

RecallResult recall(Decoder& model, const std::vector<Entry>& book, const std::vector<std::int64_t>& indices,
                    std::int64_t batch) {
  MOELAB_CHECK(!indices.empty(), "phonebook::recall", "no indices to test");
  MOELAB_CHECK(batch >= 1, "phonebook::recall", "batch must be >= 1, got ", batch);
  MOELAB_CHECK(model.config().vocab == kVocab, "phonebook::recall", "the model's vocabulary is ",
               model.config().vocab, ", the phone-book's ", kVocab);
  MOELAB_CHECK(model.config().max_seq >= kPromptLength + kNumberLength, "phonebook::recall", "the model's max_seq is ",
               model.config().max_seq, "; a prompt and its answer need ", kPromptLength + kNumberLength);
  for (std::int64_t i : indices)
    MOELAB_CHECK(i >= 0 && i < static_cast<std::int64_t>(book.size()), "phonebook::recall", "index ", i,
                 " is outside the book of ", book.size(), " entries");

  // Evaluation mode, restored to the model's own mode even when generation throws.
  EvalModeGuard eval(model);
  NoGradGuard no_grad;

  std::int64_t exact = 0, digits_right = 0;
  const auto total = static_cast<std::int64_t>(indices.size());
  for (std::int64_t start = 0; start < total; start += batch) {
    const std::int64_t rows = std::min(batch, total - start);
    std::vector<std::int32_t> prompts;
    prompts.reserve(static_cast<std::size_t>(rows * kPromptLength));
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<std::int32_t> seq = encode(book[static_cast<std::size_t>(indices[static_cast<std::size_t>(start + r)])]);
      prompts.insert(prompts.end(), seq.begin(), seq.begin() + kPromptLength);
    }
    const std::vector<std::int32_t> got =
        generate_greedy(model, from_vector(prompts, {rows, kPromptLength}), kNumberLength).tokens.to_vector<std::int32_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::string& number = book[static_cast<std::size_t>(indices[static_cast<std::size_t>(start + r)])].number;
      std::int64_t right = 0;
      for (std::int64_t k = 0; k < kNumberLength; ++k)
        right += got[static_cast<std::size_t>(r * kNumberLength + k)] == token_of(number[static_cast<std::size_t>(k)]);
      digits_right += right;
      exact += right == kNumberLength;
    }
  }
  RecallResult result;
  result.tested = total;
  result.exact_match = static_cast<double>(exact) / static_cast<double>(total);
  result.digit_accuracy = static_cast<double>(digits_right) / static_cast<double>(total * kNumberLength);
  return result;
}

}  // namespace moelab::phonebook
