#include "bindings.hpp"

#include "filkit/dpsgd/training.hpp"
#include "filkit/dpsgd/networks.hpp"

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <random>
#include <set>

namespace py = pybind11;

namespace filkit::python {

namespace {

DpSgdOptions dpsgd_options(const py::kwargs& kwargs) {
  DpSgdOptions options;
  const std::set<std::string> known = {
      "model", "intercept", "label", "batch_size", "sampling", "steps", "step_size", "clip_norm",
      "noise_multiplier", "momentum", "weight_decay", "subsampling", "kappa_delta", "trace", "spectral",
      "probes", "power_iterations", "runs", "seed", "report_epochs", "rdp_delta", "network", "hidden", "chunk",
      "optimizer", "adam_beta1", "adam_beta2", "adam_epsilon", "init_scale", "checkpoint_path", "checkpoint_every",
      "stop_after"};
  for (const auto& item : kwargs)
    if (!known.count(py::str(item.first)))
      throw std::invalid_argument("train_dpsgd(): unknown option '" + std::string(py::str(item.first)) + "'");
  auto get = [&](const char* key, auto& target) {
    if (kwargs.contains(key)) target = kwargs[key].cast<std::decay_t<decltype(target)>>();
  };
  auto text = [&](const char* key) { return kwargs[key].cast<std::string>(); };
  if (kwargs.contains("model")) options.kind = parse_enum<ModelKind>(text("model"));
  if (kwargs.contains("network")) {  // "softmax", "mlp" or "cnn" through LibTorch
    NetworkOptions network;
    network.architecture = parse_enum<NetworkArchitecture>(text("network"));
    get("hidden", network.hidden);
    get("chunk", network.chunk);
    options.network = network;
  } else if (kwargs.contains("hidden") || kwargs.contains("chunk")) {
    throw std::invalid_argument("train_dpsgd(): hidden and chunk need network='mlp', 'cnn' or 'softmax'");
  }
  if (kwargs.contains("optimizer")) options.optimizer = parse_enum<Optimizer>(text("optimizer"));
  get("adam_beta1", options.adam_beta1);
  get("adam_beta2", options.adam_beta2);
  get("adam_epsilon", options.adam_epsilon);
  get("init_scale", options.init_scale);
  get("checkpoint_path", options.checkpoint_path);
  get("checkpoint_every", options.checkpoint_every);
  get("stop_after", options.stop_after);
  get("intercept", options.intercept);
  if (kwargs.contains("label")) options.label = parse_enum<LabelPrivacy>(text("label"));
  get("batch_size", options.batch_size);
  if (kwargs.contains("sampling")) options.sampling = parse_enum<BatchSampling>(text("sampling"));
  get("steps", options.steps);
  get("step_size", options.step_size);
  get("clip_norm", options.clip_norm);
  get("noise_multiplier", options.noise_multiplier);
  get("momentum", options.momentum);
  get("weight_decay", options.weight_decay);
  if (kwargs.contains("subsampling")) options.subsampling = parse_enum<SubsamplingFactor>(text("subsampling"));
  get("kappa_delta", options.kappa_delta);
  if (kwargs.contains("trace")) options.trace = parse_enum<TraceMethod>(text("trace"));
  if (kwargs.contains("spectral")) options.spectral = parse_enum<SpectralMethod>(text("spectral"));
  get("probes", options.probes);
  get("power_iterations", options.power_iterations);
  get("runs", options.runs);
  get("seed", options.seed);
  get("report_epochs", options.report_epochs);
  get("rdp_delta", options.rdp_delta);
  return options;
}

}  // namespace

void bind_dpsgd(py::module_& m) {
  py::class_<DpSgdCheckpoint>(m, "DpSgdCheckpoint", "The FIL accountant (mean over runs) at one step.")
      .def_readonly("step", &DpSgdCheckpoint::step)
      .def_readonly("epoch", &DpSgdCheckpoint::epoch)
      .def_readonly("fisher_trace", &DpSgdCheckpoint::fisher_trace)
      .def_readonly("fisher_trace_standard_error", &DpSgdCheckpoint::fisher_trace_standard_error)
      .def_readonly("fisher_spectral", &DpSgdCheckpoint::fisher_spectral)
      .def_readonly("times_sampled", &DpSgdCheckpoint::times_sampled)
      .def_readonly("train_accuracy", &DpSgdCheckpoint::train_accuracy)
      .def_readonly("test_accuracy", &DpSgdCheckpoint::test_accuracy)
      .def_readonly("privacy", &DpSgdCheckpoint::privacy)
      .def_readonly("rdp_order2", &DpSgdCheckpoint::rdp_order2)
      .def("rdp_mse_bound", &DpSgdCheckpoint::rdp_mse_bound)
      .def("dfil", &DpSgdCheckpoint::dfil, py::arg("private_dims"))
      .def("eta", &DpSgdCheckpoint::eta);

  py::class_<DpSgdResult>(m, "DpSgdResult", "DP-SGD runs with per-example FIL accounting.")
      .def_readonly("n", &DpSgdResult::n)
      .def_readonly("num_classes", &DpSgdResult::num_classes)
      .def_readonly("private_dims", &DpSgdResult::private_dims)
      .def_readonly("sampling_rate", &DpSgdResult::sampling_rate)
      .def_readonly("step_epsilon", &DpSgdResult::step_epsilon)
      .def_readonly("kappa", &DpSgdResult::kappa)
      .def_readonly("run_seeds", &DpSgdResult::run_seeds)
      .def_readonly("checkpoints", &DpSgdResult::checkpoints)
      .def_readonly("models", &DpSgdResult::models)
      .def_readonly("parameters", &DpSgdResult::parameters)
      .def_readonly("parameter_count", &DpSgdResult::parameter_count)
      .def_readonly("architecture", &DpSgdResult::architecture)
      .def_readonly("complete", &DpSgdResult::complete)
      .def_readonly("resumed", &DpSgdResult::resumed)
      .def_readonly("steps_done", &DpSgdResult::steps_done)
      .def_readonly("seconds", &DpSgdResult::seconds)
      .def_property_readonly("final_checkpoint", &DpSgdResult::final_checkpoint);

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
      "Train logistic/softmax regression (closed form) or a network (network='softmax'|'mlp'|'cnn', LibTorch) "
      "by DP-SGD (GELU clipping, Gaussian noise) with the per-example FIL accountant of the reconstruction "
      "paper's Algorithm 1. Keyword options: model, network, hidden, chunk, intercept, label, batch_size, "
      "sampling, steps, step_size, clip_norm, noise_multiplier, optimizer, momentum, adam_beta1, adam_beta2, "
      "adam_epsilon, weight_decay, init_scale, subsampling, kappa_delta, trace, spectral, probes, "
      "power_iterations, runs, seed, report_epochs, rdp_delta, checkpoint_path, checkpoint_every, stop_after. "
      "Returns (result, summary dict).");
  m.def("subsampling_kappa", &subsampling_kappa, py::arg("q"), py::arg("noise_multiplier"), py::arg("delta"));
  m.def("networks_available", &networks_available, "Whether this build has LibTorch (mlp and cnn networks).");

  py::class_<Network>(m, "Network",
                      "A smooth network (softmax, tanh MLP, the paper's ConvNet) with batched per-example clipped "
                      "gradients and their Jacobian products about the input (LibTorch).")
      .def(py::init([](const std::string& architecture, Index input_dim, Index num_classes,
                       const std::vector<Index>& hidden, bool intercept, Index chunk) {
             NetworkOptions options;
             options.architecture = parse_enum<NetworkArchitecture>(architecture);
             options.hidden = hidden;
             options.intercept = intercept;
             options.chunk = chunk;
             return Network(options, input_dim, num_classes);
           }),
           py::arg("architecture"), py::arg("input_dim"), py::arg("num_classes"),
           py::arg("hidden") = std::vector<Index>{128}, py::arg("intercept") = false, py::arg("chunk") = 100)
      .def_property_readonly("parameter_count", &Network::parameter_count)
      .def_property_readonly("input_dim", &Network::input_dim)
      .def_property_readonly("num_classes", &Network::num_classes)
      .def("describe", &Network::describe)
      .def(
          "initial_parameters",
          [](const Network& network, std::uint64_t seed) {
            std::mt19937_64 rng(seed);
            return network.initial_parameters(rng);
          },
          py::arg("seed") = 0)
      .def("logits", &Network::logits, py::arg("w"), py::arg("X"))
      .def("accuracy", &Network::accuracy, py::arg("w"), py::arg("X"), py::arg("y"))
      .def("gradients", &Network::gradients, py::arg("w"), py::arg("X"), py::arg("y"))
      .def("clipped_gradients", &Network::clipped_gradients, py::arg("w"), py::arg("X"), py::arg("y"),
           py::arg("clip_norm"))
      .def("jacobian_vector_products", &Network::jacobian_vector_products, py::arg("w"), py::arg("X"), py::arg("y"),
           py::arg("clip_norm"), py::arg("V"), "Row b: G_b V_b, G_b = d g~_b / d x_b.")
      .def("vector_jacobian_products", &Network::vector_jacobian_products, py::arg("w"), py::arg("X"), py::arg("y"),
           py::arg("clip_norm"), py::arg("U"), "Row b: G_b^T U_b.")
      .def(
          "account_batch",
          [](const Network& network, const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
             const std::string& trace, const std::string& spectral, int probes, int power_iterations,
             std::uint64_t seed) {
            NetworkAccountingRequest request{parse_enum<TraceMethod>(trace), parse_enum<SpectralMethod>(spectral),
                                             probes, power_iterations};
            const NetworkBatchAccounting a = network.account_batch(w, X, y, clip_norm, request, seed);
            return py::make_tuple(a.clipped_sum, a.trace, a.spectral);
          },
          py::arg("w"), py::arg("X"), py::arg("y"), py::arg("clip_norm"), py::arg("trace") = "gaussian",
          py::arg("spectral") = "none", py::arg("probes") = 1, py::arg("power_iterations") = 20, py::arg("seed") = 0,
          "(sum of clipped gradients, Tr(G^T G) per example, ||G||_2^2 per example).");
  m.def("subsampling_kappa", &subsampling_kappa, py::arg("q"), py::arg("noise_multiplier"), py::arg("delta"));
}

}  // namespace filkit::python
