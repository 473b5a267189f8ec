#include "filkit/jobs/attack.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/data/tabular_datasets.hpp"
#include "filkit/leakage/irfil.hpp"

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <stdexcept>

namespace filkit {

namespace {
std::string attacked_attribute(const AttackJobOptions& options) {
  if (!options.attribute.empty()) return options.attribute;
  if (const TabularDatasetInfo* builtin = find_tabular_dataset(options.task.data.data))
    return builtin->sensitive_attribute;
  option_error("attribute", "is required for '" + options.task.data.data +
                                "' (only the built-in tabular datasets have a default sensitive attribute)");
}
}  // namespace

void AttackJobOptions::validate() const {
  task.validate();
  AttackOptions checked = attack;
  checked.fit = task.fit_options();
  checked.validate();
  attacked_attribute(*this);
}

AttackJobResult run_attack(const AttackJobOptions& requested, bool progress) {
  AttackJobResult result = result_with_resolved_task<AttackJobResult>(requested);
  result.options.attribute = attacked_attribute(requested);
  const AttackJobOptions& options = result.options;
  // On the ranks of an MPI job each attacks the examples among its rows (docs/distributed.md).
  const Communicator& comm = Communicator::world();
  result.task = prepare_task(options.task, options.seed, comm);
  const Dataset& train = result.task.data.train;
  const Index n = result.task.n_train;
  AttackOptions attack = options.attack;
  attack.fit = result.task.fit;
  attack.seed = options.seed;
  attack.progress = progress && comm.is_root();
  const AttributeColumns attribute = find_attribute(train, options.attribute);
  const ByteSize budget = options.task.data.max_memory;
  VectorXd omega;
  if (!options.weights.empty()) {  // a weight for every example of all ranks; this rank's rows kept
    const VectorXd all = read_example_weights(options.weights, options.weights_column, n, budget);
    omega = all.segment(comm.exclusive_prefix_sum(train.n()), train.n());
  }
  // Each trial keeps, per sigma, one right-or-wrong byte per attacked example and attack.
  const Index attacked = attack.max_examples > 0 ? std::min(attack.max_examples, n) : n;
  check_memory(static_cast<std::uint64_t>(attack.trials) *
                   (64 + attack.sigmas.size() * (128 + 2 * static_cast<std::uint64_t>(attacked))),
               budget, "keeping the outcomes of trials = " + std::to_string(attack.trials));
  const StageScope stage("running the attacks");
  result.attack = attribute_inference(train, result.task.data.test, attribute, attack, omega, comm);
  return result;
}

nlohmann::json AttackJobResult::to_json() const {
  nlohmann::json json = attack.to_json();
  json.update(job_summary_header(AttackJob::name, options.seed));
  json["settings"] = settings_json(options);
  json.update(task.to_json());
  return json;
}

NumericTable AttackJobResult::table() const { return {attack.table_header(), attack.table_rows()}; }

NumericTable AttackJobResult::extra_table(const std::string& name) const {
  if (name != "examples_out") return JobResult::extra_table(name);
  return {attack.example_header(), attack.example_rows()};
}

void AttackJobResult::print_summary(std::ostream& out) const {
  const bool regression = task.fit.regression;
  out << "filkit attack: " << options.task.data.data << ", n = " << task.n_train << ", d = " << task.data.train.d()
      << ", " << to_string(task.fit.kind) << ", lambda = " << task.fit.l2 << ", attribute " << attack.candidates.name
      << " (" << attack.candidates.num_levels() << " levels), " << attack.examples.size() << " examples, "
      << options.attack.trials << " trials\n";
  out << "  prior accuracy " << attack.prior_accuracy << "\n";
  out << std::setw(12) << "sigma" << std::setw(12) << "eta mean" << std::setw(12) << "white-box" << std::setw(12)
      << "black-box" << std::setw(14) << (regression ? "release MSE" : "release acc") << "\n";
  for (const SigmaAccuracy& s : attack.sigmas) {
    out << std::scientific << std::setprecision(3) << std::setw(12) << s.sigma << std::setw(12) << s.eta_mean
        << std::defaultfloat << std::setprecision(4) << std::setw(12) << s.white_box << std::setw(12) << s.black_box
        << std::setw(14) << (regression ? s.test_mse : s.test_accuracy) << "\n";
  }
  out << "  seconds:";
  for (const auto& [stage, seconds] : attack.seconds) out << " " << stage << " " << std::setprecision(3) << seconds;
  out << "\n";
  if (attack.naive.examples > 0)
    out << "  naive refit: " << attack.naive.seconds << " s for " << attack.naive.examples << " examples (update "
        << attack.naive.fast_seconds << " s), estimated " << attack.naive.estimated_seconds_all
        << " s for all; largest difference " << attack.naive.max_difference << "\n";
}

}  // namespace filkit
