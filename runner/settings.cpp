// runner/settings.cpp — see settings.h.
#include "runner/settings.h"

#include <algorithm>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace moelab {

namespace {

const char* kind_name(Settings::Kind kind) {
  switch (kind) {
    case Settings::Kind::Int: return "an integer";
    case Settings::Kind::Real: return "a number";
    case Settings::Kind::Text: return "a word";
    case Settings::Kind::Flag: return "true or false";
    case Settings::Kind::IntList: return "a comma-separated list of integers";
    case Settings::Kind::RealList: return "a comma-separated list of numbers";
  }
  return "?";
}

template <class... Parts>
[[noreturn]] void usage(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw UsageError(message.str());
}

// Text of a number as the user would write it: integers without a decimal point, reals in %g.
std::string number_text(double v, bool integral) {
  std::ostringstream s;
  if (integral)
    s << static_cast<long long>(v);
  else
    s << v;
  return s.str();
}

// Integers are kept as doubles, which hold every integer up to 2^53 exactly; beyond, a value
// would change silently, so it is out of range whatever the key's limits.
constexpr long long kLargestExactInteger = 1LL << 53;

enum class Parsed { Ok, Malformed, TooLarge };

// A whole number or a real, strictly: the whole text must parse and be finite; an integer must
// also fit (TooLarge: beyond 64 bits or beyond 2^53).
Parsed parse_number(const std::string& text, bool integral, double& out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return Parsed::Malformed;
  errno = 0;
  char* end = nullptr;
  if (integral) {
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (*end != '\0') return Parsed::Malformed;
    if (errno == ERANGE || v > kLargestExactInteger || v < -kLargestExactInteger) return Parsed::TooLarge;
    if (errno != 0) return Parsed::Malformed;
    out = static_cast<double>(v);
    return Parsed::Ok;
  }
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return Parsed::Malformed;
  out = v;
  return Parsed::Ok;
}

std::string limits_text(double min, double max, bool integral) {
  const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
  if (has_min && has_max) return "in [" + number_text(min, integral) + ", " + number_text(max, integral) + "]";
  if (has_min) return ">= " + number_text(min, integral);
  if (has_max) return "<= " + number_text(max, integral);
  return "";
}

}  // namespace

void check_plain_text(const std::string& what, const std::string& text) {
  auto hex = [](unsigned char b) {
    const char* digits = "0123456789ABCDEF";
    return std::string("0x") + digits[b >> 4] + digits[b & 15];
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x20 || b == 0x7F) {
      const std::string name = b == '\n' ? "a newline" : b == '\r' ? "a carriage return" : b == '\t' ? "a tab"
                                                                                             : "the control character " + hex(b);
      throw UsageError(what + " holds " + name + " (at byte " + std::to_string(i) +
                       "): job lines (mode=list) and records are one line each, so moelab takes no control "
                       "characters in names and settings; choose a name without them");
    }
    // UTF-8: the length of the sequence from its first byte, then continuation bytes 0x80-0xBF,
    // no overlong forms, no surrogates, nothing above U+10FFFF.
    std::size_t length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool valid = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) valid = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (valid && length > 1) {
      const auto b1 = static_cast<unsigned char>(text[i + 1]);
      valid = !(b < 0xC2) && !(b == 0xE0 && b1 < 0xA0) && !(b == 0xED && b1 >= 0xA0) && !(b == 0xF0 && b1 < 0x90) &&
              !(b > 0xF4 || (b == 0xF4 && b1 >= 0x90));
    }
    if (!valid)
      throw UsageError(what + " is not valid UTF-8 (byte " + hex(b) + " at byte " + std::to_string(i) +
                       "): moelab records names and settings in config.json, which holds UTF-8 text; choose a name "
                       "in UTF-8");
    i += length;
  }
}

void Settings::parse_into(Entry& e, const std::string& value) {
  const bool integral = e.kind == Kind::Int || e.kind == Kind::IntList;
  check_plain_text("setting '" + e.key + "'", value);
  switch (e.kind) {
    case Kind::Text:
      if (!e.choices.empty()) {
        bool ok = false;
        for (const std::string& c : e.choices) ok = ok || c == value;
        if (!ok) {
          std::string all;
          for (const std::string& c : e.choices) all += (all.empty() ? "" : ", ") + c;
          usage("setting '", e.key, "': '", value, "' is not one of ", all);
        }
      } else if (value.empty() && !e.may_be_empty) {
        usage("setting '", e.key, "' must not be empty");
      }
      e.text = value;
      return;
    case Kind::Flag:
      if (value == "true" || value == "1" || value == "yes" || value == "on")
        e.numbers = {1.0}, e.text = "true";
      else if (value == "false" || value == "0" || value == "no" || value == "off")
        e.numbers = {0.0}, e.text = "false";
      else
        usage("setting '", e.key, "': '", value, "' is not true or false");
      return;
    case Kind::Int:
    case Kind::Real:
    case Kind::IntList:
    case Kind::RealList: {
      const bool list = e.kind == Kind::IntList || e.kind == Kind::RealList;
      std::vector<double> numbers;
      std::string text;
      std::stringstream items(value);
      std::string item;
      while (std::getline(items, item, ',')) {
        double v = 0;
        const Parsed parsed = parse_number(item, integral, v);
        if (parsed == Parsed::TooLarge) {
          const std::string limits = limits_text(e.min, e.max, integral);
          usage("setting '", e.key, "': ", item, " is out of range (must be ",
                limits.empty() ? "within +-2^53" : limits, ")");
        }
        if (parsed != Parsed::Ok)
          usage("setting '", e.key, "': '", item.empty() ? value : item, "' is not ", integral ? "an integer" : "a number",
                list ? " (expected " + std::string(kind_name(e.kind)) + ")" : "");
        if (v < e.min || v > e.max)
          usage("setting '", e.key, "': ", item, " is out of range (must be ", limits_text(e.min, e.max, integral), ")");
        // Every list here names jobs or grid axes (seeds, sizes, widths, rates): a value twice would
        // run the same jobs twice and count them twice in the report.
        if (list && std::find(numbers.begin(), numbers.end(), v) != numbers.end())
          usage("setting '", e.key, "': ", item, " is listed twice in '", value, "' (each value once)");
        numbers.push_back(v);
        text += (text.empty() ? "" : ",") + number_text(v, integral);
      }
      if (numbers.empty() || (!list && numbers.size() != 1) || (!value.empty() && value.back() == ','))
        usage("setting '", e.key, "': '", value, "' is not ", kind_name(e.kind));
      e.numbers = std::move(numbers);
      e.text = std::move(text);
      return;
    }
  }
}

void Settings::declare(Entry entry, const std::string& value) {
  for (const Entry& e : entries_)
    if (e.key == entry.key) throw Error("Settings: key '" + entry.key + "' declared twice");
  parse_into(entry, value);  // a bad default is a programming error, reported as a UsageError at once
  entry.fallback = value;
  entries_.push_back(std::move(entry));
}

void Settings::add_int(const std::string& key, std::int64_t fallback, const std::string& help, double min,
                       double max) {
  declare({key, help, Kind::Int, min, max, {}, "", {}, true}, std::to_string(fallback));
}
void Settings::add_real(const std::string& key, double fallback, const std::string& help, double min, double max) {
  declare({key, help, Kind::Real, min, max, {}, "", {}, true}, number_text(fallback, false));
}
void Settings::add_text(const std::string& key, const std::string& fallback, const std::string& help,
                        const std::vector<std::string>& choices, bool may_be_empty) {
  Entry e{key, help, Kind::Text, 0, 0, choices, "", {}, true};
  e.may_be_empty = may_be_empty;
  declare(std::move(e), fallback);
}
void Settings::add_flag(const std::string& key, bool fallback, const std::string& help) {
  declare({key, help, Kind::Flag, 0, 1, {}, "", {}, true}, fallback ? "true" : "false");
}
void Settings::add_int_list(const std::string& key, const std::vector<std::int64_t>& fallback,
                            const std::string& help, double min, double max) {
  std::string text;
  for (std::int64_t v : fallback) text += (text.empty() ? "" : ",") + std::to_string(v);
  declare({key, help, Kind::IntList, min, max, {}, "", {}, true}, text);
}
void Settings::add_real_list(const std::string& key, const std::vector<double>& fallback, const std::string& help,
                             double min, double max) {
  std::string text;
  for (double v : fallback) text += (text.empty() ? "" : ",") + number_text(v, false);
  declare({key, help, Kind::RealList, min, max, {}, "", {}, true}, text);
}

void Settings::set(const std::string& key, const std::string& value) {
  for (Entry& e : entries_)
    if (e.key == key) return parse_into(e, value);
  std::string all;
  for (const Entry& e : entries_) all += (all.empty() ? "" : ", ") + e.key;
  usage("unknown setting '", key, "' (the settings are: ", all, ")");
}

void Settings::set_assignment(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    usage("--set wants key=value, got '", assignment, "'");
  set(assignment.substr(0, eq), assignment.substr(eq + 1));
}

void Settings::apply(const Preset& preset) {
  for (const auto& [key, value] : preset.values) set(key, value);
}

void Settings::may_change_on_resume(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    bool found = false;
    for (Entry& e : entries_)
      if (e.key == key) e.changes_results = false, found = true;
    if (!found) throw Error("Settings::may_change_on_resume: no key '" + key + "' was declared");
  }
}

bool Settings::changes_results(const std::string& key) const {
  for (const Entry& e : entries_)
    if (e.key == key) return e.changes_results;
  throw Error("Settings::changes_results: no key '" + key + "' was declared");
}

bool Settings::has(const std::string& key) const {
  for (const Entry& e : entries_)
    if (e.key == key) return true;
  return false;
}

const Settings::Entry& Settings::find(const std::string& key, Kind kind) const {
  for (const Entry& e : entries_) {
    if (e.key != key) continue;
    if (e.kind != kind) throw Error("Settings: '" + key + "' is not " + kind_name(kind));
    return e;
  }
  throw Error("Settings: no key '" + key + "' was declared");
}

std::int64_t Settings::integer(const std::string& key) const {
  return static_cast<std::int64_t>(find(key, Kind::Int).numbers[0]);
}
double Settings::real(const std::string& key) const { return find(key, Kind::Real).numbers[0]; }
const std::string& Settings::text(const std::string& key) const { return find(key, Kind::Text).text; }
bool Settings::flag(const std::string& key) const { return find(key, Kind::Flag).numbers[0] != 0.0; }
std::vector<std::int64_t> Settings::ints(const std::string& key) const {
  std::vector<std::int64_t> out;
  for (double v : find(key, Kind::IntList).numbers) out.push_back(static_cast<std::int64_t>(v));
  return out;
}
std::vector<double> Settings::reals(const std::string& key) const { return find(key, Kind::RealList).numbers; }

nlohmann::ordered_json Settings::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const Entry& e : entries_) {
    switch (e.kind) {
      case Kind::Int: j[e.key] = static_cast<std::int64_t>(e.numbers[0]); break;
      case Kind::Real: j[e.key] = e.numbers[0]; break;
      case Kind::Text: j[e.key] = e.text; break;
      case Kind::Flag: j[e.key] = e.numbers[0] != 0.0; break;
      case Kind::IntList: {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (double v : e.numbers) a.push_back(static_cast<std::int64_t>(v));
        j[e.key] = a;
        break;
      }
      case Kind::RealList: j[e.key] = e.numbers; break;
    }
  }
  return j;
}

nlohmann::ordered_json Settings::default_json() const {
  Settings defaults = *this;
  for (Entry& e : defaults.entries_) parse_into(e, e.fallback);
  return defaults.to_json();
}

std::string Settings::describe() const {
  std::size_t width = 0;
  for (const Entry& e : entries_) width = std::max(width, e.key.size() + e.text.size() + 3);
  std::ostringstream out;
  for (const Entry& e : entries_) {
    const std::string head = e.key + " = " + e.text;
    out << "  " << head << std::string(width + 2 - head.size(), ' ') << e.help;
    const bool integral = e.kind == Kind::Int || e.kind == Kind::IntList;
    std::string extra;
    if (e.kind == Kind::Text && !e.choices.empty()) {
      for (const std::string& c : e.choices) extra += (extra.empty() ? "one of " : ", ") + c;
    } else if (e.kind != Kind::Text && e.kind != Kind::Flag) {
      extra = limits_text(e.min, e.max, integral);
    }
    if (!extra.empty()) out << " (" << extra << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace moelab
