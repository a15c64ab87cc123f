#include "common/bench_table.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace gdn::app {

namespace {

constexpr int kErrorWidth = 9;
const BenchColumn kCheck{"check", "", 6};

// `text` right-aligned in `width` (wider text as it is), after one space.
std::string pad(const std::string& text, int width) {
  const std::size_t w = std::size_t(std::max(width, 0));
  return " " + (text.size() < w ? std::string(w - text.size(), ' ') + text : text);
}

}  // namespace

BenchTable::BenchTable(std::vector<BenchColumn> columns, std::string error_unit, std::ostream& out)
    : columns_(std::move(columns)), out_(out) {
  columns_.push_back({"error", std::move(error_unit), kErrorWidth});
  columns_.push_back(kCheck);
}

void BenchTable::header() const {
  std::string names = "#", units = "#";
  for (const BenchColumn& c : columns_) {
    names += pad(c.name, c.width);
    units += pad(c.unit, c.width);
  }
  while (!units.empty() && units.back() == ' ') units.pop_back();
  out_ << names << '\n' << units << std::endl;
}

void BenchTable::row(const std::vector<std::string>& cells, const BenchCheck& check) {
  GDN_CHECK(cells.size() + 2 == columns_.size(), "bench table: ", cells.size(), " cells for ",
            columns_.size() - 2, " columns");
  std::string line = " ";  // under the header's '#'
  for (std::size_t i = 0; i < cells.size(); ++i) line += pad(cells[i], columns_[i].width);
  const bool ok = check.tol >= 0 && std::isfinite(check.error) && check.error <= check.tol;
  line += pad(sci(check.error), kErrorWidth);
  line += pad(!check.checked() ? "-" : ok ? "ok" : "WRONG", kCheck.width);
  out_ << line << std::endl;
  ++rows_;
  if (check.checked() && !ok) ++wrong_;
}

int BenchTable::finish(const std::vector<std::string>& notes) const {
  for (const std::string& n : notes) out_ << "# " << n << '\n';
  out_ << "# " << rows_ << " rows, " << wrong_ << " wrong" << std::endl;
  return wrong_;
}

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string sci(double v, int digits) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", digits, v);
  return buf;
}

}  // namespace gdn::app
