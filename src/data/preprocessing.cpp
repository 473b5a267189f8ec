#include "filkit/data/preprocessing.hpp"

#include <stdexcept>

namespace filkit {

namespace {

double max_row_norm(const RowMatrix& X) {
  return X.rows() > 0 ? X.rowwise().norm().maxCoeff() : 0.0;
}

void scale_rows(RowMatrix& X, const Preprocessor& fitted) {
  switch (fitted.options.row_scaling) {
    case RowScaling::kNone:
      return;
    case RowScaling::kGlobalMax:
      X /= fitted.global_max_norm;
      return;
    case RowScaling::kUnitBall:
      for (Index i = 0; i < X.rows(); ++i) {
        const double norm = X.row(i).norm();
        if (norm > 1.0) X.row(i) /= norm;
      }
      return;
  }
}

void fit_row_scaling(const RowMatrix& X, Preprocessor& fitted) {
  if (fitted.options.row_scaling != RowScaling::kGlobalMax) return;
  fitted.global_max_norm = max_row_norm(X);
  if (!(fitted.global_max_norm > 0.0)) {
    throw std::invalid_argument("row_scaling = global-max needs a nonzero training row; every "
                                "training row has norm 0");
  }
}

// Flips each column so that its largest-magnitude entry is positive: eigenvectors are defined
// up to sign only, and a fixed sign keeps results comparable across runs and libraries.
void fix_signs(MatrixXd& components) {
  for (Index c = 0; c < components.cols(); ++c) {
    Index largest;
    components.col(c).cwiseAbs().maxCoeff(&largest);
    if (components(largest, c) < 0) components.col(c) *= -1.0;
  }
}

void fit_pca(const RowMatrix& X, Preprocessor& fitted) {
  const Index k = fitted.options.pca_components;
  fitted.pca_mean = X.colwise().mean().transpose();
  const RowMatrix centred = X.rowwise() - fitted.pca_mean.transpose();
  // A symmetric rank-n update (BLAS syrk) fills one triangle at half the cost of a full GEMM;
  // the eigen-solver reads only that triangle.
  MatrixXd covariance = MatrixXd::Zero(X.cols(), X.cols());
  covariance.selfadjointView<Eigen::Lower>().rankUpdate(centred.transpose(),
                                                        1.0 / static_cast<double>(X.rows() - 1));
  const Eigen::SelfAdjointEigenSolver<MatrixXd> eigen(covariance);
  if (eigen.info() != Eigen::Success) {
    throw std::runtime_error("PCA: the eigen-decomposition of the training covariance failed");
  }
  // Eigen sorts eigenvalues increasingly; the last k belong to the top components. Rounding can
  // leave tiny negative eigenvalues of a singular covariance, which are variances of zero.
  fitted.pca_components = eigen.eigenvectors().rightCols(k).rowwise().reverse();
  fitted.pca_variances = eigen.eigenvalues().tail(k).reverse().cwiseMax(0.0);
  fitted.pca_total_variance = covariance.trace();
  fix_signs(fitted.pca_components);
}

RowMatrix project(const RowMatrix& X, const Preprocessor& fitted) {
  return (X.rowwise() - fitted.pca_mean.transpose()) * fitted.pca_components;
}

void check_fit_input(const Dataset& train, const PreprocessOptions& options) {
  const Index k = options.pca_components;
  if (k > train.d()) {
    throw std::invalid_argument("pca_components = " + std::to_string(k) + " must be in 1.." +
                                std::to_string(train.d()) + " (the data's dimension), or 0 for no PCA");
  }
  if (k > 0 && train.n() < 2) {
    throw std::invalid_argument("PCA needs at least 2 training rows, found " + std::to_string(train.n()));
  }
  if (train.n() == 0) throw std::invalid_argument("cannot fit preprocessing on 0 training rows");
}

std::vector<std::string> step_order(const PreprocessOptions& options) {
  std::vector<std::string> steps;
  if (options.scale_pixels) steps.push_back("scale_pixels");
  const bool scaling = options.row_scaling != RowScaling::kNone;
  const bool pca = options.pca_components > 0;
  if (scaling && !options.scale_after_pca) steps.push_back("row_scaling");
  if (pca) steps.push_back("pca");
  if (scaling && options.scale_after_pca) steps.push_back("row_scaling");
  return steps;
}

}  // namespace



void PreprocessOptions::validate() const {
  if (pca_components < 0) {
    throw std::invalid_argument("pca_components = " + std::to_string(pca_components) +
                                " must be >= 0 (0 = no PCA)");
  }
  if (row_scaling != RowScaling::kNone && row_scaling != RowScaling::kGlobalMax &&
      row_scaling != RowScaling::kUnitBall) {
    throw std::invalid_argument("row_scaling = " + std::to_string(static_cast<int>(row_scaling)) +
                                " is not a RowScaling value");
  }
}

Preprocessor Preprocessor::fit(const Dataset& train, const PreprocessOptions& options) {
  options.validate();
  check_fit_input(train, options);
  Preprocessor fitted;
  fitted.options = options;
  fitted.input_dimension = train.d();
  RowMatrix X = options.scale_pixels ? RowMatrix(train.X / 255.0) : train.X;
  if (!options.scale_after_pca) {
    fit_row_scaling(X, fitted);
    scale_rows(X, fitted);
  }
  if (options.pca_components > 0) {
    fit_pca(X, fitted);
    X = project(X, fitted);
  }
  if (options.scale_after_pca) fit_row_scaling(X, fitted);
  return fitted;
}

Index Preprocessor::output_dimension() const {
  return options.pca_components > 0 ? options.pca_components : input_dimension;
}

Dataset Preprocessor::apply(const Dataset& data) const {
  Dataset out = data;
  if (data.n() == 0) {
    out.X.resize(0, output_dimension());
  } else if (data.d() != input_dimension) {
    throw std::invalid_argument(data.source + " has " + std::to_string(data.d()) +
                                " columns, but the preprocessing was fitted on " +
                                std::to_string(input_dimension));
  } else {
    if (options.scale_pixels) out.X /= 255.0;
    if (!options.scale_after_pca) scale_rows(out.X, *this);
    if (options.pca_components > 0) out.X = project(out.X, *this);
    if (options.scale_after_pca) scale_rows(out.X, *this);
  }
  if (options.pca_components > 0) {
    out.feature_names.clear();
    for (Index c = 1; c <= options.pca_components; ++c) out.feature_names.push_back("pc" + std::to_string(c));
    out.attributes.clear();
  }
  return out;
}

nlohmann::json Preprocessor::to_json() const {
  return {
      {"scale_pixels", options.scale_pixels},
      {"row_scaling", to_string(options.row_scaling)},
      {"pca_components", options.pca_components},
      {"scale_after_pca", options.scale_after_pca},
      {"order", step_order(options)},
      {"input_dimension", input_dimension},
      {"output_dimension", output_dimension()},
      {"global_max_norm", global_max_norm},
      {"pca_variances", std::vector<double>(pca_variances.begin(), pca_variances.end())},
      {"pca_total_variance", pca_total_variance},
  };
}

DatasetSplit preprocess(const DatasetSplit& split, const PreprocessOptions& options,
                        Preprocessor* fitted) {
  const Preprocessor preprocessor = Preprocessor::fit(split.train, options);
  if (fitted != nullptr) *fitted = preprocessor;
  return {preprocessor.apply(split.train), preprocessor.apply(split.test)};
}

}  // namespace filkit
