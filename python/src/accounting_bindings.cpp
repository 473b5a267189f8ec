#include "bindings.hpp"

#include "filkit/dpsgd/rdp_accountant.hpp"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

namespace {

std::vector<double> orders_from(const py::object& orders) {
  if (orders.is_none()) return rdp_orders(OrderGrid::kOpacus);
  if (py::isinstance<py::str>(orders)) return rdp_orders(parse_enum<OrderGrid>(orders.cast<std::string>()));
  return orders.cast<std::vector<double>>();
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

  py::class_<RdpAccountant>(m, "RdpAccountant",
                            "RDP accountant of the sampled Gaussian mechanism (Mironov, Talwar, Zhang 2019); "
                            "default orders are Opacus's.")
      .def(py::init([](const py::object& orders) { return RdpAccountant(orders_from(orders)); }),
           py::arg("orders") = py::none(), "orders: None (Opacus's), 'opacus', 'tf-privacy' or a list")
      .def("compose", &RdpAccountant::compose, py::arg("q"), py::arg("noise_multiplier"), py::arg("steps"),
           "Add `steps` steps of the sampled Gaussian mechanism with sampling rate q.")
      .def("get_privacy_spent", &RdpAccountant::get_privacy_spent, py::arg("delta"))
      .def_property_readonly("orders", &RdpAccountant::orders)
      .def_property_readonly("rdp", &RdpAccountant::rdp);

  m.def(
      "subsampled_gaussian_rdp",
      [](double q, double noise_multiplier, const py::object& orders) {
        return subsampled_gaussian_rdp(q, noise_multiplier, orders_from(orders));
      },
      py::arg("q"), py::arg("noise_multiplier"), py::arg("orders") = py::none(),
      "RDP of one step of the sampled Gaussian mechanism at each order.");
  m.def("rdp_orders", [](const std::string& grid) { return rdp_orders(parse_enum<OrderGrid>(grid)); },
        py::arg("grid") = "opacus");
  m.def(
      "noise_multiplier_for_epsilon",
      [](double target_eps, double delta, double q, std::int64_t steps, const py::object& orders) {
        NoiseSearchOptions options;
        options.target_eps = target_eps;
        options.delta = delta;
        options.q = q;
        options.steps = steps;
        options.orders = orders_from(orders);
        const NoiseSearchResult result = noise_multiplier_for_epsilon(options);
        return py::make_tuple(result.noise_multiplier, result.privacy);
      },
      py::arg("target_eps"), py::arg("delta"), py::arg("q"), py::arg("steps"), py::arg("orders") = py::none(),
      "The smallest noise multiplier (by bisection) whose eps does not exceed the target: (sigma, PrivacySpent).");
}

}  // namespace filkit::python
