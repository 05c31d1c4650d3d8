// tasks/pretrain/tokenizer.cpp — see tokenizer.h.
#include "tasks/pretrain/tokenizer.h"

#include <array>
#include <set>

#include "core/error.h"

namespace moelab::pretrain {

namespace {

// token_table[byte]: the token of that character, or -1 when it is not in kAlphabet.
constexpr std::array<std::int32_t, 256> make_token_table() {
  std::array<std::int32_t, 256> table{};
  for (std::int32_t& t : table) t = -1;
  for (std::size_t i = 0; i < kAlphabet.size(); ++i)
    table[static_cast<unsigned char>(kAlphabet[i])] = kFirstCharacter + static_cast<std::int32_t>(i);
  return table;
}
constexpr std::array<std::int32_t, 256> kTokenTable = make_token_table();

// A character for an error message: printable ASCII as 'c', anything else as its byte value.
std::string describe(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x20 && byte < 0x7F) return "'" + std::string(1, c) + "' (byte " + std::to_string(byte) + ")";
  return "byte " + std::to_string(byte);
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Where the run that starts at text[i] ends: a space followed by letters, or letters, end past the
// last letter; anything else is one character (returns i + 1). Tokenizer's only cutting rule.
std::size_t run_end(std::string_view text, std::size_t i) {
  std::size_t j = i;
  if (text[j] == ' ' && j + 1 < text.size() && is_letter(text[j + 1])) ++j;
  if (!is_letter(text[j])) return i + 1;
  while (j < text.size() && is_letter(text[j])) ++j;
  return j;
}

}  // namespace

bool in_alphabet(char c) { return kTokenTable[static_cast<unsigned char>(c)] >= 0; }

std::int32_t token_of(char c) {
  const std::int32_t t = kTokenTable[static_cast<unsigned char>(c)];
  if (t < 0) fail("pretrain::token_of", "the character ", describe(c), " is not in the tokenizer's alphabet");
  return t;
}

namespace {

std::int32_t character_token(std::string_view text, std::size_t i) {
  const std::int32_t t = kTokenTable[static_cast<unsigned char>(text[i])];
  if (t < 0)
    fail("pretrain::encode", "the character ", describe(text[i]), " at position ", i,
         " is not in the tokenizer's alphabet (letters, digits, space, newline and . , ? ! : ; ' \" - + * / = ( ))");
  return t;
}

}  // namespace

std::vector<std::int32_t> encode(std::string_view text) {
  std::vector<std::int32_t> tokens;
  tokens.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) tokens.push_back(character_token(text, i));
  return tokens;
}

std::vector<std::int32_t> encode_document(std::string_view text) {
  std::vector<std::int32_t> tokens;
  tokens.reserve(text.size() + 2);
  tokens.push_back(kBos);
  const std::vector<std::int32_t> body = encode(text);
  tokens.insert(tokens.end(), body.begin(), body.end());
  tokens.push_back(kEos);
  return tokens;
}

std::string decode(const std::vector<std::int32_t>& tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (std::int32_t t : tokens) {
    if (t >= kFirstCharacter && t < kVocab) text += kAlphabet[static_cast<std::size_t>(t - kFirstCharacter)];
    else if (t == kPad) text += "<pad>";
    else if (t == kBos) text += "<bos>";
    else if (t == kEos) text += "<eos>";
    else text += "<?" + std::to_string(t) + ">";
  }
  return text;
}

std::string decode_until_eos(const std::vector<std::int32_t>& tokens) {
  std::vector<std::int32_t> before;
  for (std::int32_t t : tokens) {
    if (t == kEos) break;
    before.push_back(t);
  }
  return decode(before);
}

Tokenizer Tokenizer::characters() {
  Tokenizer t;
  t.pieces_ = {"<pad>", "<bos>", "<eos>"};
  for (char c : kAlphabet) t.pieces_.emplace_back(1, c);
  return t;
}

Tokenizer Tokenizer::words(const std::vector<std::string>& documents) {
  Tokenizer t = characters();
  t.kind_ = Kind::Words;
  std::set<std::string> found;  // sorted: the ids depend on the documents' words only, not their order
  for (const std::string& d : documents)
    for (std::size_t i = 0; i < d.size();) {
      const std::size_t end = run_end(d, i);
      if (end - i >= 2) found.insert(d.substr(i, end - i));
      i = end;
    }
  for (const std::string& w : found) {
    t.words_.emplace(w, static_cast<std::int32_t>(t.pieces_.size()));
    t.pieces_.push_back(w);
  }
  return t;
}

const std::string& Tokenizer::piece(std::int32_t id) const {
  MOELAB_CHECK(id >= 0 && id < vocab_size(), "pretrain::Tokenizer::piece", "token id ", id, " is outside [0, ",
               vocab_size(), ")");
  return pieces_[static_cast<std::size_t>(id)];
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  if (kind_ == Kind::Characters) return pretrain::encode(text);
  std::vector<std::int32_t> tokens;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t end = run_end(text, i);
    if (end - i >= 2) {
      const auto w = words_.find(std::string(text.substr(i, end - i)));
      if (w != words_.end()) {
        tokens.push_back(w->second);
        i = end;
        continue;
      }
    }
    for (; i < end; ++i) tokens.push_back(character_token(text, i));  // a run not in the vocabulary
  }
  return tokens;
}

std::vector<std::int32_t> Tokenizer::encode_document(std::string_view text) const {
  std::vector<std::int32_t> tokens = encode(text);
  tokens.insert(tokens.begin(), kBos);
  tokens.push_back(kEos);
  return tokens;
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& tokens) const {
  std::string text;
  for (std::int32_t t : tokens) text += t >= 0 && t < vocab_size() ? pieces_[static_cast<std::size_t>(t)]
                                                                   : "<?" + std::to_string(t) + ">";
  return text;
}

std::string Tokenizer::decode_until_eos(const std::vector<std::int32_t>& tokens) const {
  std::vector<std::int32_t> before;
  for (std::int32_t t : tokens) {
    if (t == kEos) break;
    before.push_back(t);
  }
  return decode(before);
}

const Tokenizer& character_tokenizer() {
  static const Tokenizer t = Tokenizer::characters();
  return t;
}

std::string tokenizer_name(Tokenizer::Kind kind) { return kind == Tokenizer::Kind::Words ? "word" : "char"; }

}  // namespace moelab::pretrain
