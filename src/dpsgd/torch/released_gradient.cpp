// The plugin's ReleasedGradientBackend (network_backend.hpp): what private training with public
// data releases per example (public_data_training.hpp; docs/mathematics.md, section 11),
//   r(x) = clip(v(x)),  v = M g            (dpsgd, prune)
//                       v = M g + g_phi    (fim, perturbation objective; thesis equation 2.9)
//                       v = g_phi          (fim, gradient objective; thesis equation 2.4)
// with g = vec(x~ (softmax(W^T x~) - e_y)^T) the linear softmax model's per-example gradient
// (column-major, the GLM's order), M the unfrozen coordinates and clip the GELU clip of
// clipped_gradient.hpp. Everything is plain LibTorch autograd: J^T u = d<r, u>/dx is one reverse
// pass, and the gradient model's objective, which contains ||J^T u||^2, is differentiated about
// phi by a further reverse pass through that graph (create_graph): a third derivative of the loss.
#include "dpsgd/network_backend.hpp"
#include "dpsgd/torch/tensor_conversions.hpp"

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
#include <vector>

namespace filkit {

namespace {

using at::Tensor;

/// PyTorch's default initialisation of a layer with `fan_in` inputs: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor uniform_parameter(at::IntArrayRef shape, double fan_in, at::Generator& generator) {
  const double bound = 1.0 / std::sqrt(fan_in);
  return at::empty(shape, kDouble).uniform_(-bound, bound, generator).set_requires_grad(true);
}

/// JAX's GELU (tanh form), as clipped_gradient.hpp.
Tensor tanh_gelu(const Tensor& t) { return at::gelu(t, "tanh"); }

class TorchReleasedGradient final : public ReleasedGradientBackend {
 public:
  explicit TorchReleasedGradient(const ReleasedGradientSpec& spec) : spec_(spec) {
    p_ = spec.input_dim + (spec.intercept ? 1 : 0);
    released_ = at::empty({static_cast<std::int64_t>(spec.released.size())}, at::TensorOptions().dtype(at::kLong));
    for (std::size_t i = 0; i < spec.released.size(); ++i) released_[static_cast<std::int64_t>(i)] = spec.released[i];
    m_ = static_cast<std::int64_t>(spec.released.size());
    use_conv_ = spec.learned && spec.gradient_model.conv && spec.image.has_value();
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
      conv1_ = {uniform_parameter({16, image.channels, 8, 8}, c * 64, generator), uniform_parameter({16}, c * 64, generator)};
      conv2_ = {uniform_parameter({32, 16, 4, 4}, 16 * 16, generator), uniform_parameter({32}, 16 * 16, generator)};
      for (const Tensor& t : {conv1_[0], conv1_[1], conv2_[0], conv2_[1]}) parameters_.push_back(t);
      at::NoGradGuard no_grad;
      features += conv_features(at::zeros({1, spec_.input_dim}, kDouble)).size(1);
    }
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
    at::set_num_threads(omp_get_max_threads());
    const GradientModelOptions& o = spec_.gradient_model;
    std::mt19937_64 rng(seed);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x9e3779b97f4a7c15ULL);
    const Index n = X.rows(), B = std::min<Index>(o.batch_size, n);
    std::vector<Index> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), Index{0});
    const Tensor W = weights(theta);
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
      optimizer_->zero_grad();
      const Tensor loss = objective_tensor(W, to_tensor(Xb), to_labels(yb), probes);
      loss.backward();
      optimizer_->step();
      out.final_loss = loss.item<double>();
    }
    return out;
  }

  NetworkBatchAccounting account_batch(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                       const NetworkAccountingRequest& request, std::uint64_t seed) const override {
    at::set_num_threads(omp_get_max_threads());
    const Tensor x = to_tensor(X).set_requires_grad(true);
    const Tensor r = released_tensor(weights(theta), x, to_labels(y)).released;
    NetworkBatchAccounting out;
    out.clipped_sum = to_vector(r.sum(0));
    out.spectral = VectorXd::Constant(X.rows(), std::nan(""));
    const Index B = X.rows();
    Tensor trace = at::zeros({B}, kDouble);
    if (request.trace == TraceMethod::kExact) {
      // Tr(J^T J) = sum over the released coordinates j of ||J^T e_j||^2 (m reverse passes), or
      // over the input coordinates k of ||J e_k||^2 (d passes of the double-backward trick).
      if (m_ <= spec_.input_dim) {
        for (std::int64_t j = 0; j < m_; ++j)
          trace += gradient_about(r.select(1, j).sum(), x).pow(2).sum(1);
      } else {
        const Tensor dummy = at::zeros_like(r).set_requires_grad(true);
        const Tensor vjp = torch::autograd::grad({r}, {x}, {dummy}, true, true)[0];
        for (Index k = 0; k < spec_.input_dim; ++k)
          trace += gradient_about(vjp.select(1, k).sum(), dummy).pow(2).sum(1);
      }
    } else {
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
      for (int s = 0; s < request.probes; ++s) {
        const Tensor u = at::randn({B, m_}, generator, kDouble);
        trace += gradient_about((r * u).sum(), x).pow(2).sum(1);
      }
      trace /= static_cast<double>(request.probes);
    }
    out.trace = to_vector(trace);
    return out;
  }

  MatrixXd released(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const override {
    at::NoGradGuard no_grad;
    return to_row_matrix(released_tensor(weights(theta), to_tensor(X), to_labels(y)).released);
  }

  MatrixXd perturbation(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const override {
    at::NoGradGuard no_grad;
    const Forward f = released_tensor(weights(theta), to_tensor(X), to_labels(y));
    return f.model_output.defined() ? MatrixXd(to_row_matrix(f.model_output)) : MatrixXd::Zero(X.rows(), m_);
  }

  MatrixXd released_vjp(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                        const RowMatrix& U) const override {
    const Tensor x = to_tensor(X).set_requires_grad(true);
    const Tensor r = released_tensor(weights(theta), x, to_labels(y)).released;
    return to_row_matrix(gradient_about((r * to_tensor(U)).sum(), x));
  }

  double objective(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                   const RowMatrix& probes) const override {
    return objective_tensor(weights(theta), to_tensor(X), to_labels(y), to_tensor(probes)).item<double>();
  }

  VectorXd objective_gradient(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                              const RowMatrix& probes) const override {
    const Tensor loss = objective_tensor(weights(theta), to_tensor(X), to_labels(y), to_tensor(probes));
    std::vector<Tensor> flat;
    for (const Tensor& g : torch::autograd::grad({loss}, parameters_)) flat.push_back(g.reshape({-1}));
    return to_vector(at::cat(flat));
  }

  VectorXd phi() const override {
    std::vector<Tensor> flat;
    for (const Tensor& t : parameters_) flat.push_back(t.detach().reshape({-1}));
    return flat.empty() ? VectorXd() : to_vector(at::cat(flat));
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
  struct HiddenLayer {
    Tensor norm_weight, norm_bias, weight, bias;
  };
  struct Forward {
    Tensor released;      ///< r (B x m)
    Tensor model_output;  ///< g_phi (B x m), undefined without a model
    Tensor gradient;      ///< M g (B x m)
  };

  /// theta (column-major p x K) as the p x K matrix W.
  Tensor weights(const VectorXd& theta) const {
    return to_tensor(theta).reshape({spec_.num_classes, p_}).t();
  }

  static Tensor gradient_about(const Tensor& output, const Tensor& input, bool create_graph = false) {
    const Tensor g = torch::autograd::grad({output}, {input}, {}, true, create_graph, true)[0];
    return g.defined() ? g : at::zeros_like(input);
  }

  /// The conv branch's features (B x F) of image rows x (B x d).
  Tensor conv_features(const Tensor& x) const {
    const ImageShape& image = *spec_.image;
    Tensor h = x.reshape({x.size(0), image.channels, image.height, image.width});
    h = at::avg_pool2d(tanh_gelu(at::conv2d(h, conv1_[0], conv1_[1], at::IntArrayRef{2, 2}, at::IntArrayRef{2, 2})), {2, 2}, {1, 1});
    h = at::avg_pool2d(tanh_gelu(at::conv2d(h, conv2_[0], conv2_[1], at::IntArrayRef{2, 2}, at::IntArrayRef{0, 0})), {2, 2}, {1, 1});
    return h.reshape({x.size(0), -1});
  }

  Forward released_tensor(const Tensor& W, const Tensor& x, const Tensor& labels) const {
    const std::int64_t B = x.size(0);
    const Tensor xt = spec_.intercept ? at::cat({at::ones({B, 1}, kDouble), x}, 1) : x;
    const Tensor residual = at::softmax(xt.mm(W), 1) - at::one_hot(labels, spec_.num_classes).to(at::kDouble);
    const Tensor g = (residual.unsqueeze(2) * xt.unsqueeze(1)).reshape({B, -1});  // g[k p + j] = x~_j r_k
    Forward f;
    f.gradient = g.index_select(1, released_);
    Tensor v = f.gradient;
    if (spec_.learned) {
      const Tensor theta_released = W.t().reshape({1, -1}).index_select(1, released_).expand({B, m_});
      std::vector<Tensor> inputs;
      if (use_conv_) inputs.push_back(conv_features(x));
      inputs.push_back(theta_released);
      inputs.push_back(f.gradient);
      Tensor h = at::cat(inputs, 1);
      for (const HiddenLayer& layer : hidden_)
        h = tanh_gelu(at::linear(at::layer_norm(h, {h.size(1)}, layer.norm_weight, layer.norm_bias), layer.weight, layer.bias));
      f.model_output = at::linear(h, output_weight_, output_bias_);
      v = spec_.gradient_model.objective == GradientObjective::kPerturbation ? f.gradient + f.model_output
                                                                            : f.model_output;
    }
    // sqrt(|v|^2 + tiny): the same value, and a finite derivative (0) at v = 0.
    const Tensor norm = (v.pow(2).sum(1, true) + 1e-300).sqrt();
    f.released = v / (tanh_gelu(norm / spec_.clip_norm - 1.0) + 1.0);
    return f;
  }

  /// mean_b [ L'_b + lambda F_b ], F_b = mean_s ||J_b^T u_bs||^2 (/ ||r_b||^2 with snr), probes
  /// row b * S + s.
  Tensor objective_tensor(const Tensor& W, const Tensor& x_values, const Tensor& labels, const Tensor& probes) const {
    const GradientModelOptions& o = spec_.gradient_model;
    const Tensor x = x_values.detach().clone().set_requires_grad(true);
    const Forward f = released_tensor(W, x, labels);
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
    return (utility + o.lambda * fisher).mean();
  }

  ReleasedGradientSpec spec_;
  Index p_ = 0;
  std::int64_t m_ = 0;
  Tensor released_;
  bool use_conv_ = false;
  std::vector<Tensor> conv1_, conv2_;
  std::vector<HiddenLayer> hidden_;
  Tensor output_weight_, output_bias_;
  std::vector<Tensor> parameters_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

}  // namespace

}  // namespace filkit

extern "C" __attribute__((visibility("default"))) filkit::ReleasedGradientBackend*
filkit_create_released_gradient_backend(const filkit::ReleasedGradientSpec& spec) {
  return new filkit::TorchReleasedGradient(spec);
}
