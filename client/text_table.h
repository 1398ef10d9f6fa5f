// Plain-text tables, CSV lines and number cells for the CLI's output.
//
// TextTable lays out a header and rows in columns separated by two spaces, padded to the
// widest cell (width counted in UTF-8 code points), numbers right-aligned where the column
// says so, no trailing spaces. CsvLine follows RFC 4180: a field is quoted when it holds a
// comma, a double quote, CR or LF (quotes doubled); lines end with "\n".
//
// Value types; not thread-safe for concurrent mutation.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace medprof::client {

enum class Align { kLeft, kRight };

class TextTable {
 public:
  // `align` has one entry per header (missing entries are kLeft).
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> align = {});

  // Short rows are padded with empty cells; extra cells are an error in the caller and are
  // dropped.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // Header line, then one line per row, each ending in "\n".
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of UTF-8 text (code points).
size_t DisplayWidth(absl::string_view text);

// `text` cut to at most `width` code points ("…" marks the cut); width <= 0 = unchanged.
std::string ClipToWidth(const std::string& text, int width);

std::string CsvField(absl::string_view field);

// Cell texts for numbers, one spelling for every command: CsvNumber is the shortest text that
// reads back as the same double (the JSON spelling); Fixed has `digits` decimals; Percent
// prints a 0..1 share as a whole percentage ("42%").
std::string CsvNumber(double v);
std::string Fixed(double v, int digits);
std::string Percent(double share);
std::string CsvLine(const std::vector<std::string>& fields);

}  // namespace medprof::client
