// The model private training with public data trains (public_data_training.hpp): softmax regression
// in closed form or a network through LibTorch, with the unclipped gradients pre-training, sgd and
// fim's diagnostics need.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/dpsgd/training.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/networks/network_layers.hpp"
#include "filkit/networks/networks.hpp"

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

namespace filkit {

/// Softmax regression's Model of parameters w (p x K, column by column) trained on n examples.
Model softmax_model(const VectorXd& w, Index p, Index K, bool intercept, Index n);

/// The rows of X (with a leading 1 for the intercept).
MatrixXd softmax_design(const Dataset& data, const std::vector<Index>& rows, bool intercept);

/// The mean cross-entropy gradient over `rows` at W (p x K), as a vector in the GLM's order.
VectorXd softmax_mean_gradient(const Dataset& data, const std::vector<Index>& rows, const MatrixXd& W, bool intercept);

class TrainedModel {
 public:
  TrainedModel(const Dataset& like, const DpSgdOptions& phase, Index K)
      : K_(K), intercept_(!phase.network && phase.intercept), init_scale_(phase.init_scale) {
    if (phase.network) {
      network_.emplace(*phase.network, like.d(), K, like.image);
      plan_ = network_->plan();
    } else {
      NetworkOptions softmax;
      softmax.architecture = NetworkArchitecture::kSoftmax;
      softmax.intercept = intercept_;
      plan_ = plan_network(builtin_network_layers(softmax, K), {like.d() + (intercept_ ? 1 : 0)}, K);
    }
  }
  Index parameter_count() const { return plan_.parameter_count; }
  const NetworkPlan& plan() const { return plan_; }
  bool intercept() const { return intercept_; }
  bool is_glm() const { return !network_; }
  Index p() const { return plan_.parameter_count / K_; }  // softmax: rows of W

  Model glm(const VectorXd& w, Index n) const { return softmax_model(w, p(), K_, intercept_, n); }

  VectorXd initial_parameters(std::mt19937_64& rng) const {
    if (network_) return network_->initial_parameters(rng);
    VectorXd w = VectorXd::Zero(parameter_count());
    if (init_scale_ > 0.0) {
      std::normal_distribution<double> unit_normal;
      for (Index i = 0; i < w.size(); ++i) w(i) = init_scale_ * unit_normal(rng);
    }
    return w;
  }

  /// Softmax with reference_logit: the last class's weights (W's last column), held at zero.
  /// Otherwise empty: nothing fixed.
  std::vector<bool> fixed_coordinates(bool reference_logit) const {
    if (!reference_logit) return {};
    std::vector<bool> fixed(static_cast<std::size_t>(parameter_count()), false);
    for (Index i = (K_ - 1) * p(); i < parameter_count(); ++i) fixed[static_cast<std::size_t>(i)] = true;
    return fixed;
  }

  /// The mean cross-entropy gradient over `rows` of `data` at w. A network's per-example gradients
  /// are summed a chunk of rows at a time: all the public rows at once (the cosine diagnostic)
  /// would be a rows x p matrix, 11 GB for 2,500 CIFAR-10 images and its ConvNet's 550,570.
  VectorXd mean_gradient(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w) const {
    if (!network_) return softmax_mean_gradient(data, rows, Eigen::Map<const MatrixXd>(w.data(), p(), K_), intercept_);
    VectorXd sum = VectorXd::Zero(parameter_count());
    for_each_chunk(rows, [&](const std::vector<Index>& piece, Index) {
      const Dataset batch = data.select_rows(piece);
      sum += network_->gradients(w, batch.X, batch.y).colwise().sum().transpose();
    });
    return sum / static_cast<double>(rows.size());
  }

  /// The rows a network differentiates at once (its chunk).
  Index rows_at_once() const { return network_ ? network_->options().chunk : 0; }

  double accuracy(const VectorXd& w, const Dataset& data) const {
    return network_ ? network_->accuracy(w, data.X, data.y) : filkit::accuracy(glm(w, data.n()), data);
  }

  /// Calls visit(piece, first) for consecutive pieces of `rows` of at most the network's chunk,
  /// `first` the position of the piece's first row in `rows`.
  template <class Visit>
  void for_each_chunk(const std::vector<Index>& rows, Visit&& visit) const {
    const auto chunk = static_cast<std::size_t>(network_->options().chunk);
    for (std::size_t start = 0; start < rows.size(); start += chunk) {
      const auto end = rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), start + chunk));
      visit(std::vector<Index>(rows.begin() + static_cast<std::ptrdiff_t>(start), end), static_cast<Index>(start));
    }
  }

  /// The per-example cross-entropy gradients of `rows` at w restricted to `released` (B x m).
  MatrixXd released_gradients(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w,
                              const std::vector<Index>& released) const {
    const Index B = static_cast<Index>(rows.size()), m = static_cast<Index>(released.size());
    MatrixXd out(B, m);
    if (network_) {  // a chunk of rows at a time, as mean_gradient
      for_each_chunk(rows, [&](const std::vector<Index>& piece, Index first) {
        const Dataset batch = data.select_rows(piece);
        const MatrixXd G = network_->gradients(w, batch.X, batch.y);
        for (Index j = 0; j < m; ++j)
          out.block(first, j, G.rows(), 1) = G.col(released[static_cast<std::size_t>(j)]);
      });
      return out;
    }
    const MatrixXd Xt = softmax_design(data, rows, intercept_);
    const Eigen::Map<const MatrixXd> W(w.data(), p(), K_);
    for (Index b = 0; b < B; ++b) {
      VectorXd e = (Xt.row(b) * W).transpose();
      e.array() -= e.maxCoeff();
      e = e.array().exp().matrix();
      e /= e.sum();
      e(static_cast<Index>(data.y(rows[static_cast<std::size_t>(b)]))) -= 1.0;
      for (Index j = 0; j < m; ++j) {  // coordinate k p + i is x~_i e_k
        const Index coordinate = released[static_cast<std::size_t>(j)];
        out(b, j) = Xt(b, coordinate % p()) * e(coordinate / p());
      }
    }
    return out;
  }

 private:
  Index K_;
  bool intercept_;
  double init_scale_;
  std::optional<Network> network_;
  NetworkPlan plan_;
};

}  // namespace filkit
