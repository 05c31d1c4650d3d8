// tasks/pretrain/knowledge.h — the knowledge half of the synthetic pre-training corpus (Mixture of
// Parrots, Section 5, at CPU scale): synthetic people, their biographies, and questions about them.
//
// The data follow the "bioS multi5+permute" set of Allen-Zhu and Li, Physics of Language Models
// Part 3.1 (arXiv 2309.14316). A person is a unique full name (a first name and a last name from
// fixed lists of 100 each) and six attributes, each drawn uniformly from a fixed vocabulary:
//   birth date     "<Month> <day>, <year>", day 1..28, year 1950..2005   e.g. "March 7, 1984"
//   birth city     one of 48 cities                                       e.g. "Kyoto"
//   university     one of 32 universities                                 e.g. "Rice University"
//   major          one of 32 fields                                       e.g. "Marine Biology"
//   employer       one of 32 (fictional) companies                        e.g. "Bluefin Robotics"
//   employer city  the city of the employer's headquarters (as in bioS: fixed by the employer)
// Names are unique (drawn by rejection); at most half of the 10,000 names are used (max_people()).
//
// A biography is six sentences, one per attribute, each written with one of the attribute's
// kBioTemplatesPerSentence templates (chosen uniformly among the first `templates` of them), the
// six in a random order, joined by single spaces. Every sentence names the person in full, so any
// order reads well ("permute" in bioS). For example:
//   "Anya Forger works for Bluefin Robotics. Anya Forger was born in Kyoto. Anya Forger majored
//    in Marine Biology. Anya Forger's office is in Boston. Anya Forger graduated from Rice
//    University. The birth of Anya Forger took place on March 7, 1984."
// A person gets several biographies, sampled independently and all different (make_bios).
//
// A question-answer pair asks for one attribute in one fixed form per attribute; the prompt is the
// question up to and including its '?' and one space, the answer the attribute's text:
//   "What is the birth date of Anya Forger? "      "March 7, 1984"
//   "What is the birth city of Anya Forger? "      "Kyoto"
//   "Which university did Anya Forger study at? "  "Rice University"
//   "What major did Anya Forger study? "           "Marine Biology"
//   "Which company did Anya Forger work for? "     "Bluefin Robotics"
//   "Where did Anya Forger work? "                 "Boston"
// As a training document a pair is prompt + answer ("What is the birth city of Anya Forger? Kyoto").
// Which people's pairs are trained and which are held out is the corpus's business (corpus.h).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/random.h"

namespace moelab::pretrain {

enum class Attribute { BirthDate, BirthCity, University, Major, Employer, EmployerCity };
constexpr int kAttributes = 6;
// All six, in the order above (the order of Person::values and of a person's questions).
constexpr std::array<Attribute, kAttributes> kAllAttributes = {Attribute::BirthDate, Attribute::BirthCity,
                                                               Attribute::University, Attribute::Major,
                                                               Attribute::Employer,  Attribute::EmployerCity};

// "birth date", "birth city", "university", "major", "employer", "employer city" (for reports).
std::string attribute_name(Attribute a);

// The information in one person's value of `a`, in bits: log2 of the number of values it is drawn
// from uniformly. Birth date log2(12 x 28 x 56) = 14.20, birth city log2(48) = 5.58, university,
// major and employer log2(32) = 5 each, employer city 0 (the employer fixes it). A person's six
// facts hold person_bits() = 34.78 bits; a model that answers a fraction f_a of attribute a's
// questions holds about f_a x attribute_bits(a) bits per person (Allen-Zhu and Li, Physics of
// Language Models 3.3, count knowledge this way, and find ~2 bits per parameter at most).
double attribute_bits(Attribute a);
double person_bits();

// Built-in biography templates per attribute sentence ("{name}" and "{value}" are replaced).
constexpr std::int64_t kBioTemplatesPerSentence = 4;

// The kBioTemplatesPerSentence templates of one attribute's sentence, e.g. for BirthCity
// {"{name} was born in {value}.", "{name} spent early years in {value}.", ...}.
const std::vector<std::string>& bio_templates(Attribute a);

struct Person {
  std::string first_name;  // "Anya"
  std::string last_name;   // "Forger"
  std::array<std::string, kAttributes> values;  // indexed by Attribute, e.g. values[1] = "Kyoto"

  std::string full_name() const { return first_name + " " + last_name; }
  const std::string& value(Attribute a) const { return values[static_cast<std::size_t>(a)]; }
};

// 100 first names x 100 last names = 10,000 full names; a corpus may use half of them.
std::int64_t name_space();
std::int64_t max_people();

// `count` people (1 <= count <= max_people(), else moelab::Error) with unique full names: each name
// drawn as (first, last) uniformly and redrawn while taken, then the six attributes in the order
// above. Same generator state => the same people.
std::vector<Person> make_people(std::int64_t count, Generator& gen);

// One biography of `person`: a template per attribute uniformly among the first `templates`
// (1..kBioTemplatesPerSentence, else moelab::Error), the six sentences in a uniformly random order.
std::string make_bio(const Person& person, std::int64_t templates, Generator& gen);

// `count` different biographies of `person` (make_bio, redrawn while equal to one already drawn
// or to one in `exclude`). 1 <= count <= kMaxBiosPerPerson, else moelab::Error: even with one
// template per sentence a person has 720 distinct bios (the orders of six sentences), so fresh
// ones stay easy to find; moelab::Error all the same if 100,000 draws in a row bring nothing new.
constexpr std::int64_t kMaxBiosPerPerson = 100;
std::vector<std::string> make_bios(const Person& person, std::int64_t count, std::int64_t templates, Generator& gen,
                                   const std::set<std::string>* exclude = nullptr);

struct QaPair {
  std::int64_t person = 0;  // index into the corpus's people
  Attribute attribute = Attribute::BirthDate;
  std::string prompt;  // "What is the birth city of Anya Forger? " (the question, '?', one space)
  std::string answer;  // "Kyoto" (the attribute's text)

  std::string question() const { return prompt.substr(0, prompt.size() - 1); }  // without the space
  std::string text() const { return prompt + answer; }  // the training document
};

// The question about one attribute of people[index] (index in range, else moelab::Error).
QaPair make_qa(const std::vector<Person>& people, std::int64_t index, Attribute a);

}  // namespace moelab::pretrain
