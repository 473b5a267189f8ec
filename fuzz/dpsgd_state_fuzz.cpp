// The DP-SGD resume file (src/dpsgd/resume_state.cpp), read through load_state as a resumed job
// reads it: the input is the file, checked against one fixed job fingerprint (the seeds in
// corpus/dpsgd_state/ carry it, so the fuzzer gets past the comparison). Written against the
// load_state boundary only, so that a new file format needs new seeds, not a new target.
#include "dpsgd/resume_state.hpp"

#include "fuzz_util.hpp"

namespace {

// What job_fingerprint gives for some job: its settings, the shapes and a hash of the data.
// fuzz/make_corpus.sh writes the same one into the seeds.
const nlohmann::json& fingerprint() {
  static const nlohmann::json json = {
      {"settings", {{"model", "logistic"}, {"steps", 10}, {"noise_multiplier", 1.0}}},
      {"train", {4, 2}},
      {"test", {2, 2}},
      {"data_hash", "12345"}};
  return json;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = filkit::fuzz::write_input("state.cbor", filkit::fuzz::as_text(data, size));
  filkit::fuzz::runs_or_rejects([&] {
    const std::optional<filkit::detail::ResumeState> state = filkit::detail::load_state(path, fingerprint());
    FILKIT_FUZZ_CHECK(state.has_value());  // the file exists, so it is a state or an error
  });
  return 0;
}
