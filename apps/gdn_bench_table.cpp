// gdn_bench_table: the benchmark table (common/bench_table.h) for benchmarks written as
// scripts (scripts/bench_cp_exchange.sh), so that they print the C++ benchmarks' format
// from the same code. Reads one row per line from stdin: the cells of --columns,
// whitespace-separated, then the row's error and tolerance (numbers; "-" "-" for a row with
// nothing to check); a line starting with '#' is a footnote, printed before the footer.
// Prints the header, the rows and the footer; exits 1 when a row is wrong.
//
//   printf '1024 512 0 0\n' | gdn_bench_table --columns 'seq_len:tokens:8,bytes:B:10'
#include <cxxopts.hpp>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/app_common.h"
#include "common/bench_table.h"
#include "core/error.h"

using namespace gdn;

namespace {

// "name:unit:width,..." (unit may be empty).
std::vector<app::BenchColumn> parse_columns(const std::string& spec) {
  std::vector<app::BenchColumn> out;
  std::stringstream all(spec);
  for (std::string item; std::getline(all, item, ',');) {
    const std::size_t a = item.find(':'), b = item.rfind(':');
    GDN_CHECK(a != std::string::npos && b != a, "--columns: '", item, "' is not name:unit:width");
    int width = 0;
    try {
      width = std::stoi(item.substr(b + 1));
    } catch (const std::exception&) {
      width = 0;
    }
    GDN_CHECK(width > 0 && width <= 64, "--columns: '", item, "' has no width in [1, 64]");
    out.push_back({item.substr(0, a), item.substr(a + 1, b - a - 1), width});
  }
  GDN_CHECK(!out.empty(), "--columns: no columns given");
  return out;
}

double number(const std::string& s, const std::string& line) {
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw_error("row '", line, "': '", s, "' is not a number (the error and tolerance end a row)");
}

int run(int argc, char** argv) {
  cxxopts::Options o(
      "gdn_bench_table",
      "Prints the benchmark table of gdn_bench and the other benchmarks for rows "
      "read from stdin: the\ncells of --columns, then the row's error and "
      "tolerance ('-' '-': nothing to check); a line starting\nwith '#' is a footnote. Exits 1 "
      "when a row is wrong.");
  o.add_options()("columns", "the columns, 'name:unit:width,...' (unit may be empty)",
                  cxxopts::value<std::string>())(
      "error-unit", "what the error column measures, printed under its name",
      cxxopts::value<std::string>()->default_value("(rel L2)"))("h,help", "print this help");
  const auto res = app::parse_command_line(o, argc, argv);
  if (!res) {
    std::cout << o.help() << std::endl;
    return 0;
  }
  GDN_CHECK(res->count("columns"), "--columns is required");
  const std::vector<app::BenchColumn> columns = parse_columns((*res)["columns"].as<std::string>());
  app::BenchTable table(columns, (*res)["error-unit"].as<std::string>());
  table.header();
  std::vector<std::string> notes;
  for (std::string line; std::getline(std::cin, line);) {
    if (line.rfind('#', 0) == 0) {
      notes.push_back(line.substr(line.find_first_not_of("# ") == std::string::npos
                                      ? line.size()
                                      : line.find_first_not_of("# ")));
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream in(line);
    for (std::string c; in >> c;) cells.push_back(c);
    if (cells.empty()) continue;
    GDN_CHECK(cells.size() == columns.size() + 2, "row '", line, "' has ", cells.size(),
              " fields, expected ", columns.size(), " cells, the error and the tolerance");
    const std::string tol = cells.back(), err = cells[cells.size() - 2];
    cells.resize(columns.size());
    table.row(cells, err == "-" && tol == "-"
                         ? app::unchecked()
                         : app::BenchCheck{number(err, line), number(tol, line)});
  }
  return table.exit_status(notes);
}

}  // namespace

int main(int argc, char** argv) {
  return gdn::app::serial_main("gdn_bench_table", run, argc, argv);
}
