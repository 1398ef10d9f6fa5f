#include "client/text_table.h"

#include "gtest/gtest.h"

namespace medprof::client {
namespace {

TEST(TextTable, PadsColumnsAndRightAlignsNumbers) {
  TextTable t({"NAME", "N", "NOTE"}, {Align::kLeft, Align::kRight, Align::kLeft});
  t.AddRow({"baseline", "1", "x"});
  t.AddRow({"opt1", "120", ""});
  EXPECT_EQ(t.Render(),
            "NAME        N  NOTE\n"
            "baseline    1  x\n"
            "opt1      120\n");  // no trailing spaces
  EXPECT_EQ(t.rows(), 2u);
}

TEST(TextTable, ShortRowsArePaddedAndWidthCountsCodePoints) {
  TextTable t({"A", "B"});
  t.AddRow({"\u00e9t\u00e9"});  // 3 code points, 5 bytes
  t.AddRow({"abcd", "z"});
  EXPECT_EQ(t.Render(),
            "A     B\n"
            "\u00e9t\u00e9\n"
            "abcd  z\n");
}

TEST(TextTable, EmptyTableIsTheHeader) {
  TextTable t({"STUDY", "STATE"});
  EXPECT_EQ(t.Render(), "STUDY  STATE\n");
}

TEST(Csv, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\r"), "\"cr\r\"");
  EXPECT_EQ(CsvLine({"gpu", "NVIDIA H200, 141GB", "conv:0.5;norm:0.2", ""}),
            "gpu,\"NVIDIA H200, 141GB\",conv:0.5;norm:0.2,\n");
}

TEST(ClipToWidth, CutsWithAnEllipsis) {
  EXPECT_EQ(ClipToWidth("abcdef", 0), "abcdef");
  EXPECT_EQ(ClipToWidth("abcdef", 6), "abcdef");
  EXPECT_EQ(ClipToWidth("abcdef", 4), "abc\u2026");
  EXPECT_EQ(ClipToWidth("\u00e9\u00e9\u00e9\u00e9", 3), "\u00e9\u00e9\u2026");
  EXPECT_EQ(DisplayWidth("\u00e9\u00e9\u2026"), 3u);
}

}  // namespace
}  // namespace medprof::client
