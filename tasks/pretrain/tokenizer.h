// tasks/pretrain/tokenizer.h — the tokenizers of the synthetic pre-training corpus (Mixture of
// Parrots, Section 5, at CPU scale): one token per character plus three specials (the free functions
// below), or the same characters plus one token per word of the training text (class Tokenizer).
//
// Why characters. The corpus (corpus.h) is generated from templates with a small, fixed set of
// characters, so a character vocabulary is exact (no unknown words, no merges to learn), tiny
// (kVocab = 82: the embedding and the output layer stay small at CPU scale) and easy to read back.
// A number like 417 is three tokens '4' '1' '7', so arithmetic is digit by digit, as in the
// phone-book and shortest-path tasks.
//
// The vocabulary (fixed: changing it changes every token id, so every trained model):
//   PAD = 0, BOS = 1, EOS = 2, then the 79 characters of kAlphabet in its order, from id 3:
//   ' ' -> 3,  'a'..'z' -> 4..29,  'A'..'Z' -> 30..55,  '0'..'9' -> 56..65,
//   . , ? ! : ; ' " - + * / = ( ) -> 66..80,  '\n' -> 81
// A document is written BOS, its characters, EOS (corpus.h packs documents that way):
//   encode("Mia has 12.")           ->  42 12 4 3 11 4 22 3 57 58 66      (M i a ' ' h a s ' ' 1 2 .)
//   encode_document("Mia has 12.")  ->  1 42 12 4 3 11 4 22 3 57 58 66 2  (BOS ... EOS)
//   decode({1, 42, 12, 4, 2})       ->  "<bos>Mia<eos>"
// encode refuses any character outside kAlphabet (a tab, a '#', any byte of a UTF-8 letter such
// as 'é') with a moelab::Error that names it and its position; decode never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moelab::pretrain {

// Every character a document may hold, in token order (ids kFirstCharacter ...).
inline constexpr std::string_view kAlphabet =
    " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,?!:;'\"-+*/=()\n";

constexpr std::int32_t kPad = 0;  // padding: make_lm_batch's pad (its targets are ignored)
constexpr std::int32_t kBos = 1;  // begins every document
constexpr std::int32_t kEos = 2;  // ends every document; generation stops at it
constexpr std::int32_t kFirstCharacter = 3;
constexpr std::int32_t kVocab = kFirstCharacter + static_cast<std::int32_t>(kAlphabet.size());  // 82

// True when c is one of kAlphabet's characters.
bool in_alphabet(char c);

// The token of one character; moelab::Error ("pretrain::token_of") naming it when it is not in
// kAlphabet.
std::int32_t token_of(char c);

// The tokens of text, one per character, no BOS or EOS: [text.size()]. moelab::Error naming the
// first foreign character and its position.
std::vector<std::int32_t> encode(std::string_view text);

// The tokens of one document as training sees it: BOS, encode(text), EOS: [text.size() + 2].
std::vector<std::int32_t> encode_document(std::string_view text);

// Readable form of any tokens: characters as themselves, "<pad>", "<bos>", "<eos>", and "<?N>"
// for an id outside the vocabulary. Never throws.
std::string decode(const std::vector<std::int32_t>& tokens);

// What a model generated, as text: the tokens before the first EOS (all of them when there is
// none), decoded as decode() does. The evaluation protocols (corpus.h) compare this text.
std::string decode_until_eos(const std::vector<std::int32_t>& tokens);

// The tokenizer an experiment runs with: `characters()` (exactly the functions above) or
// `words(documents)`, which keeps every character token (ids 0..kVocab-1 unchanged) and adds one
// token per word piece of the documents, so that a name, a city or a company is one or two tokens
// to recall instead of a string to spell.
//
// A word piece is a run of letters (a-z, A-Z) of two or more characters, or a run of one or more
// letters after a space, the space included (as GPT-2's pieces carry their space):
//   "Anya Forger was born in Kyoto."  ->  "Anya" " Forger" " was" " born" " in" " Kyoto" "."
//   "12 + 5 = 17."                    ->  "1" "2" " " "+" " " "5" " " "=" " " "1" "7" "."
// Digits, punctuation and other spaces stay characters, so arithmetic is still digit by digit.
// The word pieces of `documents` (the training text), sorted, get ids kVocab, kVocab + 1, ...: the
// vocabulary is a pure function of the documents. encode cuts text at the same places and emits a
// run's piece when the vocabulary has it, else the run's characters one by one (a word never seen
// in training, or a run of one letter with no space). decode(encode(t)) == t for every text of
// the alphabet, with either tokenizer; encode refuses a character outside kAlphabet as the free
// function does.
//
//   Tokenizer tok = Tokenizer::words(training_documents(corpus));  // vocab_size() ~ 82 + a few hundred
//   tok.encode("Mia has 12.")  ->  ["Mia", " has", ' ', '1', '2', '.']
class Tokenizer {
 public:
  enum class Kind { Characters, Words };

  static Tokenizer characters();
  static Tokenizer words(const std::vector<std::string>& documents);

  Kind kind() const { return kind_; }
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(pieces_.size()); }
  // The text of token id (the character, the word piece, or "<pad>", "<bos>", "<eos>"); moelab::Error
  // outside [0, vocab_size()).
  const std::string& piece(std::int32_t id) const;

  std::vector<std::int32_t> encode(std::string_view text) const;
  std::vector<std::int32_t> encode_document(std::string_view text) const;  // BOS, encode(text), EOS
  std::string decode(const std::vector<std::int32_t>& tokens) const;       // "<?N>" for an unknown id
  std::string decode_until_eos(const std::vector<std::int32_t>& tokens) const;

 private:
  Kind kind_ = Kind::Characters;
  std::vector<std::string> pieces_;                        // [vocab_size]: id -> its text
  std::unordered_map<std::string, std::int32_t> words_;    // word piece -> id (empty for characters)
};

// The one character tokenizer (Tokenizer::characters()), for defaults.
const Tokenizer& character_tokenizer();

// "char" or "word" (the `tokens` setting of `moelab pretrain`).
std::string tokenizer_name(Tokenizer::Kind kind);

}  // namespace moelab::pretrain
