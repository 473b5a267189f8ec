// Private training with public data stopped and resumed (its resume file): the same numbers to the
// bit as the straight run, and the refusals of a resume file of another run or with a bad value.
#include "filkit/public_data/public_data_training.hpp"

#include "public_data_fixtures.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace filkit {
namespace {

// Stopped twice (once inside a run, once across the boundary between runs) and resumed: the same
// parameters, traces and diagnostics, to the bit, as the straight run; fim's constant and vector
// gradient models (their phi and Adam's moments are in the resume file) and dpsgd and prune.
TEST(TrainWithPublicData, StoppedAndResumedIsTheStraightRun) {
  REQUIRE_PLUGIN();
  const Dataset data = testing::image_data(60, 3, 31);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 1);
  const testing::TempDir dir;
  constexpr Precision k64 = Precision::kFloat64, k32 = Precision::kFloat32;
  for (auto [method, kind, state] : {std::tuple{PrivateTrainingMethod::kFim, GradientModelKind::kConstant, k64},
                                     std::tuple{PrivateTrainingMethod::kFim, GradientModelKind::kConstant, k32},
                                     std::tuple{PrivateTrainingMethod::kFim, GradientModelKind::kVector, k64},
                                     std::tuple{PrivateTrainingMethod::kPrune, GradientModelKind::kConstant, k64},
                                     std::tuple{PrivateTrainingMethod::kDpSgd, GradientModelKind::kConstant, k64}}) {
    const std::string label = to_string(method) + " " + to_string(kind) + " " + to_string(state);
    PublicDataTrainingOptions o = testing::small_options();
    o.methods = {method};
    o.gradient_model.kind = kind;
    o.gradient_model.state_precision = state;
    const PublicDataTrainingResult straight = train_with_public_data(split.public_part, split.private_part, data, o);
    o.private_phase.checkpoint_path = dir.file("state");
    o.private_phase.stop_after = 4;  // runs of 6 steps: stops at run 0 step 4, then run 1 step 2
    for (int call = 0; call < 2; ++call) {
      const PublicDataTrainingResult stopped = train_with_public_data(split.public_part, split.private_part, data, o);
      EXPECT_FALSE(stopped.complete) << label;
      EXPECT_EQ(stopped.methods.back().training.steps_done, 4 * (call + 1)) << label;
      EXPECT_TRUE(std::filesystem::exists(o.private_phase.checkpoint_path)) << label;
    }
    o.private_phase.stop_after = 0;
    const PublicDataTrainingResult resumed = train_with_public_data(split.public_part, split.private_part, data, o);
    ASSERT_TRUE(resumed.complete) << label;
    EXPECT_TRUE(resumed.methods[0].training.resumed) << label;
    EXPECT_FALSE(std::filesystem::exists(o.private_phase.checkpoint_path)) << label;  // kRemove
    const MethodResult &a = straight.methods[0], &b = resumed.methods[0];
    EXPECT_EQ(b.training.parameters, a.training.parameters) << label;
    EXPECT_EQ(b.training.final_snapshot().fisher_trace, a.training.final_snapshot().fisher_trace) << label;
    EXPECT_EQ(b.training.final_snapshot().test_accuracy, a.training.final_snapshot().test_accuracy) << label;
    EXPECT_EQ(b.perturbation_cosine, a.perturbation_cosine) << label;
    EXPECT_EQ(b.gradient_model_loss.size(), a.gradient_model_loss.size()) << label;
    for (std::size_t r = 0; r < a.gradient_model_loss.size(); ++r)
      for (std::size_t t = 0; t < a.gradient_model_loss[r].size(); ++t)
        EXPECT_TRUE(a.gradient_model_loss[r][t] == b.gradient_model_loss[r][t] ||
                    (std::isnan(a.gradient_model_loss[r][t]) && std::isnan(b.gradient_model_loss[r][t])))
            << label;
    ASSERT_EQ(b.vector_norms.size(), a.vector_norms.size()) << label;
    for (std::size_t r = 0; r < a.vector_norms.size(); ++r) {
      ASSERT_EQ(b.vector_norms[r].size(), a.vector_norms[r].size()) << label;
      for (std::size_t t = 0; t < a.vector_norms[r].size(); ++t) {
        EXPECT_EQ(b.vector_norms[r][t].perturbation, a.vector_norms[r][t].perturbation) << label;
        EXPECT_EQ(b.vector_norms[r][t].released, a.vector_norms[r][t].released) << label;
      }
    }
    EXPECT_EQ(b.fisher_term_sum, a.fisher_term_sum) << label;
    if (method == PrivateTrainingMethod::kFim) EXPECT_EQ(a.perturbation_cosine[1].size(), 6u) << label;
  }
}

// A resume file of fim refuses another gradient model (naming what changed) and another method.
/// fim with the constant gradient model, stopped after 3 steps: its resume file is in `dir`.
struct StoppedFimRun {
  Dataset data = testing::image_data(60, 3, 31);
  PublicPrivateSplit split = split_public_private(data, 0.4, 1);
  testing::TempDir dir;
  PublicDataTrainingOptions options = testing::small_options();

  StoppedFimRun() {
    options.methods = {PrivateTrainingMethod::kFim};
    options.gradient_model.kind = GradientModelKind::kConstant;
    options.private_phase.checkpoint_path = dir.file("state");
    options.private_phase.stop_after = 3;
    EXPECT_FALSE(run(options).complete);
  }
  PublicDataTrainingResult run(const PublicDataTrainingOptions& o) const {
    return train_with_public_data(split.public_part, split.private_part, Dataset{}, o);
  }
};

TEST(TrainWithPublicData, ResumeRefusesAnotherGradientModelOrMethod) {
  REQUIRE_PLUGIN();
  const StoppedFimRun stopped;
  PublicDataTrainingOptions other = stopped.options;
  other.gradient_model.lambda *= 2;
  testing::expect_data_error([&] { stopped.run(other); }, {"different job", "gradient_model"});
  other = stopped.options;
  other.methods = {PrivateTrainingMethod::kPrune};
  testing::expect_data_error([&] { stopped.run(other); }, {"different job", "method", "fim", "prune"});
}

/// The first list named `key` anywhere in `value` (the resume payload's model state).
nlohmann::json* find_list(nlohmann::json& value, const std::string& key) {
  if (value.is_object()) {
    for (auto& [name, member] : value.items()) {
      if (name == key && member.is_array() && !member.empty()) return &member;
      if (nlohmann::json* found = find_list(member, key)) return found;
    }
  } else if (value.is_array()) {
    for (nlohmann::json& member : value)
      if (nlohmann::json* found = find_list(member, key)) return found;
  }
  return nullptr;
}

// Issue 50: a resume file with a valid CRC and a negative Fisher-term sum was taken; every sum of
// squares and norm is range-checked, as the trainer's traces are.
TEST(TrainWithPublicData, ResumeRefusesANegativeSumOfSquares) {
  REQUIRE_PLUGIN();
  const StoppedFimRun stopped;
  const PublicDataTrainingOptions& o = stopped.options;
  const std::string saved = testing::read_bytes(o.private_phase.checkpoint_path);
  for (const char* key : {"fisher_term_sum", "norms_released", "second_moment"}) {
    nlohmann::json payload = testing::resume_payload(saved);
    nlohmann::json* list = find_list(payload, key);
    ASSERT_NE(list, nullptr) << key;
    (*list)[0] = -1.0;
    std::ofstream(o.private_phase.checkpoint_path, std::ios::binary) << testing::with_resume_payload(saved, payload);
    testing::expect_data_error([&] { stopped.run(o); }, {std::string(key) + "[0]' is -1", "expected a number >= 0"});
  }
}

/// Renames the member `from` of every object in `value` to `to`; the number renamed.
int rename_key(nlohmann::json& value, const std::string& from, const std::string& to) {
  int renamed = 0;
  if (value.is_object() && value.contains(from)) {
    value[to] = std::move(value[from]);
    value.erase(from);
    ++renamed;
  }
  if (value.is_structured())
    for (nlohmann::json& member : value) renamed += rename_key(member, from, to);
  return renamed;
}

// The Fisher-term sum was saved as "thesis_trace" before its rename: such a resume file is read,
// for one version, to the same result as under the new key.
TEST(TrainWithPublicData, ResumeReadsTheFisherTermSumUnderItsFormerKey) {
  REQUIRE_PLUGIN();
  const StoppedFimRun stopped;
  const std::string saved = testing::read_bytes(stopped.options.private_phase.checkpoint_path);
  nlohmann::json payload = testing::resume_payload(saved);
  ASSERT_GT(rename_key(payload, "fisher_term_sum", "thesis_trace"), 0);
  PublicDataTrainingOptions o = stopped.options;
  o.private_phase.stop_after = 0;
  std::ofstream(o.private_phase.checkpoint_path, std::ios::binary) << testing::with_resume_payload(saved, payload);
  const PublicDataTrainingResult former = stopped.run(o);
  std::ofstream(o.private_phase.checkpoint_path, std::ios::binary) << saved;
  const PublicDataTrainingResult current = stopped.run(o);
  ASSERT_TRUE(former.complete && current.complete);
  const VectorXd& sum = current.methods[0].fisher_term_sum[0];
  EXPECT_GT(sum.sum(), 0.0);
  EXPECT_EQ(former.methods[0].fisher_term_sum[0], sum);
  EXPECT_EQ(former.methods[0].training.parameters[0], current.methods[0].training.parameters[0]);
}

}  // namespace
}  // namespace filkit
