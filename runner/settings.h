// runner/settings.h — an experiment's settings: declared keys, presets, `--set key=value`.
//
// Every experiment declares its settings once: a key, a kind (integer, real, text, flag, or a
// comma-separated list of integers or reals), a default, limits and a help line. A preset is a
// named table of overrides ("cpu", "paper", "demo"); the command line's `--set key=value` overrides
// the preset. Every value is checked when it is set, so an unknown key, a malformed number or a
// value out of range is reported at once, naming the key, the value and what was expected (a
// UsageError: the command line exits with status 2 before any work starts).
//
//   Settings s;
//   s.add_int("steps", 1200, "optimizer steps per training run", 1);
//   s.add_int_list("book_sizes", {250, 500, 1000}, "phone-book sizes to sweep", 1);
//   s.add_text("schedule", "warmup-linear", "learning-rate schedule", {"warmup-linear", "constant"});
//   s.apply(preset);                 // Preset{"cpu", "...", {{"steps", "600"}}}
//   s.set("steps", "300");           // from --set steps=300
//   s.integer("steps") -> 300;  s.ints("book_sizes") -> {250, 500, 1000};  s.to_json() -> {...}
//
// The order of declaration is the order of --help and of the saved configuration.
//
// Resuming a run in its folder (runner/run_start.h) needs the settings that change results
// to be the same as the folder's config.json; every key counts as one unless the experiment says
// otherwise: s.may_change_on_resume({"mode", "book_sizes"}) for keys that only choose which jobs
// or which part of the run to do (a sweep's list of sizes, a mode), never what a job gives.
// A key added later is missing from older folders' config.json; the resume check then takes its
// default (default_json()), so a new key's default must be what the code did before the key
// existed (e.g. router = topk): old folders resume, unless the new key is set to something else.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace moelab {

// A problem with what the user asked for (an option, a value, a combination): exit status 2
// (tasks/cli/moelab_main.cpp catches it first; any other moelab::Error exits with status 1).
struct UsageError : Error {
  using Error::Error;
};

// UsageError naming `what` ("--out", "setting 'data_dir'") unless `text` is valid UTF-8 without
// control characters: every value is recorded in config.json (UTF-8 text; an invalid byte once
// surfaced as the JSON library's "type_error.316" after the folder was made) and every mode=list
// job line is one line (a newline in --out split a line, and a job runner ran the rest as a
// command). Settings::set checks every value with it.
void check_plain_text(const std::string& what, const std::string& text);

struct Preset {
  std::string name;
  std::string description;
  std::vector<std::pair<std::string, std::string>> values;  // key, value as it would be written after --set
};

class Settings {
 public:
  enum class Kind { Int, Real, Text, Flag, IntList, RealList };

  static constexpr double kNoLimit = std::numeric_limits<double>::infinity();

  void add_int(const std::string& key, std::int64_t fallback, const std::string& help, double min = -kNoLimit,
               double max = kNoLimit);
  void add_real(const std::string& key, double fallback, const std::string& help, double min = -kNoLimit,
                double max = kNoLimit);
  // Without choices a text must not be empty, unless may_be_empty (e.g. an options list, "" = none).
  void add_text(const std::string& key, const std::string& fallback, const std::string& help,
                const std::vector<std::string>& choices = {}, bool may_be_empty = false);
  void add_flag(const std::string& key, bool fallback, const std::string& help);
  void add_int_list(const std::string& key, const std::vector<std::int64_t>& fallback, const std::string& help,
                    double min = -kNoLimit, double max = kNoLimit);
  void add_real_list(const std::string& key, const std::vector<double>& fallback, const std::string& help,
                     double min = -kNoLimit, double max = kNoLimit);

  // Sets a declared key from its text; throws UsageError (unknown key, bad value, out of range).
  void set(const std::string& key, const std::string& value);
  // "key=value" (from --set); throws UsageError when there is no '='.
  void set_assignment(const std::string& assignment);
  // Every value of the preset, in order.
  void apply(const Preset& preset);

  // Declared keys that a resumed run may change (see above); moelab::Error for an unknown key.
  void may_change_on_resume(const std::vector<std::string>& keys);
  // False for the keys given to may_change_on_resume; moelab::Error for an unknown key.
  bool changes_results(const std::string& key) const;

  bool has(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  bool flag(const std::string& key) const;
  std::vector<std::int64_t> ints(const std::string& key) const;
  std::vector<double> reals(const std::string& key) const;

  // {key: value} with numbers as numbers and lists as arrays, in declaration order of keys.
  nlohmann::ordered_json to_json() const;
  // The same for every key's declared default (before any preset or --set).
  nlohmann::ordered_json default_json() const;
  // One line per key: "  key = default    help [limits]" (for --help).
  std::string describe() const;

 private:
  struct Entry {
    std::string key, help;
    Kind kind;
    double min, max;
    std::vector<std::string> choices;
    std::string text;              // the value as text (normalised)
    std::vector<double> numbers;   // Int, Real, Flag (0/1) and the lists, parsed
    bool changes_results = true;   // false: a resumed run may change it
    bool may_be_empty = false;     // Text without choices: "" is a value
    std::string fallback = {};     // the declared default, as given
  };
  const Entry& find(const std::string& key, Kind kind) const;
  void declare(Entry entry, const std::string& value);
  static void parse_into(Entry& entry, const std::string& value);

  std::vector<Entry> entries_;
};

}  // namespace moelab
