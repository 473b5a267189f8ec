// The DP-SGD resume file (src/dpsgd/resume_state.hpp) trusts nothing: a valid file resumes bit for
// bit; every single-bit flip and every truncation is refused by the header and CRC32; a file with a
// valid CRC32 but content that does not fit the job is refused naming the field. Refusals are
// DataError naming the file and saying it may be deleted; none crashes or resumes.
#include "filkit/base/errors.hpp"
#include "filkit/dpsgd/training.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

namespace filkit {
namespace {

using testing::TempDir;

constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();

/// Rewriting a file from length 0 makes ext4 flush it on close (auto_da_alloc), a few milliseconds
/// each on a busy disk: the loops below change their file in place instead.
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A small job: 24 examples, batches of 6, 2 runs of 6 steps, snapshots at steps 4 (epoch 1) and 6.
struct SmallJob {
  Dataset train = testing::random_classification(24, 3, 2, 11);
  Dataset test = testing::random_classification(10, 3, 2, 12);
  DpSgdOptions options;

  explicit SmallJob(const std::string& checkpoint) {
    options.batch_size = 6;
    options.steps = 6;
    options.runs = 2;
    options.report_epochs = {1.0};
    options.seed = 8;
    options.init_scale = 0.2;
    options.checkpoint_path = checkpoint;
  }
  DpSgdResult run(Index stop_after = 0) const {
    DpSgdOptions o = options;
    o.stop_after = stop_after;
    return train_dpsgd(train, test, o, false, CheckpointWhenDone::kKeep);
  }
  /// The resume file after `steps` steps over all runs.
  std::string saved_after(Index steps) const {
    std::filesystem::remove(options.checkpoint_path);
    EXPECT_FALSE(run(steps).complete);
    return testing::read_bytes(options.checkpoint_path);
  }
};

void expect_same_results(const DpSgdResult& a, const DpSgdResult& b) {
  ASSERT_EQ(a.snapshots.size(), b.snapshots.size());
  for (std::size_t c = 0; c < a.snapshots.size(); ++c) {
    EXPECT_EQ(a.snapshots[c].fisher_trace, b.snapshots[c].fisher_trace);
    EXPECT_EQ(a.snapshots[c].fisher_trace_standard_error, b.snapshots[c].fisher_trace_standard_error);
    EXPECT_EQ(a.snapshots[c].fisher_trace_per_run, b.snapshots[c].fisher_trace_per_run);
    EXPECT_EQ(a.snapshots[c].dfil_over_runs.max_replicates, b.snapshots[c].dfil_over_runs.max_replicates);
    EXPECT_EQ(a.snapshots[c].dfil_over_runs.median_replicates, b.snapshots[c].dfil_over_runs.median_replicates);
    EXPECT_EQ(a.snapshots[c].fisher_spectral.hasNaN(), b.snapshots[c].fisher_spectral.hasNaN());
    if (!a.snapshots[c].fisher_spectral.hasNaN())
      EXPECT_EQ(a.snapshots[c].fisher_spectral, b.snapshots[c].fisher_spectral);
    EXPECT_EQ(a.snapshots[c].times_sampled, b.snapshots[c].times_sampled);
    EXPECT_EQ(a.snapshots[c].train_accuracy, b.snapshots[c].train_accuracy);
    EXPECT_EQ(a.snapshots[c].test_accuracy.size(), b.snapshots[c].test_accuracy.size());
  }
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.run_seeds, b.run_seeds);
}

/// The message of the DataError `run` throws ("" if it throws none).
std::string refusal(const std::function<void()>& run) {
  try {
    run();
  } catch (const DataError& error) {
    return error.what();
  }
  return "";
}

TEST(ResumeState, ASavedStateResumesBitForBit) {
  const TempDir dir;
  SmallJob sgd(dir.file("state"));
  SmallJob adam_poisson_no_test(dir.file("state"));  // NaN spectral sums and test accuracies
  adam_poisson_no_test.options.optimizer = Optimizer::kAdam;
  adam_poisson_no_test.options.sampling = BatchSampling::kPoisson;
  adam_poisson_no_test.options.spectral = SpectralMethod::kNone;
  adam_poisson_no_test.test = Dataset();
  for (const SmallJob* job : {&sgd, &adam_poisson_no_test}) {
    SmallJob whole_job = *job;
    whole_job.options.checkpoint_path.clear();
    const DpSgdResult whole = whole_job.run();
    for (Index stop : {3, 4, 6, 9}) {  // mid-run, at a snapshot, between runs, in the second run
      const std::string saved = job->saved_after(stop);
      const DpSgdResult resumed = job->run();
      EXPECT_TRUE(resumed.resumed);
      expect_same_results(whole, resumed);
      // Decoded and encoded again by the test's own reading of the format: still valid.
      write_file(job->options.checkpoint_path, testing::with_resume_payload(saved, testing::resume_payload(saved)));
      expect_same_results(whole, job->run());
    }
  }
}

TEST(ResumeState, RunsTrainedAloneIntoRunFilesCombineIntoTheCallOfEveryRun) {
  const TempDir dir;
  SmallJob job("");
  job.options.runs = 3;
  job.options.spectral = SpectralMethod::kExact;  // the spectral sums too
  const DpSgdResult whole = job.run();
  std::vector<std::string> files;
  for (int run : {2, 0, 1}) {  // any order
    files.resize(3);
    files[static_cast<std::size_t>(run)] = dir.file("run" + std::to_string(run));
    const DpSgdResult alone =
        train_dpsgd_run(job.train, job.test, job.options, run, files[static_cast<std::size_t>(run)]);
    ASSERT_EQ(alone.parameters.size(), 1u);
    EXPECT_EQ(alone.parameters.front(), whole.parameters[static_cast<std::size_t>(run)]);
  }
  const DpSgdResult combined = combine_dpsgd_run_files(job.train, job.test, job.options, files);
  expect_same_results(combined, whole);
  for (std::size_t c = 0; c < whole.snapshots.size(); ++c) {
    EXPECT_EQ(combined.snapshots[c].test_accuracy, whole.snapshots[c].test_accuracy);
    EXPECT_EQ(combined.snapshots[c].fisher_spectral, whole.snapshots[c].fisher_spectral);
    EXPECT_EQ(combined.snapshots[c].epsilon, whole.snapshots[c].epsilon);
  }
  nlohmann::json combined_summary = combined.summary(job.options), whole_summary = whole.summary(job.options);
  combined_summary.erase("seconds");  // wall times
  whole_summary.erase("seconds");
  EXPECT_EQ(combined_summary, whole_summary);
  // A file in another run's place: refused, naming it and the run it holds.
  std::filesystem::copy_file(files[0], files[1], std::filesystem::copy_options::overwrite_existing);
  const std::string message = refusal([&] { combine_dpsgd_run_files(job.train, job.test, job.options, files); });
  EXPECT_NE(message.find("run file " + files[1] + " belongs to a different job (it holds run 0, not run 1"),
            std::string::npos)
      << message;
}

TEST(ResumeState, EverySingleBitFlipIsRefused) {
  const TempDir dir;
  const SmallJob job(dir.file("state"));
  for (Index stop : {5, 6}) {  // in a run (a trainer state) and between runs (none)
    const std::string saved = job.saved_after(stop);
    const std::size_t bits = 8 * saved.size();
    // Every bit of a small file; else every header bit and a large random sample (the generator's
    // state, 312 numbers as text, makes the file some 8 kB). The sanitizer build, which looks for
    // memory errors on the same refusal paths, takes a tenth of the sample.
    constexpr std::size_t kMostFlips = testing::kAddressSanitizer ? 2000 : 20000;
    std::vector<std::size_t> flips;
    for (std::size_t bit = 0; bit < bits && (bits <= kMostFlips || bit < 8 * testing::kResumeHeaderSize); ++bit)
      flips.push_back(bit);
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<std::size_t> any_bit(0, bits - 1);
    while (flips.size() < std::min(bits, kMostFlips)) flips.push_back(any_bit(rng));
    int accepted = 0;
    std::fstream file(job.options.checkpoint_path, std::ios::in | std::ios::out | std::ios::binary);
    const auto put_byte = [&](std::size_t at, char byte) {
      file.seekp(static_cast<std::streamoff>(at));
      file.put(byte);
      file.flush();
    };
    for (std::size_t bit : flips) {
      put_byte(bit / 8, static_cast<char>(saved[bit / 8] ^ (1 << (bit % 8))));
      const std::string message = refusal([&] { job.run(); });
      put_byte(bit / 8, saved[bit / 8]);
      if (message.find(job.options.checkpoint_path) == std::string::npos ||
          message.find("delete it") == std::string::npos) {
        if (++accepted <= 5)
          ADD_FAILURE() << "bit " << bit << " of " << bits << ": " << (message.empty() ? "used" : message);
      }
    }
    EXPECT_EQ(accepted, 0) << "of " << flips.size() << " flips of a " << saved.size() << "-byte file";
    file.close();
    ASSERT_EQ(testing::read_bytes(job.options.checkpoint_path), saved);
    EXPECT_TRUE(job.run().resumed) << "the undamaged file still resumes";
  }
}

TEST(ResumeState, EveryTruncationAndExtensionIsRefused) {
  const TempDir dir;
  const SmallJob job(dir.file("state"));
  const std::string saved = job.saved_after(5);
  std::vector<std::size_t> lengths;  // longest first: each shortens the file further
  lengths.push_back(saved.size() - 1);
  for (std::size_t length = saved.size() - 2; length > 64; length -= 7) lengths.push_back(length);
  for (std::size_t length = 64; length-- > 0;) lengths.push_back(length);
  for (std::size_t length : lengths) {
    std::filesystem::resize_file(job.options.checkpoint_path, length);
    const std::string message = refusal([&] { job.run(); });
    EXPECT_NE(message.find("delete it"), std::string::npos)
        << length << " of " << saved.size() << " bytes: " << message;
  }
  write_file(job.options.checkpoint_path, saved + '\0');
  EXPECT_NE(refusal([&] { job.run(); }).find("bytes of payload"), std::string::npos);
  std::string other_version = saved;
  other_version[8] = 1;
  write_file(job.options.checkpoint_path, other_version);
  EXPECT_NE(refusal([&] { job.run(); }).find("format version 1"), std::string::npos);
  // Version 2 kept only sums of the runs' traces: too little for the intervals over runs.
  other_version[8] = 2;
  write_file(job.options.checkpoint_path, other_version);
  const std::string older = refusal([&] { job.run(); });
  for (const char* part : {"format version 2 was written by an earlier filkit", "reads version 5", "delete it"})
    EXPECT_NE(older.find(part), std::string::npos) << older;
  // Version 3 hashed the data in one pass, which the ranks of an MPI job cannot reproduce.
  other_version[8] = 3;
  write_file(job.options.checkpoint_path, other_version);
  EXPECT_NE(refusal([&] { job.run(); }).find("format version 3 was written by an earlier filkit"), std::string::npos);
  // Version 4 had no model states (fim's gradient model).
  other_version[8] = 4;
  write_file(job.options.checkpoint_path, other_version);
  EXPECT_NE(refusal([&] { job.run(); }).find("format version 4 was written by an earlier filkit"), std::string::npos);
  other_version[8] = 6;
  write_file(job.options.checkpoint_path, other_version);
  EXPECT_NE(refusal([&] { job.run(); }).find("format version 6, this filkit reads version 5"), std::string::npos);
}

// Issue 50: a 2 GB resume file was read whole under --max-memory 256M. Its size is checked against
// max_memory before it is read (a sparse file: nothing is written to the disk).
TEST(ResumeState, AResumeFileLargerThanMaxMemoryIsRefusedBeforeItIsRead) {
  const TempDir dir;
  SmallJob job(dir.file("state"));
  job.options.max_memory = ByteSize{1 << 20};
  write_file(job.options.checkpoint_path, "");
  std::filesystem::resize_file(job.options.checkpoint_path, std::uintmax_t{3} << 20);
  try {
    job.run();
    ADD_FAILURE() << "a 3 MiB resume file under a 1 MiB budget was read";
  } catch (const MemoryLimitError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("reading '" + job.options.checkpoint_path + "' needs 3.0 MiB"), std::string::npos)
        << message;
  }
}

/// A valid CRC over content that does not fit the job: refused, naming `field`.
void expect_refused(const SmallJob& job, const std::string& saved, const std::function<void(nlohmann::json&)>& edit,
                    const std::string& field) {
  nlohmann::json payload = testing::resume_payload(saved);
  edit(payload);
  write_file(job.options.checkpoint_path, testing::with_resume_payload(saved, payload));
  const std::string message = refusal([&] { job.run(); });
  EXPECT_NE(message.find(field), std::string::npos) << "expected a refusal naming " << field << ", got: " << message;
  EXPECT_NE(message.find(job.options.checkpoint_path), std::string::npos) << message;
  EXPECT_NE(message.find("delete it"), std::string::npos) << message;
}

TEST(ResumeState, ContentThatDoesNotFitTheJobIsRefusedNamingTheField) {
  const TempDir dir;
  const SmallJob job(dir.file("state"));
  const std::string saved = job.saved_after(9);  // run 1, step 3: one finished run, a trainer state
  using json = nlohmann::json;
  expect_refused(
      job, saved, [](json& p) { p["run"] = 2; }, "'run'");
  expect_refused(
      job, saved, [](json& p) { p["run"] = -1; }, "'run'");
  expect_refused(
      job, saved, [](json& p) { p["run"] = 3; }, "'run'");
  expect_refused(
      job, saved, [](json& p) { p["step"] = 6; }, "'step'");
  expect_refused(
      job, saved, [](json& p) { p["step"] = 2.5; }, "'step'");
  expect_refused(
      job, saved, [](json& p) { p["step"] = 0; }, "'trainer'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"] = nullptr; }, "'trainer'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"].erase("order"); }, "'trainer.order' is missing");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["order"].erase(0); }, "'trainer.order'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["order"][0] = p["trainer"]["order"][1]; }, "repeats");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["order"][3] = 24; }, "'trainer.order[3]'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["parameters"].erase(0); }, "'trainer.parameters'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["first_moment"].push_back(0.0); }, "'trainer.first_moment'");
  expect_refused(
      job, saved,
      [](json& p) {
        p["trainer"]["second_moment"] = {1.0, 2.0, 3.0};
      },
      "'trainer.second_moment'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["adam_steps"] = 3; }, "'trainer.adam_steps'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["generator"] = "1 2 3"; }, "'trainer.generator'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["parameters"][1] = nan; }, "'trainer.parameters[1]'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["trace"][2] = -1.0; }, "'trainer.trace[2]'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["spectral"][2] = nan; }, "'trainer.spectral[2]'");
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["sampled"][0] = 4; }, "'trainer.sampled[0]'");  // > 3 steps
  expect_refused(
      job, saved, [](json& p) { p["trainer"]["sampled"][0] = 0.5; }, "'trainer.sampled[0]'");
  expect_refused(
      job, saved, [](json& p) { p["sums"].erase(1); }, "'sums'");
  expect_refused(
      job, saved, [](json& p) { p["sums"][0]["trace_per_run"][0].erase(5); }, "'sums[0].trace_per_run[0]'");
  expect_refused(
      job, saved, [](json& p) { p["sums"][0]["trace_per_run"][0][2] = -1.0; }, "'sums[0].trace_per_run[0][2]'");
  expect_refused(
      job, saved, [](json& p) { p["sums"][1]["trace_per_run"][0][0] = inf; }, "'sums[1].trace_per_run[0][0]'");
  // One finished run holds both snapshots (run 1 is at step 3, before either): one trace each.
  expect_refused(
      job, saved, [](json& p) { p["sums"][1]["trace_per_run"].push_back(p["sums"][1]["trace_per_run"][0]); },
      "'sums[1].trace_per_run' holds 2 entries, expected 1");
  expect_refused(
      job, saved, [](json& p) { p["sums"][0].erase("trace_per_run"); }, "'sums[0].trace_per_run' is missing");
  expect_refused(
      job, saved, [](json& p) { p["sums"][1]["sampled"][3] = 13; }, "'sums[1].sampled[3]'");  // > 1 run x 6
  expect_refused(
      job, saved, [](json& p) { p["sums"][0] = json::array(); }, "'sums[0]' is not an object");
  expect_refused(
      job, saved, [](json& p) { p["train_accuracy"][0].push_back(0.5); }, "'train_accuracy[0]'");
  expect_refused(
      job, saved, [](json& p) { p["train_accuracy"][1] = json::array(); }, "'train_accuracy[1]'");
  expect_refused(
      job, saved, [](json& p) { p["test_accuracy"][0][0] = 1.5; }, "'test_accuracy[0][0]'");
  expect_refused(
      job, saved, [](json& p) { p["run_seeds"][0] = 7; }, "'run_seeds[0]'");
  expect_refused(
      job, saved, [](json& p) { p["run_seeds"].erase(1); }, "'run_seeds'");
  expect_refused(
      job, saved, [](json& p) { p["parameters"] = json::array(); }, "'parameters'");
  expect_refused(
      job, saved, [](json& p) { p["parameters"][0].erase(0); }, "'parameters[0]'");
  expect_refused(
      job, saved, [](json& p) { p["model_states"].erase(1); }, "'model_states' holds 1 entries, expected 2");
  expect_refused(
      job, saved, [](json& p) { p["model_states"][0] = 3; }, "'model_states[0]' is 3");
  // dpsgd's GLM keeps no state of its own: an object there is refused by the model.
  expect_refused(
      job, saved,
      [](json& p) {
        p["model_states"][1] = json::object({{"x", 1}});
      },
      "'model_states[1]' holds a state for a model that keeps none");
  expect_refused(
      job, saved, [](json& p) { p["training_seconds"] = -1.0; }, "'training_seconds'");
  expect_refused(
      job, saved, [](json& p) { p["evaluation_seconds"] = inf; }, "'evaluation_seconds'");
  expect_refused(
      job, saved, [](json& p) { p["evaluation_seconds"] = "soon"; }, "'evaluation_seconds'");
  expect_refused(
      job, saved,
      [](json& p) {
        p = json::array({1, 2});
      },
      "not a JSON object");
  expect_refused(
      job, saved, [](json& p) { p["job"]["data_hash"] = "0"; }, "belongs to a different job");
}

TEST(ResumeState, APayloadNestedBeyondReasonIsRefusedWithoutRecursingIntoIt) {
  const TempDir dir;
  const SmallJob job(dir.file("state"));
  const std::string saved = job.saved_after(5);
  std::string deep(1000000, '\x81');  // [[[...[null]...]]] a million deep
  deep.push_back('\xf6');             // (appended, not +: GCC 12 misreads + of a long string as an overflow)
  write_file(job.options.checkpoint_path, testing::reframed_resume_file(saved, deep));
  EXPECT_NE(refusal([&] { job.run(); }).find("nests deeper"), std::string::npos);
  write_file(job.options.checkpoint_path,
             testing::reframed_resume_file(saved, "\xff"));  // a CBOR "break" with nothing open
  EXPECT_NE(refusal([&] { job.run(); }).find("not valid CBOR"), std::string::npos);
}

}  // namespace
}  // namespace filkit
