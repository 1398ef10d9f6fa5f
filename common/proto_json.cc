#include "common/proto_json.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace medprof {
namespace {

using Json = nlohmann::ordered_json;
using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;

// The longest prefix ending in '_' that every value name of `type` starts with.
std::string SharedPrefix(const EnumDescriptor* type) {
  std::string prefix = type->value(0)->name();
  for (int i = 1; i < type->value_count(); ++i) {
    const std::string& name = type->value(i)->name();
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
    prefix.resize(n);
  }
  const size_t underscore = prefix.rfind('_');
  return underscore == std::string::npos ? "" : prefix.substr(0, underscore + 1);
}

void SpellEnum(const EnumDescriptor* type, Json* value) {
  if (!value->is_string()) return;  // numbers the enum does not know stay numbers
  if (const auto* v = type->FindValueByName(value->get<std::string>())) *value = EnumSpelling(v);
}

void SpellEnums(const Descriptor* type, Json* object);

// One value of `field` (an element when repeated, a map's value).
void SpellValue(const FieldDescriptor* field, Json* value) {
  if (field->type() == FieldDescriptor::TYPE_ENUM) SpellEnum(field->enum_type(), value);
  if (field->type() == FieldDescriptor::TYPE_MESSAGE) SpellEnums(field->message_type(), value);
}

// Rewrites every enum value under `object`, the JSON of a message of `type`.
void SpellEnums(const Descriptor* type, Json* object) {
  if (!object->is_object()) return;  // well-known types print as strings or arrays
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    auto it = object->find(field->name());
    if (it == object->end()) continue;
    if (field->is_map()) {
      const FieldDescriptor* value_field = field->message_type()->map_value();
      for (auto& [key, value] : it->items()) SpellValue(value_field, &value);
    } else if (field->is_repeated()) {
      for (Json& element : *it) SpellValue(field, &element);
    } else {
      SpellValue(field, &*it);
    }
  }
}

}  // namespace

std::string EnumSpelling(const google::protobuf::EnumValueDescriptor* value) {
  if (value == nullptr) return "unknown";
  if (value->full_name() == "medprof.v1.DEVICE_KIND_UNSPECIFIED") return "auto";  // --device auto
  if (value->number() == 0 && absl::EndsWith(value->name(), "_UNSPECIFIED")) return "unspecified";
  return absl::AsciiStrToLower(value->name().substr(SharedPrefix(value->type()).size()));
}

std::string EnumSpelling(const EnumDescriptor* type, int number) {
  return EnumSpelling(type->FindValueByNumber(number));
}

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message, JsonStyle style) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = style.print_defaults;
  std::string text;
  if (auto s = google::protobuf::util::MessageToJsonString(message, &text, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("JSON of ", message.GetTypeName(), ": ", s.ToString()));
  }
  Json json = Json::parse(text);
  SpellEnums(message.GetDescriptor(), &json);
  return json.dump(style.pretty ? 2 : -1) + "\n";
}

}  // namespace medprof
