// tasks/pretrain/tokenizer.h — the character tokenizer of the synthetic pre-training corpus
// (Mixture of Parrots, Section 5, at CPU scale): one token per character, plus three specials.
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

}  // namespace moelab::pretrain
