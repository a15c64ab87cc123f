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
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "core/error.h"
#include "train/checkpoint.h"

namespace gdn {

namespace {

namespace fs = std::filesystem;

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

LockHolder this_process(double stale_s) {
  LockHolder me;
  me.host = host_name();
  me.pid = ::getpid();
  me.start_ticks = proc_stat(me.pid).start_ticks;
  if (const char* job = std::getenv("SLURM_JOB_ID")) me.job = job;
  if (const char* r = std::getenv("SLURM_RESTART_COUNT")) me.restart = std::strtoll(r, nullptr, 10);
  me.since = utc_now();
  me.token = random_token();
  me.stale_s = stale_s;
  me.heartbeat_s = RunLock::heartbeat_s(stale_s);
  return me;
}

std::string to_text(const LockHolder& h) {
  return nlohmann::json{{"host", h.host},   {"pid", h.pid},         {"start_ticks", h.start_ticks},
                        {"job", h.job},     {"restart", h.restart}, {"since", h.since},
                        {"token", h.token}, {"stale_s", h.stale_s}, {"heartbeat_s", h.heartbeat_s}}
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
    h.restart = j.value("restart", std::int64_t(0));
    h.since = j.value("since", std::string());
    h.token = j.value("token", std::string());
    h.stale_s = j.value("stale_s", 0.0);
    h.heartbeat_s = j.value("heartbeat_s", 0.0);
    return h;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// A lock's bytes; nullopt when it is gone or not a readable regular file.
std::optional<std::string> read_text(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, std::size_t(n));
    if (n == 0) {
      ::close(fd);
      return out;
    }
  }
  ::close(fd);
  return std::nullopt;
}

// Modification time in seconds; nullopt when the file is gone.
std::optional<double> mtime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
}

// Throws unless `path` is missing or a regular file: a folder, a link (dangling or not)
// or a device in the lock's place is no lock of ours and never taken over.
void require_lock_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  std::string kind = "not a regular file";
  if (S_ISDIR(st.st_mode)) kind = "a directory";
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    kind = "a symbolic link (to '" + fs::read_symlink(path, ec).string() + "')";
  }
  throw_error("the run lock '", path, "' is ", kind,
              ", not a lock file gdn-cp wrote: remove it (no run holds a lock of that kind), "
              "or use another directory");
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
  if (err != EEXIST)
    throw_error("cannot take the run lock '", path, "' (link: ", std::strerror(err),
                "): its directory's file system must support hard links");
  return false;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", s);
  return buf;
}

// The bound after which a silent holder is gone: the larger of its own and ours.
double stale_bound(const std::optional<LockHolder>& h, double stale_s) {
  return std::max(stale_s, h ? h->stale_s : 0.0);
}

// Why a lock whose heartbeat is `age` s old may be taken over by `me`; "" while its
// holder may still run.
std::string why_gone(const std::optional<LockHolder>& h, double age, const LockHolder& me) {
  const double bound = stale_bound(h, me.stale_s);
  if (!h)
    return age > bound ? "an unreadable lock, last touched " + seconds_text(age) + " ago" : "";
  if (h->host == me.host)
    return alive(*h) ? ""
                     : "its process " + std::to_string(h->pid) + " no longer runs on this host";
  if (!me.job.empty() && h->job == me.job && h->restart < me.restart)
    return "it ran in start " + std::to_string(h->restart) + " of this Slurm job, which was " +
           "requeued (this is start " + std::to_string(me.restart) + ") and so has ended";
  if (age > bound)
    return "its heartbeat stopped " + seconds_text(age) + " ago (over " + seconds_text(bound) + ")";
  return "";
}

}  // namespace

std::string LockHolder::describe() const {
  std::string s = "host " + host + ", pid " + std::to_string(pid);
  if (!job.empty()) s += ", Slurm job " + job;
  if (restart > 0) s += " (start " + std::to_string(restart) + ")";
  if (!since.empty()) s += ", since " + since;
  return s;
}

double RunLock::heartbeat_s(double stale_s) {
  return std::clamp(stale_s / 4, 0.2, 30.0);
}

std::string RunLock::checkpoint_dir_lock(const std::string& dir) {
  return dir + "/gdn-run.lock";
}

std::string RunLock::output_lock(const std::string& path) {
  fs::path p(path);
  if (!p.has_filename()) p = p.parent_path();
  return (p.parent_path() / ("." + p.filename().string() + ".gdn-lock")).string();
}

std::string RunLock::live_holder(const std::string& lock, double stale_s) {
  const std::optional<std::string> text = read_text(lock);
  const std::optional<double> held = mtime(lock);
  if (!text || !held) return "";
  const std::optional<LockHolder> h = parse(*text);
  const LockHolder me = this_process(stale_s);
  // The age by this host's clock: no file of ours is written in another run's directory.
  const double age = std::max(0.0, double(std::time(nullptr)) - *held);
  if (!why_gone(h, age, me).empty()) return "";
  return h ? h->describe() : std::string("an unreadable lock");
}

RunLock::RunLock(double stale_s) : stale_s_(stale_s) {
  GDN_CHECK(stale_s > 0, "--lock-stale-s ", stale_s, ": expected a number of seconds > 0");
  me_ = this_process(stale_s);
}

void RunLock::take(const std::string& lock, const std::string& what, const std::string& remedy) {
  const std::string text = to_text(me_);
  const fs::path lp(lock);
  const std::string mine =
      (lp.parent_path() / ("." + lp.filename().string() + "." + me_.token)).string();
  struct Remove {  // our file beside the lock is gone however this ends
    const std::string& p;
    ~Remove() { ::unlink(p.c_str()); }
  } remove{mine};
  for (int attempt = 0; attempt < kTries; ++attempt) {
    require_lock_file(lock);
    write_new(mine, text);
    if (link_into_place(mine, lock)) {
      std::lock_guard<std::mutex> guard(m_);
      held_.push_back({lock, what, text});
      if (!thread_.joinable()) thread_ = std::thread([this] { beat_loop(); });
      return;
    }
    // Held: by whom, and since when did it beat (both times from the file server).
    const std::optional<std::string> found = read_text(lock);
    const std::optional<double> held = mtime(lock), now = mtime(mine);
    ::unlink(mine.c_str());
    if (!found || !held || !now) continue;  // released meanwhile: try again
    const double age = std::max(0.0, *now - *held);
    const std::optional<LockHolder> holder = parse(*found);
    GDN_CHECK(!holder || holder->token != me_.token, what, ": this run asks for its lock ", lock,
              " twice (two flags name one path)");
    const std::string why = why_gone(holder, age, me_);
    if (why.empty()) {
      const double bound = stale_bound(holder, stale_s_);
      throw_error(what, " is in use by another run (",
                  holder ? holder->describe() : std::string("an unreadable lock"),
                  "; its heartbeat ", seconds_text(age), " ago, lock file ", lock, "): ", remedy,
                  ". A lock whose run died is taken over at once on the same host, elsewhere "
                  "after ",
                  seconds_text(bound),
                  " without a heartbeat (the larger of the holder's --lock-stale-s and this "
                  "run's)");
    }
    // Take it over: move it aside (only one taker can), and check it is the one judged.
    const std::string aside = lock + ".stale." + me_.token;
    if (::rename(lock.c_str(), aside.c_str()) != 0) continue;
    if (read_text(aside) != found) {  // replaced meanwhile by a live run: put it back
      (void)::link(aside.c_str(), lock.c_str());
      ::unlink(aside.c_str());
      continue;
    }
    ::unlink(aside.c_str());
    spdlog::warn("taking over the lock of {} from a run that ended without releasing it ({}): {}",
                 what, holder ? holder->describe() : std::string("unreadable"), why);
  }
  throw_error("cannot take the lock ", lock, " of ", what, " after ", kTries,
              " tries: other runs keep taking it");
}

void RunLock::take_checkpoint_dir(const std::string& dir) {
  check_checkpoint_dir(dir);  // creates it, with the errors every run gives
  take(checkpoint_dir_lock(dir), "checkpoint directory '" + dir + "'",
       "two runs in one directory would mix their checkpoints. Wait for it to end or use "
       "another --checkpoint-dir");
}

void RunLock::take_output(const std::string& path, const std::string& flag) {
  const std::string lock = output_lock(path);
  std::error_code ec;
  const fs::path parent = fs::path(lock).parent_path();
  GDN_CHECK(parent.empty() || fs::is_directory(parent, ec), flag, " '", path, "': its directory '",
            parent.string(), "' does not exist");
  take(lock, flag + " '" + path + "'",
       "two runs writing it would mix their output. Wait for that run to end or pass another " +
           flag);
}

bool RunLock::still_held() {
  if (!lost_.empty()) return false;
  for (const Held& h : held_) {
    const std::optional<std::string> now = read_text(h.path);
    if (now == h.text) continue;
    const std::optional<LockHolder> other = now ? parse(*now) : std::nullopt;
    lost_ = "the lock " + h.path + " of " + h.what + " is no longer this run's: " +
            (other ? "another run took it over (" + other->describe() + ")"
                   : std::string("it was removed"));
    return false;
  }
  return true;
}

std::string RunLock::lost() {
  std::lock_guard<std::mutex> guard(m_);
  still_held();
  return lost_;
}

RunLock::~RunLock() {
  {
    std::lock_guard<std::mutex> guard(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const Held& h : held_)
    if (read_text(h.path) == h.text) ::unlink(h.path.c_str());
}

void RunLock::beat_loop() {
  const auto period = std::chrono::duration<double>(heartbeat_s(stale_s_));
  std::unique_lock<std::mutex> lock(m_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    if (!still_held()) {  // never touch another run's lock; rank 0's stop names it
      spdlog::warn(
          "the heartbeat found a lock of this run taken over: the run stops at the end "
          "of its step and writes nothing more");
      return;
    }
    for (const Held& h : held_)
      ::utimensat(AT_FDCWD, h.path.c_str(), nullptr, 0);  // now, by the file server's clock
  }
}

}  // namespace gdn
