// tasks/cli/claims_command.cpp — see claims_command.h.
#include "tasks/cli/claims_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runner/json_file.h"

namespace moelab {

int run_claims_command(const std::vector<Experiment>& experiments, const std::string& dir, bool check) {
  const std::filesystem::path folder(dir);
  if (!std::filesystem::is_regular_file(folder / "config.json")) {
    std::fprintf(stderr, "moelab claims: %s has no config.json (give a finished run folder)\n", dir.c_str());
    return 2;
  }
  const nlohmann::ordered_json config = read_json_file(folder / "config.json", "the run's record", "give a folder a moelab run wrote");
  const std::string name = config.value("experiment", "");
  const Experiment* experiment = nullptr;
  for (const Experiment& e : experiments)
    if (e.name == name) experiment = &e;
  if (experiment == nullptr || !experiment->claims) {
    std::fprintf(stderr, "moelab claims: %s: the experiment '%s' states no paper claims\n", dir.c_str(), name.c_str());
    return 2;
  }
  ClaimsInput input{folder, config.contains("settings") ? config.at("settings") : nlohmann::ordered_json::object(),
                    config.value("seed", std::uint64_t{0}), config.value("device", std::string("cpu"))};
  const std::vector<Claim> claims = experiment->claims(input);
  if (!check) {
    write_claims_section(folder, claims);
    std::printf("%s", claims_section(claims).c_str());
    std::printf("claims: %s\n", (folder / "summary.md").c_str());
    return 0;
  }
  std::ifstream in(folder / "summary.md", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (in.good() && with_claims_section(text.str(), claims_section(claims)) == text.str()) {
    std::printf("%s: the claims section is current (%zu claims)\n", dir.c_str(), claims.size());
    return 0;
  }
  std::fprintf(stderr, "moelab claims --check: %s/summary.md does not hold the claims its CSVs give; "
               "`moelab claims %s` rewrites the section:\n%s", dir.c_str(), dir.c_str(),
               claims_section(claims).c_str());
  return 1;
}

}  // namespace moelab
