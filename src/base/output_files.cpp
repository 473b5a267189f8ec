// Output files that never destroy what a path leads to (io.hpp): regular files are replaced whole
// through a synced temporary and a rename; standard output, devices, FIFOs and symbolic links are
// written in place.
#include "filkit/base/io.hpp"

#include "filkit/base/checks.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>

namespace filkit {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw ResourceError(what + " '" + path + "': " + std::strerror(error));
}

/// Closes the descriptor it owns, unless closed (and checked) before.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  /// Closes now: a delayed write error (NFS, quotas) can surface only here.
  void close(const std::string& path) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("failed writing", path, errno);
  }

 private:
  int fd_;
};

void write_all(int fd, const std::string& content, const std::string& path) {
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("failed writing", path, errno);
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

/// Regular files only: a device or FIFO has nothing to sync (fsync fails with EINVAL).
void sync_if_regular(int fd, const std::string& path) {
  struct stat status {};
  if (::fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && ::fsync(fd) != 0) fail("cannot sync", path, errno);
}

/// Makes the renames into `directory` durable. Best effort where the file system cannot sync a
/// directory (EINVAL) or the directory cannot be opened for reading (write-only directories).
void sync_directory(const fs::path& directory) {
  const FileDescriptor fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return;
  if (::fsync(fd.get()) != 0 && errno != EINVAL) fail("cannot sync the directory", directory.string(), errno);
}

fs::path directory_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void write_through(const OutputFile& file) {
  if (file.path == kStandardOutput) {
    std::cout.flush();  // what was printed before comes first
    std::fflush(stdout);
    write_all(STDOUT_FILENO, file.content, "standard output");
    return;
  }
  // O_TRUNC empties a file behind a link and is ignored by devices and FIFOs.
  FileDescriptor fd(::open(file.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (fd.get() < 0) fail("cannot open", file.path, errno);
  write_all(fd.get(), file.content, file.path);
  sync_if_regular(fd.get(), file.path);
  fd.close(file.path);
}

/// Creates a new temporary file beside `target` ("target.tmp.PID.N"), with the permissions of the
/// file it replaces (else 0666 less the umask); returns its path, and its descriptor in `fd`.
std::string create_temporary(const std::string& target, int& fd) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string path = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;  // left by an earlier process of the same id
    if (fd < 0) fail("cannot create a temporary file beside", target, errno);
    struct stat replaced {};
    if (::stat(target.c_str(), &replaced) == 0 && S_ISREG(replaced.st_mode))
      (void)::fchmod(fd, replaced.st_mode & 07777);  // best effort: the content matters more
    return path;
  }
  throw ResourceError("cannot create a temporary file beside '" + target + "': every name taken");
}

/// The content of `file` in a synced temporary beside it; returns the temporary's path.
std::string write_temporary(const OutputFile& file) {
  int opened = -1;
  const std::string temporary = create_temporary(file.path, opened);
  FileDescriptor fd(opened);
  try {
    write_all(fd.get(), file.content, temporary);
    if (::fsync(fd.get()) != 0) fail("cannot sync", temporary, errno);
    fd.close(temporary);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  return temporary;
}

/// A file to be renamed over its target.
struct StagedFile {
  std::string temporary;
  std::string target;
};

void remove_temporaries(const std::vector<StagedFile>& staged, std::size_t from) {
  for (std::size_t k = from; k < staged.size(); ++k) ::unlink(staged[k].temporary.c_str());
}

/// Renames every temporary over its target, then syncs their directories. A set of renames cannot
/// be atomic: all data is on disk before the first, so a failing rename (rare: the checks
/// before the run and the temporaries in the same directories exclude the usual causes) leaves
/// the files renamed before it in place and removes the remaining temporaries.
void rename_into_place(const std::vector<StagedFile>& staged) {
  std::set<fs::path> directories;
  for (std::size_t k = 0; k < staged.size(); ++k) {
    if (::rename(staged[k].temporary.c_str(), staged[k].target.c_str()) != 0) {
      const int error = errno;
      remove_temporaries(staged, k);
      fail("cannot rename '" + staged[k].temporary + "' to", staged[k].target, error);
    }
    directories.insert(directory_of(staged[k].target));
  }
  for (const fs::path& directory : directories) sync_directory(directory);
}

/// Refuses `path` for `option` unless `directory` exists and new files can be made in it.
void require_writable_directory(const std::string& option, const std::string& path, const fs::path& directory) {
  struct stat status {};
  if (::stat(directory.c_str(), &status) != 0 || !S_ISDIR(status.st_mode))
    throw OptionError::with_text(
        option, option_name(option) + " " + path + ": the directory " + directory.string() + " does not exist");
  if (::access(directory.c_str(), W_OK | X_OK) != 0)
    throw OptionError::with_text(
        option, option_name(option) + " " + path + ": the directory " + directory.string() + " is not writable");
}

/// The file a symbolic link names (relative targets are relative to the link's directory).
fs::path link_target(const std::string& link) {
  const fs::path target = fs::read_symlink(link);
  return target.is_absolute() ? target : fs::absolute(link).parent_path() / target;
}

}  // namespace

bool is_written_through(const std::string& path) {
  if (path == kStandardOutput) return true;
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) return false;  // a new file
  return S_ISLNK(status.st_mode) || S_ISCHR(status.st_mode) || S_ISBLK(status.st_mode) || S_ISFIFO(status.st_mode);
}

void check_output_path(const std::string& option, const std::string& path) {
  if (path == kStandardOutput) return;
  const auto refuse = [&](const std::string& problem) {
    throw OptionError::with_text(option, option_name(option) + " " + path + ": " + problem);
  };
  // "--out -q" gives the path "-q": far likelier a forgotten value than a file of that name.
  if (path.size() > 1 && path[0] == '-')
    refuse(
        "looks like a flag, not a path (the option's value is missing?); for a file whose name begins with '-', "
        "write ./" +
        path);
  struct stat entry {
  }, followed{};
  const bool is_link = ::lstat(path.c_str(), &entry) == 0 && S_ISLNK(entry.st_mode);
  if (::stat(path.c_str(), &followed) != 0) {
    if (errno == ELOOP) refuse("a loop of symbolic links");
    if (errno != ENOENT && errno != ENOTDIR) refuse(std::strerror(errno));
    // A new file, or the file a dangling link names (written through: the link's target is created).
    const fs::path created = is_link ? link_target(path) : fs::absolute(path);
    return require_writable_directory(option, path, created.parent_path());
  }
  if (S_ISDIR(followed.st_mode)) refuse("is a directory; expected a file");
  if (S_ISSOCK(followed.st_mode)) refuse("is a socket; expected a file, a device or a FIFO");
  if (is_link || !S_ISREG(followed.st_mode)) {  // written through
    if (::access(path.c_str(), W_OK) != 0) refuse("is not writable");
    return;
  }
  require_writable_directory(option, path, fs::absolute(path).parent_path());  // for the temporary
}

void check_output_directory(const std::string& option, const std::string& path) {
  const auto refuse = [&](const std::string& problem) {
    throw OptionError::with_text(option, option_name(option) + " " + path + ": " + problem);
  };
  struct stat entry {
  }, followed{};
  if (::stat(path.c_str(), &followed) == 0) {
    if (!S_ISDIR(followed.st_mode)) refuse("exists and is not a directory; name a directory (created if missing)");
    return;
  }
  if (errno == ELOOP) refuse("a loop of symbolic links");
  // std::filesystem reports a dangling link, the path or a folder on it, as "File exists": name it
  // and the file it names.
  fs::path prefix;
  for (const fs::path& part : fs::path(path)) {
    prefix /= part;
    if (::lstat(prefix.c_str(), &entry) == 0 && S_ISLNK(entry.st_mode) && ::stat(prefix.c_str(), &followed) != 0)
      refuse((prefix == fs::path(path) ? std::string("is") : "'" + prefix.string() + "' is") + " a symbolic link to '" +
             fs::read_symlink(prefix).string() + "', which does not exist; create it, or name another directory");
  }
}

void create_output_directory(const std::string& option, const std::string& path) {
  check_output_directory(option, path);
  std::error_code error;
  fs::create_directories(path, error);
  if (error)
    throw OptionError::with_text(option, option_name(option) + " " + path + ": cannot be created: " + error.message());
}

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::map<std::string, std::string> option_of;  // resolved path -> the option that names it
  for (const auto& [option, path] : outputs) {
    if (path.empty() || path == kStandardOutput) continue;
    struct stat followed {};
    if (::stat(path.c_str(), &followed) == 0 && !S_ISREG(followed.st_mode)) continue;  // devices, FIFOs
    std::error_code error;
    // A dangling link names the file it will create (weakly_canonical stops at it).
    const fs::path named = fs::is_symlink(path, error) ? link_target(path) : fs::absolute(path);
    const fs::path resolved = fs::weakly_canonical(named, error);
    const auto [earlier, added] =
        option_of.emplace(error ? named.lexically_normal().string() : resolved.string(), option);
    if (!added)
      throw OptionError::with_text(option, option_name(option) + " " + path + ": the same file as " +
                                               option_name(earlier->second) + "; each output needs a file of its own");
  }
}

void write_output_files(const std::vector<OutputFile>& files) {
  std::vector<bool> through(files.size());
  for (std::size_t k = 0; k < files.size(); ++k) through[k] = is_written_through(files[k].path);
  std::vector<StagedFile> staged;
  try {
    for (std::size_t k = 0; k < files.size(); ++k)
      if (!through[k]) staged.push_back({write_temporary(files[k]), files[k].path});
    // Before any rename: a failing FIFO or device must not leave the regular files half replaced.
    for (std::size_t k = 0; k < files.size(); ++k)
      if (through[k]) write_through(files[k]);
  } catch (...) {
    remove_temporaries(staged, 0);
    throw;
  }
  rename_into_place(staged);
}

void write_output_file(const std::string& path, const std::string& content) { write_output_files({{path, content}}); }

}  // namespace filkit
