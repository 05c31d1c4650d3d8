// tasks/phonebook/phonebook_data.h — the phone-book task of Mixture of Parrots (Section 4, Figure 3):
// closed-book memorization of a list of (name, phone number) pairs.
//
// The task. A phone-book is `size` entries, each a 5-letter name (a-z) and an 8-digit number
// (0-9, leading zeros allowed). Names are unique (a name must determine its number) and so are
// numbers; both are drawn uniformly at random, so there is no pattern to learn: the model can only
// store every pair in its weights. Training shows the model whole entries; at test time it is given
// a name from the book and must write the number without seeing the book. The paper reports the
// largest book a model recalls with >= 90% exact match, and finds it grows with the TOTAL number of
// parameters (so an MoE memorizes like a dense model of its total size, not its active size).
//
// Tokens (vocabulary of kVocab = 39, as in the paper):
//   'a'..'z' -> 0..25,  '0'..'9' -> 26..35,  BOS = 36,  EOS = 37,  SEP = 38
// One entry is kSequenceLength = 16 tokens: BOS, the 5 letters, SEP, the 8 digits, EOS.
//   {"abcde", "01234567"}  ->  <bos> a b c d e <sep> 0 1 2 3 4 5 6 7 <eos>
//                          =   36    0 1 2 3 4  38   26 27 28 29 30 31 32 33  37
//   decode(...)            ->  "<bos>abcde<sep>01234567<eos>"
//
// Training (training_batch). The entries of a batch are chosen by tasks/common/epoch_sampler.h:
// by default a fresh shuffle of the book per epoch, taken in order (every entry once per epoch,
// as the paper trains for a number of epochs), or with replacement (sampling=replacement, the old
// recipe, which leaves about e^-E of the book unseen after E epochs). Next-token prediction on
// every position with no loss mask (the paper masks nothing for this task): inputs are tokens
// 0..14 and targets tokens 1..15 of each entry, both int32 [B, 15]. The name tokens are targets
// too; they cannot be predicted (names are random) and only add a constant floor to the loss.
//
// What is measured (recall). For each tested entry the prompt is BOS name SEP (7 tokens, [B, 7]),
// the model continues it greedily for 8 tokens ([B, 8], nn/generate.h), and the entry counts as
// recalled only when all 8 generated tokens equal the number's digits (exact match, the paper's
// metric). digit_accuracy is the fraction of the 8 * tested digits that are right, a softer signal
// that rises before exact match does. Tested entries come from the training book itself
// (test_indices): memorization, not generalization, is what is measured.
//
//   Generator gen(0);
//   std::vector<Entry> book = make_book(1000, gen);
//   EpochSampler sampler(book.size(), 128, Sampling::Epochs);
//   TokenBatch b = training_batch(book, sampler.next(gen));   // b.inputs, b.targets: [128, 15]
//   ... train a Decoder (vocab kVocab, max_seq >= 15) with nn::cross_entropy(model.forward(b.inputs), b.targets)
//   RecallResult r = recall(model, book, test_indices(book.size(), 1000, gen));
//   // r.exact_match in [0, 1]; the paper's criterion: r.exact_match >= 0.9
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/decoder.h"
#include "tasks/common/batch.h"
#include "tasks/common/epoch_sampler.h"

namespace moelab::phonebook {

constexpr std::int32_t kVocab = 39;
constexpr std::int32_t kFirstDigit = 26;  // token of '0'
constexpr std::int32_t kBos = 36;
constexpr std::int32_t kEos = 37;
constexpr std::int32_t kSep = 38;
constexpr std::int64_t kNameLength = 5;
constexpr std::int64_t kNumberLength = 8;
constexpr std::int64_t kSequenceLength = 1 + kNameLength + 1 + kNumberLength + 1;  // 16
constexpr std::int64_t kPromptLength = 1 + kNameLength + 1;                        // 7: BOS name SEP
// 26^5 = 11,881,376 names exist; a book may use at most half of them, so that drawing unique
// names by rejection stays cheap (fewer than 2 draws per name on average). 5,940,688 entries is
// about twice the paper's largest book (3e6).
constexpr std::int64_t kNameSpace = 26LL * 26 * 26 * 26 * 26;
constexpr std::int64_t kMaxBookSize = kNameSpace / 2;

struct Entry {
  std::string name;    // kNameLength letters a-z
  std::string number;  // kNumberLength digits 0-9
};

// `size` entries (1 <= size <= kMaxBookSize, else moelab::Error): unique names and unique numbers,
// each drawn uniformly (a name as one integer in [0, 26^5), a number as one in [0, 10^8)) and
// redrawn while already taken. Same generator state => the same book.
std::vector<Entry> make_book(std::int64_t size, Generator& gen);

// The token of a letter a-z or digit 0-9; moelab::Error for any other character.
std::int32_t token_of(char c);

// BOS name SEP number EOS: kSequenceLength tokens. moelab::Error if the name is not kNameLength
// letters a-z or the number not kNumberLength digits.
std::vector<std::int32_t> encode(const Entry& entry);

// Readable form of any tokens: letters and digits as themselves, "<bos>", "<eos>", "<sep>", and
// "<?N>" for an id outside the vocabulary. Never throws.
std::string decode(const std::vector<std::int32_t>& tokens);

// The entry of a well-formed sequence (exactly encode's layout); moelab::Error otherwise.
Entry decode_entry(const std::vector<std::int32_t>& tokens);

// The entries book[i], i in indices (non-empty, each in range; an EpochSampler's batch): inputs and
// targets int32 [indices.size(), kSequenceLength - 1], every target counted (make_lm_batch with no
// mask). moelab::Error for an empty list or an index outside the book.
TokenBatch training_batch(const std::vector<Entry>& book, const std::vector<std::int64_t>& indices);

// `count` >= 1 distinct indices in [0, book_size), drawn uniformly and returned in increasing
// order; when count >= book_size, every index 0 .. book_size - 1.
std::vector<std::int64_t> test_indices(std::int64_t book_size, std::int64_t count, Generator& gen);

struct RecallResult {
  double exact_match = 0;     // fraction of tested entries whose 8 generated digits are all right
  std::int64_t tested = 0;    // entries tested (indices.size())
  double digit_accuracy = 0;  // fraction of the 8 * tested generated tokens equal to their digit
};

// Prompts BOS name SEP for book[i], i in indices (non-empty, each in range), `batch` prompts at a
// time ([<=batch, 7]), and generates 8 tokens greedily. Needs model.config().max_seq >= 15 and
// vocab kVocab. Runs in eval mode under NoGradGuard, then puts the model back in the train/eval
// mode it was in.
RecallResult recall(Decoder& model, const std::vector<Entry>& book, const std::vector<std::int64_t>& indices,
                    std::int64_t batch = 256);

}  // namespace moelab::phonebook
