// A run's state in the resume file (public_data_model.hpp): what it must have been made under, the
// gradient model and diagnostics saved, and every saved list checked before it is restored.
#include "public_data/public_data_model.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/sha256.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace filkit {

namespace {

/// The key of the Fisher-term sum in a run's saved state, and its former name (docs/mathematics.md, 11.5).
constexpr const char* kFisherTermSumKey = "fisher_term_sum";
constexpr const char* kFormerFisherTermSumKey = "thesis_trace";

/// A resume file's list of `size` numbers at state[field] (NaN admitted where `nan`), or the
/// DataError naming the field.
/// Whether a saved list may hold negative numbers: sums of squares and norms may not (a resume file
/// with a valid CRC and a negative Fisher-term sum was taken; issue 50).
enum class Sign { kAny, kNonNegative };

VectorXd saved_numbers(const nlohmann::json& state, const std::string& name, Index size, bool nan,
                       const std::string& parent = "", Sign sign = Sign::kAny) {
  const std::string field = parent.empty() ? name : parent + "." + name;
  const auto found = state.find(name);
  if (found == state.end() || !found->is_array() || static_cast<Index>(found->size()) != size)
    throw DataError("'" + field + "' is missing or is not a list of " + std::to_string(size) + " numbers");
  VectorXd values(size);
  for (Index i = 0; i < size; ++i) {
    const nlohmann::json& value = (*found)[static_cast<std::size_t>(i)];
    if (!value.is_number()) throw DataError("'" + field + "[" + std::to_string(i) + "]' is not a number");
    values(i) = value.get<double>();
    if (std::isinf(values(i)) || (std::isnan(values(i)) && !nan))
      throw DataError("'" + field + "[" + std::to_string(i) + "]' is " + format_double(values(i)) +
                      ", expected a finite number");
    if (sign == Sign::kNonNegative && values(i) < 0)
      throw DataError("'" + field + "[" + std::to_string(i) + "]' is " + format_double(values(i)) +
                      ", expected a number >= 0 (a sum of squares or a norm)");
  }
  return values;
}

std::vector<double> as_list(const VectorXd& v) { return std::vector<double>(v.data(), v.data() + v.size()); }

}  // namespace

nlohmann::json PublicDataModel::resume_fingerprint() const {
  std::string bytes(reinterpret_cast<const char*>(start_.data()),
                    sizeof(double) * static_cast<std::size_t>(start_.size()));
  for (bool frozen : frozen_) bytes.push_back(frozen ? '1' : '0');
  return {
      {"method", to_string(method_)},
      {"gradient_model", method_ == PrivateTrainingMethod::kFim ? settings_json(gradient_model_) : nlohmann::json()},
      {"start_sha256", sha256_hex(bytes)},
      {"public_hash", std::to_string(rows_hash(public_))},
      {"account_fil", account_fil_}};
}

nlohmann::json PublicDataModel::resume_state() const {
  nlohmann::json state = {{"cosine", cosine_},
                          {"loss", loss_},
                          {kFisherTermSumKey, as_list(fisher_term_sum_over_ranks())},
                          {"constant", nullptr}};
  for (const auto& [name, part] :
       {std::pair{"norms_base", &VectorNorms::base}, std::pair{"norms_perturbation", &VectorNorms::perturbation},
        std::pair{"norms_released", &VectorNorms::released}}) {
    std::vector<double> values;
    for (const VectorNorms& n : norms_) values.push_back(n.*part);
    state[name] = values;
  }
  if (constant_) {
    const ConstantGradientModel::State c = constant_->state();
    state["constant"] = {{"parameters", as_list(c.parameters)},
                         {"first_moment", as_list(c.first_moment)},
                         {"second_moment", as_list(c.second_moment)},
                         {"updates", c.updates}};
  }
  return state;
}

void PublicDataModel::restore(const nlohmann::json& state, Index steps_done) {
  if (!state.is_object()) throw DataError("is not an object");
  const bool fim = method_ == PrivateTrainingMethod::kFim;
  const Index diagnostics = fim ? steps_done : 0;
  const VectorXd cosine = saved_numbers(state, "cosine", diagnostics, true);
  const VectorXd loss = saved_numbers(state, "loss", diagnostics, true);
  const Index norms = fim && constant_ ? steps_done : 0;
  const VectorXd base = saved_numbers(state, "norms_base", norms, true, "", Sign::kNonNegative);
  const VectorXd perturbation = saved_numbers(state, "norms_perturbation", norms, true, "", Sign::kNonNegative);
  const VectorXd released = saved_numbers(state, "norms_released", norms, true, "", Sign::kNonNegative);
  // Resume files written before the rename (filkit 0.1.0) hold the sum as "thesis_trace": read until the next version.
  const char* sum_key = !state.contains(kFisherTermSumKey) && state.contains(kFormerFisherTermSumKey)
                            ? kFormerFisherTermSumKey
                            : kFisherTermSumKey;
  // Saved over every rank's private rows (by any number of ranks): this rank keeps its own.
  const VectorXd fisher_term_sum =
      saved_numbers(state, sum_key, account_fil_ && steps_done > 0 ? private_rows_ : 0, false, "", Sign::kNonNegative);
  const auto found = state.find("constant");
  if (found == state.end() || found->is_object() != constant_.has_value() || (!constant_ && !found->is_null()))
    throw DataError(constant_ ? "'constant' is missing: the constant gradient model's state"
                              : "'constant' is set for a method without the constant gradient model");
  if (constant_) {
    const Index count = constant_->parameters().size();
    ConstantGradientModel::State c;
    c.parameters = saved_numbers(*found, "parameters", count, false, "constant");
    c.first_moment = saved_numbers(*found, "first_moment", count, false, "constant");
    c.second_moment = saved_numbers(*found, "second_moment", count, false, "constant", Sign::kNonNegative);
    const auto updates = found->find("updates");
    if (updates == found->end() || !updates->is_number_integer() || updates->get<Index>() < 0)
      throw DataError("'constant.updates' is not a count");
    c.updates = updates->get<Index>();
    constant_->restore(c);
    backend_->set_shift(constant_->perturbation());
  }
  cosine_ = as_list(cosine);
  loss_ = as_list(loss);
  norms_.clear();
  for (Index i = 0; i < norms; ++i) norms_.push_back({base(i), perturbation(i), released(i)});
  fisher_term_sum_ = fisher_term_sum.size() > 0 ? VectorXd(fisher_term_sum.segment(private_first_row_, private_.n()))
                                                : fisher_term_sum;
}

}  // namespace filkit
