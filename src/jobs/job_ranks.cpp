// A job under mpirun (job.hpp): the ranks' agreement on the command, its settings and the files
// they name, checked before any work; and the refusal of the jobs that run on one process, naming
// those that run on several (registry.hpp).
#include "filkit/jobs/job.hpp"
#include "filkit/jobs/registry.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/data/load.hpp"
#include "base/seeding.hpp"

#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace filkit {

namespace fs = std::filesystem;

namespace {

// A machine's share, not a setting of the results: it may differ between the nodes of a job.
constexpr const char* kMachineSettings[] = {"max_memory"};

/// A hash of a file's whole contents, read in pieces (words of 8 bytes mixed by splitmix64; a
/// few GB/s, so that a rank checking its copy of the data costs a fraction of reading it).
std::optional<std::uint64_t> contents_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> buffer(std::size_t{1} << 20);
  std::uint64_t hash = 0x9e3779b97f4a7c15ULL;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    std::size_t k = 0;
    for (; k + 8 <= got; k += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, buffer.data() + k, 8);
      hash = splitmix64(hash ^ word);
    }
    std::uint64_t tail = got - k;  // the last bytes, with their count (so trailing zeros count)
    for (; k < got; ++k) tail = (tail << 8) | static_cast<unsigned char>(buffer[k]);
    if (got % 8 != 0) hash = splitmix64(hash ^ tail);
  }
  if (in.bad()) return std::nullopt;
  return hash;
}

/// What a rank knows of the files a setting names (a data source's files, or the file a path
/// names): each path, its size and a hash of its contents. Empty for anything else.
nlohmann::json file_identities(const std::string& name, const std::string& value) {
  std::vector<std::string> paths;
  std::error_code error;
  if (name == "data") paths = dataset_source_files(value);
  else if (!value.empty() && fs::is_regular_file(value, error)) paths = {value};
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& path : paths) {
    const std::uintmax_t size = fs::file_size(path, error);
    const std::optional<std::uint64_t> hash = contents_hash(path);
    if (error || !hash) continue;  // unreadable here: the loader says so
    files.push_back({{"path", path}, {"bytes", size}, {"hash", std::to_string(*hash)}});
  }
  return files;
}

/// What rank `rank` must agree on with rank 0: the command, its settings, the files they name.
nlohmann::json rank_identity(const std::string& command, const nlohmann::json& settings) {
  nlohmann::json compared = settings, files = nlohmann::json::object();
  for (const char* name : kMachineSettings) compared.erase(name);
  for (const auto& [name, value] : compared.items())
    if (value.is_string()) {
      nlohmann::json identities = file_identities(name, value.get<std::string>());
      if (!identities.empty()) files[name] = std::move(identities);
    }
  return {{"command", command}, {"settings", compared}, {"files", files}};
}

std::string shown_setting(const nlohmann::json& value) {
  if (value.is_null()) return "(not set)";
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  return text.size() > 100 ? text.substr(0, 100) + "..." : text;
}

/// How the files of setting `name` differ on rank `rank` from rank 0's (`zero`, `other`: their
/// file_identities); empty if they do not.
Message files_difference(const std::string& name, const std::string& value, const nlohmann::json& zero,
                         const nlohmann::json& other, int rank) {
  const std::string on = " on rank " + std::to_string(rank) + " but ";
  const Message subject = option_name(name) + " " + value;
  if (zero.size() != other.size())
    return subject + " reads " + std::to_string(other.size()) + " file(s)" + on + std::to_string(zero.size()) +
           " on rank 0";
  for (std::size_t k = 0; k < zero.size(); ++k) {
    const nlohmann::json &a = zero[k], &b = other[k];
    const std::string path = b["path"].get<std::string>();
    const Message file = a["path"] == b["path"] ? subject + (path == value ? Message("") : Message(" (" + path + ")"))
                                                : subject + " (" + path + " on rank " + std::to_string(rank) + ", " +
                                                      a["path"].get<std::string>() + " on rank 0)";
    if (a["bytes"] != b["bytes"])
      return file + " has " + b["bytes"].dump() + " bytes" + on + a["bytes"].dump() + " on rank 0";
    if (a["hash"] != b["hash"]) return file + " has other contents" + on + "the same size on rank 0";
  }
  return {};
}

/// How rank `rank`'s identity differs from rank 0's, naming the first differing option; empty
/// (and `option` untouched) if it does not.
Message rank_difference(const nlohmann::json& zero, const nlohmann::json& other, int rank, std::string& option) {
  const std::string on = " on rank " + std::to_string(rank) + " but ";
  if (zero["command"] != other["command"])
    return "the command is filkit " + shown_setting(other["command"]) + on + "filkit " +
           shown_setting(zero["command"]) + " on rank 0";
  const nlohmann::json &a = zero["settings"], &b = other["settings"];
  for (const auto& [name, value] : a.items())
    if (!b.contains(name) || b[name] != value) {
      option = name;
      return option_name(name) + " is " + shown_setting(b.contains(name) ? b[name] : nullptr) + on +
             shown_setting(value) + " on rank 0";
    }
  for (const auto& [name, value] : b.items())
    if (!a.contains(name)) {
      option = name;
      return option_name(name) + " is " + shown_setting(value) + on + "not set on rank 0";
    }
  const nlohmann::json &fa = zero["files"], &fb = other["files"];
  const nlohmann::json none = nlohmann::json::array();
  for (const auto& [name, value] : a.items()) {
    if (!value.is_string()) continue;
    Message difference = files_difference(name, value.get<std::string>(), fa.contains(name) ? fa[name] : none,
                                          fb.contains(name) ? fb[name] : none, rank);
    if (!difference.plain().empty()) {
      option = name;
      return difference;
    }
  }
  return {};
}

}  // namespace

void check_ranks_agree(const std::string& command, const nlohmann::json& settings, const Communicator& comm) {
  if (!comm.distributed()) return;
  const std::vector<std::string> identities = comm.gather(rank_identity(command, settings).dump());
  std::exception_ptr problem;
  if (comm.is_root()) {
    const nlohmann::json zero = nlohmann::json::parse(identities[0]);
    for (int rank = 1; rank < static_cast<int>(identities.size()) && !problem; ++rank) {
      std::string option;
      const Message difference =
          rank_difference(zero, nlohmann::json::parse(identities[static_cast<std::size_t>(rank)]), rank, option);
      if (difference.plain().empty()) continue;
      const Message text = "the MPI ranks were started differently: " + difference +
                           "; start every rank with the same command, options and data (docs/distributed.md)";
      problem = std::make_exception_ptr(OptionError::with_text(option.empty() ? "command" : option, text));
    }
  }
  comm.stop_all_if(problem);
}

std::string jobs_on_several_ranks() {
  std::vector<std::string> names;
  for_each_job([&]<class Job>() {
    if constexpr (runs_on_mpi_ranks<Job>()) names.push_back(Job::name);
  });
  std::string text;
  for (std::size_t k = 0; k < names.size(); ++k)
    text += (k == 0 ? "" : k + 1 == names.size() ? " and " : ", ") + names[k];
  return text;
}

void refuse_several_ranks(const char* job, const Communicator& comm) {
  if (!comm.distributed()) return;
  throw ResourceError(std::string("filkit ") + job + " runs on one process; of the jobs only " +
                      jobs_on_several_ranks() +
                      " run on several MPI ranks so far (docs/distributed.md): run it without mpirun, or with -np 1");
}

}  // namespace filkit
