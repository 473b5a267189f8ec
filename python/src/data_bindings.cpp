#include "bindings.hpp"
#include "job_bindings.hpp"
#include "readonly_class.hpp"

#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/data/preprocessing.hpp"

#include <nlohmann/json.hpp>
#include <pybind11/eigen.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

namespace {

Dataset make_dataset(const Eigen::Ref<const RowMatrix>& X, const Eigen::Ref<const VectorXd>& y,
                     const std::string& source, std::optional<std::tuple<Index, Index, Index>> image) {
  if (X.rows() != y.size())
    throw DataError("Dataset: X has " + std::to_string(X.rows()) + " rows but y has " + std::to_string(y.size()) +
                    " values");
  Dataset data;
  data.X = X;
  data.y = y;
  data.source = source;
  if (image) data.image = ImageShape{std::get<0>(*image), std::get<1>(*image), std::get<2>(*image)};
  data.validate();
  return data;
}

// DataOptions from keywords: the library's names and defaults (load.hpp).
DatasetSplit load_dataset_from_kwargs(const py::kwargs& kwargs) {
  DataOptions options;
  std::set<std::string> accepted;
  visit_fields(options, KwargsBinder{kwargs, accepted});
  reject_unknown_keywords("load_dataset", kwargs, accepted);
  return load_dataset(options);
}

}  // namespace

void bind_data(py::module_& m) {
  py::class_<AttributeColumns> attribute_columns(m, "AttributeColumns",
                                                 "The columns of X that encode one source attribute.");
  ReadonlyClass(attribute_columns)
      .field("name", &AttributeColumns::name)
      .field("columns", &AttributeColumns::columns)
      .field("levels", &AttributeColumns::levels)
      .field("dropped_level", &AttributeColumns::dropped_level)
      .field("categorical", &AttributeColumns::categorical)
      .done();

  py::class_<Dataset> dataset(m, "Dataset", "X (n x d, one example a row) and targets y (class indices or values).");
  dataset.def(py::init(&make_dataset), py::arg("X"), py::arg("y"), py::arg("source") = "numpy",
              py::arg("image") = py::none(),
              "A dataset from NumPy arrays (copied once into the library's row-major storage); image=(C, H, W) when "
              "the rows are images, channel-major (X.reshape(n, C, H, W) as PyTorch's NCHW).");
  ReadonlyClass(dataset)
      .property(
          "X", [](const Dataset& d) -> const RowMatrix& { return d.X; },
          [](Dataset& d, const py::handle& value) { d.X = value.cast<RowMatrix>(); },
          "Features, n x d (read-only view)", py::return_value_policy::reference_internal)
      .property(
          "y", [](const Dataset& d) -> const VectorXd& { return d.y; },
          [](Dataset& d, const py::handle& value) { d.y = value.cast<VectorXd>(); }, "Targets, n (read-only view)",
          py::return_value_policy::reference_internal)
      .field("feature_names", &Dataset::feature_names)
      .field("attributes", &Dataset::attributes)
      .field("class_names", &Dataset::class_names)
      .field("source", &Dataset::source)
      .property(
          "image",
          [](const Dataset& d) -> py::object {
            if (!d.image) return py::none();
            return py::make_tuple(d.image->channels, d.image->height, d.image->width);
          },
          [](Dataset& d, const py::handle& value) {
            if (value.is_none()) return d.image.reset();
            const auto [c, h, w] = value.cast<std::tuple<Index, Index, Index>>();
            d.image = ImageShape{c, h, w};
          },
          "The image shape (channels, height, width) of every row of X, stored channel-major as PyTorch's NCHW "
          "(X.reshape(n, C, H, W)); None for tables and after PCA")
      .field("dropped_rows", &Dataset::dropped_rows, "Source rows left out for missing values (tables)")
      .done();
  dataset.def_property_readonly("n", &Dataset::n)
      .def_property_readonly("d", &Dataset::d)
      .def("attribute", &Dataset::attribute, py::arg("name"), py::return_value_policy::reference_internal)
      .def("select_rows", &Dataset::select_rows, py::arg("rows"))
      .def("__repr__", [](const Dataset& d) {
        return "<filkit.Dataset n=" + std::to_string(d.n()) + " d=" + std::to_string(d.d()) + " source='" + d.source +
               "'>";
      });

  py::class_<DatasetSplit> split(m, "DatasetSplit", "A train/test pair.");
  split.def(py::init([](Dataset train, Dataset test) {
              return DatasetSplit{std::move(train), std::move(test)};
            }),
            py::arg("train"), py::arg("test"));
  ReadonlyClass(split).field("train", &DatasetSplit::train).field("test", &DatasetSplit::test).done();

  keyword_registry()["load_dataset"] = [] {
    py::list keywords;
    add_keywords(keywords, DataOptions{});
    return keywords;
  };
  keyword_registry()["preprocess"] = [] {
    py::list keywords;
    add_keywords(keywords, PreprocessOptions{});
    add_keywords(keywords, RunKeywords{});
    return keywords;
  };
  m.def("load_dataset", &load_dataset_from_kwargs,
        "The library's DataOptions as keywords (filkit.defaults: the signature). "
        "Load a built-in dataset (fashion-mnist, mnist, cifar10, or 'NAME:DIR' with an image built-in's files in "
        "DIR; income-regression, income-classification, credit-g) or a .csv/.arff/.npz file and its train/test "
        "split. An .npz X may be a table (n, d) or images (n, H, W), (n, C, H, W) or (n, H, W, C): image_layout "
        "'nchw' or 'nhwc' says which a 4-D X is (None = auto, from the shape when it allows one reading). Images "
        "keep their shape (Dataset.image). Pixels stay raw (0..255); see preprocess(). "
        "train_size/test_size > 0 keep a random subset drawn with seed (the CLI's --train-size/--test-size with "
        "the same --seed give the same rows). max_memory ('2G', '512M' or bytes) refuses a file whose size or "
        "declared shape needs more.");
  m.def("builtin_dataset_names", &builtin_dataset_names);

  m.def(
      "preprocess",
      [](const DatasetSplit& split, py::kwargs kwargs) {
        PreprocessOptions options;
        std::set<std::string> accepted;
        visit_fields(options, KwargsBinder{kwargs, accepted});
        const RunKeywords run = take_run_keywords(kwargs, accepted);
        reject_unknown_keywords("preprocess", kwargs, accepted);
        Preprocessor fitted;
        DatasetSplit result;
        {
          py::gil_scoped_release release;
          const ThreadsForCall threads(run.threads);
          result = preprocess(split, options, &fitted);
        }
        return py::make_tuple(std::move(result), json_to_python(fitted.to_json().dump()));
      },
      py::arg("split"),
      "The library's PreprocessOptions as keywords, named as the jobs' (scale_pixels, standardize, row_scaling, "
      "pca, scale_after_pca), and threads. Fit preprocessing on split.train and apply it to "
      "both parts: pixels /255, per-channel standardisation of images (standardize='channel': each channel's "
      "training mean and standard deviation), row scaling (none, global-max, unit-ball), PCA to `pca` "
      "dimensions. Returns (split, record).");
}

}  // namespace filkit::python
