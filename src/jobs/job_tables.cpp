// The tables of a job's results (job.hpp): CSV of a NumericTable and the tables of trained models.
#include "filkit/jobs/job.hpp"

#include "filkit/base/io.hpp"

#include <stdexcept>

namespace filkit {

std::string NumericTable::to_csv() const { return numeric_csv(header, rows); }

NumericTable model_table(std::vector<std::string> keys, Index parameter_count) {
  NumericTable table{std::move(keys), {}};
  for (Index j = 0; j < parameter_count; ++j) table.header.push_back("w" + std::to_string(j));
  return table;
}

void add_model_row(NumericTable& table, std::vector<double> keys, const VectorXd& parameters) {
  const std::size_t columns = keys.size() + static_cast<std::size_t>(parameters.size());
  // Tables are laid out by the jobs themselves: a bug otherwise.
  if (columns != table.header.size())
    throw std::logic_error("add_model_row: " + std::to_string(keys.size()) + " keys and " +
                           std::to_string(parameters.size()) + " parameters for a table of " +
                           std::to_string(table.header.size()) + " columns");
  keys.insert(keys.end(), parameters.data(), parameters.data() + parameters.size());
  table.rows.push_back(std::move(keys));
}

NumericTable JobResult::extra_table(const std::string& name) const {
  throw OptionError::with_text("output", "this job has no output named '" + name + "'");
}

}  // namespace filkit
