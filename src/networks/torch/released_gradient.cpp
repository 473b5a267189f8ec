// The plugin's ReleasedGradientBackend (network_backend.hpp): what private training with public
// data releases per example (public_data_training.hpp; docs/mathematics.md, section 11),
//   r(x) = clip(v(x)),  v = M g            (dpsgd, prune)
//                       v = M g + g_phi    (fim, perturbation objective; thesis equation 2.9)
//                       v = g_phi          (fim, gradient objective; thesis equation 2.4)
// with g the trained model's per-example cross-entropy gradient in the plan's parameter order (for
// softmax regression vec(x~ (softmax(W^T x~) - e_y)^T), the GLM's order), M the unfrozen
// coordinates and clip the GELU clip of clipped_gradient.hpp. g comes from one reverse pass of the
// summed loss to every layer's pre-activations (row b of each is example b's own) and per-example
// products with the layers' inputs, kept in the graph. Everything is plain LibTorch autograd:
// J^T u = d<r, u>/dx is one reverse pass, and the gradient model's objective, which contains
// ||J^T u||^2, is differentiated about phi by a further reverse pass through that graph
// (create_graph): a third derivative of the loss. The constant models' objective (perturbation_objective)
// needs no such pass: its per-example gradients and their Jacobian products about x come from the
// records of one forward and backward pass, as the networks' accountant computes them
// (clipped_gradients.hpp), not through a graph of the B x p per-example gradients.
// A batch is cut into pieces (pieces.hpp) sized so
// that the gradient model's B x (features + 2m) tensors stay near 8 MB: at the ConvNet's 13,005
// released coordinates a batch of 512 is otherwise 4.5 GB of graph, every tensor of which the
// kernel faults in and zeroes afresh (a third of the time).
#include "networks/network_backend.hpp"
#include "networks/torch/clipped_gradients.hpp"
#include "networks/torch/forward_pass.hpp"
#include "networks/torch/pieces.hpp"
#include "networks/torch/tensor_conversions.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/adamw.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace filkit {

namespace {

using at::Tensor;

/// PyTorch's default initialisation of a layer with `fan_in` inputs: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor uniform_parameter(at::IntArrayRef shape, double fan_in, at::Generator& generator) {
  const double bound = 1.0 / std::sqrt(fan_in);
  return at::empty(shape, kDouble).uniform_(-bound, bound, generator).set_requires_grad(true);
}

/// JAX's GELU (tanh form), as clipped_gradient.hpp, and its derivative.
Tensor tanh_gelu(const Tensor& t) { return at::gelu(t, "tanh"); }
Tensor tanh_gelu_derivative(const Tensor& t) {
  const double k0 = std::sqrt(2.0 / M_PI), k1 = 0.044715;
  const Tensor th = at::tanh(k0 * (t + k1 * t.pow(3)));
  return 0.5 * (1.0 + th) + 0.5 * t * (1.0 - th.pow(2)) * k0 * (1.0 + 3.0 * k1 * t.pow(2));
}

/// The constant models' objective's terms that do not depend on c, for a piece of consecutive
/// examples (pieces.hpp): g = M g_b (count x m, float64) and, for any directions, M J_g v_b,
/// computed in `real` from the records of one forward and backward pass (clipped_gradients.hpp):
/// J_R v by the double-backward trick, then the per-example products by hand, with no B x p tensor
/// in any graph. The records' graph is kept, so products along new directions cost only their own
/// reverse pass (PerturbationObjectiveTermCache).
struct PieceOfTerms {
  ClippedGradients records;
  Tensor H;         ///< J_R^T of the records' dummy cotangents, with its graph (count x d)
  Tensor g;         ///< M g_b (count x m), float64
  Tensor released;  ///< M's coordinates

  PieceOfTerms(const ReleasedGradientSpec& spec, const Tensor& released_coordinates, const Tensor& w,
               const RowMatrix& X, const Tensor& labels, Rows piece, at::ScalarType real)
      : records(clipped_gradients(
            spec.plan, spec.intercept, w,
            to_tensor(RowMatrix(X.middleRows(piece.first, piece.count)), real).set_requires_grad(true),
            labels.narrow(0, piece.first, piece.count), 0.0, true)),
        released(released_coordinates) {
    H = records.prepare_jacobian_vector_products();
    g = records.unclipped().index_select(1, released).to(at::kDouble);
  }
  /// M J_g v_b (count x m, float64) of the directions V (count x d, the records' type): the probes,
  /// or without them (`unit` >= 0) the unit vector e_unit of every example (the exact trace).
  Tensor products(const Tensor& V, Index unit = -1) const {
    const Tensor directional = unit >= 0 ? H.select(1, unit).sum() : (H * V).sum();
    return records.jacobian_vector_products(directional).index_select(1, released).to(at::kDouble);
  }
};

/// PerturbationObjectiveTermCache: the pieces' records kept for the examples at one theta.
class TorchPerturbationObjectiveTermCache final : public PerturbationObjectiveTermCache {
 public:
  TorchPerturbationObjectiveTermCache(const ReleasedGradientSpec& spec, const Tensor& released, const VectorXd& theta,
                                      const RowMatrix& X, const VectorXd& y, Precision precision)
      : real_(real_type(precision)), d_(X.cols()) {
    at::set_num_threads(omp_get_max_threads());
    const Tensor w = to_tensor(theta, real_), labels = to_labels(y);
    parts_ = pieces_of({0, X.rows()}, spec.max_piece_rows > 0 ? spec.max_piece_rows : kPieceRows);
    pieces_.resize(parts_.size());
    gradients_.resize(X.rows(), static_cast<Index>(spec.released.size()));
    for_each_piece(parts_, [&](std::size_t i, Rows piece) {
      pieces_[i] = std::make_unique<PieceOfTerms>(spec, released, w, X, labels, piece, real_);
      gradients_.middleRows(piece.first, piece.count) = to_row_matrix(pieces_[i]->g);
    });
  }

  const RowMatrix& gradients() const override { return gradients_; }

  void probe_products(const RowMatrix& probes, RowMatrix& products) const override {
    at::set_num_threads(omp_get_max_threads());
    const Index n = gradients_.rows(), S = probes.rows() / std::max<Index>(1, n);
    // The library passes probe blocks of the right shape: a bug otherwise.
    if (S < 1 || probes.rows() != n * S || probes.cols() != d_)
      throw std::logic_error("probe_products: " + std::to_string(probes.rows()) + " x " +
                             std::to_string(probes.cols()) + " probes for " + std::to_string(n) + " examples of " +
                             std::to_string(d_) + " features: expected a positive multiple of " + std::to_string(n) +
                             " rows");
    products.resize(n * S, gradients_.cols());
    for_each_piece(parts_, [&](std::size_t i, Rows piece) {
      const RowMatrix mine = probes.middleRows(piece.first * S, piece.count * S);
      const Tensor v = to_tensor(mine, real_).reshape({piece.count, S, d_});
      for (Index k = 0; k < S; ++k) {
        const RowMatrix dm = to_row_matrix(pieces_[i]->products(v.select(1, k)));
        for (Index b = 0; b < piece.count; ++b) products.row((piece.first + b) * S + k) = dm.row(b);
      }
    });
  }

 private:
  at::ScalarType real_;
  Index d_;
  std::vector<Rows> parts_;
  std::vector<std::unique_ptr<PieceOfTerms>> pieces_;
  RowMatrix gradients_;
};

class TorchReleasedGradient final : public ReleasedGradientBackend {
 public:
  explicit TorchReleasedGradient(const ReleasedGradientSpec& spec) : spec_(spec), real_(real_type(spec.precision)) {
    // Options are checked before (public_data_options.cpp): a bug otherwise.
    if (spec.learned && spec.precision != Precision::kFloat64)
      throw std::logic_error("TorchReleasedGradient: a learned gradient model trains in float64 only");
    released_ = at::empty({static_cast<std::int64_t>(spec.released.size())}, at::TensorOptions().dtype(at::kLong));
    for (std::size_t i = 0; i < spec.released.size(); ++i) released_[static_cast<std::int64_t>(i)] = spec.released[i];
    m_ = static_cast<std::int64_t>(spec.released.size());
    use_conv_ = spec.learned && spec.gradient_model.conv && spec.image.has_value();
    widest_ = spec.plan.parameter_count;
    if (spec.learned) initialize(0);
  }

  void initialize(std::uint64_t seed) override {
    if (!spec_.learned) return;
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    parameters_.clear();
    std::int64_t features = 2 * m_;  // the unfrozen parameters and gradient
    if (use_conv_) {
      const ImageShape& image = *spec_.image;
      const double c = static_cast<double>(image.channels);
      conv1_ = {uniform_parameter({16, image.channels, 8, 8}, c * 64, generator),
                uniform_parameter({16}, c * 64, generator)};
      conv2_ = {uniform_parameter({32, 16, 4, 4}, 16 * 16, generator), uniform_parameter({32}, 16 * 16, generator)};
      for (const Tensor& t : {conv1_[0], conv1_[1], conv2_[0], conv2_[1]}) parameters_.push_back(t);
      at::NoGradGuard no_grad;
      features += conv_features(at::zeros({1, spec_.input_dim}, kDouble)).size(1);
    }
    widest_ = std::max<Index>(widest_, features);
    hidden_.clear();
    for (Index width : spec_.gradient_model.hidden) {
      // Layer normalisation (per example: no coupling of the batch's members), dense, GELU.
      HiddenLayer layer{at::ones({features}, kDouble).set_requires_grad(true),
                        at::zeros({features}, kDouble).set_requires_grad(true),
                        uniform_parameter({width, features}, static_cast<double>(features), generator),
                        uniform_parameter({width}, static_cast<double>(features), generator)};
      for (const Tensor& t : {layer.norm_weight, layer.norm_bias, layer.weight, layer.bias}) parameters_.push_back(t);
      hidden_.push_back(layer);
      features = width;
    }
    output_weight_ = uniform_parameter({m_, features}, static_cast<double>(features), generator);
    output_bias_ = uniform_parameter({m_}, static_cast<double>(features), generator);
    if (spec_.gradient_model.objective == GradientObjective::kPerturbation) {
      // g_phi starts at 0, so fim starts as DP-SGD (prune) and moves away only as far as its
      // objective asks; with lambda = 0 it stays there (the objective ||g_phi||^2 is then minimal).
      at::NoGradGuard no_grad;
      output_weight_.zero_();
      output_bias_.zero_();
    }
    parameters_.push_back(output_weight_);
    parameters_.push_back(output_bias_);
    const GradientModelOptions& o = spec_.gradient_model;
    optimizer_ = std::make_unique<torch::optim::AdamW>(
        parameters_, torch::optim::AdamWOptions(o.step_size).weight_decay(o.weight_decay));
  }

  GradientModelTraining train(const VectorXd& theta, const RowMatrix& X, const VectorXd& y, Index steps,
                              std::uint64_t seed) override {
    GradientModelTraining out;
    if (!spec_.learned || steps == 0) return out;
    const GradientModelOptions& o = spec_.gradient_model;
    std::mt19937_64 rng(seed);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x9e3779b97f4a7c15ULL);
    const Index n = X.rows(), B = std::min<Index>(o.batch_size, n);
    std::vector<Index> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), Index{0});
    const Tensor w = weights(theta);
    for (Index s = 0; s < steps; ++s) {
      for (Index j = 0; j < B; ++j) {  // partial Fisher-Yates: a uniform B-subset
        std::uniform_int_distribution<Index> pick(j, n - 1);
        std::swap(order[static_cast<std::size_t>(j)], order[static_cast<std::size_t>(pick(rng))]);
      }
      RowMatrix Xb(B, X.cols());
      VectorXd yb(B);
      for (Index j = 0; j < B; ++j) {
        Xb.row(j) = X.row(order[static_cast<std::size_t>(j)]);
        yb(j) = y(order[static_cast<std::size_t>(j)]);
      }
      const Tensor probes = at::randn({B * o.probes, m_}, generator, kDouble);
      const ObjectiveValue objective = objective_over_pieces(w, Xb, yb, probes, /*with_gradient=*/true);
      for (std::size_t i = 0; i < parameters_.size(); ++i) parameters_[i].mutable_grad() = objective.gradient[i];
      optimizer_->step();
      out.final_loss = objective.value;
    }
    return out;
  }

  NetworkBatchAccounting account_batch(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                       const NetworkAccountingRequest& request, std::uint64_t seed,
                                       Index first_position, Index batch_rows) const override {
    at::set_num_threads(omp_get_max_threads());
    const Index B = X.rows();
    // The library passes the members' place in their batch: a bug otherwise.
    if (first_position < 0 || first_position + B > batch_rows)
      throw std::logic_error("account_batch: members " + std::to_string(first_position) + " .. " +
                             std::to_string(first_position + B - 1) + " of a batch of " + std::to_string(batch_rows));
    // Drawn for the whole batch (in double, then in the computation's type), so that they depend
    // neither on the pieces nor on how the batch's members are split over ranks; the members' rows kept.
    std::vector<Tensor> probes;
    if (request.trace != TraceMethod::kExact) {
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
      for (int s = 0; s < request.probes; ++s)
        probes.push_back(at::randn({batch_rows, m_}, generator, kDouble).narrow(0, first_position, B).to(real_));
    }
    const Tensor w = weights(theta), labels = to_labels(y);
    const std::vector<Rows> parts = pieces(B);
    std::vector<Tensor> sums(parts.size());
    const Tensor trace = at::zeros({B}, kDouble);
    for_each_piece(parts, [&](std::size_t i, Rows piece) {
      const Tensor x = to_tensor(RowMatrix(X.middleRows(piece.first, piece.count)), real_).set_requires_grad(true);
      const Tensor r = released_tensor(w, x, labels.narrow(0, piece.first, piece.count)).released;
      sums[i] = r.sum(0).detach();
      std::vector<Tensor> piece_probes;
      for (const Tensor& u : probes) piece_probes.push_back(u.narrow(0, piece.first, piece.count));
      trace.narrow(0, piece.first, piece.count).copy_(piece_trace(r, x, piece_probes));
    });
    NetworkBatchAccounting out;
    Tensor clipped_sum = at::zeros({m_}, kDouble);
    for (const Tensor& sum : sums) clipped_sum += sum;  // in the pieces' order
    out.clipped_sum = to_vector(clipped_sum);
    out.spectral = VectorXd::Constant(B, std::nan(""));
    out.trace = to_vector(trace);
    return out;
  }

  MatrixXd released(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const override {
    return rows_over_pieces(theta, X, y, m_, [&](const Tensor& w, const Tensor& x, const Tensor& labels, Rows) {
      return released_tensor(w, x, labels, false).released;
    });
  }

  MatrixXd perturbation(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const override {
    return rows_over_pieces(theta, X, y, m_, [&](const Tensor& w, const Tensor& x, const Tensor& labels, Rows) {
      const Forward f = released_tensor(w, x, labels, false);
      return f.model_output.defined() ? f.model_output : at::zeros({x.size(0), m_}, kDouble);
    });
  }

  MatrixXd released_vjp(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                        const RowMatrix& U) const override {
    const Tensor u = to_tensor(U, real_);
    return rows_over_pieces(theta, X, y, spec_.input_dim,
                            [&](const Tensor& w, const Tensor& x, const Tensor& labels, Rows piece) {
                              const Tensor r = released_tensor(w, x, labels).released;
                              return gradient_about((r * u.narrow(0, piece.first, piece.count)).sum(), x);
                            });
  }

  double objective(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                   const RowMatrix& probes) const override {
    return objective_over_pieces(weights(theta), X, y, to_tensor(probes), false).value;
  }

  VectorXd objective_gradient(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                              const RowMatrix& probes) const override {
    std::vector<Tensor> flat;
    for (const Tensor& g : objective_over_pieces(weights(theta), X, y, to_tensor(probes), true).gradient)
      flat.push_back(g.reshape({-1}));
    return to_vector(at::cat(flat));
  }

  VectorXd phi() const override {
    std::vector<Tensor> flat;
    for (const Tensor& t : parameters_) flat.push_back(t.detach().reshape({-1}));
    return flat.empty() ? VectorXd() : to_vector(at::cat(flat));
  }

  void set_shift(const VectorXd& c) override {
    if (c.size() == 0) {
      shift_ = Tensor();
      return;
    }
    // The library passes probe blocks of the right shape: a bug otherwise.
    if (c.size() != m_)
      throw std::logic_error("set_shift: the shift has " + std::to_string(c.size()) + " values for " +
                             std::to_string(m_) + " released coordinates");
    shift_ = to_tensor(c, real_);
  }

  PerturbationObjectiveValue perturbation_objective(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                                    const VectorXd& c, const RowMatrix& probes,
                                                    const PerturbationObjectiveRequest& request) const override {
    const Index B = X.rows(), S = probes.rows() / std::max<Index>(1, B);
    const Tensor shift = to_tensor(c).set_requires_grad(true);
    std::vector<double> values;
    std::vector<Tensor> gradients;
    for_each_piece_of_terms(
        theta, X, y, probes, request.precision,
        [&](std::size_t i, Rows piece, const Tensor& g, Index directions, const auto& product) {
          const std::int64_t count = piece.count;
          const Tensor u = g + shift;
          const Tensor n = (u.pow(2).sum(1) + 1e-300).sqrt();
          const Tensor t = n / spec_.clip_norm - 1.0;
          const Tensor s = tanh_gelu(t) + 1.0;
          const Tensor kappa = tanh_gelu_derivative(t) / spec_.clip_norm / (s.pow(2) * n);  // d(1/s)/dn / n, negated
          Tensor trace = at::zeros({count}, kDouble);
          for (Index k = 0; k < directions; ++k) {
            const Tensor dm = product(k);
            // dr = dm / s - kappa u (u . dm)
            const Tensor along = (u * dm).sum(1);
            trace = trace + dm.pow(2).sum(1) / s.pow(2) - 2.0 * kappa * along.pow(2) / s + (kappa * n * along).pow(2);
          }
          if (S > 0) trace = trace / static_cast<double>(S);
          Tensor fisher = trace + request.floor;
          if (request.snr) fisher = fisher / (u.pow(2).sum(1) / s.pow(2));
          const Tensor sum = static_cast<double>(count) * shift.pow(2).sum() + request.lambda * fisher.sum();
          values[i] = sum.item<double>();
          gradients[i] = torch::autograd::grad({sum}, {shift})[0];
        },
        [&](std::size_t pieces) {
          values.resize(pieces);
          gradients.resize(pieces);
        });
    PerturbationObjectiveValue out;
    Tensor gradient = at::zeros({m_}, kDouble);
    for (std::size_t i = 0; i < values.size(); ++i) {  // in the pieces' order
      out.value += values[i];
      gradient += gradients[i];
    }
    out.value /= static_cast<double>(B);
    out.gradient = to_vector(gradient / static_cast<double>(B));
    return out;
  }

  PerturbationObjectiveTerms perturbation_objective_terms(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                                          const RowMatrix& probes, Precision precision) const override {
    const Index B = X.rows(), S = probes.rows() / std::max<Index>(1, B);
    // The library passes probe blocks of the right shape: a bug otherwise.
    if (S < 1 || probes.rows() != B * S)
      throw std::logic_error("perturbation_objective_terms: " + std::to_string(probes.rows()) + " probe rows for " +
                             std::to_string(B) + " examples: expected a positive multiple");
    PerturbationObjectiveTerms terms;
    terms.gradients.resize(B, m_);
    terms.probe_products.resize(B * S, m_);
    for_each_piece_of_terms(
        theta, X, y, probes, precision,
        [&](std::size_t, Rows piece, const Tensor& g, Index directions, const auto& product) {
          terms.gradients.middleRows(piece.first, piece.count) = to_row_matrix(g);
          for (Index k = 0; k < directions; ++k) {
            const RowMatrix dm = to_row_matrix(product(k));
            for (Index b = 0; b < piece.count; ++b) terms.probe_products.row((piece.first + b) * S + k) = dm.row(b);
          }
        },
        [](std::size_t) {});
    return terms;
  }

  std::unique_ptr<PerturbationObjectiveTermCache> perturbation_objective_term_cache(
      const VectorXd& theta, const RowMatrix& X, const VectorXd& y, Precision precision) const override {
    return std::make_unique<TorchPerturbationObjectiveTermCache>(spec_, released_, theta, X, y, precision);
  }

  void set_phi(const VectorXd& phi) override {
    at::NoGradGuard no_grad;
    Index offset = 0;
    for (Tensor& t : parameters_) {
      const Index size = t.numel();
      t.copy_(to_tensor(VectorXd(phi.segment(offset, size))).reshape(t.sizes()));
      offset += size;
    }
  }

 private:
  /// The constant models' objective's terms that do not depend on c (PieceOfTerms), a piece
  /// (pieces.hpp) at a time: body(i, piece, g, directions, product) with g = M g_b of the piece's
  /// examples (count x m) and product(k) = M J_g v_k (count x m) for direction k, the probes (rows
  /// b S + k) or, with no probes, the unit vectors of the exact trace; both float64, computed in
  /// `precision`. sized(pieces) is called first with the number of pieces.
  template <class Body, class Sized>
  void for_each_piece_of_terms(const VectorXd& theta, const RowMatrix& X, const VectorXd& y, const RowMatrix& probes,
                               Precision precision, const Body& body, const Sized& sized) const {
    at::set_num_threads(omp_get_max_threads());
    const Index B = X.rows(), S = probes.rows() / std::max<Index>(1, B);
    const at::ScalarType real = real_type(precision);
    const Tensor w = to_tensor(theta, real), labels = to_labels(y), all_probes = to_tensor(probes, real);
    const std::vector<Rows> parts = pieces_of({0, B}, spec_.max_piece_rows > 0 ? spec_.max_piece_rows : kPieceRows);
    sized(parts.size());
    for_each_piece(parts, [&](std::size_t i, Rows piece) {
      const std::int64_t count = piece.count, d = spec_.input_dim;
      const PieceOfTerms terms(spec_, released_, w, X, labels, piece, real);
      const Tensor v = S > 0 ? all_probes.narrow(0, piece.first * S, count * S).reshape({count, S, d}) : Tensor();
      const auto product = [&](Index k) {
        return S > 0 ? terms.products(v.select(1, k)) : terms.products(Tensor(), k);
      };
      body(i, piece, terms.g, S > 0 ? S : spec_.input_dim, product);
    });
  }

  struct HiddenLayer {
    Tensor norm_weight, norm_bias, weight, bias;
  };
  struct Forward {
    Tensor released;      ///< r (B x m)
    Tensor model_output;  ///< g_phi (B x m), undefined without a model
    Tensor gradient;      ///< M g (B x m)
  };
  /// The gradient model's objective on a batch and, when asked for, its gradient about phi (one
  /// tensor a parameter).
  struct ObjectiveValue {
    double value = 0.0;
    std::vector<Tensor> gradient;
  };

  /// The pieces of a batch of B rows: at most spec_.max_piece_rows, or as many as keep a B x
  /// widest_ tensor near 8 MB.
  std::vector<Rows> pieces(Index B) const {
    constexpr Index kDoublesPerTensor = Index{1} << 20;
    const Index rows = spec_.max_piece_rows > 0 ? spec_.max_piece_rows
                                                : std::max<Index>(1, kDoublesPerTensor / std::max<Index>(1, widest_));
    return pieces_of({0, B}, rows);
  }

  /// The rows (B x width) of rows_of(w, x, labels, piece) over the pieces, x a leaf that requires grad.
  template <class RowsOf>
  MatrixXd rows_over_pieces(const VectorXd& theta, const RowMatrix& X, const VectorXd& y, Index width,
                            const RowsOf& rows_of) const {
    at::set_num_threads(omp_get_max_threads());
    const Tensor w = weights(theta), labels = to_labels(y);
    const Tensor out = at::empty({X.rows(), width}, kDouble);
    for_each_piece(pieces(X.rows()), [&](std::size_t, Rows piece) {
      const Tensor x = to_tensor(RowMatrix(X.middleRows(piece.first, piece.count)), real_).set_requires_grad(true);
      out.narrow(0, piece.first, piece.count)
          .copy_(rows_of(w, x, labels.narrow(0, piece.first, piece.count), piece).detach());
    });
    return to_row_matrix(out);
  }

  /// Tr(J_b^T J_b) of a piece's members: exact without probes, else the mean of ||J_b^T u_b||^2
  /// over the probes (each B_piece x m).
  Tensor piece_trace(const Tensor& r, const Tensor& x, const std::vector<Tensor>& probes) const {
    Tensor trace = at::zeros({x.size(0)}, kDouble);
    if (!probes.empty()) {
      for (const Tensor& u : probes) trace += gradient_about((r * u).sum(), x).pow(2).sum(1);
      return trace / static_cast<double>(probes.size());
    }
    // Tr(J^T J) = sum over the released coordinates j of ||J^T e_j||^2 (m reverse passes), or
    // over the input coordinates k of ||J e_k||^2 (d passes of the double-backward trick).
    if (m_ <= spec_.input_dim) {
      for (std::int64_t j = 0; j < m_; ++j) trace += gradient_about(r.select(1, j).sum(), x).pow(2).sum(1);
    } else {
      const Tensor dummy = at::zeros_like(r).set_requires_grad(true);
      const Tensor vjp = torch::autograd::grad({r}, {x}, {dummy}, true, true)[0];
      for (Index k = 0; k < spec_.input_dim; ++k) trace += gradient_about(vjp.select(1, k).sum(), dummy).pow(2).sum(1);
    }
    return trace;
  }

  /// The objective's mean over the batch (probes: row b * S + s) and its gradient about phi, the
  /// pieces' sums added in their order.
  ObjectiveValue objective_over_pieces(const Tensor& w, const RowMatrix& X, const VectorXd& y, const Tensor& probes,
                                       bool with_gradient) const {
    at::set_num_threads(omp_get_max_threads());
    const Index B = X.rows(), S = probes.size(0) / B;
    const Tensor x = to_tensor(X), labels = to_labels(y);
    const std::vector<Rows> parts = pieces(B);
    std::vector<double> values(parts.size());
    std::vector<std::vector<Tensor>> gradients(parts.size());
    for_each_piece(parts, [&](std::size_t i, Rows piece) {
      const Tensor sum =
          objective_sum(w, x.narrow(0, piece.first, piece.count), labels.narrow(0, piece.first, piece.count),
                        probes.narrow(0, piece.first * S, piece.count * S));
      values[i] = sum.item<double>();
      if (!with_gradient) return;
      gradients[i] = torch::autograd::grad({sum}, parameters_, {}, false, false, true);
      for (std::size_t j = 0; j < parameters_.size(); ++j)
        if (!gradients[i][j].defined()) gradients[i][j] = at::zeros_like(parameters_[j]);
    });
    ObjectiveValue out;
    for (double value : values) out.value += value;
    out.value /= static_cast<double>(B);
    if (!with_gradient) return out;
    for (std::size_t j = 0; j < parameters_.size(); ++j) {
      Tensor sum = at::zeros_like(parameters_[j]);
      for (const std::vector<Tensor>& piece : gradients) sum += piece[j];  // in the pieces' order
      out.gradient.push_back(sum / static_cast<double>(B));
    }
    return out;
  }

  /// theta as a leaf that requires grad: the per-example gradients are reverse passes through it.
  Tensor weights(const VectorXd& theta) const { return to_tensor(theta, real_).set_requires_grad(true); }

  /// Per-example gradients of the cross-entropy (B x p, the plan's parameter order), in the graph
  /// (about x and, through x, for the gradient model's objective) when `create_graph`.
  Tensor per_example_gradients(const Tensor& w, const Tensor& x, const Tensor& labels, bool create_graph) const {
    const ForwardPass pass = forward_pass(spec_.plan, spec_.intercept, w, x);
    const Tensor loss = -at::log_softmax(pass.logits, 1).gather(1, labels.view({-1, 1})).sum();
    const std::vector<Tensor> dz = torch::autograd::grad({loss}, pass.preactivations, {}, true, create_graph);
    std::vector<Tensor> blocks;
    std::size_t l = 0;
    const std::int64_t B = x.size(0);
    for (const PlannedLayer& layer : spec_.plan.layers) {
      if (!layer.spec.has_parameters()) continue;
      const Tensor& delta = dz[l];           // dense: B x out; conv: B x out x L
      const Tensor& input = pass.inputs[l];  // dense: B x in;  conv: B x (in kh kw) x L
      const bool conv = layer.spec.kind == LayerKind::kConv;
      blocks.push_back((conv ? at::matmul(delta, input.transpose(1, 2)) : delta.unsqueeze(2) * input.unsqueeze(1))
                           .reshape({B, -1}));  // the weight's (out x fan_in) row-major layout
      if (layer.spec.bias) blocks.push_back(conv ? delta.sum(2) : delta);
      ++l;
    }
    return at::cat(blocks, 1);
  }

  static Tensor gradient_about(const Tensor& output, const Tensor& input, bool create_graph = false) {
    const Tensor g = torch::autograd::grad({output}, {input}, {}, true, create_graph, true)[0];
    return g.defined() ? g : at::zeros_like(input);
  }

  /// The conv branch's features (B x F) of image rows x (B x d).
  Tensor conv_features(const Tensor& x) const {
    const ImageShape& image = *spec_.image;
    Tensor h = x.reshape({x.size(0), image.channels, image.height, image.width});
    h = at::avg_pool2d(tanh_gelu(at::conv2d(h, conv1_[0], conv1_[1], at::IntArrayRef{2, 2}, at::IntArrayRef{2, 2})),
                       {2, 2}, {1, 1});
    h = at::avg_pool2d(tanh_gelu(at::conv2d(h, conv2_[0], conv2_[1], at::IntArrayRef{2, 2}, at::IntArrayRef{0, 0})),
                       {2, 2}, {1, 1});
    return h.reshape({x.size(0), -1});
  }

  Forward released_tensor(const Tensor& w, const Tensor& x, const Tensor& labels, bool create_graph = true) const {
    const std::int64_t B = x.size(0);
    Forward f;
    f.gradient = per_example_gradients(w, x, labels, create_graph).index_select(1, released_);
    Tensor v = shift_.defined() ? f.gradient + shift_ : f.gradient;
    if (spec_.learned) {
      const Tensor theta_released = w.detach().index_select(0, released_).unsqueeze(0).expand({B, m_});
      std::vector<Tensor> inputs;
      if (use_conv_) inputs.push_back(conv_features(x));
      inputs.push_back(theta_released);
      inputs.push_back(f.gradient);
      Tensor h = at::cat(inputs, 1);
      for (const HiddenLayer& layer : hidden_)
        h = tanh_gelu(
            at::linear(at::layer_norm(h, {h.size(1)}, layer.norm_weight, layer.norm_bias), layer.weight, layer.bias));
      f.model_output = at::linear(h, output_weight_, output_bias_);
      v = spec_.gradient_model.objective == GradientObjective::kPerturbation ? f.gradient + f.model_output
                                                                             : f.model_output;
    }
    // sqrt(|v|^2 + tiny): the same value, and a finite derivative (0) at v = 0 (tiny is 0 in
    // float, where a subnormal does the same).
    const Tensor norm = (v.pow(2).sum(1, true) + (real_ == at::kFloat ? 1e-40 : 1e-300)).sqrt();
    f.released = v / (tanh_gelu(norm / spec_.clip_norm - 1.0) + 1.0);
    return f;
  }

  /// sum_b [ L'_b + lambda F_b ], F_b = mean_s ||J_b^T u_bs||^2 (/ ||r_b||^2 with snr), probes
  /// row b * S + s.
  Tensor objective_sum(const Tensor& w, const Tensor& x_values, const Tensor& labels, const Tensor& probes) const {
    const GradientModelOptions& o = spec_.gradient_model;
    const Tensor x = x_values.detach().clone().set_requires_grad(true);
    const Forward f = released_tensor(w, x, labels);
    const std::int64_t B = x.size(0), S = probes.size(0) / B;
    const Tensor utility = o.objective == GradientObjective::kPerturbation
                               ? f.model_output.pow(2).sum(1)
                               : (f.gradient - f.model_output).pow(2).sum(1);
    const Tensor u = probes.reshape({B, S, m_});
    Tensor fisher = at::zeros({B}, kDouble);
    for (std::int64_t s = 0; s < S; ++s)
      fisher = fisher + gradient_about((f.released * u.select(1, s)).sum(), x, true).pow(2).sum(1);
    fisher = fisher / static_cast<double>(S);
    if (o.snr) fisher = fisher / f.released.pow(2).sum(1);
    return (utility + o.lambda * fisher).sum();
  }

  ReleasedGradientSpec spec_;
  at::ScalarType real_;  ///< spec_.precision's: the releases' tensor type
  std::int64_t m_ = 0;
  Tensor released_;
  bool use_conv_ = false;
  Index widest_ = 1;  ///< per example: the larger of p and the gradient model's input features
  std::vector<Tensor> conv1_, conv2_;
  std::vector<HiddenLayer> hidden_;
  Tensor output_weight_, output_bias_;
  std::vector<Tensor> parameters_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  Tensor shift_;  ///< c of the constant gradient models (m), undefined without
};

}  // namespace

}  // namespace filkit

extern "C" __attribute__((visibility("default"))) filkit::ReleasedGradientBackend*
filkit_create_released_gradient_backend(const filkit::ReleasedGradientSpec& spec) {
  return new filkit::TorchReleasedGradient(spec);
}
