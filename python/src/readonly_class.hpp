// Read-only result classes whose attributes are also their pickled state, declared once:
//
//   ReadonlyClass<Model>(cls).field("l2", &Model::l2, "...").property("kind", get, set).done();
//
// binds each as a read-only attribute and makes the class picklable (pickle, copy.deepcopy,
// multiprocessing): __getstate__ is a dict of every declared attribute, __setstate__ builds the
// object from a default-constructed one and the same dict. An attribute not declared here is
// neither seen by Python nor pickled. Classes with py::dynamic_attr() also keep their __dict__
// (e.g. a `summary` dict set when the result is made).
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace filkit::python {

namespace py = pybind11;

namespace detail {
// A value as a Python object: Python objects as they are, C++ values through their casters.
template <class V>
py::object to_python(V&& value) {
  if constexpr (std::is_base_of_v<py::handle, std::decay_t<V>>) return py::reinterpret_borrow<py::object>(value);
  else return py::cast(std::forward<V>(value));
}
}  // namespace detail

template <class T, class... Options>
class ReadonlyClass {
 public:
  explicit ReadonlyClass(py::class_<T, Options...>& cls)
      : cls_(cls), entries_(std::make_shared<std::vector<Entry>>()) {}

  /// A member as a read-only attribute, pickled as itself.
  template <class M>
  ReadonlyClass& field(const char* name, M T::*member, const char* doc = "") {
    cls_.def_readonly(name, member, doc);
    entries_->push_back({name, [member](const T& object) { return py::cast(object.*member); },
                         [member](T& object, const py::handle& value) { object.*member = value.cast<M>(); }});
    return *this;
  }

  /// A computed attribute (e.g. an enum as its spelling) with the setter that restores it.
  template <class Get, class Set, class... Extra>
  ReadonlyClass& property(const char* name, Get get, Set set, const char* doc = "", const Extra&... extra) {
    cls_.def_property_readonly(name, get, extra..., doc);
    entries_->push_back({name, [get](const T& object) { return detail::to_python(get(object)); },
                         [set](T& object, const py::handle& value) { set(object, value); }});
    return *this;
  }

  /// Pickled, but not an attribute (or an attribute bound otherwise), through its own accessors:
  /// state Python does not read that the object needs, or a member whose type is pickled elsewhere.
  template <class Get, class Set>
  ReadonlyClass& state(const char* name, Get get, Set set) {
    entries_->push_back({name, [get](const T& object) { return detail::to_python(get(object)); },
                         [set](T& object, const py::handle& value) { set(object, value); }});
    return *this;
  }

  /// Defines the pickling from the attributes declared so far.
  void done() {
    const auto entries = entries_;
    constexpr bool dynamic = (std::is_same_v<Options, py::dynamic_attr> || ...);
    (void)dynamic;
    cls_.def(py::pickle(
        [entries](const py::object& self) {
          const T& object = self.cast<const T&>();
          py::dict state;
          for (const Entry& entry : *entries) state[entry.name.c_str()] = entry.get(object);
          py::dict instance_dict;
          if (py::hasattr(self, "__dict__")) instance_dict = self.attr("__dict__");
          return py::make_tuple(state, instance_dict);
        },
        [entries](const py::tuple& pickled) {
          if (pickled.size() != 2) throw py::value_error("unpickling: expected (attributes, __dict__)");
          const py::dict state = pickled[0].cast<py::dict>();
          T object{};
          for (const Entry& entry : *entries)
            if (state.contains(entry.name.c_str())) entry.set(object, state[entry.name.c_str()]);
          return std::make_pair(std::move(object), pickled[1].cast<py::dict>());
        }));
  }

 private:
  struct Entry {
    std::string name;
    std::function<py::object(const T&)> get;
    std::function<void(T&, const py::handle&)> set;
  };
  py::class_<T, Options...>& cls_;
  std::shared_ptr<std::vector<Entry>> entries_;
};

}  // namespace filkit::python
