#include "bindings.hpp"
#include "job_bindings.hpp"
#include "readonly_class.hpp"

#include "filkit/jobs/dpsgd.hpp"

#include "filkit/dpsgd/training.hpp"
#include "filkit/networks/networks.hpp"

#include <nlohmann/json.hpp>
#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <random>
#include <set>

namespace py = pybind11;

namespace filkit::python {

namespace {

// The training options from keywords: the dpsgd job's names and defaults (its model fields and
// every DpSgdOptions field), without its data options.
DpSgdOptions dpsgd_options(const py::kwargs& kwargs, RunKeywords& run) {
  DpSgdJobOptions job;
  std::set<std::string> accepted;
  const KwargsBinder bind{kwargs, accepted};
  visit_model_fields(job, bind);
  visit_fields(job.dpsgd, bind);
  run = take_run_keywords(kwargs, accepted);
  reject_unknown_keywords("train_dpsgd", kwargs, accepted);
  return job.training_options();
}

}  // namespace

void bind_dpsgd(py::module_& m) {
  py::class_<ConfidenceInterval> interval(m, "ConfidenceInterval", "A two-sided confidence interval.");
  ReadonlyClass(interval).field("lower", &ConfidenceInterval::lower).field("upper", &ConfidenceInterval::upper).done();
  py::class_<MaxAndMedian> max_and_median(m, "MaxAndMedian", "The largest and the median over examples.");
  ReadonlyClass(max_and_median).field("max", &MaxAndMedian::max).field("median", &MaxAndMedian::median).done();
  py::class_<RunBootstrap> bootstrap(m, "RunBootstrap",
                                     "Max and median over examples of the run-averaged quantity, each run's own, and "
                                     "their percentile bootstrap intervals over runs (None with one run).");
  ReadonlyClass(bootstrap)
      .field("estimate", &RunBootstrap::estimate)
      .field("per_run", &RunBootstrap::per_run)
      .field("max_interval", &RunBootstrap::max_interval)
      .field("median_interval", &RunBootstrap::median_interval)
      .field("max_replicates", &RunBootstrap::max_replicates)
      .field("median_replicates", &RunBootstrap::median_replicates)
      .field("level", &RunBootstrap::level)
      .field("resamples", &RunBootstrap::resamples)
      .field("seed", &RunBootstrap::seed)
      .done();

  py::class_<DpSgdSnapshot> snapshot(m, "DpSgdSnapshot", "The FIL accountant (mean over runs) at one step.");
  ReadonlyClass(snapshot)
      .field("step", &DpSgdSnapshot::step)
      .field("epoch", &DpSgdSnapshot::epoch)
      .field("private_dims", &DpSgdSnapshot::private_dims)
      .field("fisher_trace", &DpSgdSnapshot::fisher_trace)
      .field("fisher_trace_standard_error", &DpSgdSnapshot::fisher_trace_standard_error)
      .field("fisher_trace_per_run", &DpSgdSnapshot::fisher_trace_per_run)
      .field("dfil_over_runs", &DpSgdSnapshot::dfil_over_runs)
      .field("fisher_spectral", &DpSgdSnapshot::fisher_spectral)
      .field("times_sampled", &DpSgdSnapshot::times_sampled)
      .field("train_accuracy", &DpSgdSnapshot::train_accuracy)
      .field("test_accuracy", &DpSgdSnapshot::test_accuracy)
      .field("epsilon", &DpSgdSnapshot::epsilon)
      .field("pld_infinity_mass", &DpSgdSnapshot::pld_infinity_mass)
      .field("rdp_order2", &DpSgdSnapshot::rdp_order2)
      // PrivacySpent is bound with the accountants: pickled here by its fields.
      .state(
          "privacy",
          [](const DpSgdSnapshot& c) {
            return py::dict(py::arg("eps") = c.privacy.eps, py::arg("delta") = c.privacy.delta,
                            py::arg("optimal_order") = c.privacy.optimal_order, py::arg("orders") = c.privacy.orders,
                            py::arg("rdp") = c.privacy.rdp, py::arg("status") = to_string(c.privacy.status),
                            py::arg("warning") = c.privacy.warning);
          },
          [](DpSgdSnapshot& c, const py::handle& value) {
            const py::dict d = value.cast<py::dict>();
            c.privacy.eps = d["eps"].cast<double>();
            c.privacy.delta = d["delta"].cast<double>();
            c.privacy.optimal_order = d["optimal_order"].cast<double>();
            c.privacy.orders = d["orders"].cast<std::vector<double>>();
            c.privacy.rdp = d["rdp"].cast<std::vector<double>>();
            c.privacy.status = parse_enum<OptimalOrderStatus>(d["status"].cast<std::string>());
            c.privacy.warning = d["warning"].cast<std::string>();
          })
      .done();
  snapshot.def_readonly("privacy", &DpSgdSnapshot::privacy)
      .def_property_readonly("dfil", py::overload_cast<>(&DpSgdSnapshot::dfil, py::const_),
                             "dFIL of every training example, sqrt(Tr(I_i) / d_z)")
      .def_property_readonly("eta", &DpSgdSnapshot::eta, "eta of every training example (NaN when not computed)")
      .def("rdp_mse_bound", &DpSgdSnapshot::rdp_mse_bound);

  py::class_<DpSgdResult> result(m, "DpSgdResult", "DP-SGD runs with per-example FIL accounting.");
  ReadonlyClass(result)
      .field("n", &DpSgdResult::n)
      .field("num_classes", &DpSgdResult::num_classes)
      .field("private_dims", &DpSgdResult::private_dims)
      .field("sampling_rate", &DpSgdResult::sampling_rate)
      .field("kappa_delta", &DpSgdResult::kappa_delta)
      .field("step_epsilon", &DpSgdResult::step_epsilon)
      .field("kappa", &DpSgdResult::kappa)
      .field("run_seeds", &DpSgdResult::run_seeds)
      .field("bootstrap_seed", &DpSgdResult::bootstrap_seed)
      .field("snapshots", &DpSgdResult::snapshots)
      .field("models", &DpSgdResult::models)
      .field("parameters", &DpSgdResult::parameters)
      .field("parameter_count", &DpSgdResult::parameter_count)
      .field("architecture", &DpSgdResult::architecture)
      .field("complete", &DpSgdResult::complete)
      .field("resumed", &DpSgdResult::resumed)
      .field("steps_done", &DpSgdResult::steps_done)
      .field("seconds", &DpSgdResult::seconds)
      .done();
  // A run stopped early to be resumed has no snapshots: a ValueError, not snapshots.back() of none.
  const auto last = [](const DpSgdResult& r) -> const DpSgdSnapshot& {
    if (r.snapshots.empty())
      throw py::value_error("this DP-SGD result has no snapshots: the run stopped early (complete is False)");
    return r.final_snapshot();
  };
  result.def_property_readonly("final_snapshot", last)
      .def_property_readonly(
          "dfil", [last](const DpSgdResult& r) { return last(r).dfil(); },
          "dFIL of every training example at the last snapshot (final_snapshot.dfil)");

  keyword_registry()["train_dpsgd"] = [] {
    py::list keywords;
    add_keywords(keywords, DpSgdJobOptions{}, [](DpSgdJobOptions& o, auto&& visit) {
      visit_model_fields(o, visit);
      visit_fields(o.dpsgd, visit);
    });
    add_keywords(keywords, RunKeywords{});
    return keywords;
  };

  m.def(
      "train_dpsgd",
      [](const Dataset& train, const Dataset& test, const py::kwargs& kwargs) {
        RunKeywords run;
        const DpSgdOptions options = dpsgd_options(kwargs, run);
        DpSgdResult result;
        {
          py::gil_scoped_release release;
          const ThreadsForCall threads(run.threads);
          result = train_dpsgd(train, test, options, !run.quiet);
        }
        py::object summary = json_to_python(result.summary(options).dump());
        return py::make_tuple(std::move(result), summary);
      },
      py::arg("train"), py::arg("test"),
      "Train logistic/softmax regression (closed form) or a network (model='mlp'|'cnn'|'cifar-cnn'|'custom', or "
      "engine='torch' for the "
      "softmax network; LibTorch) by DP-SGD (GELU clipping, Gaussian noise) with the per-example FIL accountant of "
      "the reconstruction paper's Algorithm 1, on given datasets. Keyword options: those of filkit.run('dpsgd') "
      "without the data options (filkit.defaults('dpsgd') lists them), threads and quiet. Returns (result, summary "
      "dict).");
  m.def("subsampling_kappa", &subsampling_kappa, py::arg("sample_rate"), py::arg("noise_multiplier"), py::arg("delta"));
  m.def("networks_available", &networks_available,
        "Whether the LibTorch plugin (libfilkit_torch.so) loads, so that the mlp and cnn networks can be used.");

  py::class_<Network>(m, "Network",
                      "A smooth network (softmax, tanh MLP, the paper's ConvNets, a layer specification or a "
                      "TorchScript module) with batched per-example clipped "
                      "gradients and their Jacobian products about the input (LibTorch).")
      .def(py::init([](const std::string& architecture, Index input_dim, Index num_classes,
                       const std::vector<Index>& hidden, bool intercept, Index chunk, const std::string& arch,
                       const std::string& torchscript, std::optional<std::tuple<Index, Index, Index>> image,
                       const py::object& max_memory) {
             NetworkOptions options;
             options.architecture = parse_enum<NetworkArchitecture>(architecture);
             options.hidden = hidden;
             options.intercept = intercept;
             options.chunk = chunk;
             options.layers = arch;
             options.torchscript = torchscript;
             ByteSize budget = default_memory_budget();  // the command line's default
             if (!max_memory.is_none()) KwargsBinder::assign("max_memory", max_memory, budget);
             options.max_memory = budget.bytes;
             std::optional<ImageShape> shape;
             if (image) shape = ImageShape{std::get<0>(*image), std::get<1>(*image), std::get<2>(*image)};
             py::gil_scoped_release release;  // reading a TorchScript module runs LibTorch
             // The jobs' --model is this constructor's architecture.
             return with_keywords({{"model", "architecture"}},
                                  [&] { return Network(options, input_dim, num_classes, shape); });
           }),
           py::arg("architecture"), py::arg("input_dim"), py::arg("num_classes"),
           py::arg("hidden") = NetworkOptions{}.hidden, py::arg("intercept") = NetworkOptions{}.intercept,
           py::arg("chunk") = NetworkOptions{}.chunk, py::arg("arch") = NetworkOptions{}.layers,
           py::arg("torchscript") = NetworkOptions{}.torchscript, py::arg("image") = py::none(),
           py::arg("max_memory") = py::none(),
           "architecture: softmax, mlp, cnn, cifar-cnn or custom (with arch='conv:16:8:2:2,tanh,...', the layers as "
           "filkit dpsgd --arch, or torchscript='model.pt'); image=(channels, height, width) when the rows are images "
           "(channel-major); max_memory ('2G', '512M' or bytes; None: half the physical memory, as the command "
           "line's --max-memory) refuses a network whose estimated training memory is larger, before it is built.")
      .def_property_readonly("parameter_count", &Network::parameter_count)
      .def_property_readonly("input_dim", &Network::input_dim)
      .def_property_readonly("num_classes", &Network::num_classes)
      .def("describe", &Network::describe)
      .def_property_readonly(
          "layers",
          [](const Network& network) {
            std::vector<LayerSpec> layers;
            for (const PlannedLayer& layer : network.plan().layers) layers.push_back(layer.spec);
            return to_string(layers);
          },
          "The layers as a specification (parse_network_layers' syntax).")
      .def(
          "initial_parameters",
          [](const Network& network, std::uint64_t seed) {
            std::mt19937_64 rng(seed);
            return network.initial_parameters(rng);
          },
          py::arg("seed") = 0)
      .def("logits", &Network::logits, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"))
      .def("accuracy", &Network::accuracy, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"),
           py::arg("y"))
      .def("gradients", &Network::gradients, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"),
           py::arg("y"))
      .def("clipped_gradients", &Network::clipped_gradients, py::call_guard<py::gil_scoped_release>(), py::arg("w"),
           py::arg("X"), py::arg("y"), py::arg("clip_norm"))
      .def("jacobian_vector_products", &Network::jacobian_vector_products, py::call_guard<py::gil_scoped_release>(),
           py::arg("w"), py::arg("X"), py::arg("y"), py::arg("clip_norm"), py::arg("V"),
           "Row b: G_b V_b, G_b = d g~_b / d x_b.")
      .def("vector_jacobian_products", &Network::vector_jacobian_products, py::call_guard<py::gil_scoped_release>(),
           py::arg("w"), py::arg("X"), py::arg("y"), py::arg("clip_norm"), py::arg("U"), "Row b: G_b^T U_b.")
      .def(
          "account_batch",
          [](const Network& network, const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
             const std::string& trace, const std::string& spectral, int probes, int power_iterations,
             std::uint64_t seed) {
            NetworkAccountingRequest request{parse_enum<TraceMethod>(trace), parse_enum<SpectralMethod>(spectral),
                                             probes, power_iterations};
            NetworkBatchAccounting a;
            {
              py::gil_scoped_release release;  // LibTorch's autograd refuses to run holding the GIL
              a = network.account_batch(w, X, y, clip_norm, request, seed);
            }
            return py::make_tuple(a.clipped_sum, a.trace, a.spectral);
          },
          py::arg("w"), py::arg("X"), py::arg("y"), py::arg("clip_norm"),
          py::arg("trace") = to_string(NetworkAccountingRequest{}.trace),
          py::arg("spectral") = to_string(NetworkAccountingRequest{}.spectral),
          py::arg("probes") = NetworkAccountingRequest{}.probes,
          py::arg("power_iterations") = NetworkAccountingRequest{}.power_iterations, py::arg("seed") = 0,
          "(sum of clipped gradients, Tr(G^T G) per example, ||G||_2^2 per example).");
}

}  // namespace filkit::python
