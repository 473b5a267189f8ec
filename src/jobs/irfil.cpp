#include "filkit/jobs/irfil.hpp"

#include "filkit/base/options.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/leakage/attribute_inference.hpp"
#include "filkit/leakage/result_checks.hpp"

#include <iomanip>
#include <ostream>

namespace filkit {

void IrfilJobOptions::validate() const {
  task.validate();
  IrfilOptions checked = irfil;
  checked.fit = task.fit_options();
  checked.validate();
}

IrfilJobResult run_irfil(const IrfilJobOptions& requested, bool progress) {
  IrfilJobResult result = result_with_resolved_task<IrfilJobResult>(requested);
  const IrfilJobOptions& options = result.options;
  const Communicator& comm = Communicator::world();
  result.task = prepare_task(options.task, options.seed, comm);
  IrfilOptions irfil_options = options.irfil;
  irfil_options.fit = result.task.fit;
  if (!options.attribute.empty())
    irfil_options.attribute_columns = find_attribute(result.task.data.train, options.attribute).columns;
  irfil_options.progress = progress && comm.is_root();
  const StageScope stage("reweighting (IRFIL: fits and FIL)");
  result.irfil = irfil(result.task.data.train, result.task.data.test, irfil_options, comm);
  result.labels = comm.gather(result.task.data.train.y);
  require_finite_model(result.irfil.model);
  return result;
}

nlohmann::json IrfilJobResult::to_json() const {
  nlohmann::json json = irfil.to_json();
  json.update(job_summary_header(IrfilJob::name, options.seed));
  json["settings"] = settings_json(options);
  json.update(task.to_json());
  if (!options.attribute.empty())
    json["attribute_columns"] = find_attribute(task.data.train, options.attribute).columns;
  return json;
}

NumericTable IrfilJobResult::table() const {
  NumericTable table{{"index", "label", "weight", "eta_before", "eta_after"}, {}};
  for (Index i = 0; i < labels.size(); ++i)
    table.rows.push_back(
        {static_cast<double>(i), labels(i), irfil.weights.back()(i), irfil.eta_before(i), irfil.eta_after(i)});
  return table;
}

NumericTable IrfilJobResult::extra_table(const std::string& name) const {
  if (name != "history_out") return JobResult::extra_table(name);
  NumericTable table{{"index", "label"}, {}};
  for (std::size_t t = 0; t < irfil.weights.size(); ++t) table.header.push_back("iteration_" + std::to_string(t));
  for (Index i = 0; i < labels.size(); ++i) {
    std::vector<double> row = {static_cast<double>(i), labels(i)};
    for (const VectorXd& omega : irfil.weights) row.push_back(omega(i));
    table.rows.push_back(std::move(row));
  }
  return table;
}

void IrfilJobResult::print_summary(std::ostream& out) const {
  const bool regression = task.fit.regression;
  out << "filkit irfil: " << options.task.data.data << ", n = " << task.n_train << ", d = " << task.data.train.d()
      << ", " << to_string(task.fit.kind) << ", lambda = " << task.fit.l2 << ", weighting "
      << to_string(options.irfil.weighting) << ", eta of "
      << (options.attribute.empty() ? "the whole example" : "attribute " + options.attribute)
      << " at sigma = " << options.irfil.fil.sigma << "\n";
  out << std::setw(5) << "iter" << std::setw(12) << "eta mean" << std::setw(12) << "eta std" << std::setw(12)
      << "eta max" << std::setw(12) << (regression ? "train MSE" : "train acc") << std::setw(12)
      << (regression ? "test MSE" : "test acc") << std::setw(12) << "weight min" << std::setw(12) << "weight max"
      << "\n";
  for (const IrfilIteration& it : irfil.iterations) {
    out << std::setw(5) << it.iteration << std::scientific << std::setprecision(3) << std::setw(12) << it.eta.mean
        << std::setw(12) << it.eta.std << std::setw(12) << it.eta.max << std::defaultfloat << std::setprecision(4)
        << std::setw(12) << (regression ? it.train_mse : it.train_accuracy) << std::setw(12)
        << (regression ? it.test_mse : it.test_accuracy) << std::setw(12) << it.weight_min << std::setw(12)
        << it.weight_max << "\n";
  }
}

}  // namespace filkit
