#include "train/run_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "core/error.h"
#include "train/checkpoint.h"

namespace gdn {

namespace {

constexpr int kTries = 5;  // takeovers raced by other runs before giving up

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// Fields 3 (the state) and 22 (the start time in clock ticks since boot) of
// /proc/PID/stat, after the command's closing parenthesis; {' ', -1} when unreadable.
struct ProcStat {
  char state = ' ';
  std::int64_t start_ticks = -1;
};
ProcStat proc_stat(std::int64_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t close = s.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(s.substr(close + 1));
  ProcStat out;
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return {};
    if (i == 3) out.state = field[0];
  }
  out.start_ticks = std::strtoll(field.c_str(), nullptr, 10);
  return out;
}

// Whether the process that wrote a lock on this host still runs (a zombie, killed and not
// yet reaped, does not; nor another process that got its pid).
bool alive(const LockHolder& h) {
  if (h.pid <= 0) return false;
  if (::kill(pid_t(h.pid), 0) != 0 && errno == ESRCH) return false;
  const ProcStat now = proc_stat(h.pid);
  if (now.state == 'Z' || now.state == 'X') return false;
  return now.start_ticks < 0 || h.start_ticks <= 0 || now.start_ticks == h.start_ticks;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream os;
  os << std::hex << rd() << rd();
  return os.str();
}

std::string to_text(const LockHolder& h) {
  return nlohmann::json{{"host", h.host}, {"pid", h.pid},     {"start_ticks", h.start_ticks},
                        {"job", h.job},   {"since", h.since}, {"token", h.token}}
             .dump() +
         "\n";
}

std::optional<LockHolder> parse(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    LockHolder h;
    h.host = j.at("host").get<std::string>();
    h.pid = j.at("pid").get<std::int64_t>();
    h.start_ticks = j.value("start_ticks", std::int64_t(0));
    h.job = j.value("job", std::string());
    h.since = j.value("since", std::string());
    h.token = j.value("token", std::string());
    return h;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Modification time in seconds; nullopt when the file is gone.
std::optional<double> mtime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
}

// Writes `text` to a new file at path (synced): the lock before it is linked into place.
void write_new(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  GDN_CHECK(fd >= 0, "cannot create the run lock '", path, "': ", std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    throw_error("cannot write the run lock '", path, "': ", std::strerror(err));
  }
}

// Links `mine` onto `path`: true when it is ours now. NFS may lose link's reply after the
// link was made: a link count of 2 then says it was.
bool link_into_place(const std::string& mine, const std::string& path) {
  if (::link(mine.c_str(), path.c_str()) == 0) return true;
  const int err = errno;
  struct stat st {};
  if (::stat(mine.c_str(), &st) == 0 && st.st_nlink == 2) return true;
  if (err != EEXIST) {
    ::unlink(mine.c_str());
    throw_error("cannot take the run lock '", path, "' (link: ", std::strerror(err),
                "): the checkpoint directory's file system must support hard links");
  }
  return false;
}

}  // namespace

std::string LockHolder::describe() const {
  std::string s = "host " + host + ", pid " + std::to_string(pid);
  if (!job.empty()) s += ", Slurm job " + job;
  if (!since.empty()) s += ", since " + since;
  return s;
}

double RunLock::heartbeat_s(double stale_s) {
  return std::clamp(stale_s / 4, 0.2, 30.0);
}

RunLock::RunLock(const std::string& dir, double stale_s) : dir_(dir), stale_s_(stale_s) {
  GDN_CHECK(stale_s > 0, "--lock-stale-s ", stale_s, ": expected a number of seconds > 0");
  check_checkpoint_dir(dir);  // creates it, with the errors every run gives
  path_ = dir + "/gdn-run.lock";
  LockHolder me;
  me.host = host_name();
  me.pid = ::getpid();
  me.start_ticks = proc_stat(me.pid).start_ticks;
  if (const char* job = std::getenv("SLURM_JOB_ID")) me.job = job;
  me.since = utc_now();
  me.token = random_token();
  text_ = to_text(me);
  const std::string mine = dir + "/.gdn-run.lock." + me.token;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    write_new(mine, text_);
    if (link_into_place(mine, path_)) {
      ::unlink(mine.c_str());
      thread_ = std::thread([this] { beat_loop(); });
      return;
    }
    // Held: by whom, and since when did it beat (both times from the file server).
    const std::optional<std::string> text = read_text(path_);
    const std::optional<double> held = mtime(path_), now = mtime(mine);
    ::unlink(mine.c_str());
    if (!text || !held || !now) continue;  // released meanwhile: try again
    const double age = std::max(0.0, *now - *held);
    const std::optional<LockHolder> holder = parse(*text);
    char age_text[64];
    std::snprintf(age_text, sizeof age_text, "%.0f s ago", age);
    std::string why;
    if (!holder) {
      if (age > stale_s) why = std::string("an unreadable lock, last touched ") + age_text;
    } else if (holder->host == me.host && !alive(*holder)) {
      why = "its process " + std::to_string(holder->pid) + " no longer runs on this host";
    } else if (!me.job.empty() && holder->job == me.job) {
      why = "an earlier run of this Slurm job (requeued), which has ended";
    } else if (age > stale_s) {
      why = std::string("its heartbeat stopped ") + age_text;
    }
    if (why.empty())
      throw_error("checkpoint directory '", dir, "' is in use by another run (",
                  holder ? holder->describe() : std::string("an unreadable lock"),
                  "; its heartbeat ", age_text, ", lock file ", path_,
                  "): two runs in one directory would mix their checkpoints. Wait for it to end "
                  "or use another --checkpoint-dir; a lock whose run died is taken over at once "
                  "on the same host, elsewhere after ",
                  stale_s, " s without a heartbeat (--lock-stale-s)");
    // Take it over: move it aside (only one taker can), and check it is the one judged.
    const std::string aside = path_ + ".stale." + me.token;
    if (::rename(path_.c_str(), aside.c_str()) != 0) continue;
    if (read_text(aside) != text) {  // replaced meanwhile by a live run: put it back
      (void)::link(aside.c_str(), path_.c_str());
      ::unlink(aside.c_str());
      continue;
    }
    ::unlink(aside.c_str());
    spdlog::warn(
        "taking over the lock of checkpoint directory {} from a run that ended without "
        "releasing it ({}): {}",
        dir, holder ? holder->describe() : std::string("unreadable"), why);
  }
  throw_error("cannot take the lock of checkpoint directory '", dir, "' after ", kTries,
              " tries: other runs keep taking it");
}

RunLock::~RunLock() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (read_text(path_) == text_) ::unlink(path_.c_str());
}

void RunLock::beat_loop() {
  const auto period = std::chrono::duration<double>(heartbeat_s(stale_s_));
  std::unique_lock<std::mutex> lock(m_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    if (read_text(path_) != text_) {
      spdlog::error(
          "the lock {} is no longer this run's: another run took it over (this run's "
          "heartbeat was late by over {} s); two runs may now write the directory",
          path_, stale_s_);
      return;
    }
    ::utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);  // now, by the file server's clock
  }
}

}  // namespace gdn
