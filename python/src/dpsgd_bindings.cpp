#include "bindings.hpp"
#include "job_bindings.hpp"

#include "filkit/jobs/dpsgd.hpp"

#include "filkit/dpsgd/training.hpp"
#include "filkit/dpsgd/networks.hpp"

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
DpSgdOptions dpsgd_options(const py::kwargs& kwargs) {
  DpSgdJobOptions job;
  std::set<std::string> accepted;
  const KwargsBinder bind{kwargs, accepted};
  visit_model_fields(job, bind);
  visit_fields(job.dpsgd, bind);
  reject_unknown_keywords("train_dpsgd", kwargs, accepted);
  return job.training_options();
}

}  // namespace

void bind_dpsgd(py::module_& m) {
  py::class_<ConfidenceInterval>(m, "ConfidenceInterval", "A two-sided confidence interval.")
      .def_readonly("lower", &ConfidenceInterval::lower)
      .def_readonly("upper", &ConfidenceInterval::upper);
  py::class_<MaxAndMedian>(m, "MaxAndMedian", "The largest and the median over examples.")
      .def_readonly("max", &MaxAndMedian::max)
      .def_readonly("median", &MaxAndMedian::median);
  py::class_<RunBootstrap>(m, "RunBootstrap",
                           "Max and median over examples of the run-averaged quantity, each run's own, and their "
                           "percentile bootstrap intervals over runs (None with one run).")
      .def_readonly("estimate", &RunBootstrap::estimate)
      .def_readonly("per_run", &RunBootstrap::per_run)
      .def_readonly("max_interval", &RunBootstrap::max_interval)
      .def_readonly("median_interval", &RunBootstrap::median_interval)
      .def_readonly("max_replicates", &RunBootstrap::max_replicates)
      .def_readonly("median_replicates", &RunBootstrap::median_replicates)
      .def_readonly("level", &RunBootstrap::level)
      .def_readonly("resamples", &RunBootstrap::resamples)
      .def_readonly("seed", &RunBootstrap::seed);

  py::class_<DpSgdSnapshot>(m, "DpSgdSnapshot", "The FIL accountant (mean over runs) at one step.")
      .def_readonly("step", &DpSgdSnapshot::step)
      .def_readonly("epoch", &DpSgdSnapshot::epoch)
      .def_readonly("fisher_trace", &DpSgdSnapshot::fisher_trace)
      .def_readonly("fisher_trace_standard_error", &DpSgdSnapshot::fisher_trace_standard_error)
      .def_readonly("fisher_trace_per_run", &DpSgdSnapshot::fisher_trace_per_run)
      .def_readonly("dfil_over_runs", &DpSgdSnapshot::dfil_over_runs)
      .def_readonly("fisher_spectral", &DpSgdSnapshot::fisher_spectral)
      .def_readonly("times_sampled", &DpSgdSnapshot::times_sampled)
      .def_readonly("train_accuracy", &DpSgdSnapshot::train_accuracy)
      .def_readonly("test_accuracy", &DpSgdSnapshot::test_accuracy)
      .def_readonly("privacy", &DpSgdSnapshot::privacy)
      .def_readonly("rdp_order2", &DpSgdSnapshot::rdp_order2)
      .def("rdp_mse_bound", &DpSgdSnapshot::rdp_mse_bound)
      .def("dfil", &DpSgdSnapshot::dfil, py::arg("private_dims"))
      .def("eta", &DpSgdSnapshot::eta);

  py::class_<DpSgdResult>(m, "DpSgdResult", "DP-SGD runs with per-example FIL accounting.")
      .def_readonly("n", &DpSgdResult::n)
      .def_readonly("num_classes", &DpSgdResult::num_classes)
      .def_readonly("private_dims", &DpSgdResult::private_dims)
      .def_readonly("sampling_rate", &DpSgdResult::sampling_rate)
      .def_readonly("step_epsilon", &DpSgdResult::step_epsilon)
      .def_readonly("kappa", &DpSgdResult::kappa)
      .def_readonly("run_seeds", &DpSgdResult::run_seeds)
      .def_readonly("bootstrap_seed", &DpSgdResult::bootstrap_seed)
      .def_readonly("snapshots", &DpSgdResult::snapshots)
      .def_readonly("models", &DpSgdResult::models)
      .def_readonly("parameters", &DpSgdResult::parameters)
      .def_readonly("parameter_count", &DpSgdResult::parameter_count)
      .def_readonly("architecture", &DpSgdResult::architecture)
      .def_readonly("complete", &DpSgdResult::complete)
      .def_readonly("resumed", &DpSgdResult::resumed)
      .def_readonly("steps_done", &DpSgdResult::steps_done)
      .def_readonly("seconds", &DpSgdResult::seconds)
      .def_property_readonly("final_snapshot", &DpSgdResult::final_snapshot);

  m.def(
      "train_dpsgd",
      [](const Dataset& train, const Dataset& test, const py::kwargs& kwargs) {
        const DpSgdOptions options = dpsgd_options(kwargs);
        DpSgdResult result;
        {
          py::gil_scoped_release release;
          result = train_dpsgd(train, test, options);
        }
        py::object summary = json_to_python(result.summary(options).dump());
        return py::make_tuple(std::move(result), summary);
      },
      py::arg("train"), py::arg("test"),
      "Train logistic/softmax regression (closed form) or a network (model='mlp'|'cnn'|'cifar-cnn'|'custom', or engine='torch' for the "
      "softmax network; LibTorch) by DP-SGD (GELU clipping, Gaussian noise) with the per-example FIL accountant of "
      "the reconstruction paper's Algorithm 1, on given datasets. Keyword options: those of filkit.run('dpsgd') "
      "without the data options (filkit.defaults('dpsgd') lists them). Returns (result, summary dict).");
  m.def("subsampling_kappa", &subsampling_kappa, py::arg("q"), py::arg("noise_multiplier"), py::arg("delta"));
  m.def("networks_available", &networks_available, "Whether the LibTorch plugin (libfilkit_torch.so) loads, so that the mlp and cnn networks can be used.");

  py::class_<Network>(m, "Network",
                      "A smooth network (softmax, tanh MLP, the paper's ConvNets, a layer specification or a TorchScript module) with batched per-example clipped "
                      "gradients and their Jacobian products about the input (LibTorch).")
      .def(py::init([](const std::string& architecture, Index input_dim, Index num_classes,
                       const std::vector<Index>& hidden, bool intercept, Index chunk, const std::string& layers,
                       const std::string& torchscript, std::optional<std::tuple<Index, Index, Index>> image,
                       const py::object& max_memory) {
             NetworkOptions options;
             options.architecture = parse_enum<NetworkArchitecture>(architecture);
             options.hidden = hidden;
             options.intercept = intercept;
             options.chunk = chunk;
             options.layers = layers;
             options.torchscript = torchscript;
             ByteSize budget = default_memory_budget();  // the command line's default
             if (!max_memory.is_none()) KwargsBinder::assign("max_memory", max_memory, budget);
             options.max_memory = budget.bytes;
             std::optional<ImageShape> shape;
             if (image) shape = ImageShape{std::get<0>(*image), std::get<1>(*image), std::get<2>(*image)};
             py::gil_scoped_release release;  // reading a TorchScript module runs LibTorch
             // The jobs' option names (--arch, --model) are this constructor's layers and architecture.
             return with_keywords({{"arch", "layers"}, {"model", "architecture"}},
                                  [&] { return Network(options, input_dim, num_classes, shape); });
           }),
           py::arg("architecture"), py::arg("input_dim"), py::arg("num_classes"),
           py::arg("hidden") = std::vector<Index>{128}, py::arg("intercept") = false, py::arg("chunk") = 100,
           py::arg("layers") = "", py::arg("torchscript") = "", py::arg("image") = py::none(),
           py::arg("max_memory") = py::none(),
           "architecture: softmax, mlp, cnn, cifar-cnn or custom (with layers='conv:16:8:2:2,tanh,...' or "
           "torchscript='model.pt'); image=(channels, height, width) when the rows are images (channel-major); "
           "max_memory ('2G', '512M' or bytes; None: half the physical memory, as the command line's "
           "--max-memory) refuses a network whose estimated training memory is larger, before it is built.")
      .def_property_readonly("parameter_count", &Network::parameter_count)
      .def_property_readonly("input_dim", &Network::input_dim)
      .def_property_readonly("num_classes", &Network::num_classes)
      .def("describe", &Network::describe)
      .def_property_readonly("layers", [](const Network& network) {
        std::vector<LayerSpec> layers;
        for (const PlannedLayer& layer : network.plan().layers) layers.push_back(layer.spec);
        return to_string(layers);
      }, "The layers as a specification (parse_network_layers' syntax).")
      .def(
          "initial_parameters",
          [](const Network& network, std::uint64_t seed) {
            std::mt19937_64 rng(seed);
            return network.initial_parameters(rng);
          },
          py::arg("seed") = 0)
      .def("logits", &Network::logits, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"))
      .def("accuracy", &Network::accuracy, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"), py::arg("y"))
      .def("gradients", &Network::gradients, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"), py::arg("y"))
      .def("clipped_gradients", &Network::clipped_gradients, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"), py::arg("y"),
           py::arg("clip_norm"))
      .def("jacobian_vector_products", &Network::jacobian_vector_products, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"), py::arg("y"),
           py::arg("clip_norm"), py::arg("V"), "Row b: G_b V_b, G_b = d g~_b / d x_b.")
      .def("vector_jacobian_products", &Network::vector_jacobian_products, py::call_guard<py::gil_scoped_release>(), py::arg("w"), py::arg("X"), py::arg("y"),
           py::arg("clip_norm"), py::arg("U"), "Row b: G_b^T U_b.")
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
          py::arg("w"), py::arg("X"), py::arg("y"), py::arg("clip_norm"), py::arg("trace") = "gaussian",
          py::arg("spectral") = "none", py::arg("probes") = 1, py::arg("power_iterations") = 20, py::arg("seed") = 0,
          "(sum of clipped gradients, Tr(G^T G) per example, ||G||_2^2 per example).");
  m.def("subsampling_kappa", &subsampling_kappa, py::arg("q"), py::arg("noise_multiplier"), py::arg("delta"));
}

}  // namespace filkit::python
