// Softmax regression's closed forms for the trained model (trained_model.hpp).
#include "public_data/trained_model.hpp"

#include <algorithm>

namespace filkit {

Model softmax_model(const VectorXd& w, Index p, Index K, bool intercept, Index n) {
  Model m;
  m.kind = ModelKind::kSoftmax;
  m.intercept = intercept;
  m.n_train = n;
  m.num_classes = K;
  m.weights = Eigen::Map<const MatrixXd>(w.data(), p, K);
  return m;
}

MatrixXd softmax_design(const Dataset& data, const std::vector<Index>& rows, bool intercept) {
  const Index n = static_cast<Index>(rows.size()), d = data.d(), first = intercept ? 1 : 0;
  MatrixXd Xt(n, d + first);
  if (intercept) Xt.col(0).setOnes();
  // Row-major X into the column-major design, 64 rows at a time: each pixel's 64 values are
  // written together, from 64 rows that stay in L1. Copying a whole row at a time wrote its 784
  // values to 784 columns, 5 ns a value (a third of the time of a fim step without public batches).
  constexpr Index kRows = 64;
  for (Index r0 = 0; r0 < n; r0 += kRows) {
    const Index count = std::min(kRows, n - r0);
    for (Index j = 0; j < d; ++j)
      for (Index i = 0; i < count; ++i) Xt(r0 + i, first + j) = data.X(rows[static_cast<std::size_t>(r0 + i)], j);
  }
  return Xt;
}

VectorXd softmax_mean_gradient(const Dataset& data, const std::vector<Index>& rows, const MatrixXd& W, bool intercept) {
  // In pieces of 4,096 rows: the design of all of table 3.1's 30,000 public examples (fim's cosine
  // diagnostic, every private step) would be 188 MB at once; a batch is one piece.
  constexpr std::size_t kPiece = 4096;
  MatrixXd G = MatrixXd::Zero(W.rows(), W.cols());
  for (std::size_t start = 0; start < rows.size(); start += kPiece) {
    const std::vector<Index> piece(rows.begin() + static_cast<std::ptrdiff_t>(start),
                                   rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), start + kPiece)));
    MatrixXd Xt = softmax_design(data, piece, intercept);
    MatrixXd R = Xt * W;  // logits, then residuals softmax - onehot
    for (Index i = 0; i < R.rows(); ++i) {
      R.row(i).array() -= R.row(i).maxCoeff();
      R.row(i) = R.row(i).array().exp().matrix();
      R.row(i) /= R.row(i).sum();
      R(i, static_cast<Index>(data.y(piece[static_cast<std::size_t>(i)]))) -= 1.0;
    }
    G.noalias() += Xt.transpose() * R;
  }
  G /= static_cast<double>(rows.size());
  return Eigen::Map<const VectorXd>(G.data(), G.size());
}

}  // namespace filkit
