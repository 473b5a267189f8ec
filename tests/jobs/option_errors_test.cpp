// Every job's validate() refuses a bad option with an OptionError that names options by the names
// its visit_fields declares (so that the command line prints --name-with-dashes and Python the
// keyword, never a struct field such as FilOptions.sigma), and the command line and Python show
// them as their users type them.
#include "filkit/base/errors.hpp"
#include "filkit/jobs/registry.hpp"

#include "test_util.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <type_traits>

namespace filkit {
namespace {

/// The declared names of Options' fields.
template <class Options>
std::set<std::string> declared_names() {
  Options options;
  std::set<std::string> names;
  visit_fields(options, [&](const char* name, auto&, const char*) { names.insert(name); });
  return names;
}

/// Values no rule of a numeric field is likely to accept, tried one at a time.
template <typename T>
std::vector<T> bad_values() {
  if constexpr (std::is_floating_point_v<T>)
    return {-1.0, 0.0, std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(), 1e300};
  else if constexpr (std::is_signed_v<T>) return {-1, 0, std::numeric_limits<T>::max()};
  else return {0, std::numeric_limits<T>::max()};
}

/// Sets the k-th numeric field (or list or optional of numbers) of `options` to `value_index`-th
/// bad value; false when there is no such field or value.
template <class Options>
bool spoil(Options& options, std::size_t k, std::size_t value_index, std::string& which) {
  std::size_t position = 0;
  bool done = false;
  visit_fields(options, [&](const char* name, auto& field, const char*) {
    using T = std::decay_t<decltype(field)>;
    bool here = false;
    const auto assign = [&](auto& target) {
      using V = std::decay_t<decltype(target)>;
      if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) {
        if (position++ != k) return;
        const std::vector<V> values = bad_values<V>();
        if (value_index >= values.size()) return;
        target = values[value_index];
        which = std::string(name) + " = " + std::to_string(static_cast<double>(values[value_index]));
        here = done = true;
      }
    };
    if constexpr (is_optional<T>::value) {
      typename T::value_type inner{};
      assign(inner);
      if (here) field = inner;
    } else if constexpr (is_vector<T>::value) {
      typename T::value_type element{};
      assign(element);
      if (here) field = {element};
    } else {
      assign(field);
    }
  });
  return done;
}

/// Spoils every numeric field of Job's options in turn with each bad value; every refusal must be
/// an OptionError naming declared options only (besides the outputs and threads every job has).
template <class Job>
void expect_declared_names_in_refusals(const typename Job::Options& start) {
  std::set<std::string> names = declared_names<typename Job::Options>();
  for (const char* common : {"out", "json", "report", "threads"}) names.insert(common);
  int refusals = 0;
  for (std::size_t k = 0;; ++k) {
    bool any = false;
    for (std::size_t v = 0;; ++v) {
      typename Job::Options options = start;
      std::string which;
      if (!spoil(options, k, v, which)) break;
      any = true;
      try {
        options.validate();
      } catch (const OptionError& error) {
        ++refusals;
        EXPECT_TRUE(names.count(error.option())) << Job::name << ", " << which << ": " << error.what();
        for (const std::string& named : error.text().options())
          EXPECT_TRUE(names.count(named)) << Job::name << ", " << which << " names '" << named << "': " << error.what();
      } catch (const std::exception& error) {
        ADD_FAILURE() << Job::name << ", " << which << ": not an OptionError: " << error.what();
      }
    }
    if (!any) break;
  }
  EXPECT_GT(refusals, 3) << Job::name;
}

/// Options a job runs with but for the spoiled one: its defaults, or, where a job needs more, what
/// it needs.
template <class Job>
typename Job::Options runnable_options() {
  typename Job::Options options;
  if constexpr (std::is_same_v<Job, AttackJob>) {
    options.task.data.data = "income-regression";
  } else if constexpr (std::is_same_v<Job, AccountantJob>) {
    options.sample_rate = 0.01;
    options.noise_multiplier = 1.0;
    options.steps = 100;
  } else if constexpr (std::is_same_v<Job, ReportJob>) {
    options.inputs = {"summary.json"};
    options.out_dir = "report";
  }
  return options;
}

TEST(OptionErrors, EveryJobNamesOnlyItsDeclaredOptions) {
  for_each_job([]<class Job>() { expect_declared_names_in_refusals<Job>(runnable_options<Job>()); });
}

/// The command line's exit status and standard error for `arguments`.
std::pair<int, std::string> run_filkit(const std::string& arguments) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) return {-1, ""};
  const std::string command = std::string(binary) + " " + arguments + " 2>&1 >/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (std::size_t got = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, got);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(OptionErrors, TheCommandLineSpellsOptionsAsFlagsAndExitsByKind) {
  if (std::getenv("FILKIT_BINARY") == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  struct Case {
    std::string arguments, message;
    int status;
  };
  const std::vector<Case> cases = {
      {"dpsgd -q --clip-norm -1", "filkit: error: --clip-norm = -1: must be > 0\n", 64},
      {"dpsgd -q --steps 0", "filkit: error: --steps = 0: must be >= 1\n", 64},
      {"dpsgd -q --momentum 1", "filkit: error: --momentum = 1: must lie in [0, 1)\n", 64},
      {"dpsgd -q --stop-after 3", "filkit: error: --stop-after = 3: needs --checkpoint (where to save the state)\n",
       64},
      {"measure -q --sigma 0", "filkit: error: --sigma = 0: must be > 0\n", 64},
      {"measure -q --l2 -1", "filkit: error: --l2 = -1: must be >= 0\n", 64},
      {"measure -q --tolerance 1", "filkit: error: --tolerance = 1: must lie in (0, 0.001]\n", 64},
      {"bound -q --norm-bound 0", "filkit: error: --norm-bound = 0: must be > 0\n", 64},
      {"irfil -q --max-weight 0", "filkit: error: --max-weight = 0: must be greater than --min-weight = 0\n", 64},
      {"public-training -q --gradient-hidden 0", "filkit: error: --gradient-hidden = 0: must be >= 1\n", 64},
      {"fim -q --lambda-min 2 --lambda 1", "filkit: error: --lambda-min = 2: must lie in [0, --lambda = 1]\n", 64},
      {"learned-attack -q --fixed-size 0", "filkit: error: --fixed-size = 0: must be >= 1\n", 64},
      {"accountant -q --sample-rate 0.01 --noise-multiplier 1 --steps 10 --discretization 0",
       "filkit: error: --discretization = 0: must lie in (0, 1]\n", 64},
      {"accountant -q --sample-rate 0.01 --steps 10",
       "filkit: error: --noise-multiplier: is required (or --target-eps to solve "
       "for it)\n",
       64},
      {"report --input x.json --report r --reload-timeout 0", "filkit: error: --reload-timeout = 0: must be > 0\n", 64},
      {"measure -q --clip-norm 1", "", 109},  // CLI11's own: no such flag
      {"dpsgd -q --clip-norm abc", "filkit: error: --clip-norm = 'abc': expected a number\n", 64},
  };
  for (const Case& c : cases) {
    const auto [status, output] = run_filkit(c.arguments);
    EXPECT_EQ(status, c.status) << c.arguments << "\n" << output;
    if (!c.message.empty()) EXPECT_EQ(output, c.message) << c.arguments;
  }
}

// Each kind of typed error exits with its status (cli/main.cpp, base/errors.hpp): a malformed file
// 65 (DataError), a file that cannot be opened and a size beyond --max-memory 71 (ResourceError,
// MemoryLimitError), a fit that has no finite minimiser 70 (NumericalError); and the message names
// the file or the flag.
TEST(OptionErrors, TheCommandLineExitsByTheKindOfError) {
  if (std::getenv("FILKIT_BINARY") == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const testing::TempDir dir;
  const std::string ragged = dir.write("ragged.csv", "f0,y\n0.5,0\n0.25,1,7\n");
  const std::string missing = dir.file("missing.npz");
  std::string rows = "f0,y\n";  // separable at 0: logistic regression without L2 has no minimiser
  for (int i = 0; i < 40; ++i) rows += std::to_string(i < 20 ? -1.0 - i : 1.0 + i) + "," + (i < 20 ? "0" : "1") + "\n";
  const std::string separable = dir.write("separable.csv", rows);
  struct Case {
    std::string arguments, fragment;
    int status;
  };
  const std::vector<Case> cases = {
      {"measure -q --data " + ragged + " --target y", ragged + "' line 3", 65},
      {"measure -q --data " + missing, "cannot open '" + missing + "'", 71},
      {"measure -q --data " + separable + " --target y --max-memory 1K", "more than --max-memory = 1K", 71},
      {"measure -q --data " + separable + " --target y --l2 0 --pca 0", "linearly separable", 70},
      {"measure -q --sigma 0", "--sigma = 0: must be > 0", 64},
  };
  for (const Case& c : cases) {
    const auto [status, output] = run_filkit(c.arguments);
    EXPECT_EQ(status, c.status) << c.arguments << "\n" << output;
    EXPECT_NE(output.find("filkit: error: "), std::string::npos) << c.arguments << "\n" << output;
    EXPECT_NE(output.find(c.fragment), std::string::npos) << c.arguments << "\n" << output;
  }
}

}  // namespace
}  // namespace filkit
