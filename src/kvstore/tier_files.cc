#include "kvstore/tier_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/strings.h"

namespace kvforge::kvstore {
namespace {

using base::StrFormat;

Status Errno(const char* what, const std::string& path) {
  return Status::IoError(StrFormat("%s %s: %s", what, path.c_str(), std::strerror(errno)));
}

class PosixTierFiles final : public TierFiles {
 public:
  Status MakeDirs(const std::string& dir) override {
    std::string cur;
    for (size_t i = 0; i <= dir.size(); ++i) {
      if (i == dir.size() || dir[i] == '/') {
        if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
          return Errno("mkdir", cur);
      }
      if (i < dir.size()) cur += dir[i];
    }
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Status::IoError(StrFormat("%s is not a directory", dir.c_str()));
    return Status::Ok();
  }

  Status WriteAtomic(const std::string& path, std::span<const uint8_t> bytes) override {
    static std::atomic<uint64_t> counter{0};
    const std::string tmp = StrFormat("%s.tmp.%d.%llu", path.c_str(), static_cast<int>(::getpid()),
                                      (unsigned long long)counter.fetch_add(1));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", tmp);
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        Status s = Errno("write", tmp);
        ::close(fd);
        ::unlink(tmp.c_str());
        return s;
      }
      done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) {
      Status s = Errno("close", tmp);
      ::unlink(tmp.c_str());
      return s;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      Status s = Errno("rename", tmp);
      ::unlink(tmp.c_str());
      return s;
    }
    return Status::Ok();
  }

  Result<std::vector<uint8_t>> Read(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open", path);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      Status s = Errno("stat", path);
      ::close(fd);
      return s;
    }
    std::vector<uint8_t> out(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // shorter than stat said: the caller's checks reject it
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    out.resize(done);
    return out;
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("unlink", path);
    return Status::Ok();
  }

  Result<std::vector<TierFileEntry>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return Errno("opendir", dir);
    std::vector<TierFileEntry> out;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (::stat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      out.push_back({name, static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
    }
    ::closedir(d);
    return out;
  }
};

}  // namespace

std::unique_ptr<TierFiles> MakePosixTierFiles() { return std::make_unique<PosixTierFiles>(); }

}  // namespace kvforge::kvstore
