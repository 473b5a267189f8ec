#include "bindings.hpp"

#include "filkit/dpsgd/training.hpp"
#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/rdp_accountant.hpp"
#include "filkit/privacy/step_privacy.hpp"

#include <nlohmann/json.hpp>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

namespace {

std::vector<double> orders_from(const py::object& orders) {
  if (orders.is_none()) return rdp_orders(OrderGrid::kOpacus);
  if (py::isinstance<py::str>(orders)) return rdp_orders(parse_enum<OrderGrid>(orders.cast<std::string>()));
  return orders.cast<std::vector<double>>();
}

// An accountant's relation from the batch sampling its front end names ("poisson", "uniform").
NeighbouringRelation relation_of_sampling(const std::string& sampling) {
  return neighbouring_relation(require_accountable(parse_enum<BatchSampling>(sampling)));
}

// The batch sampling an accountant's relation comes from: its `sampling` property.
std::string sampling_of(NeighbouringRelation relation) {
  return relation == NeighbouringRelation::kAddRemove ? "poisson" : "uniform";
}

nlohmann::json json_from_python(const py::object& value) {
  return nlohmann::json::parse(py::module_::import("json").attr("dumps")(value).cast<std::string>());
}

}  // namespace

void bind_accounting(py::module_& m) {
  py::class_<PrivacySpent>(m, "PrivacySpent", "An (eps, delta) guarantee converted from an RDP curve.")
      .def_readonly("eps", &PrivacySpent::eps)
      .def_readonly("delta", &PrivacySpent::delta)
      .def_readonly("optimal_order", &PrivacySpent::optimal_order)
      .def_readonly("orders", &PrivacySpent::orders)
      .def_readonly("rdp", &PrivacySpent::rdp)
      .def_property_readonly("status", [](const PrivacySpent& p) { return to_string(p.status); })
      .def_readonly("warning", &PrivacySpent::warning)
      .def("__repr__", [](const PrivacySpent& p) {
        return "<filkit.PrivacySpent eps=" + std::to_string(p.eps) + " order=" + std::to_string(p.optimal_order) + ">";
      });

  py::class_<PrivacyAccountant>(m, "PrivacyAccountant",
                                "The incremental interface of the accountants (docs/accountants.md): step, epsilon, "
                                "delta, state_dict / load_state_dict, noise_multiplier.")
      .def("step", &PrivacyAccountant::step, py::arg("noise_multiplier"), py::arg("sample_rate"), py::arg("steps") = 1,
           "Record `steps` steps of the sampled Gaussian mechanism (noise multiplier sigma > 0, rate q in [0, 1]).")
      .def("epsilon", &PrivacyAccountant::epsilon, py::arg("delta"),
           "The eps (an upper bound) of an (eps, delta) guarantee for everything recorded; 0 when empty.")
      .def("delta", &PrivacyAccountant::delta, py::arg("epsilon"), "delta at this eps (an upper bound); 0 when empty.")
      .def(
          "state_dict", [](const PrivacyAccountant& a) { return json_to_python(a.state_dict().dump()); },
          "The kind, settings and recorded events as a JSON-compatible dict.")
      .def(
          "load_state_dict",
          [](PrivacyAccountant& a, const py::object& state) { a.load_state_dict(json_from_python(state)); },
          py::arg("state"), "Restore what state_dict() returned (ValueError when it is another accountant's).")
      .def(
          "noise_multiplier",
          [](const PrivacyAccountant& a, double target_eps, double delta, double sample_rate, std::int64_t steps) {
            return noise_multiplier_for_epsilon([&a] { return a.empty_like(); }, target_eps, delta, sample_rate, steps)
                .noise_multiplier;
          },
          py::arg("target_eps"), py::arg("delta"), py::arg("sample_rate"), py::arg("steps"),
          "The smallest noise multiplier (bisection, eps within 1e-4 of the target, never above it) for `steps` "
          "steps at this rate, by an accountant of this kind and settings (what is recorded here is ignored).")
      .def_property_readonly("description", &PrivacyAccountant::description)
      .def_property_readonly("history", [](const PrivacyAccountant& a) {
        py::list events;
        for (const AccountantEvent& e : a.history())
          events.append(py::dict(py::arg("noise_multiplier") = e.noise_multiplier,
                                 py::arg("sample_rate") = e.sample_rate, py::arg("steps") = e.steps));
        return events;
      });

  py::class_<RdpAccountant, PrivacyAccountant>(
      m, "RdpAccountant",
      "RDP accountant of the sampled Gaussian mechanism (Mironov, Talwar, Zhang 2019; without replacement: Wang, "
      "Balle, Kasiviswanathan 2019); default orders are Opacus's.")
      .def(py::init([](const py::object& orders, const std::string& sampling) {
             return RdpAccountant(orders_from(orders), relation_of_sampling(sampling));
           }),
           py::arg("orders") = py::none(), py::arg("sampling") = "poisson",
           "orders: None (Opacus's), 'opacus', 'tf-privacy' or a list; sampling: 'poisson' (add/remove) or "
           "'uniform' (fixed-size batches without replacement, replace-one)")
      .def("compose", &RdpAccountant::compose, py::kw_only(), py::arg("noise_multiplier"), py::arg("sample_rate"),
           py::arg("steps"),
           "Add `steps` steps of the sampled Gaussian mechanism (noise multiplier sigma >= 0, 0 giving eps = inf; "
           "sample rate q in [0, 1]); keywords only, in step()'s order.")
      .def(
          "compose",
          [](RdpAccountant& a, double q, double noise_multiplier, std::int64_t steps) {
            a.compose(noise_multiplier, q, steps);
          },
          py::kw_only(), py::arg("q"), py::arg("noise_multiplier"), py::arg("steps"),
          "The same with the sample rate under its former keyword q.")
      .def("get_privacy_spent", &RdpAccountant::get_privacy_spent, py::arg("delta"))
      .def_property_readonly("orders", &RdpAccountant::orders)
      .def_property_readonly("rdp", &RdpAccountant::rdp)
      .def_property_readonly("sampling", [](const RdpAccountant& a) { return sampling_of(a.relation()); })
      .def_property_readonly("neighbouring_relation", [](const RdpAccountant& a) { return to_string(a.relation()); });

  py::class_<PldAccountant, PrivacyAccountant>(
      m, "PldAccountant",
      "Privacy loss distribution accountant of the sampled Gaussian mechanism (pessimistic connect-the-dots "
      "discretisation, composition by FFT): an upper bound on eps, tighter than RDP.")
      .def(py::init([](const std::string& sampling, double discretization, double truncation_mass) {
             return PldAccountant(relation_of_sampling(sampling), PldSettings{discretization, truncation_mass});
           }),
           py::arg("sampling") = "poisson", py::arg("discretization") = PldSettings{}.discretization,
           py::arg("truncation_mass") = PldSettings{}.truncation_mass,
           "sampling: 'poisson' or 'uniform'; discretization: the loss grid's spacing h; truncation_mass: the tail "
           "mass cut (pessimistically) per discretisation and composition")
      .def_property_readonly("infinity_mass", &PldAccountant::infinity_mass,
                             "The mass at infinite loss (truncation), which every delta includes.")
      .def_property_readonly("sampling", [](const PldAccountant& a) { return sampling_of(a.relation()); })
      .def_property_readonly("neighbouring_relation", [](const PldAccountant& a) { return to_string(a.relation()); })
      .def_property_readonly("discretization", [](const PldAccountant& a) { return a.settings().discretization; });

  m.def(
      "subsampled_gaussian_rdp",
      [](double sample_rate, double noise_multiplier, const py::object& orders) {
        return subsampled_gaussian_rdp(noise_multiplier, sample_rate, orders_from(orders));
      },
      py::arg("sample_rate"), py::arg("noise_multiplier"), py::arg("orders") = py::none(),
      "RDP of one step of the sampled Gaussian mechanism at each order (positional order as before: sample_rate, "
      "noise_multiplier; q= is read as sample_rate=).");
  // What dpsgd's summaries say about the accounting, for filkit.torch's summary (one wording).
  m.def(
      "neighbouring_relation", [](const std::string& sampling) { return describe(relation_of_sampling(sampling)); },
      py::arg("sampling"), "The neighbouring relation a sampling ('poisson' or 'uniform') is accounted under.");
  m.def(
      "sampling_note",
      [](const std::string& sampler) -> py::object {
        const char* note = sampling_note(parse_enum<BatchSampling>(sampler));
        return note ? py::object(py::str(note)) : py::object(py::none());
      },
      py::arg("sampler"),
      "filkit dpsgd's note on a sampler ('uniform', 'poisson', 'shuffle') that no accountant covers, or None.");
  m.attr("EFFECTIVE_NOISE_MULTIPLIER_REASON") = kEffectiveNoiseMultiplierReason;
  m.def(
      "rdp_orders", [](const std::string& grid) { return rdp_orders(parse_enum<OrderGrid>(grid)); },
      py::arg("grid") = "opacus");
  m.def(
      "noise_multiplier_for_epsilon",
      [](double target_eps, double delta, double sample_rate, std::int64_t steps, const py::object& orders) {
        const RdpAccountant empty(orders_from(orders));
        const double sigma =
            noise_multiplier_for_epsilon([&empty] { return empty.empty_like(); }, target_eps, delta, sample_rate, steps)
                .noise_multiplier;
        RdpAccountant found(empty.orders());
        found.step(sigma, sample_rate, steps);
        return py::make_tuple(sigma, found.get_privacy_spent(delta));
      },
      py::arg("target_eps"), py::arg("delta"), py::arg("sample_rate"), py::arg("steps"), py::arg("orders") = py::none(),
      "The smallest noise multiplier (by bisection) whose eps does not exceed the target: (sigma, PrivacySpent).");
}

}  // namespace filkit::python
