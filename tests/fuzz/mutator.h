// tests/fuzz/mutator.h — deterministic mutations of a valid file, for the seeded fuzz test
// (tests/test_loader_fuzz.cpp). libFuzzer has its own, coverage-guided mutator; this one needs no
// compiler support, runs on every build and gives the same cases on every machine.
//
// Mutator(seed) draws from SplitMix64 (fixed arithmetic, unlike std:: distributions, whose output
// differs between standard libraries), so a (seed, case) pair names one input forever. Each call
// of mutate() applies 1 to 4 of these edits and returns what it did, e.g.
//   "flip bit 3 of byte 41; truncate to 57 bytes"
// The edits aim at what the loaders parse:
//   flip a bit / set a byte / set a byte to a value parsers care about (0, 0xFF, 0x80, '-', '"', ...)
//   truncate / insert bytes / delete a range / duplicate a range elsewhere
//   add a small delta to, or set an extreme in, a 32- or 64-bit integer, little- or big-endian, at
//     a length field (byte 0: safetensors' header length; bytes 4, 8, 12, 16: IDX sizes) or anywhere
//   replace a decimal number in text (the JSON header's shapes, offsets and metadata values) by
//     another: 0, -1, the number +- 1, 2^63 - 1, -2^63, 2^64, 1e400, 1.5 (inside a safetensors
//     header, the header length is adjusted to match, so that the JSON itself is what changes)
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace moelab::fuzz {

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : state_(seed) {}

  // SplitMix64.
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n) for n >= 1 (the modulo bias of n << 2^64 does not matter here).
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

  // Applies 1 to 4 edits to `bytes`; returns their description.
  std::string mutate(std::vector<std::uint8_t>& bytes) {
    std::string how;
    const std::size_t edits = 1 + below(4);
    for (std::size_t i = 0; i < edits; ++i) how += (i ? "; " : "") + edit(bytes);
    return how;
  }

 private:
  static constexpr std::uint8_t kInteresting[] = {0x00, 0x01, 0x7F, 0x80, 0xFF, '-', '0', '9', '"', ',', '{', '}', '[', ']', 0x1F, 0x8B};

  std::string edit(std::vector<std::uint8_t>& b) {
    const std::size_t n = b.size();
    switch (below(9)) {
      case 0: {
        if (n == 0) break;
        const std::size_t at = below(n), bit = below(8);
        b[at] ^= static_cast<std::uint8_t>(1u << bit);
        return "flip bit " + std::to_string(bit) + " of byte " + std::to_string(at);
      }
      case 1: {
        if (n == 0) break;
        const std::size_t at = below(n);
        b[at] = static_cast<std::uint8_t>(next());
        return "set byte " + std::to_string(at) + " to " + std::to_string(b[at]);
      }
      case 2: {
        if (n == 0) break;
        const std::size_t at = below(n);
        b[at] = kInteresting[below(sizeof kInteresting)];
        return "set byte " + std::to_string(at) + " to " + std::to_string(b[at]);
      }
      case 3: {
        const std::size_t keep = below(n + 1);
        b.resize(keep);
        return "truncate to " + std::to_string(keep) + " bytes";
      }
      case 4: {
        const std::size_t at = below(n + 1), count = 1 + below(8);
        std::vector<std::uint8_t> extra(count);
        for (auto& x : extra) x = below(2) ? kInteresting[below(sizeof kInteresting)] : static_cast<std::uint8_t>(next());
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), extra.begin(), extra.end());
        return "insert " + std::to_string(count) + " bytes at " + std::to_string(at);
      }
      case 5: {
        if (n == 0) break;
        const std::size_t at = below(n), count = 1 + below(std::min<std::size_t>(16, n - at));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + count));
        return "delete " + std::to_string(count) + " bytes at " + std::to_string(at);
      }
      case 6: {
        if (n == 0) break;
        const std::size_t from = below(n), count = 1 + below(std::min<std::size_t>(32, n - from)), to = below(n + 1);
        const std::vector<std::uint8_t> chunk(b.begin() + static_cast<std::ptrdiff_t>(from),
                                              b.begin() + static_cast<std::ptrdiff_t>(from + count));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(to), chunk.begin(), chunk.end());
        return "copy " + std::to_string(count) + " bytes from " + std::to_string(from) + " to " + std::to_string(to);
      }
      case 7: return edit_integer(b);
      case 8: return edit_decimal(b);
    }
    return "nothing (empty input)";
  }

  // A 4- or 8-byte integer, either byte order, at a length field or anywhere.
  std::string edit_integer(std::vector<std::uint8_t>& b) {
    const std::size_t width = below(2) ? 4 : 8;
    if (b.size() < width) return "nothing (too short for an integer)";
    static constexpr std::size_t kFields[] = {0, 4, 8, 12, 16};
    std::size_t at = below(2) ? kFields[below(5)] : below(b.size());
    if (at + width > b.size()) at = b.size() - width;
    const bool big = below(2);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < width; ++i) v |= std::uint64_t{b[at + (big ? width - 1 - i : i)]} << (8 * i);
    static constexpr std::uint64_t kExtremes[] = {0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF, ~0ull};
    std::string how;
    if (below(2)) {
      const std::int64_t delta = static_cast<std::int64_t>(below(33)) - 16;
      v += static_cast<std::uint64_t>(delta);
      how = "add " + std::to_string(delta);
    } else {
      v = kExtremes[below(sizeof kExtremes / sizeof kExtremes[0])];
      how = "set " + std::to_string(v);
    }
    for (std::size_t i = 0; i < width; ++i) b[at + (big ? width - 1 - i : i)] = static_cast<std::uint8_t>(v >> (8 * i));
    return how + " to the " + std::to_string(8 * width) + "-bit " + (big ? "big" : "little") + "-endian integer at " +
           std::to_string(at);
  }

  // Another number in place of a run of decimal digits.
  std::string edit_decimal(std::vector<std::uint8_t>& b) {
    std::vector<std::pair<std::size_t, std::size_t>> runs;  // [begin, end)
    for (std::size_t i = 0; i < b.size();) {
      if (b[i] < '0' || b[i] > '9') {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < b.size() && b[j] >= '0' && b[j] <= '9') ++j;
      runs.emplace_back(i, j);
      i = j;
    }
    if (runs.empty()) return "nothing (no decimal number)";
    const auto [begin, end] = runs[below(runs.size())];
    const std::string old(b.begin() + static_cast<std::ptrdiff_t>(begin), b.begin() + static_cast<std::ptrdiff_t>(end));
    std::string value;
    switch (below(9)) {
      case 0: value = "0"; break;
      case 1: value = "-1"; break;
      case 2: value = "-" + old; break;
      case 3: value = old.size() < 18 ? std::to_string(std::stoll(old) + 1) : old + "0"; break;
      case 4: value = old.size() < 18 ? std::to_string(std::stoll(old) - 1) : "1"; break;
      case 5: value = "9223372036854775807"; break;
      case 6: value = "-9223372036854775808"; break;
      case 7: value = "18446744073709551616"; break;
      default: value = below(2) ? "1e400" : "1.5"; break;
    }
    // In a safetensors header, keep the header length in step, so that the edit reaches the JSON.
    std::uint64_t header = 0;
    for (std::size_t i = 0; i < 8 && b.size() >= 8; ++i) header |= std::uint64_t{b[i]} << (8 * i);
    const bool in_header = b.size() > 8 && b[8] == '{' && header <= b.size() - 8 && begin >= 8 && end <= 8 + header;
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(begin), b.begin() + static_cast<std::ptrdiff_t>(end));
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(begin), value.begin(), value.end());
    if (in_header) {
      header = header - old.size() + value.size();
      for (std::size_t i = 0; i < 8; ++i) b[i] = static_cast<std::uint8_t>(header >> (8 * i));
    }
    return "replace the number " + old + " at " + std::to_string(begin) + " by " + value +
           (in_header ? " (header length adjusted)" : "");
  }

  std::uint64_t state_;
};

}  // namespace moelab::fuzz
