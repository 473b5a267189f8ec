#include "dpsgd/resume_state.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/io.hpp"
#include "filkit/data/dataset.hpp"

#include "base/json_input.hpp"
#include "base/parsing.hpp"
#include "base/seeding.hpp"

#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace filkit::detail {

namespace {

constexpr std::string_view kMagic(
    "\x89"
    "FKDPSGD",
    8);
constexpr std::size_t kHeaderSize = 24;  // magic, version (4), payload length (8), CRC32 (4)
// The payload nests 5 deep (job -> settings -> network -> hidden); CBOR is parsed recursively, so
// a crafted payload nested a million deep would overflow the stack.
constexpr int kMaxNesting = 32;

/// A value of the file for a message: its bytes may be anything, so invalid UTF-8 is replaced.
std::string shown(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

[[noreturn]] void refuse(const StateFileKind& kind, const std::string& path, const std::string& problem) {
  throw DataError(std::string(kind.name) + " " + path + ": " + problem + "; the file is damaged or not " + kind.what +
                  ": " + kind.remedy);
}

// ---------------------------------------------------------------------------------------------
// The frame: header and checksum around the CBOR payload.

void append_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int k = 0; k < bytes; ++k) out += static_cast<char>(value >> (8 * k));
}

std::uint64_t little_endian_at(std::string_view bytes, std::size_t at, int count) {
  std::uint64_t value = 0;
  for (int k = 0; k < count; ++k)
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + k])) << (8 * k);
  return value;
}

std::uint32_t crc32_of(std::string_view data) {
  return static_cast<std::uint32_t>(crc32_z(0L, reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

std::string framed(const std::vector<std::uint8_t>& cbor) {
  const std::string_view payload(reinterpret_cast<const char*>(cbor.data()), cbor.size());
  std::string out(kMagic);
  append_little_endian(out, kResumeFormatVersion, 4);
  append_little_endian(out, payload.size(), 8);
  append_little_endian(out, crc32_of(payload), 4);
  out.append(payload);
  return out;
}

/// The payload of a file, once its magic, version, length and checksum hold.
std::string_view payload_of(std::string_view bytes, const StateFileKind& kind, const std::string& path) {
  if (bytes.size() < kHeaderSize)
    refuse(kind, path,
           "it is " + std::to_string(bytes.size()) + " bytes long, shorter than its " + std::to_string(kHeaderSize) +
               "-byte header");
  if (bytes.substr(0, kMagic.size()) != kMagic)
    refuse(kind, path,
           "it does not begin with the checkpoint's magic bytes (\\x89FKDPSGD; files of filkit before format "
           "version 2 are not read)");
  const std::uint64_t version = little_endian_at(bytes, 8, 4);
  if (version < kResumeFormatVersion)
    throw DataError(std::string(kind.name) + " " + path + ": format version " + std::to_string(version) +
                    " was written by an earlier filkit; this one reads version " +
                    std::to_string(kResumeFormatVersion) +
                    " (which keeps each run's traces for the confidence intervals and each run's model "
                    "state) and cannot use it: " +
                    kind.remedy);
  if (version != kResumeFormatVersion)
    refuse(kind, path,
           "format version " + std::to_string(version) + ", this filkit reads version " +
               std::to_string(kResumeFormatVersion));
  const std::uint64_t length = little_endian_at(bytes, 12, 8);
  if (length != bytes.size() - kHeaderSize)
    refuse(kind, path,
           "the header announces " + std::to_string(length) + " bytes of payload, the file holds " +
               std::to_string(bytes.size() - kHeaderSize) + " (truncated?)");
  const std::string_view payload = bytes.substr(kHeaderSize);
  const std::uint64_t recorded = little_endian_at(bytes, 20, 4), computed = crc32_of(payload);
  if (recorded != computed)
    refuse(kind, path,
           "checksum mismatch (CRC32 recorded " + std::to_string(recorded) + ", computed " + std::to_string(computed) +
               ")");
  return payload;
}

nlohmann::json parse_payload(std::string_view payload, const StateFileKind& kind, const std::string& path) {
  if (nests_deeper_than(payload, nlohmann::json::input_format_t::cbor, kMaxNesting))
    refuse(kind, path, "its payload nests deeper than " + std::to_string(kMaxNesting) + " levels");
  try {
    return nlohmann::json::from_cbor(payload.begin(), payload.end());
  } catch (const nlohmann::json::exception& e) {
    refuse(kind, path, std::string("its payload is not valid CBOR (") + e.what() + ")");
  }
}

// ---------------------------------------------------------------------------------------------
// The payload: the state as JSON, and back with every size and value checked.

std::vector<double> to_list(const VectorXd& v) { return std::vector<double>(v.data(), v.data() + v.size()); }

nlohmann::json trainer_json(const TrainerState& trainer) {
  std::ostringstream generator;
  generator << trainer.generator;
  return {{"parameters", to_list(trainer.parameters)},
          {"first_moment", to_list(trainer.first_moment)},
          {"second_moment", to_list(trainer.second_moment)},
          {"adam_steps", trainer.adam_steps},
          {"generator", generator.str()},
          {"order", trainer.order},
          {"trace", to_list(trainer.accountant.trace)},
          {"spectral", to_list(trainer.accountant.spectral)},
          {"sampled", to_list(trainer.accountant.sampled)}};
}

nlohmann::json state_json(const nlohmann::json& fingerprint, const ResumeState& state) {
  nlohmann::json sums = nlohmann::json::array(), parameters = nlohmann::json::array();
  for (const SnapshotSums& c : state.sums) {
    nlohmann::json traces = nlohmann::json::array();
    for (const VectorXd& trace : c.trace_per_run) traces.push_back(to_list(trace));
    sums.push_back({{"trace_per_run", traces}, {"spectral", to_list(c.spectral)}, {"sampled", to_list(c.sampled)}});
  }
  for (const VectorXd& w : state.parameters) parameters.push_back(to_list(w));
  return {{"job", fingerprint},
          {"run", state.run},
          {"step", state.step},
          {"trainer", state.trainer ? trainer_json(*state.trainer) : nlohmann::json()},
          {"sums", sums},
          {"train_accuracy", state.train_accuracy},
          {"test_accuracy", state.test_accuracy},
          {"run_seeds", state.run_seeds},
          {"parameters", parameters},
          {"model_states", state.model_states},
          {"training_seconds", state.training_seconds},
          {"evaluation_seconds", state.evaluation_seconds}};
}

constexpr double kLargest = std::numeric_limits<double>::max();

/// The values a number may take (infinities never).
struct Range {
  double low = -kLargest, high = kLargest;
  bool integral = false;
  bool nan = false;  ///< NaN admitted too

  bool holds(double value) const {
    if (std::isnan(value)) return nan;
    return value >= low && value <= high && (!integral || value == std::floor(value));
  }
  std::string describe() const {
    if (low > high) return "NaN";
    std::string text = integral ? "an integer" : "a finite number";
    if (high < kLargest) text += " in [" + format_double(low) + ", " + format_double(high) + "]";
    else if (low > -kLargest) text += " >= " + format_double(low);
    return nan ? text + " or NaN" : text;
  }
};

Range non_negative(bool nan = false) { return {0.0, kLargest, false, nan}; }
// The accountant's sums and Adam's second moments: a sum beyond 1e300 is a few steps from
// overflowing, which a run that has not diverged (and stopped) never comes near, so such a value
// is a corrupt file, refused here rather than reported later as divergence.
Range accounted(bool nan = false) { return {0.0, 1e300, false, nan}; }
Range count_up_to(double most) { return {0.0, most, true, false}; }
Range nan_only() { return {1.0, 0.0, false, true}; }

/// Reads a parsed payload into a ResumeState, refusing (naming the field) anything that does not
/// fit the job: a size or counter that would index out of bounds, a value no run produces.
class StateReader {
 public:
  StateReader(const std::string& path, const ExpectedState& expected) : path_(path), expected_(expected) {}

  ResumeState read(const nlohmann::json& payload) const {
    if (!payload.is_object()) refuse(*expected_.kind, path_, "its payload is not a JSON object");
    check_same_job(member(payload, "", "job"));
    ResumeState state;
    // run = runs: every run done (a run file, or a finished call's resume file), at step 0.
    state.run = static_cast<int>(integer(member(payload, "", "run"), "run", 0, expected_.runs));
    state.step = integer(member(payload, "", "step"), "step", 0, expected_.steps - 1);
    if (state.run == expected_.runs && state.step != 0)
      refuse_field("run", "is " + std::to_string(state.run) + ", every run done, with 'step' " +
                              std::to_string(state.step) + ", expected step 0");
    const nlohmann::json& trainer = member(payload, "", "trainer");
    if (state.step > 0) state.trainer = trainer_state(trainer, state.step);
    else if (!trainer.is_null()) refuse_field("trainer", "is set at step 0 of a run, expected null");
    state.run_seeds = run_seeds(member(payload, "", "run_seeds"), state.run + (state.step > 0 ? 1 : 0));
    state.parameters = finished_parameters(member(payload, "", "parameters"), state.run);
    state.model_states = model_states(member(payload, "", "model_states"), state.run + (state.step > 0 ? 1 : 0));
    state.sums = snapshot_sums(member(payload, "", "sums"), state.run, state.step);
    state.train_accuracy =
        accuracies(member(payload, "", "train_accuracy"), "train_accuracy", state.run, state.step, Range{0.0, 1.0});
    state.test_accuracy = accuracies(member(payload, "", "test_accuracy"), "test_accuracy", state.run, state.step,
                                     expected_.has_test ? Range{0.0, 1.0} : nan_only());
    state.training_seconds = number(member(payload, "", "training_seconds"), "training_seconds", non_negative());
    state.evaluation_seconds = number(member(payload, "", "evaluation_seconds"), "evaluation_seconds", non_negative());
    return state;
  }

 private:
  [[noreturn]] void refuse_field(const std::string& field, const std::string& problem) const {
    refuse(*expected_.kind, path_, "'" + field + "' " + problem);
  }

  /// Settings and data first: the likeliest refusal names the setting that changed.
  void check_same_job(const nlohmann::json& saved) const {
    const nlohmann::json& fingerprint = expected_.fingerprint;
    if (saved == fingerprint) return;
    std::string difference = "the data differ";
    const auto saved_value = [&saved](const char* key) {
      return saved.is_object() ? saved.value(key, nlohmann::json()) : nlohmann::json();
    };
    if (fingerprint.value("torchscript_sha256", nlohmann::json()) != saved_value("torchscript_sha256"))
      difference = "the TorchScript file's contents changed: SHA-256 " + shown(saved_value("torchscript_sha256")) +
                   ", now " + shown(fingerprint.value("torchscript_sha256", nlohmann::json()));
    if (const nlohmann::json model = fingerprint.value("model", nlohmann::json()); model != saved_value("model")) {
      // TrainableModel::resume_fingerprint: name the first part that differs (fim: its method, gradient
      // model, pre-trained start, public part).
      const nlohmann::json before = saved_value("model");
      difference = "the model's own state was made under other conditions";
      const auto was = [&before](const std::string& key) {
        return before.is_object() ? before.value(key, nlohmann::json()) : nlohmann::json();
      };
      std::vector<std::string> keys{"method"};  // first: it decides the rest
      if (model.is_object())
        for (const auto& item : model.items()) keys.push_back(item.key());
      for (const std::string& key : keys)
        if (const nlohmann::json now = model.is_object() ? model.value(key, nlohmann::json()) : nlohmann::json();
            was(key) != now) {
          std::string name = key;
          nlohmann::json old_value = was(key), new_value = now;
          if (old_value.is_object() && new_value.is_object())  // a settings object: the setting that changed
            for (const auto& item : new_value.items())
              if (old_value.value(item.key(), nlohmann::json()) != item.value()) {
                name += "." + item.key();
                old_value = nlohmann::json(old_value.value(item.key(), nlohmann::json()));
                new_value = nlohmann::json(item.value());
                break;
              }
          difference = "the model's '" + name + "' changed: it was " + shown(old_value) + ", now " + shown(new_value);
          break;
        }
    }
    if (fingerprint.value("network", nlohmann::json()) != saved_value("network"))
      difference = "the network changed: it was " + shown(saved_value("network")) + ", now " +
                   shown(fingerprint.value("network", nlohmann::json()));
    // A run file's run (train_dpsgd_run), before the settings: they name the likelier difference.
    if (const nlohmann::json run = fingerprint.value("run_alone", nlohmann::json()); run != saved_value("run_alone")) {
      const nlohmann::json was = saved_value("run_alone");
      difference =
          was.is_null() ? "it is a resume file, not the run file of one run"
          : run.is_null()
              ? "it is the run file of run " + shown(was) + " (filkit dpsgd --run), not a resume file"
              : "it holds run " + shown(was) + ", not run " + shown(run) + "; a copy of run " + shown(was) + "'s file?";
    }
    if (!saved.is_object() || !saved.contains("settings") || !saved.at("settings").is_object()) {
      difference = "it records no settings";
    } else {
      const nlohmann::json& settings = saved.at("settings");
      for (const auto& [key, value] : fingerprint.at("settings").items())
        if (!settings.contains(key) || settings.at(key) != value) {
          difference =
              "setting '" + key + "' was " + shown(settings.value(key, nlohmann::json())) + ", now " + shown(value);
          break;
        }
    }
    throw DataError(std::string(expected_.kind->name) + " " + path_ + " belongs to a different job (" + difference +
                    "): " + expected_.kind->other_job_remedy);
  }

  const nlohmann::json& member(const nlohmann::json& object, const std::string& parent, const char* key) const {
    const std::string field = parent.empty() ? key : parent + "." + key;
    if (!object.is_object()) refuse_field(parent, "is not an object");
    const auto found = object.find(key);
    if (found == object.end()) refuse_field(field, "is missing");
    return *found;
  }

  const nlohmann::json& array(const nlohmann::json& value, const std::string& field, std::size_t size,
                              const std::string& what) const {
    if (!value.is_array()) refuse_field(field, "is not an array");
    if (value.size() != size)
      refuse_field(
          field, "holds " + std::to_string(value.size()) + " entries, expected " + std::to_string(size) + ": " + what);
    return value;
  }

  static bool is_integer_in(const nlohmann::json& value, Index low, Index high) {
    if (value.is_number_unsigned()) {  // beyond Index when above 2^63 - 1
      const std::uint64_t v = value.get<std::uint64_t>();
      return high >= 0 && v <= static_cast<std::uint64_t>(high) && static_cast<Index>(v) >= low;
    }
    return value.is_number_integer() && value.get<std::int64_t>() >= low && value.get<std::int64_t>() <= high;
  }

  Index integer(const nlohmann::json& value, const std::string& field, Index low, Index high) const {
    if (!is_integer_in(value, low, high))
      refuse_field(field, "is " + shown(value) + ", expected an integer in [" + std::to_string(low) + ", " +
                              std::to_string(high) + "]");
    return value.get<Index>();
  }

  double number(const nlohmann::json& value, const std::string& field, const Range& range) const {
    if (!value.is_number() || !range.holds(value.get<double>()))
      refuse_field(field, "is " + shown(value) + ", expected " + range.describe());
    return value.get<double>();
  }

  std::vector<double> numbers(const nlohmann::json& value, const std::string& field, std::size_t size,
                              const std::string& what, const Range& range) const {
    array(value, field, size, what);
    std::vector<double> out(size);
    for (std::size_t i = 0; i < size; ++i) out[i] = number(value[i], field + "[" + std::to_string(i) + "]", range);
    return out;
  }

  VectorXd vector(const nlohmann::json& value, const std::string& field, Index size, const std::string& what,
                  const Range& range) const {
    const std::vector<double> v = numbers(value, field, static_cast<std::size_t>(size), what, range);
    return Eigen::Map<const VectorXd>(v.data(), size);
  }

  VectorXd examples_vector(const nlohmann::json& value, const std::string& field, const Range& range) const {
    return vector(value, field, expected_.n, "one per training example", range);
  }

  /// Parameters (and Adam's first moments) within the data's bound: a run whose parameters pass
  /// it has diverged and stopped, so a larger one is a corrupt file, not a run to go on with.
  VectorXd parameters_vector(const nlohmann::json& value, const std::string& field,
                             const Range& range = Range{-kMaxInputMagnitude, kMaxInputMagnitude}) const {
    return vector(value, field, expected_.parameter_count, "the model's parameter count", range);
  }

  /// The runs whose accountant and accuracies snapshot `c` holds.
  Index runs_through(std::size_t c, int run, Index step) const {
    return run + (step >= expected_.snapshot_steps[c] ? 1 : 0);
  }

  std::vector<std::uint64_t> run_seeds(const nlohmann::json& value, int started) const {
    array(value, "run_seeds", static_cast<std::size_t>(started), "one per run started");
    std::vector<std::uint64_t> seeds;
    for (int r = 0; r < started; ++r) {
      const nlohmann::json& seed = value[r];
      if (!seed.is_number_unsigned() || seed.get<std::uint64_t>() != expected_.run_seeds[r])
        refuse_field("run_seeds[" + std::to_string(r) + "]", "is " + shown(seed) + ", expected " +
                                                                 std::to_string(expected_.run_seeds[r]) + ", run " +
                                                                 std::to_string(r) + "'s seed");
      seeds.push_back(expected_.run_seeds[r]);
    }
    return seeds;
  }

  std::vector<VectorXd> finished_parameters(const nlohmann::json& value, int finished) const {
    array(value, "parameters", static_cast<std::size_t>(finished), "one per finished run");
    std::vector<VectorXd> parameters;
    for (int r = 0; r < finished; ++r)
      parameters.push_back(parameters_vector(value[r], "parameters[" + std::to_string(r) + "]"));
    return parameters;
  }

  /// Null or an object each; what is inside, the run's model checks (TrainableModel::restore).
  std::vector<nlohmann::json> model_states(const nlohmann::json& value, int started) const {
    array(value, "model_states", static_cast<std::size_t>(started), "one per run started");
    for (int r = 0; r < started; ++r)
      if (!value[r].is_null() && !value[r].is_object())
        refuse_field("model_states[" + std::to_string(r) + "]",
                     "is " + shown(value[r]) + ", expected null or an object");
    return value.get<std::vector<nlohmann::json>>();
  }

  std::vector<SnapshotSums> snapshot_sums(const nlohmann::json& value, int run, Index step) const {
    const std::size_t count = expected_.snapshot_steps.size();
    array(value, "sums", count, "one per snapshot");
    std::vector<SnapshotSums> sums;
    for (std::size_t c = 0; c < count; ++c) {
      const std::string field = "sums[" + std::to_string(c) + "]";
      const Index runs = runs_through(c, run, step);
      const double sampled_at_most = static_cast<double>(runs * expected_.snapshot_steps[c]);
      const nlohmann::json& traces = array(member(value[c], field, "trace_per_run"), field + ".trace_per_run",
                                           static_cast<std::size_t>(runs), "one per run through the snapshot");
      SnapshotSums snapshot;
      for (Index r = 0; r < runs; ++r)
        snapshot.trace_per_run.push_back(
            examples_vector(traces[r], field + ".trace_per_run[" + std::to_string(r) + "]", accounted()));
      snapshot.spectral = examples_vector(member(value[c], field, "spectral"), field + ".spectral",
                                          accounted(!expected_.spectral_computed));
      snapshot.sampled =
          examples_vector(member(value[c], field, "sampled"), field + ".sampled", count_up_to(sampled_at_most));
      sums.push_back(std::move(snapshot));
    }
    return sums;
  }

  std::vector<std::vector<double>> accuracies(const nlohmann::json& value, const std::string& field, int run,
                                              Index step, const Range& range) const {
    const std::size_t count = expected_.snapshot_steps.size();
    array(value, field, count, "one per snapshot");
    std::vector<std::vector<double>> lists;
    for (std::size_t c = 0; c < count; ++c)
      lists.push_back(numbers(value[c], field + "[" + std::to_string(c) + "]",
                              static_cast<std::size_t>(runs_through(c, run, step)), "one per run through the snapshot",
                              range));
    return lists;
  }

  TrainerState trainer_state(const nlohmann::json& value, Index step) const {
    TrainerState trainer;
    trainer.parameters = parameters_vector(member(value, "trainer", "parameters"), "trainer.parameters");
    trainer.first_moment = parameters_vector(member(value, "trainer", "first_moment"), "trainer.first_moment");
    const nlohmann::json& second = member(value, "trainer", "second_moment");
    trainer.second_moment = expected_.adam ? parameters_vector(second, "trainer.second_moment", accounted())
                                           : vector(second, "trainer.second_moment", 0, "none without Adam", Range{});
    const Index adam_steps = expected_.adam ? step : 0;  // Adam counts every step of the run
    trainer.adam_steps = integer(member(value, "trainer", "adam_steps"), "trainer.adam_steps", adam_steps, adam_steps);
    trainer.generator = generator(member(value, "trainer", "generator"));
    trainer.order = permutation(member(value, "trainer", "order"));
    trainer.accountant.trace = examples_vector(member(value, "trainer", "trace"), "trainer.trace", accounted());
    trainer.accountant.spectral = examples_vector(member(value, "trainer", "spectral"), "trainer.spectral",
                                                  accounted(!expected_.spectral_computed));
    trainer.accountant.sampled =
        examples_vector(member(value, "trainer", "sampled"), "trainer.sampled", count_up_to(static_cast<double>(step)));
    return trainer;
  }

  std::mt19937_64 generator(const nlohmann::json& value) const {
    std::mt19937_64 generator;
    std::istringstream text(value.is_string() ? value.get<std::string>() : std::string());
    text >> generator;
    if (!value.is_string() || text.fail() || !(text >> std::ws).eof())
      refuse_field("trainer.generator", "is not the text of a std::mt19937_64 state");
    return generator;
  }

  std::vector<Index> permutation(const nlohmann::json& value) const {
    const Index n = expected_.n;
    array(value, "trainer.order", static_cast<std::size_t>(n), "one per training example");
    std::vector<Index> order(n);
    std::vector<bool> seen(n, false);
    for (Index i = 0; i < n; ++i) {
      const std::string field = "trainer.order[" + std::to_string(i) + "]";
      order[i] = integer(value[i], field, 0, n - 1);
      if (seen[order[i]])
        refuse_field(field,
                     "repeats " + std::to_string(order[i]) + ", expected a permutation of 0.." + std::to_string(n - 1));
      seen[order[i]] = true;
    }
    return order;
  }

  const std::string& path_;
  const ExpectedState& expected_;
};

/// The bytes at `path`, or nullopt when there is no file; within `budget` (its size checked before
/// it is read: a 2 GB resume file was read whole under --max-memory 256M).
std::optional<std::string> read_if_present(const StateFileKind& kind, const std::string& path, ByteSize budget) {
  std::error_code error;
  if (std::filesystem::status(path, error).type() == std::filesystem::file_type::not_found) return std::nullopt;
  try {
    return read_file_bytes(path, budget);
  } catch (const ResourceError&) {
    throw;  // names the file, its size and the budget
  } catch (const std::exception& failure) {
    throw ResourceError(std::string(kind.name) + " " + path + ": exists but cannot be read (" + failure.what() + ")");
  }
}

}  // namespace

namespace {

/// rows_hash (data/dataset.hpp) of all the ranks' rows of `data` (this rank's rows start at global
/// row `offset`), the same for any number of ranks (one process included). The sum is added over
/// the ranks in two exact 32-bit halves.
std::uint64_t all_ranks_rows_hash(const Dataset& data, Index offset, const Communicator& comm) {
  const std::uint64_t sum = filkit::rows_hash(data, offset);
  const Index low = comm.sum(static_cast<Index>(sum & 0xffffffffULL));
  const Index high = comm.sum(static_cast<Index>(sum >> 32));
  return (static_cast<std::uint64_t>(high) << 32) + static_cast<std::uint64_t>(low);
}

}  // namespace

nlohmann::json job_fingerprint(const Dataset& train, const Dataset& test, const DpSgdOptions& options,
                               const Communicator& comm) {
  nlohmann::json settings = to_json(options);
  // Where and how often the state is saved, and how the results are summarised and accounted
  // (after training, from the step count), do not change it.
  for (const char* key : {"checkpoint", "checkpoint_every", "stop_after", "bootstrap_resamples", "confidence_level",
                          "accountant", "discretization"})
    settings.erase(key);
  const Index train_offset = comm.exclusive_prefix_sum(train.n()), test_offset = comm.exclusive_prefix_sum(test.n());
  const std::uint64_t hash =
      all_ranks_rows_hash(train, train_offset, comm) ^ splitmix64(all_ranks_rows_hash(test, test_offset, comm));
  return {{"settings", settings},
          {"train", {comm.sum(train.n()), train.d()}},
          {"test", {comm.sum(test.n()), test.d()}},
          {"data_hash", std::to_string(hash)}};
}

void save_state(const std::string& path, const nlohmann::json& fingerprint, const ResumeState& state) {
  write_output_file(path, framed(nlohmann::json::to_cbor(state_json(fingerprint, state))));
}

void refuse_checkpoint(const std::string& path, const std::string& problem) { refuse(kCheckpointFile, path, problem); }

std::optional<ResumeState> load_state(const std::string& path, const ExpectedState& expected) {
  const StateFileKind& kind = *expected.kind;
  const std::optional<std::string> bytes = read_if_present(kind, path, expected.max_memory);
  if (!bytes) return std::nullopt;
  return StateReader(path, expected).read(parse_payload(payload_of(*bytes, kind, path), kind, path));
}

}  // namespace filkit::detail
