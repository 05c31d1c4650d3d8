// tasks/pretrain/knowledge.cpp — see knowledge.h.
#include "tasks/pretrain/knowledge.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"

namespace moelab::pretrain {

namespace {

// The fixed vocabularies. Changing any list changes every corpus drawn from it.
const std::vector<std::string> kFirstNames = {
    "Anya",   "Boris",   "Carla",  "Dmitri", "Elena",  "Farid",  "Greta",   "Hiro",   "Ingrid", "Jonas",
    "Kenji",  "Lucia",   "Marco",  "Nadia",  "Oscar",  "Priya",  "Quentin", "Rosa",   "Samir",  "Tamsin",
    "Ulrich", "Vera",    "Wanda",  "Xavier", "Yara",   "Zoltan", "Amelia",  "Bruno",  "Chiara", "Diego",
    "Esther", "Felix",   "Gloria", "Hugo",   "Irene",  "Julian", "Keiko",   "Leon",   "Mirela", "Niko",
    "Olga",   "Pablo",   "Rania",  "Stefan", "Tessa",  "Umar",   "Violet",  "Walter", "Ximena", "Yusuf",
    "Zelda",  "Aldo",    "Bianca", "Cyrus",  "Daria",  "Emil",   "Fiona",   "Goran",  "Hana",   "Ivo",
    "Jana",   "Kofi",    "Lena",   "Mateo",  "Nora",   "Otto",   "Paloma",  "Rafael", "Sofia",  "Tobias",
    "Una",    "Viktor",  "Willa",  "Yosef",  "Zara",   "Anders", "Beatriz", "Cosmo",  "Delia",  "Enzo",
    "Flora",  "Gideon",  "Helga",  "Isaac",  "Judith", "Kasper", "Lidia",   "Milan",  "Noemi",  "Orin",
    "Petra",  "Rolf",    "Selma",  "Teodor", "Ursula", "Vikram", "Wilma",   "Yuki",   "Zeno",   "Agnes"};
const std::vector<std::string> kLastNames = {
    "Forger",   "Almeida",  "Brennan",  "Castillo", "Dalton",   "Eriksen",  "Fontaine", "Galloway", "Hartmann",
    "Ibarra",   "Jansen",   "Kowalski", "Lindqvist", "Moreau",  "Nakamura", "Okafor",   "Petrov",   "Quinlan",
    "Rossi",    "Sandoval", "Takahashi", "Underwood", "Valente", "Whitaker", "Xiong",   "Yamada",   "Zimmer",
    "Abbott",   "Bergstrom", "Carvalho", "Delgado", "Engel",    "Fischer",  "Gallagher", "Holloway", "Iverson",
    "Jovanovic", "Kaplan",  "Larsen",   "Mancini",  "Novak",    "Olsen",    "Pereira",  "Ramirez",  "Schneider",
    "Thornton", "Ueda",     "Vasquez",  "Wagner",   "Yilmaz",   "Zeller",   "Asante",   "Bauer",    "Cortez",
    "Dubois",   "Eastwood", "Ferreira", "Grimaldi", "Haddad",   "Ionescu",  "Jaeger",   "Kruger",   "Lombardi",
    "Mendoza",  "Nilsen",   "Oliveira", "Pavlov",   "Reyes",    "Salazar",  "Tanaka",   "Ulloa",    "Vogel",
    "Winslow",  "Yoshida",  "Zamora",   "Ashford",  "Blackwood", "Crane",   "Dimitrov", "Everett",  "Falk",
    "Garrison", "Hayward",  "Ishikawa", "Kessler",  "Lowell",   "Marsh",    "Nordin",   "Orlov",    "Prescott",
    "Rasmussen", "Sorensen", "Tremblay", "Vance",   "Wexler",   "Hale",     "Lindgren", "Mercer",   "Pike",
    "Strand"};
const std::vector<std::string> kMonths = {"January", "February", "March",     "April",   "May",      "June",
                                          "July",    "August",   "September", "October", "November", "December"};
constexpr std::uint32_t kDays = 28, kFirstYear = 1950, kYears = 56;  // day 1..28, year 1950..2005
const std::vector<std::string> kCities = {
    "Kyoto",     "Boston",     "Lisbon",    "Nairobi",   "Oslo",       "Denver",    "Seoul",     "Lima",
    "Dublin",    "Perth",      "Toronto",   "Madrid",    "Cairo",      "Austin",    "Vienna",    "Manila",
    "Helsinki",  "Chicago",    "Krakow",    "Santiago",  "Osaka",      "Seattle",   "Prague",    "Accra",
    "Montreal",  "Porto",      "Phoenix",   "Geneva",    "Bogota",     "Hamburg",   "Atlanta",   "Auckland",
    "Budapest",  "Calgary",    "Marseille", "Nashville", "Reykjavik",  "Shanghai",  "Tampa",     "Valencia",
    "Warsaw",    "Zurich",     "Edinburgh", "Houston",   "Istanbul",   "Melbourne", "Portland",  "Stockholm"};
const std::vector<std::string> kUniversities = {
    "Rice University",         "Duke University",           "Brown University",          "Cornell University",
    "Tufts University",        "Emory University",          "Purdue University",         "Yale University",
    "Stanford University",     "Princeton University",      "Vanderbilt University",     "Georgetown University",
    "University of Michigan",  "University of Toronto",     "University of Oslo",        "University of Vienna",
    "University of Chicago",   "University of Edinburgh",   "University of Melbourne",   "University of Zurich",
    "University of Kyoto",     "University of Porto",       "University of Helsinki",    "University of Warsaw",
    "Boston College",          "Dartmouth College",         "Imperial College",          "Kings College",
    "Carnegie Mellon",         "Northwestern University",   "Johns Hopkins University",  "Trinity College"};
const std::vector<std::string> kMajors = {
    "Marine Biology",     "Computer Science",  "Economics",          "Philosophy",      "Civil Engineering",
    "Chemistry",          "Art History",       "Linguistics",        "Mathematics",     "Astronomy",
    "Political Science",  "Nursing",           "Architecture",       "Geology",         "Music Theory",
    "Psychology",         "Statistics",        "Mechanical Engineering", "Sociology",   "Journalism",
    "Anthropology",       "Biochemistry",      "Accounting",         "Physics",         "Classics",
    "Film Studies",       "Neuroscience",      "Urban Planning",     "Agriculture",     "Graphic Design",
    "Oceanography",       "Public Health"};
// Fictional companies and the city of their headquarters (an employee works in that city).
const std::vector<std::pair<std::string, std::string>> kEmployers = {
    {"Bluefin Robotics", "Boston"},     {"Northwind Traders", "Seattle"},   {"Cedar Analytics", "Austin"},
    {"Harbor Freight Lines", "Houston"}, {"Lumen Optics", "Rochester"},     {"Quartz Software", "Denver"},
    {"Redwood Biotech", "San Diego"},   {"Silverline Foods", "Chicago"},    {"Granite Insurance", "Hartford"},
    {"Maple Health", "Toronto"},        {"Aurora Energy", "Oslo"},          {"Kestrel Airlines", "Atlanta"},
    {"Sakura Motors", "Osaka"},         {"Tidewater Shipping", "Hamburg"},  {"Juniper Textiles", "Porto"},
    {"Pinnacle Bank", "Zurich"},        {"Orchid Pharma", "Geneva"},        {"Copper Kettle Media", "Dublin"},
    {"Falcon Logistics", "Phoenix"},    {"Summit Outdoor", "Calgary"},      {"Nimbus Cloud", "Portland"},
    {"Atlas Construction", "Madrid"},   {"Beacon Publishing", "Edinburgh"}, {"Coral Reef Hotels", "Tampa"},
    {"Evergreen Paper", "Helsinki"},    {"Ironbridge Steel", "Krakow"},     {"Lotus Electronics", "Seoul"},
    {"Meridian Games", "Montreal"},     {"Opal Jewelers", "Melbourne"},     {"Polaris Labs", "Stockholm"},
    {"Saffron Kitchens", "Istanbul"},   {"Willow Furniture", "Nashville"}};

const std::vector<std::vector<std::string>> kBioTemplates = {
    // BirthDate
    {"{name} was born on {value}.", "{name} came into this world on {value}.", "{name}'s life began on {value}.",
     "The birth of {name} took place on {value}."},
    // BirthCity
    {"{name} was born in {value}.", "{name} spent early years in {value}.", "{name} is a native of {value}.",
     "{name}'s hometown is {value}."},
    // University
    {"{name} studied at {value}.", "{name} graduated from {value}.", "{name} received an education at {value}.",
     "{name} attended {value}."},
    // Major
    {"{name} majored in {value}.", "{name} completed a degree in {value}.", "{name} focused on {value} in college.",
     "{name} chose {value} as a field of study."},
    // Employer
    {"{name} works for {value}.", "{name} is employed by {value}.", "{name} has a job at {value}.",
     "{name} earns a living at {value}."},
    // EmployerCity
    {"{name} works in {value}.", "{name} is based in {value}.", "{name}'s office is in {value}.",
     "{name} commutes to work in {value}."}};

// One question per attribute; "{name}" is replaced. The prompt is this, then one space.
const std::vector<std::string> kQuestions = {
    "What is the birth date of {name}?", "What is the birth city of {name}?",
    "Which university did {name} study at?", "What major did {name} study?",
    "Which company did {name} work for?", "Where did {name} work?"};

std::size_t index_of(Attribute a) { return static_cast<std::size_t>(a); }

template <class T>
const T& pick(const std::vector<T>& list, Generator& gen) {
  return list[gen.next_below(static_cast<std::uint32_t>(list.size()))];
}

// Replaces every "{key}" in text by value.
std::string fill(std::string text, const std::string& key, const std::string& value) {
  const std::string marker = "{" + key + "}";
  for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + value.size()))
    text.replace(at, marker.size(), value);
  return text;
}

}  // namespace

std::string attribute_name(Attribute a) {
  switch (a) {
    case Attribute::BirthDate: return "birth date";
    case Attribute::BirthCity: return "birth city";
    case Attribute::University: return "university";
    case Attribute::Major: return "major";
    case Attribute::Employer: return "employer";
    case Attribute::EmployerCity: return "employer city";
  }
  fail("pretrain::attribute_name", "unknown attribute ", static_cast<int>(a));
}

double attribute_bits(Attribute a) {
  switch (a) {
    case Attribute::BirthDate: return std::log2(static_cast<double>(kMonths.size() * kDays * kYears));
    case Attribute::BirthCity: return std::log2(static_cast<double>(kCities.size()));
    case Attribute::University: return std::log2(static_cast<double>(kUniversities.size()));
    case Attribute::Major: return std::log2(static_cast<double>(kMajors.size()));
    case Attribute::Employer: return std::log2(static_cast<double>(kEmployers.size()));
    case Attribute::EmployerCity: return 0.0;  // the employer's headquarters
  }
  fail("pretrain::attribute_bits", "unknown attribute ", static_cast<int>(a));
}

double person_bits() {
  double bits = 0;
  for (Attribute a : kAllAttributes) bits += attribute_bits(a);
  return bits;
}

const std::vector<std::string>& bio_templates(Attribute a) { return kBioTemplates.at(index_of(a)); }

std::int64_t name_space() { return static_cast<std::int64_t>(kFirstNames.size() * kLastNames.size()); }
std::int64_t max_people() { return name_space() / 2; }

std::vector<Person> make_people(std::int64_t count, Generator& gen) {
  MOELAB_CHECK(count >= 1 && count <= max_people(), "pretrain::make_people", "count must be in [1, ", max_people(),
               "] (half of the ", name_space(), " full names), got ", count);
  std::vector<bool> taken(static_cast<std::size_t>(name_space()), false);
  std::vector<Person> people;
  people.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint32_t first = 0, last = 0;
    do {
      first = gen.next_below(static_cast<std::uint32_t>(kFirstNames.size()));
      last = gen.next_below(static_cast<std::uint32_t>(kLastNames.size()));
    } while (taken[first * kLastNames.size() + last]);
    taken[first * kLastNames.size() + last] = true;
    Person p;
    p.first_name = kFirstNames[first];
    p.last_name = kLastNames[last];
    const std::string& month = pick(kMonths, gen);
    const std::uint32_t day = 1 + gen.next_below(kDays), year = kFirstYear + gen.next_below(kYears);
    p.values[index_of(Attribute::BirthDate)] = month + " " + std::to_string(day) + ", " + std::to_string(year);
    p.values[index_of(Attribute::BirthCity)] = pick(kCities, gen);
    p.values[index_of(Attribute::University)] = pick(kUniversities, gen);
    p.values[index_of(Attribute::Major)] = pick(kMajors, gen);
    const auto& [employer, city] = pick(kEmployers, gen);
    p.values[index_of(Attribute::Employer)] = employer;
    p.values[index_of(Attribute::EmployerCity)] = city;
    people.push_back(std::move(p));
  }
  return people;
}

std::string make_bio(const Person& person, std::int64_t templates, Generator& gen) {
  MOELAB_CHECK(templates >= 1 && templates <= kBioTemplatesPerSentence, "pretrain::make_bio",
               "templates must be in [1, ", kBioTemplatesPerSentence, "], got ", templates);
  // The order of the six sentences: Fisher-Yates from the identity, then a template per sentence.
  std::array<Attribute, kAttributes> order = kAllAttributes;
  for (std::size_t i = order.size() - 1; i > 0; --i)
    std::swap(order[i], order[gen.next_below(static_cast<std::uint32_t>(i + 1))]);
  const std::string name = person.full_name();
  std::string bio;
  for (Attribute a : order) {
    const std::string& form = bio_templates(a)[gen.next_below(static_cast<std::uint32_t>(templates))];
    if (!bio.empty()) bio += ' ';
    bio += fill(fill(form, "name", name), "value", person.value(a));
  }
  return bio;
}

std::vector<std::string> make_bios(const Person& person, std::int64_t count, std::int64_t templates, Generator& gen,
                                   const std::set<std::string>* exclude) {
  MOELAB_CHECK(count >= 1 && count <= kMaxBiosPerPerson, "pretrain::make_bios", "count must be in [1, ",
               kMaxBiosPerPerson, "], got ", count);
  constexpr int kMaxFailedDraws = 100000;
  std::vector<std::string> bios;
  bios.reserve(static_cast<std::size_t>(count));
  for (int failed = 0; static_cast<std::int64_t>(bios.size()) < count;) {
    std::string bio = make_bio(person, templates, gen);
    const bool fresh = std::find(bios.begin(), bios.end(), bio) == bios.end() && !(exclude && exclude->count(bio));
    if (fresh) {
      bios.push_back(std::move(bio));
      failed = 0;
    } else if (++failed == kMaxFailedDraws) {
      fail("pretrain::make_bios", "no new biography of ", person.full_name(), " in ", kMaxFailedDraws,
           " draws (", bios.size(), " of ", count, " found)");
    }
  }
  return bios;
}

QaPair make_qa(const std::vector<Person>& people, std::int64_t index, Attribute a) {
  MOELAB_CHECK(index >= 0 && index < static_cast<std::int64_t>(people.size()), "pretrain::make_qa", "person ", index,
               " is outside the ", people.size(), " people");
  const Person& p = people[static_cast<std::size_t>(index)];
  QaPair qa;
  qa.person = index;
  qa.attribute = a;
  qa.prompt = fill(kQuestions[index_of(a)], "name", p.full_name()) + " ";
  qa.answer = p.value(a);
  return qa;
}

}  // namespace moelab::pretrain
