#include "filkit/public_data/constant_perturbation.hpp"
#include "filkit/base/io.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"

#include "base/parallel_blocks.hpp"

#include "filkit/base/errors.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace filkit {

namespace {

// Examples per block: the blocks' products are GEMMs of this many rows, and the blocks (not
// Eigen) are what the threads share, in an order-fixed sum (base/parallel_blocks.hpp).
constexpr Index kBlockExamples = 64;

// The clip's scalar functions of n = ||u|| (constant_perturbation.hpp): ||J v||^2 =
// a ||J_m v||^2 + b (u.J_m v)^2, ||r||^2 = n^2/s^2, and their derivatives in n.
struct ClipScalars {
  double inv_s, a, b, da, db, norm2, dnorm2;
};

ClipScalars clip_scalars(double n, double C) {
  const double t = n / C - 1.0;
  const double s = gelu(t) + 1.0, s1 = gelu_derivative(t) / C, s2 = gelu_second_derivative(t) / (C * C);
  const double s_2 = 1.0 / (s * s), s_3 = s_2 / s;
  ClipScalars k{};
  k.inv_s = 1.0 / s;
  k.a = s_2;
  k.da = -2.0 * s1 * s_3;
  k.norm2 = n * n * s_2;
  k.dnorm2 = 2.0 * n * s_2 - 2.0 * n * n * s1 * s_3;
  if (n > 0.0) {                // at u = 0 both u.J_m v and J_m^T u vanish: the b terms are zero
    const double q = s1 * s_2;  // kappa n
    k.b = q * q - 2.0 * s1 * s_3 / n;
    k.db = 2.0 * q * (s2 * s_2 - 2.0 * s1 * s1 * s_3) -
           2.0 * (s2 * s_3 / n - 3.0 * s1 * s1 * s_3 / s / n - s1 * s_3 / (n * n));
  }
  return k;
}

// Softmax probabilities P and residuals E = P - onehot(y) of a block's scores (nb x K).
void residuals(MatrixXd& scores, const Eigen::Ref<const VectorXd>& y, MatrixXd& E) {
  for (Index i = 0; i < scores.rows(); ++i) {
    scores.row(i).array() -= scores.row(i).maxCoeff();
    scores.row(i) = scores.row(i).array().exp().matrix();
    scores.row(i) /= scores.row(i).sum();
  }
  E = scores;
  for (Index i = 0; i < y.size(); ++i) E(i, static_cast<Index>(y(i))) -= 1.0;
}

// rows <- S_b rows, S_b = diag(p) - p p^T the softmax Jacobian of example i / per, p = P.row(i / per).
void apply_softmax_jacobian(const MatrixXd& P, MatrixXd& rows, Index per = 1) {
  for (Index r = 0; r < rows.rows(); ++r) {
    const auto p = P.row(r / per);
    rows.row(r) = p.cwiseProduct((rows.row(r).array() - p.dot(rows.row(r))).matrix());
  }
}

}  // namespace

PerturbationObjectiveValue perturbation_objective_from_terms(const RowMatrix& gradients,
                                                             const RowMatrix& probe_products,
                                                             const std::vector<Index>& rows, const VectorXd& c,
                                                             double clip_norm, double lambda, bool snr, double floor) {
  const Index n = gradients.rows(), m = gradients.cols(), B = static_cast<Index>(rows.size());
  const Index S = n > 0 ? probe_products.rows() / n : 0;
  if (c.size() != m || probe_products.cols() != m || S < 1 || probe_products.rows() != n * S)
    throw DataError("perturbation_objective_from_terms: gradients " + std::to_string(n) + " x " + std::to_string(m) +
                    ", probe products " + std::to_string(probe_products.rows()) + " x " +
                    std::to_string(probe_products.cols()) + " and c of " + std::to_string(c.size()) +
                    " do not fit (expected n x m, n S x m with S >= 1, m)");
  for (const Index r : rows)
    if (r < 0 || r >= n)
      throw DataError("perturbation_objective_from_terms: row " + std::to_string(r) + " of " + std::to_string(n));
  if (B == 0) throw DataError("perturbation_objective_from_terms: an empty batch");
  struct Partial {
    double value = 0.0;
    VectorXd gradient;  // sum_b lambda d(F_b / D_b)/du_b
  };
  Partial zero;
  zero.gradient = VectorXd::Zero(m);
  PerturbationObjectiveValue out;
  out.gradient = VectorXd::Zero(m);
  const auto add_block = [&](Partial& part, Index b0, Index nb) {
    VectorXd u(m), along_w(m);
    for (Index b = b0; b < b0 + nb; ++b) {
      const Index r = rows[static_cast<std::size_t>(b)];
      u = gradients.row(r).transpose() + c;
      const double norm = u.norm();
      const ClipScalars k = clip_scalars(norm, clip_norm);
      // T = (1/S) sum_s a ||w_s||^2 + b (u.w_s)^2, and dT/du = t_u u / n + along_w.
      double T = 0.0, t_u = 0.0;
      along_w.setZero();
      for (Index s = 0; s < S; ++s) {
        const auto w = probe_products.row(r * S + s).transpose();
        const double A = w.squaredNorm(), P = u.dot(w);
        T += k.a * A + k.b * P * P;
        t_u += k.da * A + k.db * P * P;
        along_w.noalias() += (2.0 * k.b * P) * w;
      }
      T /= static_cast<double>(S);
      t_u /= static_cast<double>(S);
      along_w /= static_cast<double>(S);
      const double F = T + floor, D = snr ? k.norm2 : 1.0;
      const double d_u = snr ? k.dnorm2 : 0.0;  // dD/dn
      part.value += lambda * F / D;
      // d(F/D)/du = (dT/du) / D - F dD/du / D^2; at u = 0 every u/n term vanishes with u.
      const double on_u = norm > 0.0 ? (t_u / D - F * d_u / (D * D)) / norm : 0.0;
      part.gradient.noalias() += lambda * (on_u * u + along_w / D);
    }
  };
  detail::reduce_blocks_in_order(B, kBlockExamples, zero, add_block, [&](Partial& part) {
    out.value += part.value;
    out.gradient += part.gradient;
  });
  out.value = out.value / static_cast<double>(B) + c.squaredNorm();
  out.gradient = out.gradient / static_cast<double>(B) + 2.0 * c;
  return out;
}

// One evaluation over a batch: its inputs, what is asked, and the results.
struct SoftmaxRelease::Pass {
  const RowMatrix* X = nullptr;
  const VectorXd* y = nullptr;
  MatrixXd C;                                // p x K
  const RowMatrix* probes = nullptr;         // nullptr or no rows (and no source): exact trace
  const ProbeSource* source = nullptr;       // or the probes made a block at a time
  const std::vector<Index>* rows = nullptr;  // the batch: these rows of X and y (else all of them)
  Index probes_per_example = 0;              // with a source
  bool objective = false;                    // else accounting: traces and the clipped sum
  double lambda = 0.0, floor = 0.0;
  bool snr = false;

  VectorXd trace;  // accounting
  double value = 0.0;
  MatrixXd total;  // p x K: sum_b r_b (accounting) or dL/dC (objective), masked
};

SoftmaxRelease::SoftmaxRelease(MatrixXd weights, bool intercept, const std::vector<bool>& frozen, double clip_norm)
    : W_(std::move(weights)), intercept_(intercept), clip_norm_(clip_norm) {
  if (W_.cols() < 2)
    throw DataError("SoftmaxRelease: weights have " + std::to_string(W_.cols()) +
                    " columns: softmax needs K >= 2 classes");
  if (input_dim() < 1) throw DataError("SoftmaxRelease: weights have no feature rows");
  if (!W_.allFinite()) throw DataError("SoftmaxRelease: weights are not all finite");
  if (!(clip_norm_ > 0.0) || !std::isfinite(clip_norm_))
    throw DataError("SoftmaxRelease: clip_norm = " + format_double(clip_norm_) + ": must be finite and > 0");
  if (static_cast<Index>(frozen.size()) != W_.size())
    throw DataError("SoftmaxRelease: frozen has " + std::to_string(frozen.size()) + " flags, the weights " +
                    std::to_string(W_.size()) + " coordinates");
  R_ = MatrixXd::Zero(W_.rows(), W_.cols());
  for (Index i = 0; i < W_.size(); ++i) {
    if (frozen[static_cast<std::size_t>(i)]) continue;
    released_.push_back(i);
    R_(i) = 1.0;
  }
  masked_weights_ = R_.cwiseProduct(W_);
  const auto W_f = W_.bottomRows(input_dim());
  feature_gram_ = W_f.transpose() * W_f;
}

void SoftmaxRelease::check_batch(const RowMatrix& X, const VectorXd& y, const VectorXd& c,
                                 const std::vector<Index>* rows) const {
  if (X.cols() != input_dim())
    throw DataError("SoftmaxRelease: X has " + std::to_string(X.cols()) + " features, the weights " +
                    std::to_string(input_dim()));
  if (y.size() != X.rows())
    throw DataError("SoftmaxRelease: y has " + std::to_string(y.size()) + " labels, X " + std::to_string(X.rows()) +
                    " rows");
  if (rows)
    for (const Index r : *rows)
      if (r < 0 || r >= X.rows())
        throw DataError("SoftmaxRelease: batch row " + std::to_string(r) + " of X's " + std::to_string(X.rows()));
  const Index count = rows ? static_cast<Index>(rows->size()) : y.size();
  for (Index k = 0; k < count; ++k) {  // the batch's labels only
    const Index i = rows ? (*rows)[static_cast<std::size_t>(k)] : k;
    const double label = y(i);
    if (!(label >= 0.0 && label < static_cast<double>(num_classes())) || label != std::floor(label))
      throw DataError("SoftmaxRelease: y[" + std::to_string(i) + "] = " + format_double(label) +
                      " is not a class index in [0, " + std::to_string(num_classes() - 1) + "]");
  }
  if (c.size() != released_count())
    throw DataError("SoftmaxRelease: c has " + std::to_string(c.size()) +
                    " entries, expected m = " + std::to_string(released_count()) + " released coordinates");
  if (!c.allFinite()) throw DataError("SoftmaxRelease: c is not all finite");
}

MatrixXd SoftmaxRelease::coordinate_matrix(const VectorXd& c) const {
  MatrixXd C = MatrixXd::Zero(W_.rows(), W_.cols());
  for (Index i = 0; i < released_count(); ++i) C(released_[static_cast<std::size_t>(i)]) = c(i);
  return C;
}

VectorXd SoftmaxRelease::gather(const MatrixXd& full) const {
  VectorXd out(released_count());
  for (Index i = 0; i < released_count(); ++i) out(i) = full(released_[static_cast<std::size_t>(i)]);
  return out;
}

MatrixXd SoftmaxRelease::released(const RowMatrix& X, const VectorXd& y, const VectorXd& c) const {
  check_batch(X, y, c);
  const Index d = input_dim(), p = W_.rows();
  const MatrixXd C = coordinate_matrix(c);
  MatrixXd P = X * W_.bottomRows(d), E;
  if (intercept_) P.rowwise() += W_.row(0);
  residuals(P, y, E);
  MatrixXd out(X.rows(), released_count());
  VectorXd design(p);
  for (Index b = 0; b < X.rows(); ++b) {
    if (intercept_) design(0) = 1.0;
    design.tail(d) = X.row(b).transpose();
    const MatrixXd u = R_.cwiseProduct(design * E.row(b)) + C;
    out.row(b) = gather(u).transpose() / (gelu(u.norm() / clip_norm_ - 1.0) + 1.0);
  }
  return out;
}

void SoftmaxRelease::evaluate(Pass& pass) const {
  const RowMatrix& X = *pass.X;
  const VectorXd& y = *pass.y;
  const Index B = pass.rows ? static_cast<Index>(pass.rows->size()) : X.rows(), d = input_dim(), K = num_classes(),
              p = W_.rows();
  const Index S = pass.source ? pass.probes_per_example : pass.probes ? pass.probes->rows() / std::max<Index>(B, 1) : 0;
  const bool exact = S == 0;
  const double C_clip = clip_norm_, c2 = pass.C.squaredNorm();
  const auto W_f = W_.bottomRows(d), R_f = R_.bottomRows(d);
  const MatrixXd C_f = pass.C.bottomRows(d);
  // One product of X with [W_f, C_f, (R.W)_f]: scores, x^T C and (exact) x^T (R.W)_f.
  MatrixXd right(d, exact ? 3 * K : 2 * K);
  right.leftCols(K) = W_f;
  right.middleCols(K, K) = C_f;
  if (exact) right.rightCols(K) = masked_weights_.bottomRows(d);
  const VectorXd released_columns = R_f.colwise().sum().transpose();
  const VectorXd gram_diagonal = feature_gram_.diagonal();
  if (!pass.objective) pass.trace.resize(B);

  struct Partial {
    double value = 0.0, c_weight = 0.0;
    MatrixXd design;  // sum_b x~_b z_b^T + [0; sum_b v_b e_b^T]: the masked part of the total
  };
  Partial zero;
  zero.design = MatrixXd::Zero(p, K);
  Partial sum = zero;

  // A block's probes from the source, and its rows of X and y when the batch is X's `rows`:
  // gathered where they are used (each thread's copy of add_block has its own buffers).
  RowMatrix made, gathered;
  VectorXd labels;
  const auto add_block = [&, made, gathered, labels](Partial& part, Index b0, Index nb) mutable {
    if (pass.rows) {
      gathered.resize(nb, d);
      labels.resize(nb);
      for (Index i = 0; i < nb; ++i) {
        const Index r = (*pass.rows)[static_cast<std::size_t>(b0 + i)];
        gathered.row(i) = X.row(r);
        labels(i) = y(r);
      }
    }
    const Eigen::Map<const RowMatrix> Xb(pass.rows ? gathered.data() : X.row(b0).data(), nb, d);
    const Eigen::Ref<const VectorXd> yb =
        pass.rows ? Eigen::Ref<const VectorXd>(labels) : Eigen::Ref<const VectorXd>(y.segment(b0, nb));
    const MatrixXd XP = Xb * right;
    MatrixXd P = XP.leftCols(K), E;
    if (intercept_) P.rowwise() += W_.row(0);
    residuals(P, yb, E);
    MatrixXd XC = XP.middleCols(K, K);  // x~^T C
    if (intercept_) XC.rowwise() += pass.C.row(0);
    MatrixXd A1 = Xb.array().square().matrix() * R_f;  // (x~.x~)^T R
    if (intercept_) A1.rowwise() += R_.row(0);
    const MatrixXd E2 = E.array().square().matrix();
    const VectorXd n2 = A1.cwiseProduct(E2).rowwise().sum() + 2.0 * XC.cwiseProduct(E).rowwise().sum();
    const VectorXd n = (n2.array() + c2).max(0.0).sqrt().matrix();  // ||u||
    std::vector<ClipScalars> k(static_cast<std::size_t>(nb));
    for (Index i = 0; i < nb; ++i) k[static_cast<std::size_t>(i)] = clip_scalars(n(i), C_clip);

    // u.J_m v = v.h with h = J_m^T u = (U e)_f + W_f S_b (U^T x~), U = R.(x~ e^T) + C.
    const RowMatrix Y1 = E2 * R_f.transpose();                // R_f e^2
    RowMatrix h = Xb.cwiseProduct(Y1) + E * C_f.transpose();  // (U e)_f, then h (exact)
    MatrixXd gamma = A1.cwiseProduct(E) + XC;                 // U^T x~

    // The objective's weights that depend on n alone: the c-gradient's dm(q_b) is scaled by
    // lambda/B b/D (exact: q_b = 2 h_b; probes: q_b = (2/S) sum_s (v.h) v_s).
    const double scale = pass.lambda / static_cast<double>(B);
    VectorXd vq_weight = VectorXd::Zero(nb), D(nb), dD(nb);
    for (Index i = 0; i < nb; ++i) {
      const ClipScalars& ki = k[static_cast<std::size_t>(i)];
      D(i) = pass.snr ? ki.norm2 : 1.0;
      dD(i) = pass.snr ? ki.dnorm2 : 0.0;
      if (pass.objective) vq_weight(i) = scale * ki.b / D(i) * (exact ? 2.0 : 2.0 / static_cast<double>(S));
    }

    VectorXd frobenius(nb), q2(nb);  // ||J_m||_F^2 or the mean ||J_m v||^2; ||J_m^T u||^2 or mean (u.J_m v)^2
    RowMatrix VQ;                    // q_b, weighted
    MatrixXd ZQ;                     // S_b W_f^T q_b, weighted
    if (exact) {
      // ||J_m||_F^2 = 1_f^T R e^2 + 2 [x^T (R.W)_f (e.p) - (x.W_f p)^T R_f (e.p)] + (x~.x~)^T R diag(S W_f^T W_f S).
      apply_softmax_jacobian(P, gamma);
      h.noalias() += gamma * W_f.transpose();
      const MatrixXd EP = E.cwiseProduct(P);
      const MatrixXd PG = P * feature_gram_;
      const VectorXd pgp = P.cwiseProduct(PG).rowwise().sum();
      const RowMatrix PW = P * W_f.transpose();
      const RowMatrix EPR = EP * R_f.transpose();
      for (Index i = 0; i < nb; ++i) {
        const VectorXd sgs = P.row(i).transpose().array().square() *
                             (gram_diagonal.array() - 2.0 * PG.row(i).transpose().array() + pgp(i));
        frobenius(i) = E2.row(i).dot(released_columns) +
                       2.0 * (XP.row(i).tail(K).dot(EP.row(i)) - (Xb.row(i).cwiseProduct(PW.row(i))).dot(EPR.row(i))) +
                       A1.row(i).dot(sgs.transpose());
      }
      q2 = h.rowwise().squaredNorm();
      if (pass.objective) {
        VQ = vq_weight.asDiagonal() * h;
        ZQ = VQ * W_f;
        apply_softmax_jacobian(P, ZQ);
      }
    } else {
      // Per probe: delta = S_b W_f^T v, ||J_m v||^2 = v^2.(R_f e^2) + 2 ((v.x)^T R_f).(e.delta) +
      // A1.delta^2 and v.h = v.(U e)_f + delta.(U^T x~).
      if (pass.source) {
        made.resize(nb * S, d);
        (*pass.source)(b0, nb, made.data());
      }
      const Eigen::Map<const RowMatrix> Vb(pass.source ? made.data() : pass.probes->row(b0 * S).data(), nb * S, d);
      MatrixXd delta = Vb * W_f;
      apply_softmax_jacobian(P, delta, S);
      RowMatrix VX(nb * S, d);
      for (Index r = 0; r < nb * S; ++r) VX.row(r) = Vb.row(r).cwiseProduct(Xb.row(r / S));
      const MatrixXd T2 = VX * R_f;
      if (pass.objective) {
        VQ = RowMatrix::Zero(nb, d);
        ZQ = MatrixXd::Zero(nb, K);
      }
      for (Index i = 0; i < nb; ++i) {
        double a_sum = 0.0, q_sum = 0.0;
        for (Index s = 0; s < S; ++s) {
          const Index r = i * S + s;
          const double q = Vb.row(r).dot(h.row(i)) + delta.row(r).dot(gamma.row(i));
          a_sum += Vb.row(r).cwiseAbs2().dot(Y1.row(i)) + 2.0 * T2.row(r).dot(E.row(i).cwiseProduct(delta.row(r))) +
                   A1.row(i).dot(delta.row(r).cwiseAbs2());
          q_sum += q * q;
          if (pass.objective) {
            VQ.row(i) += (vq_weight(i) * q) * Vb.row(r);
            ZQ.row(i) += (vq_weight(i) * q) * delta.row(r);
          }
        }
        frobenius(i) = a_sum / static_cast<double>(S);
        q2(i) = q_sum / static_cast<double>(S);
      }
    }

    MatrixXd Z(nb, K);  // the residual side of sum_b x~_b z_b^T
    if (!pass.objective) {
      for (Index i = 0; i < nb; ++i) {
        const ClipScalars& ki = k[static_cast<std::size_t>(i)];
        pass.trace(b0 + i) = ki.a * frobenius(i) + ki.b * q2(i);
        Z.row(i) = ki.inv_s * E.row(i);  // sum_b u_b / s_b
        part.c_weight += ki.inv_s;
      }
    } else {
      // F_b = (T_b + floor)/D_b and its derivative in n, which moves with C as U/n.
      for (Index i = 0; i < nb; ++i) {
        const ClipScalars& ki = k[static_cast<std::size_t>(i)];
        const double T = ki.a * frobenius(i) + ki.b * q2(i) + pass.floor;
        part.value += scale * T / D(i);
        const double dF = (ki.da * frobenius(i) + ki.db * q2(i)) / D(i) - T * dD(i) / (D(i) * D(i));
        const double wU = n(i) > 0.0 ? scale * dF / n(i) : 0.0;
        Z.row(i) = wU * E.row(i) + ZQ.row(i);
        part.c_weight += wU;
      }
      part.design.bottomRows(d).noalias() += VQ.transpose() * E;
    }
    part.design.bottomRows(d).noalias() += Xb.transpose() * Z;
    if (intercept_) part.design.row(0) += Z.colwise().sum();
  };
  const auto merge = [&](Partial& part) {
    sum.value += part.value;
    sum.c_weight += part.c_weight;
    sum.design += part.design;
  };
  detail::reduce_blocks_in_order(B, kBlockExamples, zero, add_block, merge);

  pass.total = R_.cwiseProduct(sum.design) + sum.c_weight * pass.C;
  if (pass.objective) {
    pass.value = sum.value + c2;
    pass.total += 2.0 * pass.C;
  }
}

SoftmaxRelease::Accounting SoftmaxRelease::account(const RowMatrix& X, const VectorXd& y, const VectorXd& c) const {
  check_batch(X, y, c);
  Pass pass;
  pass.X = &X;
  pass.y = &y;
  pass.C = coordinate_matrix(c);
  evaluate(pass);
  return {gather(pass.total), std::move(pass.trace)};
}

SoftmaxRelease::Objective SoftmaxRelease::objective(const RowMatrix& X, const VectorXd& y, const VectorXd& c,
                                                    const RowMatrix& probes, double lambda, bool snr,
                                                    double floor) const {
  check_batch(X, y, c);
  if (X.rows() == 0) throw DataError("SoftmaxRelease: objective of an empty batch (X has no rows)");
  if (probes.rows() > 0) {
    if (probes.cols() != input_dim())
      throw DataError("SoftmaxRelease: probes have " + std::to_string(probes.cols()) +
                      " columns, expected d = " + std::to_string(input_dim()));
    if (probes.rows() % X.rows() != 0)
      throw DataError("SoftmaxRelease: probes have " + std::to_string(probes.rows()) +
                      " rows, not a multiple of the batch size " + std::to_string(X.rows()));
  }
  Pass pass = objective_pass(X, y, c, lambda, snr, floor);
  pass.probes = probes.rows() > 0 ? &probes : nullptr;
  evaluate(pass);
  return {pass.value, gather(pass.total)};
}

SoftmaxRelease::Objective SoftmaxRelease::objective(const RowMatrix& X, const VectorXd& y,
                                                    const std::vector<Index>& rows, const VectorXd& c,
                                                    Index probes_per_example, const ProbeSource& source, double lambda,
                                                    bool snr, double floor) const {
  check_batch(X, y, c, &rows);
  if (rows.empty()) throw DataError("SoftmaxRelease: objective of an empty batch (no rows)");
  if (probes_per_example < 1 || !source)
    throw DataError("SoftmaxRelease: a probe source needs S >= 1 probes an example (S = " +
                    std::to_string(probes_per_example) + ") and a function to make them");
  Pass pass = objective_pass(X, y, c, lambda, snr, floor);
  pass.source = &source;
  pass.probes_per_example = probes_per_example;
  pass.rows = &rows;
  evaluate(pass);
  return {pass.value, gather(pass.total)};
}

SoftmaxRelease::Pass SoftmaxRelease::objective_pass(const RowMatrix& X, const VectorXd& y, const VectorXd& c,
                                                    double lambda, bool snr, double floor) const {
  if (!(lambda >= 0.0) || !std::isfinite(lambda))
    throw DataError("SoftmaxRelease: lambda = " + format_double(lambda) + ": must be finite and >= 0");
  if (!(floor >= 0.0) || !std::isfinite(floor))
    throw DataError("SoftmaxRelease: floor = " + format_double(floor) + ": must be finite and >= 0");
  Pass pass;
  pass.X = &X;
  pass.y = &y;
  pass.C = coordinate_matrix(c);
  pass.objective = true;
  pass.lambda = lambda;
  pass.floor = floor;
  pass.snr = snr;
  return pass;
}

}  // namespace filkit
