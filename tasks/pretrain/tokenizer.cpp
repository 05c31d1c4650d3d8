// tasks/pretrain/tokenizer.cpp — see tokenizer.h.
#include "tasks/pretrain/tokenizer.h"

#include <array>

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

}  // namespace

bool in_alphabet(char c) { return kTokenTable[static_cast<unsigned char>(c)] >= 0; }

std::int32_t token_of(char c) {
  const std::int32_t t = kTokenTable[static_cast<unsigned char>(c)];
  if (t < 0) fail("pretrain::token_of", "the character ", describe(c), " is not in the tokenizer's alphabet");
  return t;
}

std::vector<std::int32_t> encode(std::string_view text) {
  std::vector<std::int32_t> tokens;
  tokens.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::int32_t t = kTokenTable[static_cast<unsigned char>(text[i])];
    if (t < 0)
      fail("pretrain::encode", "the character ", describe(text[i]), " at position ", i,
           " is not in the tokenizer's alphabet (letters, digits, space, newline and . , ? ! : ; ' \" - + * / = ( ))");
    tokens.push_back(t);
  }
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

}  // namespace moelab::pretrain
