// runner/claims.cpp — see claims.h.
#include "runner/claims.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "runner/checked_file.h"
#include "runner/report.h"
#include "runner/statistics.h"

namespace moelab {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Holds: return "holds";
    case Verdict::HoldsWeaker: return "holds weaker";
    case Verdict::Differs: return "differs";
    case Verdict::Contradicts: return "contradicts";
    case Verdict::NotJudged: return "not judged";
  }
  return "not judged";
}

void ClaimCounts::add(double effect, double spread, std::int64_t seeds) {
  if (seeds < kMinSeedsToJudge) {
    ++too_few_seeds;
    return;
  }
  ++cells;
  if (effect > 0) ++paper_direction;
  if (effect > 0 && effect > spread) ++beyond;
  if (effect < 0 && -effect > spread) ++against_beyond;
}

void ClaimCounts::add_paired(double effect, double spread, const std::vector<double>& a,
                             const std::vector<double>& b, std::int64_t seeds) {
  add_cell(effect, std::fabs(effect) > spread || paired_beyond(a, b), seeds);
}

void ClaimCounts::add_cell(double effect, bool beyond_spread, std::int64_t seeds) {
  if (seeds < kMinSeedsToJudge) {
    ++too_few_seeds;
    return;
  }
  ++cells;
  if (effect > 0) ++paper_direction;
  if (effect > 0 && beyond_spread) ++beyond;
  if (effect < 0 && beyond_spread) ++against_beyond;
}

Verdict grade(const ClaimCounts& c, bool full_strength) {
  if (c.cells == 0) return Verdict::NotJudged;
  const std::int64_t against = c.cells - c.paper_direction;
  if (2 * against > c.cells && c.against_beyond > 0) return Verdict::Contradicts;
  if (c.beyond == c.cells && full_strength) return Verdict::Holds;
  if (2 * c.paper_direction > c.cells) return Verdict::HoldsWeaker;
  return Verdict::Differs;
}

std::string counts_text(const ClaimCounts& c, const std::string& spread) {
  std::ostringstream s;
  if (c.cells == 0 && c.too_few_seeds > 0) {
    s << "no cell with " << kMinSeedsToJudge << " seeds or more (" << c.too_few_seeds
      << (c.too_few_seeds == 1 ? " cell" : " cells") << " with fewer): one seed has no spread to judge against";
    return s.str();
  }
  s << c.paper_direction << " of " << c.cells << (c.cells == 1 ? " cell" : " cells") << " in the paper's direction, "
    << c.beyond << " beyond " << spread;
  if (c.against_beyond > 0) s << " (" << c.against_beyond << " against it beyond the spread)";
  if (c.too_few_seeds > 0)
    s << "; " << c.too_few_seeds << (c.too_few_seeds == 1 ? " cell" : " cells") << " with fewer than "
      << kMinSeedsToJudge << " seeds not judged";
  return s.str();
}

bool paired_beyond(const std::vector<double>& a, const std::vector<double>& b) {
  return !a.empty() && a.size() == b.size() && a.size() <= 24 && paired_sign_flip_p(a, b) < 0.05;
}

std::string sign_flip_text(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || a.size() != b.size() || a.size() > 24) return "no paired seeds";
  const auto n = static_cast<std::int64_t>(a.size());
  char text[160];
  std::snprintf(text, sizeof text, "sign-flip p = %.3g over %lld paired seed%s (the smallest possible: %.3g)",
                paired_sign_flip_p(a, b), static_cast<long long>(n), n == 1 ? "" : "s", smallest_sign_flip_p(n));
  return text;
}

void judge_rank_claim(Claim& c, const std::vector<RankSample>& seeds, const std::string& first_name,
                      const std::string& second_name, std::size_t models) {
  judge_rank_cells(c, {RankCell{"", seeds}}, first_name, second_name, models, "");
}

void judge_rank_cells(Claim& c, const std::vector<RankCell>& cells, const std::string& first_name,
                      const std::string& second_name, std::size_t models, const std::string& cell_kind) {
  ClaimCounts counts;
  std::size_t same_order = 0, judged_cells = 0;  // same_order: seeds whose models both quantities rank alike
  std::string ours;
  for (const RankCell& cell : cells) {
    std::vector<double> differences, first_rho, second_rho;
    for (const RankSample& s : cell.seeds) {
      const double a = rank_correlation(s.quantity, s.first), b = rank_correlation(s.quantity, s.second);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      if (rank_correlation(s.first, s.second) >= 1 - 1e-12) {
        ++same_order;
        continue;
      }
      first_rho.push_back(a), second_rho.push_back(b), differences.push_back(a - b);
    }
    if (differences.empty()) continue;
    ++judged_cells;
    const MeanStd d = mean_std(differences), a = mean_std(first_rho), b = mean_std(second_rho);
    counts.add(d.mean, d.std, d.count);
    const std::string seeds = std::to_string(differences.size()) + (differences.size() == 1 ? " seed" : " seeds");
    ours += (ours.empty() ? "" : "; ") + (cell.label.empty() ? std::string() : cell.label + ": ") +
            "Spearman's rho with " + first_name + " " + format_number(a.mean, "%.2f") + " ± " +
            format_number(a.std, "%.2f") + ", with " + second_name + " " + format_number(b.mean, "%.2f") + " ± " +
            format_number(b.std, "%.2f") +
            (cells.size() == 1 ? " (per seed over " + std::to_string(models) + " models, " + seeds + ")"
                               : " (" + seeds + ")");
  }
  if (judged_cells == 0 && same_order > 0) {
    c.ours = "not separable on this grid: its models are in the same order by " + first_name + " as by " +
             second_name + " (" + std::to_string(models) + " models), so no result could tell the two apart";
  } else if (judged_cells == 0) {
    c.ours = "too few models to rank";
  } else {
    c.ours = cells.size() == 1 ? ours : ours + " (per seed over " + std::to_string(models) + " models)";
  }
  c.verdict = grade(counts);
  c.rule = "rho(" + first_name + ") - rho(" + second_name + ") per seed, its mean against its std over seeds" +
           (cells.size() == 1 ? std::string() : ", one cell per " + cell_kind + " (" + std::to_string(cells.size()) + ")") +
           ": " + counts_text(counts) +
           (same_order > 0 ? "; " + std::to_string(same_order) + " seed" + (same_order == 1 ? "" : "s") +
                                 " left out: the models in the same order by both"
                           : std::string()) +
           ".";
}

namespace {

// A table cell: no line breaks, no unescaped '|'.
std::string table_cell(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\n') out += ' ';
    else if (ch == '|') out += "\\|";
    else out += ch;
  }
  return out;
}

}  // namespace

std::string claims_section(const std::vector<Claim>& claims) {
  std::ostringstream s;
  s << "## Claims\n\n"
    << "One row per paper claim, computed from this folder's CSV files by `moelab claims` (runner/claims.h "
       "gives the scale: holds / holds weaker / differs / contradicts).\n\n"
    << "| claim | paper | ours | independent reference | verdict |\n|---|---|---|---|---|\n";
  for (const Claim& c : claims)
    s << "| " << table_cell(c.name + ": " + c.statement) << " | " << table_cell(c.paper) << " | " << table_cell(c.ours)
      << " | " << table_cell(c.reference.empty() ? "none recorded" : c.reference) << " | **" << verdict_name(c.verdict)
      << "** |\n";
  s << "\n";
  // Each rule line repeats its row's first cell: several rows share a figure's name (a claim and
  // its second row, one per metric), and "Fig. 1: ..." alone did not say which row a line judged.
  for (const Claim& c : claims) s << "- " << c.name << ": " << c.statement << " — " << c.rule << "\n";
  s << "\n";
  return s.str();
}

std::string with_claims_section(const std::string& summary, const std::string& section) {
  // Headings start a line: at 0 or after '\n'.
  auto heading_at = [&](std::size_t from, const std::string& prefix) {
    for (std::size_t pos = summary.find(prefix, from); pos != std::string::npos; pos = summary.find(prefix, pos + 1))
      if (pos == 0 || summary[pos - 1] == '\n') return pos;
    return std::string::npos;
  };
  const std::size_t own = heading_at(0, "## Claims\n");
  if (own != std::string::npos) {
    const std::size_t next = heading_at(own + 1, "## ");
    return summary.substr(0, own) + section + (next == std::string::npos ? "" : summary.substr(next));
  }
  const std::size_t first = heading_at(0, "## ");
  if (first == std::string::npos) return summary + (summary.empty() || summary.back() == '\n' ? "\n" : "\n\n") + section;
  return summary.substr(0, first) + section + summary.substr(first);
}

void write_claims_section(const std::filesystem::path& dir, const std::vector<Claim>& claims) {
  const std::filesystem::path path = dir / "summary.md";
  std::ifstream in(path, std::ios::binary);
  MOELAB_CHECK(in.good(), "claims", "no summary.md in ", dir.string(), " (the report writes it first)");
  std::stringstream text;
  text << in.rdbuf();
  write_file_atomic(path, with_claims_section(text.str(), claims_section(claims)));
}

}  // namespace moelab
