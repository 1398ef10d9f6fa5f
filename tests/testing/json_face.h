// ExpectTableSpellings: a JSON document medprof prints uses the tables' spellings — snake_case
// keys (no upper-case letter in any key) and no enum value in its proto spelling
// ("RUN_SUCCEEDED", "PHASE_TRAIN", "DEVICE_KIND_CPU": every value name of every medprof.v1
// enum) anywhere among its strings. Header-only, for unit and integration tests.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "medprof/v1/service.pb.h"

namespace medprof::testing {

// Every value name of every enum of medprof.v1 (service.proto imports the others).
inline const std::set<std::string>& ProtoEnumSpellings() {
  static const std::set<std::string> names = [] {
    std::set<std::string> out;
    std::vector<const google::protobuf::FileDescriptor*> files = {v1::Job::descriptor()->file()};
    for (size_t f = 0; f < files.size(); ++f) {
      for (int d = 0; d < files[f]->dependency_count(); ++d) files.push_back(files[f]->dependency(d));
      if (files[f]->package() != "medprof.v1") continue;
      for (int e = 0; e < files[f]->enum_type_count(); ++e) {
        const google::protobuf::EnumDescriptor* type = files[f]->enum_type(e);
        for (int v = 0; v < type->value_count(); ++v) out.insert(type->value(v)->name());
      }
    }
    return out;
  }();
  return names;
}

inline void ExpectTableSpellingsIn(const nlohmann::json& j, const std::string& path, const std::string& what) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      EXPECT_EQ(key.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), std::string::npos)
          << what << ": key " << path << "." << key << " is not snake_case";
      ExpectTableSpellingsIn(value, path + "." + key, what);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) ExpectTableSpellingsIn(j[i], path + "[" + std::to_string(i) + "]", what);
  } else if (j.is_string()) {
    EXPECT_EQ(ProtoEnumSpellings().count(j.get<std::string>()), 0u)
        << what << ": " << path << " is the proto enum name " << j.get<std::string>();
  }
}

// `text`: one JSON document, or JSON lines (--decode).
inline void ExpectTableSpellings(const std::string& text, const std::string& what) {
  ASSERT_FALSE(text.empty()) << what;
  if (nlohmann::json::accept(text)) {
    ExpectTableSpellingsIn(nlohmann::json::parse(text), "$", what);
    return;
  }
  size_t start = 0, line = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string one = text.substr(start, end - start);
    ASSERT_TRUE(nlohmann::json::accept(one)) << what << " line " << line << " is not JSON: " << one;
    ExpectTableSpellingsIn(nlohmann::json::parse(one), "$[line " + std::to_string(line) + "]", what);
    start = end + 1;
    ++line;
  }
}

}  // namespace medprof::testing
