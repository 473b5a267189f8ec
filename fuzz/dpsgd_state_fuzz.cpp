// The DP-SGD resume file (src/dpsgd/resume_state.cpp), read through load_state as a resumed job
// reads it, against one fixed job (kExpected; the seeds in corpus/dpsgd_state/ are states of it).
// The first byte picks what the rest is: even, the CBOR payload, framed here with a valid header
// and CRC32 so that the fuzzer explores the payload's checks (a random payload would almost never
// pass the checksum); odd, the whole file as it is (header, version, length and checksum checks).
// Written against the load_state boundary only, so that a new file format needs new seeds.
#include "dpsgd/resume_state.hpp"

#include "fuzz_util.hpp"

#include <zlib.h>

namespace {

// The job the seeds belong to: fuzz/make_corpus.sh writes the same fingerprint and sizes.
const filkit::detail::ExpectedState& expected() {
  static const filkit::detail::ExpectedState state = [] {
    filkit::detail::ExpectedState e;
    e.fingerprint = {{"settings", {{"model", "logistic"}, {"steps", 10}, {"noise_multiplier", 1.0}}},
                     {"train", {4, 2}},
                     {"test", {2, 2}},
                     {"data_hash", "12345"}};
    e.runs = 2;
    e.steps = 10;
    e.n = 4;
    e.parameter_count = 2;
    e.snapshot_steps = {5, 10};
    e.run_seeds = {42, (std::uint64_t{1} << 63) + 5};
    return e;
  }();
  return state;
}

// The file format's header (resume_state.hpp): magic, version, payload length, CRC32, little-endian.
std::string framed(std::string_view payload) {
  std::string file(
      "\x89"
      "FKDPSGD",
      8);
  const auto append = [&](std::uint64_t value, int bytes) {
    for (int k = 0; k < bytes; ++k) file += static_cast<char>(value >> (8 * k));
  };
  append(filkit::detail::kResumeFormatVersion, 4);
  append(payload.size(), 8);
  append(crc32_z(0L, reinterpret_cast<const Bytef*>(payload.data()), payload.size()), 4);
  return file.append(payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view rest = filkit::fuzz::as_text(data + 1, size - 1);
  const std::string path = filkit::fuzz::write_input("state.bin", data[0] % 2 == 0 ? framed(rest) : std::string(rest));
  filkit::fuzz::runs_or_rejects([&] {
    const std::optional<filkit::detail::ResumeState> state = filkit::detail::load_state(path, expected());
    FILKIT_FUZZ_CHECK(state.has_value());  // the file exists, so it is a state or an error
    // What the training loop indexes with the state: its sizes must be the job's.
    FILKIT_FUZZ_CHECK(state->run >= 0 && state->run < expected().runs);
    FILKIT_FUZZ_CHECK(state->step >= 0 && state->step < expected().steps);
    FILKIT_FUZZ_CHECK(state->sums.size() == expected().snapshot_steps.size());
    for (const auto& sums : state->sums) {
      FILKIT_FUZZ_CHECK(static_cast<int>(sums.trace_per_run.size()) <= expected().runs);
      for (const auto& trace : sums.trace_per_run) FILKIT_FUZZ_CHECK(trace.size() == expected().n);
      FILKIT_FUZZ_CHECK(sums.spectral.size() == expected().n && sums.sampled.size() == expected().n);
    }
    if (state->trainer) {
      FILKIT_FUZZ_CHECK(state->trainer->parameters.size() == expected().parameter_count);
      FILKIT_FUZZ_CHECK(static_cast<filkit::Index>(state->trainer->order.size()) == expected().n);
    }
  });
  return 0;
}
