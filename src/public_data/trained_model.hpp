// The model private training with public data trains (public_data_training.hpp): dpsgd's GLM or
// network (make_trainable_model, dpsgd/trainable_models.hpp: softmax regression in closed form or a
// network through LibTorch), with what pre-training, sgd and fim need beside it: its plan, which
// the released-gradient backend differentiates (network_layers.hpp: softmax regression is the
// softmax plan, in the GLM's order), and its unclipped gradients.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/dpsgd/training.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/networks/network_layers.hpp"

#include "dpsgd/trainable_models.hpp"

#include <memory>
#include <random>
#include <vector>

namespace filkit {

class TrainedModel {
 public:
  /// The model of `phase` (its kind softmax, or its network) on data like `like` with K classes.
  /// `like` must outlive the model.
  TrainedModel(const Dataset& like, const DpSgdOptions& phase, Index K);
  TrainedModel(const TrainedModel&) = delete;
  TrainedModel& operator=(const TrainedModel&) = delete;

  Index parameter_count() const { return plan_.parameter_count; }
  Index num_classes() const { return K_; }
  const NetworkPlan& plan() const { return plan_; }
  bool intercept() const { return phase_.intercept; }
  bool is_glm() const { return model_->is_glm(); }
  Index p() const { return plan_.parameter_count / K_; }  // softmax: rows of W
  /// Softmax regression's Model of w, trained on `like`'s examples.
  Model glm(const VectorXd& w) const { return model_->glm(w); }
  VectorXd initial_parameters(std::mt19937_64& rng) const { return model_->initial_parameters(rng); }
  double accuracy(const VectorXd& w, const Dataset& data) const { return model_->accuracy(w, data); }

  /// Softmax with reference_logit: the last class's weights (W's last column), held at zero.
  /// Otherwise empty: nothing fixed.
  std::vector<bool> fixed_coordinates(bool reference_logit) const;

  /// The mean cross-entropy gradient over `rows` of `data` at w. A network's per-example gradients
  /// are summed a chunk of rows at a time: all the public rows at once (the cosine diagnostic)
  /// would be a rows x p matrix, 11 GB for 2,500 CIFAR-10 images and its ConvNet's 550,570.
  VectorXd mean_gradient(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w) const;

  /// The mean over `rows` of each example's cross-entropy gradient through the smooth clip at
  /// clip_norm (privacy/soft_clip.hpp), its norm taken over the coordinates not `fixed` (empty, or
  /// one flag per coordinate; the fixed ones' entries are returned 0): the thesis' code's SGD step
  /// (its DP-SGD update at sigma 0). Computed in double.
  VectorXd mean_clipped_gradient(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w,
                                 double clip_norm, const std::vector<bool>& fixed) const;

  /// The per-example cross-entropy gradients of `rows` at w restricted to `released` (B x m).
  MatrixXd released_gradients(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w,
                              const std::vector<Index>& released) const;

  /// The rows a network differentiates at once (its chunk); 0 for softmax regression.
  Index rows_at_once() const;

 private:
  /// Calls visit(piece, first) for consecutive pieces of `rows` of at most the network's chunk,
  /// `first` the position of the piece's first row in `rows`.
  template <class Visit>
  void for_each_chunk(const std::vector<Index>& rows, Visit&& visit) const;

  Index K_;
  DpSgdOptions phase_;                     ///< as model_ reads it: no intercept on a network
  std::unique_ptr<TrainableModel> model_;  ///< dpsgd's GLM or network, on `like`
  NetworkPlan plan_;
};

}  // namespace filkit
