#include "client/text_table.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"

namespace medprof::client {

size_t DisplayWidth(absl::string_view text) {
  size_t n = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;  // not a continuation byte
  }
  return n;
}

std::string ClipToWidth(const std::string& text, int width) {
  if (width <= 0 || DisplayWidth(text) <= static_cast<size_t>(width)) return text;
  // Keep width-1 code points, then the ellipsis.
  size_t kept = 0, i = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (kept == static_cast<size_t>(width - 1)) break;
      ++kept;
    }
  }
  return text.substr(0, i) + "\u2026";
}

TextTable::TextTable(std::vector<std::string> headers, std::vector<Align> align)
    : headers_(std::move(headers)), align_(std::move(align)) {
  align_.resize(headers_.size(), Align::kLeft);
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = DisplayWidth(headers_[c]);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], DisplayWidth(row[c]));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const size_t pad = width[c] - DisplayWidth(cells[c]);
      if (c > 0) text += "  ";
      if (align_[c] == Align::kRight) {
        text.append(pad, ' ');
        text += cells[c];
      } else {
        text += cells[c];
        text.append(pad, ' ');
      }
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text;
    out += '\n';
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  return out;
}

std::string CsvField(absl::string_view field) {
  if (field.find_first_of(",\"\r\n") == absl::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string CsvLine(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += CsvField(fields[i]);
  }
  out += '\n';
  return out;
}

std::string CsvNumber(double v) { return nlohmann::json(v).dump(); }
std::string Fixed(double v, int digits) { return absl::StrFormat("%.*f", digits, v); }
std::string Percent(double share) { return absl::StrFormat("%.0f%%", share * 100.0); }

}  // namespace medprof::client
