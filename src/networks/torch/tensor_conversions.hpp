// Eigen <-> LibTorch conversions shared by the plugin's sources (copies, so the tensors own their
// memory): Eigen's doubles become double tensors (then .to(real) where a computation is in float32,
// DpSgdOptions::precision), and tensors of either precision come back as doubles.
#pragma once

#include "filkit/base/precision.hpp"
#include "filkit/base/types.hpp"

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>

namespace filkit {

inline const at::TensorOptions kDouble = at::TensorOptions().dtype(at::kDouble);

/// The tensor type of a computation in `precision`.
inline at::ScalarType real_type(Precision precision) {
  return precision == Precision::kFloat32 ? at::kFloat : at::kDouble;
}

/// A copy of X (of v) as a tensor of type `real`: converted as it is copied, in one pass.
inline at::Tensor to_tensor(const RowMatrix& X, at::ScalarType real = at::kDouble) {
  return at::from_blob(const_cast<double*>(X.data()), {X.rows(), X.cols()}, kDouble).to(real, false, /*copy=*/true);
}

inline at::Tensor to_tensor(const VectorXd& v, at::ScalarType real = at::kDouble) {
  return at::from_blob(const_cast<double*>(v.data()), {v.size()}, kDouble).to(real, false, /*copy=*/true);
}

inline at::Tensor to_labels(const VectorXd& y) {
  at::Tensor labels = at::empty({y.size()}, at::TensorOptions().dtype(at::kLong));
  for (Index i = 0; i < y.size(); ++i) labels[i] = static_cast<std::int64_t>(y(i));
  return labels;
}

inline RowMatrix to_row_matrix(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  RowMatrix m(c.size(0), c.size(1));
  std::memcpy(m.data(), c.data_ptr<double>(), sizeof(double) * m.size());
  return m;
}

inline VectorXd to_vector(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  VectorXd v(c.numel());
  std::memcpy(v.data(), c.data_ptr<double>(), sizeof(double) * v.size());
  return v;
}

}  // namespace filkit
