#include "node/recorder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "base/files.h"
#include "cgroups/parsers.h"
#include "cgroups/readers.h"
#include "server/log.h"

namespace nodewarden::node {

namespace fs = std::filesystem;
using policy::Signal;
using record::PodInfo;

// ---- what the ring holds ----

// One pod in one ring sample, compact (72 bytes: a pod block of 110 pods is 8 KB).
struct Recorder::PodSample {
  std::shared_ptr<const PodInfo> info;
  std::uint64_t values[6] = {};  // working set, usage, swap, processes, ephemeral, inodes
  std::uint8_t present = 0;      // bit i: values[i] is a figure
  bool candidate = true;

  void set(const record::PodFigures& f) {
    const std::optional<std::uint64_t>* fields[6] = {
        &f.workingSet, &f.usage, &f.swap, &f.processes, &f.ephemeralStorage, &f.inodes};
    present = 0;
    for (int i = 0; i < 6; ++i) {
      values[i] = fields[i]->value_or(0);
      if (fields[i]->has_value()) present |= std::uint8_t(1u << i);
    }
    candidate = f.candidate;
  }
  record::PodFigures figures() const {
    record::PodFigures f;
    std::optional<std::uint64_t>* fields[6] = {&f.workingSet,       &f.usage, &f.swap, &f.processes,
                                               &f.ephemeralStorage, &f.inodes};
    for (int i = 0; i < 6; ++i) {
      if (present & (1u << i)) *fields[i] = values[i];
    }
    f.candidate = candidate;
    return f;
  }
};

struct Recorder::PodBlock {
  std::vector<PodSample> pods;
  std::size_t bytes = 0;
};

namespace {

bool sameFigures(const Recorder::PodBlock& a, const Recorder::PodBlock& b) {
  if (a.pods.size() != b.pods.size()) return false;
  for (std::size_t i = 0; i < a.pods.size(); ++i) {
    const Recorder::PodSample& x = a.pods[i];
    const Recorder::PodSample& y = b.pods[i];
    if (x.present != y.present || x.candidate != y.candidate) return false;
    if (!std::equal(std::begin(x.values), std::end(x.values), std::begin(y.values))) return false;
    if (x.info != y.info && (!x.info || !y.info || !(*x.info == *y.info))) return false;
  }
  return true;
}

}  // namespace

struct Recorder::RingSample {
  SteadyTime t{};
  record::NodeFigures node;
  std::optional<record::Pressure> pressure;
  std::optional<record::MemoryEvents> events;
  std::shared_ptr<const PodBlock> pods;
  std::vector<record::SignalObservation> signals;
  struct Planned {
    std::shared_ptr<const PodInfo> info;
    record::PlannedEviction entry;
  };
  std::vector<Planned> plan;
  policy::EvictionState before;  // what the decision of this sample was given
  std::shared_ptr<const policy::Policy> policy;
  std::size_t bytes = 0;  // without the pod block
};

namespace {

std::string stem(const std::string& name) {
  return name.substr(0, name.size() - record::kEpisodeSuffix.size());
}

Result<void> writeAll(int fd, std::string_view bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error{"cannot write " + path + ": " + std::strerror(errno), errno};
    done += std::size_t(n);
  }
  return {};
}

void syncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Files of `dir` whose names end with `suffix`, sorted by name (oldest first: names start
// with the time or a sequence number).
std::vector<std::string> listFiles(const std::string& dir, std::string_view suffix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > suffix.size() && name.ends_with(suffix)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::uintmax_t sizeOf(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

std::string safeName(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "node" : out.substr(0, 63);
}

std::string compactTime(std::int64_t wallMicros) {
  const std::time_t seconds = std::time_t(wallMicros / 1'000'000);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%04d%02d%02dT%02d%02d%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                int((wallMicros / 1000) % 1000));
  return buffer;
}

std::optional<std::int64_t> memoryOf(const policy::ResourceList& list) {
  auto it = list.find("memory");
  if (it == list.end()) return std::nullopt;
  return it->second.value();
}

std::optional<std::uint64_t> diskUsageOf(const policy::PodStats& stats) {
  if (stats.ephemeralStorageUsedBytes) return stats.ephemeralStorageUsedBytes;
  bool any = false;
  std::uint64_t sum = 0;
  for (const auto& c : stats.containers) {
    if (c.rootfsUsedBytes) sum += *c.rootfsUsedBytes, any = true;
    if (c.logsUsedBytes) sum += *c.logsUsedBytes, any = true;
  }
  if (!any) return std::nullopt;
  return sum;
}

std::int64_t requestOf(const policy::Pod& pod, const char* resource) {
  auto it = pod.rankingRequests.find(resource);
  return it == pod.rankingRequests.end() ? 0 : it->second;
}

record::InitialState initialStateOf(const policy::EvictionState& state, SteadyTime origin) {
  record::InitialState out;
  auto rel = [origin](SteadyTime t) {
    return std::int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin).count());
  };
  for (const auto& [key, t] : state.firstObservedAt) out.firstObservedAt.push_back({key, rel(t)});
  for (const auto& key : state.met) out.met.push_back(key);
  for (const auto& [condition, t] : state.conditionLastObservedAt) {
    out.conditionLastObservedAt.emplace_back(condition, rel(t));
  }
  return out;
}

// OOM kills of a v1 pod: its own memory.oom_control and its containers' (one level down:
// the kubelet's layout), as v1 counts them where the victim was.
std::optional<std::uint64_t> v1PodKills(const cgroups::PodCgroup& pod, std::string& buffer) {
  auto own = cgroups::readOomKills(pod.memory, buffer);
  if (!own) return std::nullopt;
  std::uint64_t total = *own;
  auto dir = cgroups::openDirAt(pod.memory.fd(), ".");
  if (!dir) return total;
  const int fd = ::dup(dir->get());
  if (fd < 0) return total;
  DIR* listing = ::fdopendir(fd);
  if (listing == nullptr) {
    ::close(fd);
    return total;
  }
  while (dirent* entry = ::readdir(listing)) {
    if (entry->d_type != DT_DIR || entry->d_name[0] == '.') continue;
    auto text =
        cgroups::readFileAt(pod.memory.fd(), std::string(entry->d_name) + "/memory.oom_control");
    if (!text) continue;
    if (auto control = cgroups::parseOomControl(*text); control && control->oomKill) {
      total += *control->oomKill;
    }
  }
  ::closedir(listing);
  return total;
}

}  // namespace

// ---- the writer thread ----

struct Recorder::Writer {
  explicit Writer(const RecorderOptions& options) : options_(options) {
    thread_ = std::thread([this] { run(); });
  }
  ~Writer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    abandonEpisode();
    if (segmentFd_ >= 0) ::close(segmentFd_);
    if (logFd_ >= 0 && logFd_ != STDOUT_FILENO) ::close(logFd_);
  }

  void post(std::function<void()> job, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.emplace_back(std::move(job), bytes);
      queuedBytes_ += bytes;
    }
    wake_.notify_all();
  }
  bool drain(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return idle_.wait_for(lock, wait, [this] { return queue_.empty() && !busy_; });
  }
  std::size_t queuedBytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queuedBytes_;
  }
  std::vector<std::string> finished() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }

  // ---- run on the writer thread ----

  struct Header {
    std::string name;  // NAME.nwep
    record::Episode header;
    SteadyTime origin{};
  };

  void openEpisode(const Header& header,
                   const std::vector<std::shared_ptr<const RingSample>>& samples) {
    abandonEpisode();
    base_ = header;
    part_ = 1;
    start(header.name, header.header, header.origin,
          samples.empty() ? nullptr : samples.front().get());
    for (const auto& sample : samples) appendSample(*sample);
  }

  void appendSample(const RingSample& sample) {
    if (continuation_) {
      continuation_ = false;
      ++part_;
      record::Episode header = base_.header;
      header.reason = "continued";
      start(stem(base_.name) + "-" + std::to_string(part_) + std::string(record::kEpisodeSuffix),
            header, sample.t, &sample);
    }
    if (fd_ < 0) return;
    if (sample.policy && sample.policy != lastPolicy_) {
      lastPolicy_ = sample.policy;
      write(encoder_.policy(samples_, *sample.policy));
    }
    record::Sample s;
    s.t = rel(sample.t);
    s.node = sample.node;
    s.pressure = sample.pressure;
    s.events = sample.events;
    s.pods.reserve(sample.pods ? sample.pods->pods.size() : 0);
    if (sample.pods) {
      for (const PodSample& p : sample.pods->pods) {
        record::PodFigures figures = p.figures();
        figures.pod = indexOf(p.info);
        s.pods.push_back(figures);
      }
    }
    s.signals = sample.signals;
    for (const RingSample::Planned& p : sample.plan) {
      record::PlannedEviction entry = p.entry;
      entry.pod = indexOf(p.info);
      s.plan.push_back(entry);
    }
    write(encoder_.sample(s));
    ++samples_;
    lastT_ = sample.t;
    if (fd_ >= 0 &&
        (bytes_ >= options_.maxEpisodeBytes || sample.t - origin_ >= options_.maxEpisode)) {
      finish("cut", sample.t);
      continuation_ = true;
    }
  }

  void order(record::Order order, const std::shared_ptr<const PodInfo>& info, SteadyTime t) {
    if (fd_ < 0 || samples_ == 0) return;
    order.sample = samples_ - 1;
    order.t = rel(t);
    order.pod = indexOf(info);
    write(encoder_.order(order, *info));
    ++orders_;
  }

  void oomKill(record::OomKill kill, const std::shared_ptr<const PodInfo>& info, SteadyTime t) {
    if (fd_ < 0 || samples_ == 0) return;
    kill.sample = samples_ - 1;
    kill.t = rel(t);
    if (info) kill.pod = indexOf(info);
    write(encoder_.oomKill(kill, info.get()));
    ++kills_;
  }

  void outcome(record::Outcome outcome, const std::shared_ptr<const PodInfo>& info, SteadyTime t) {
    if (fd_ < 0) return;
    outcome.t = rel(t);
    outcome.pod = indexOf(info);
    write(encoder_.outcome(outcome, *info));
  }

  void closeEpisode(const std::string& reason, SteadyTime t) {
    continuation_ = false;
    if (fd_ >= 0) finish(reason, t);
  }

  void store(const std::string& line, const std::string& logLine) {
    if (!options_.stateDir.empty()) appendRecord(line);
    if (!options_.decisionLog.empty()) appendLog(logLine);
  }

  // The store's current segment, found by open() before the thread writes.
  void setSegment(std::uint64_t seq, std::size_t bytes) {
    segmentSeq_ = seq;
    segmentBytes_ = bytes;
  }

 private:
  std::int64_t rel(SteadyTime t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  }

  void start(const std::string& name, const record::Episode& header, SteadyTime origin,
             const RingSample* first) {
    const std::string dir = options_.stateDir + "/episodes";
    name_ = name;
    path_ = dir + "/" + name;
    tmp_ = path_ + ".tmp";
    origin_ = origin;
    samples_ = orders_ = kills_ = 0;
    bytes_ = 0;
    index_.clear();
    keep_.clear();
    lastPolicy_.reset();
    encoder_ = record::EpisodeEncoder{};
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd_ < 0) {
      problem("episode-write-failed", "cannot create " + tmp_ + ": " + std::strerror(errno));
      return;
    }
    record::Episode h = header;
    h.originWallMicros =
        header.originWallMicros +
        std::chrono::duration_cast<std::chrono::microseconds>(origin - base_.origin).count();
    write(encoder_.begin(h));
    write(encoder_.state(first ? initialStateOf(first->before, origin) : record::InitialState{}));
  }

  std::uint32_t indexOf(const std::shared_ptr<const PodInfo>& info) {
    auto [it, added] = index_.emplace(info.get(), std::uint32_t(keep_.size()));
    if (added) {
      keep_.push_back(info);
      write(encoder_.pod(it->second, *info));
    }
    return it->second;
  }

  void write(const std::string& bytes) {
    if (fd_ < 0) return;
    if (auto ok = writeAll(fd_, bytes, tmp_); !ok) {
      problem("episode-write-failed", ok.error().message);
      abandonEpisode();
      return;
    }
    bytes_ += bytes.size();
  }

  void finish(const std::string& reason, SteadyTime t) {
    write(encoder_.end(reason, rel(t), samples_, orders_, kills_));
    if (fd_ < 0) return;
    const bool synced = ::fsync(fd_) == 0;
    ::close(fd_);
    fd_ = -1;
    if (!synced || ::rename(tmp_.c_str(), path_.c_str()) != 0) {
      problem("episode-write-failed", "cannot finish " + path_ + ": " + std::strerror(errno));
      ::unlink(tmp_.c_str());
      return;
    }
    syncDirectory(options_.stateDir + "/episodes");
    server::logEvent(server::LogLevel::Info, "episode-recorded",
                     {{"file", path_},
                      {"reason", reason},
                      {"samples", static_cast<std::int64_t>(samples_)},
                      {"evictions", static_cast<std::int64_t>(orders_)},
                      {"oom_kills", static_cast<std::int64_t>(kills_)},
                      {"bytes", static_cast<std::int64_t>(bytes_)}});
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.push_back(path_);
    }
    pruneEpisodes();
  }

  void abandonEpisode() {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
  }

  void pruneEpisodes() {
    const std::string dir = options_.stateDir + "/episodes";
    std::vector<std::string> names = listFiles(dir, record::kEpisodeSuffix);
    std::vector<std::uintmax_t> sizes;
    std::uintmax_t total = 0;
    for (const std::string& name : names) {
      sizes.push_back(sizeOf(dir + "/" + name));
      total += sizes.back();
    }
    for (std::size_t i = 0; i + 1 < names.size(); ++i) {
      if (names.size() - i <= options_.maxEpisodes && total <= options_.maxEpisodesBytes) break;
      ::unlink((dir + "/" + names[i]).c_str());
      total -= sizes[i];
      server::logEvent(server::LogLevel::Info, "episode-removed",
                       {{"file", dir + "/" + names[i]}, {"reason", "oldest beyond the bound"}});
    }
  }

  std::string segmentPath(std::uint64_t seq) const {
    char name[32];
    std::snprintf(name, sizeof name, "%08llu", static_cast<unsigned long long>(seq));
    return options_.stateDir + "/decisions/" + name + std::string(record::kDecisionsSuffix);
  }

  void appendRecord(const std::string& line) {
    if (segmentFd_ < 0 || segmentBytes_ + line.size() > options_.segmentBytes) {
      if (segmentFd_ >= 0) {
        ::close(segmentFd_);
        segmentFd_ = -1;
        ++segmentSeq_;
        segmentBytes_ = 0;
      }
      const std::string path = segmentPath(segmentSeq_);
      segmentFd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
      if (segmentFd_ < 0) {
        problem("decision-store-failed", "cannot open " + path + ": " + std::strerror(errno));
        return;
      }
      if (segmentBytes_ == 0) {
        const std::string header = record::storeHeaderLine(options_.nodeName);
        (void)writeAll(segmentFd_, header, path);
        segmentBytes_ = header.size();
      }
      pruneSegments();
    }
    if (auto ok = writeAll(segmentFd_, line, segmentPath(segmentSeq_)); !ok) {
      problem("decision-store-failed", ok.error().message);
      return;
    }
    segmentDirty_ = true;  // synced once the queue is empty: a burst costs one sync
    segmentBytes_ += line.size();
  }

  void pruneSegments() {
    const std::string dir = options_.stateDir + "/decisions";
    std::vector<std::string> names = listFiles(dir, record::kDecisionsSuffix);
    std::uintmax_t total = 0;
    std::vector<std::uintmax_t> sizes;
    for (const std::string& name : names) {
      sizes.push_back(sizeOf(dir + "/" + name));
      total += sizes.back();
    }
    for (std::size_t i = 0; i + 1 < names.size() && total > options_.maxRecordBytes; ++i) {
      ::unlink((dir + "/" + names[i]).c_str());
      total -= sizes[i];
    }
  }

  void appendLog(const std::string& line) {
    if (logFd_ < 0) {
      if (options_.decisionLog == "-") {
        logFd_ = STDOUT_FILENO;
      } else {
        logFd_ =
            ::open(options_.decisionLog.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
        if (logFd_ < 0) {
          problem("decision-log-failed",
                  "cannot open " + options_.decisionLog + ": " + std::strerror(errno));
          return;
        }
      }
    }
    (void)writeAll(logFd_, line + "\n", options_.decisionLog);
  }

  void problem(const char* event, const std::string& error) {
    if (!reported_.insert(error).second || reported_.size() > 100) return;
    server::logEvent(server::LogLevel::Warn, event, {{"error", error}});
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty() && stopping_) return;
      auto [job, bytes] = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      job();
      if (segmentDirty_ && segmentFd_ >= 0) {
        bool more = false;
        {
          std::lock_guard<std::mutex> peek(mutex_);
          more = !queue_.empty();
        }
        if (!more) {
          ::fdatasync(segmentFd_);
          segmentDirty_ = false;
        }
      }
      lock.lock();
      busy_ = false;
      queuedBytes_ -= bytes;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  const RecorderOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::pair<std::function<void()>, std::size_t>> queue_;
  std::size_t queuedBytes_ = 0;
  bool stopping_ = false;
  bool busy_ = false;
  std::vector<std::string> finished_;
  std::thread thread_;

  // The episode file (writer thread only).
  Header base_;
  int part_ = 1;
  bool continuation_ = false;
  int fd_ = -1;
  std::string name_, path_, tmp_;
  SteadyTime origin_{}, lastT_{};
  record::EpisodeEncoder encoder_;
  std::map<const PodInfo*, std::uint32_t> index_;
  std::vector<std::shared_ptr<const PodInfo>> keep_;
  std::shared_ptr<const policy::Policy> lastPolicy_;
  std::size_t samples_ = 0, orders_ = 0, kills_ = 0, bytes_ = 0;
  // The decision store and log.
  int segmentFd_ = -1;
  bool segmentDirty_ = false;
  std::uint64_t segmentSeq_ = 1;
  std::size_t segmentBytes_ = 0;
  int logFd_ = -1;
  std::set<std::string> reported_;
};

// ---- the recorder ----

Recorder::Recorder(RecorderOptions options, const cgroups::PodCgroups& pods, const Clock& clock)
    : options_(std::move(options)), pods_(pods), clock_(clock) {
#ifdef NODEWARDEN_VERSION
  if (options_.nodewardenVersion.empty()) options_.nodewardenVersion = NODEWARDEN_VERSION;
#endif
  steadyBase_ = clock_.now();
  wallBase_ = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
}

Recorder::~Recorder() {
  stop(std::chrono::seconds(2));
}

std::int64_t Recorder::wallMicros(SteadyTime t) const {
  return wallBase_ + std::chrono::duration_cast<std::chrono::microseconds>(t - steadyBase_).count();
}

Result<void> Recorder::open() {
  Result<void> result;
  std::uint64_t seq = 1;
  std::size_t segmentBytes = 0;
  if (!options_.stateDir.empty()) {
    std::error_code ec;
    fs::create_directories(options_.stateDir + "/episodes", ec);
    if (!ec) fs::create_directories(options_.stateDir + "/decisions", ec);
    if (ec) {
      result =
          Error{"cannot create " + options_.stateDir + "/episodes and /decisions: " + ec.message() +
                " (recording in memory only: no episodes, no durable records)"};
      options_.stateDir.clear();
    }
  }
  if (!options_.stateDir.empty()) {
    const std::string episodes = options_.stateDir + "/episodes";
    for (const std::string& name : listFiles(episodes, ".tmp")) {
      ::unlink((episodes + "/" + name).c_str());
      server::logEvent(server::LogLevel::Warn, "episode-torn",
                       {{"file", episodes + "/" + name},
                        {"effect", "removed: the agent stopped while writing it"}});
    }
    const std::string decisions = options_.stateDir + "/decisions";
    std::vector<record::DecisionRecord> loaded;
    for (const std::string& name : listFiles(decisions, record::kDecisionsSuffix)) {
      const std::string path = decisions + "/" + name;
      auto text = readFile(path);
      if (!text) continue;
      std::size_t good = 0;
      auto records = record::parseStoreFile(*text, &good);
      if (!records) {
        const bool tornTail = text->find('\n', good) == std::string::npos && good > 0;
        auto kept = record::parseStoreFile(std::string_view(*text).substr(0, good));
        if (kept) loaded.insert(loaded.end(), kept->begin(), kept->end());
        if (tornTail) {
          if (::truncate(path.c_str(), off_t(good)) == 0) {
            server::logEvent(server::LogLevel::Warn, "decision-store-repaired",
                             {{"file", path},
                              {"error", records.error().message},
                              {"effect", "cut back to its last whole record"}});
          }
        } else {
          std::error_code ignored;
          fs::rename(path, path + ".corrupt", ignored);
          server::logEvent(server::LogLevel::Warn, "decision-store-corrupt",
                           {{"file", path},
                            {"error", records.error().message},
                            {"effect", "set aside as " + name +
                                           ".corrupt; the records before "
                                           "the damage are kept"}});
        }
        continue;
      }
      loaded.insert(loaded.end(), records->begin(), records->end());
    }
    for (record::DecisionRecord& r : loaded) keep(std::move(r));
    const auto names = listFiles(decisions, record::kDecisionsSuffix);
    if (!names.empty()) {
      seq = std::strtoull(names.back().c_str(), nullptr, 10);
      if (seq == 0) seq = 1;
      segmentBytes = std::size_t(sizeOf(decisions + "/" + names.back()));
    }
  }
  writer_ = std::make_unique<Writer>(options_);
  writer_->setSegment(seq, segmentBytes);
  return result;
}

std::shared_ptr<const PodInfo> Recorder::infoFor(const policy::Pod& pod) {
  auto& slot = infos_[pod.uid];
  const std::int64_t memory = requestOf(pod, "memory");
  const std::int64_t storage = requestOf(pod, "ephemeral-storage");
  if (slot && slot->priority == pod.priority && slot->qos == pod.qos &&
      slot->critical == pod.critical && slot->terminating == pod.terminating &&
      slot->memoryRequest == memory && slot->storageRequest == storage &&
      slot->terminationGracePeriodSeconds == pod.terminationGracePeriodSeconds &&
      slot->name == pod.name && slot->ns == pod.ns) {
    return slot;
  }
  auto info = std::make_shared<PodInfo>();
  info->uid = pod.uid;
  info->ns = pod.ns;
  info->name = pod.name;
  info->priority = pod.priority;
  info->qos = pod.qos;
  info->critical = pod.critical;
  info->terminating = pod.terminating;
  info->memoryRequest = memory;
  info->storageRequest = storage;
  info->terminationGracePeriodSeconds = pod.terminationGracePeriodSeconds;
  slot = info;
  return slot;
}

namespace {

record::PodFigures figuresOf(const RecordedPod& recorded, bool candidate) {
  record::PodFigures f;
  f.candidate = candidate;
  if (recorded.figures != nullptr) {
    const policy::PodStats& s = *recorded.figures;
    f.workingSet = s.memoryWorkingSetBytes;
    f.usage = s.memoryUsageBytes;
    f.swap = s.swapUsageBytes;
    f.processes = s.processCount;
    f.ephemeralStorage = diskUsageOf(s);
    f.inodes = s.ephemeralStorageInodesUsed;
  }
  return f;
}

}  // namespace

std::shared_ptr<const Recorder::PodBlock> Recorder::podBlock(const policy::NodeView& candidates,
                                                             const RecordedPods& recorded) {
  const std::vector<RecordedPod>& pods = recorded.pods;
  // The objects of the last block (same version): its infos hold. Chosen the same way too
  // (the same candidates, no order this cycle): its candidate flags hold.
  const bool sameObjects = recorded.version != 0 && recorded.version == lastVersion_ &&
                           lastBlock_ && lastBlock_->pods.size() == pods.size();
  const bool sameChoice = sameObjects && pending_.empty() && candidates.pods == lastCandidates_;
  if (sameChoice) {
    // Most idle cycles: every figure as before, and the last block is this sample's.
    bool same = true;
    for (std::size_t i = 0; i < pods.size() && same; ++i) {
      const PodSample& last = lastBlock_->pods[i];
      PodSample now;
      now.set(figuresOf(pods[i], last.candidate));
      same = now.present == last.present &&
             std::equal(std::begin(now.values), std::end(now.values), std::begin(last.values));
    }
    if (same) return lastBlock_;
  }
  // Pods ordered in this cycle left the candidates after the decision; they were in it. By
  // UID: the recorded pods may be copies of the pods the view points at (a snapshot's).
  std::vector<std::string_view> chosen;
  if (!sameChoice) {
    chosen.reserve(candidates.pods.size() + pending_.size());
    for (const policy::Pod* pod : candidates.pods) chosen.push_back(pod->uid);
    for (const Pending& p : pending_) chosen.push_back(p.record.order.uid);
    std::sort(chosen.begin(), chosen.end());
  }
  auto block = std::make_shared<PodBlock>();
  block->pods.reserve(pods.size());
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const policy::Pod& pod = *pods[i].pod;
    PodSample sample;
    sample.info = sameObjects ? lastBlock_->pods[i].info : infoFor(pod);
    const bool candidate =
        sameChoice ? lastBlock_->pods[i].candidate
                   : std::binary_search(chosen.begin(), chosen.end(), std::string_view(pod.uid));
    sample.set(figuresOf(pods[i], candidate));
    block->pods.push_back(std::move(sample));
  }
  block->bytes = sizeof(PodBlock) + block->pods.capacity() * sizeof(PodSample);
  lastVersion_ = recorded.version;
  lastCandidates_ = candidates.pods;
  // Shared with the previous sample only when every figure is the same. Not by the figures'
  // storage: the agent reads pods in place (victims first, the refresh's slices), into the
  // same figures every cycle, so equal addresses say nothing about equal figures; a sample
  // holding the previous figures would not be what the decision saw, and replay would
  // diverge from it.
  if (lastBlock_ && sameFigures(*lastBlock_, *block)) return lastBlock_;
  lastBlock_ = block;
  return block;
}

std::vector<std::pair<std::string, record::OomKill>> Recorder::readKernel(RingSample& sample) {
  std::vector<std::pair<std::string, record::OomKill>> kills;
  // The pods' cgroup on cgroup v2 (hierarchical memory.events); PSI from its cgroup2
  // directory (hybrid hosts have one without the memory controller), else the node's; on v1,
  // /proc/vmstat's oom_kill.
  const bool v2 =
      pods_.hierarchy().memoryVersion == cgroups::Version::V2 && pods_.kubepodsMemory().valid();
  const cgroups::CgroupDir* unified =
      v2                                                              ? &pods_.kubepodsMemory()
      : (pods_.kubepodsUnified() && pods_.kubepodsUnified()->valid()) ? &*pods_.kubepodsUnified()
                                                                      : nullptr;
  std::optional<std::uint64_t> globalKills;
  if (unified != nullptr) {
    if (auto text = unified->read(cgroups::CgroupDir::File::MemoryPressure, buffer_)) {
      if (auto p = cgroups::parsePressure(*text)) {
        sample.pressure = record::Pressure{p->some.avg10, p->full ? p->full->avg10 : 0,
                                           p->some.totalMicros, p->full ? p->full->totalMicros : 0};
      }
    }
  }
  if (v2) {
    if (auto events = cgroups::readMemoryEvents(pods_.kubepodsMemory(), buffer_)) {
      sample.events = record::MemoryEvents{events->high, events->max, events->oom, events->oomKill};
      globalKills = events->oomKill;
    }
  }
  if (!sample.pressure) {
    if (!systemPressure_) {
      auto fd = cgroups::openFileAt(AT_FDCWD, options_.procRoot + "/pressure/memory");
      if (fd) systemPressure_ = std::move(fd).value();
    }
    if (systemPressure_) {
      char text[512];
      if (auto n = cgroups::preadWhole(systemPressure_.get(), text, sizeof text)) {
        if (auto p = cgroups::parsePressure(std::string_view(text, *n))) {
          sample.pressure =
              record::Pressure{p->some.avg10, p->full ? p->full->avg10 : 0, p->some.totalMicros,
                               p->full ? p->full->totalMicros : 0};
        }
      }
    }
  }
  if (!v2) {
    if (!vmstat_) {
      auto fd = cgroups::openFileAt(AT_FDCWD, options_.procRoot + "/vmstat");
      if (fd) vmstat_ = std::move(fd).value();
    }
    if (vmstat_) {
      buffer_.resize(16384);
      if (auto n = cgroups::preadWhole(vmstat_.get(), buffer_.data(), buffer_.size())) {
        const std::string_view text(buffer_.data(), *n);
        const std::size_t at = text.find("\noom_kill ");
        if (at != std::string_view::npos) {
          globalKills = std::strtoull(text.data() + at + 10, nullptr, 10);
        }
      }
    }
  }
  const bool changed = globalKills && lastGlobalKills_ && *globalKills > *lastGlobalKills_;
  const std::uint64_t globalDelta = changed ? *globalKills - *lastGlobalKills_ : 0;
  if (globalKills) lastGlobalKills_ = globalKills;

  // Each pod's counters: a baseline when first seen, then read again when the total moved.
  std::uint64_t attributed = 0;
  const bool newPods = pods_.size() != podKills_.size();
  if (!changed && !newPods) return kills;
  for (const auto& [uid, pod] : pods_.pods()) {
    const bool known = podKills_.contains(uid);
    if (known && !changed) continue;
    std::optional<std::uint64_t> count;
    std::optional<std::uint64_t> ooms;
    if (pod->memory.version() == cgroups::Version::V2) {
      if (auto events = cgroups::readMemoryEvents(pod->memory, buffer_)) {
        count = events->oomKill;
        ooms = events->oom;
      }
    } else {
      count = v1PodKills(*pod, buffer_);
    }
    if (!count) continue;
    if (known && *count > podKills_[uid]) {
      record::OomKill kill;
      kill.count = *count - podKills_[uid];
      kill.limit = ooms ? (*ooms > podOoms_[uid] ? "pod" : "node") : "";
      attributed += kill.count;
      kills.emplace_back(uid, kill);
    }
    podKills_[uid] = *count;
    if (ooms) podOoms_[uid] = *ooms;
  }
  if (globalDelta > attributed && v2) {
    record::OomKill kill;
    kill.count = globalDelta - attributed;
    kill.limit = "node";
    kills.emplace_back("", kill);
  }
  // Forget pods whose cgroups are gone (bounded by the pods on the node).
  std::erase_if(podKills_, [&](const auto& entry) { return pods_.find(entry.first) == nullptr; });
  std::erase_if(podOoms_, [&](const auto& entry) { return pods_.find(entry.first) == nullptr; });
  return kills;
}

void Recorder::trimRing(SteadyTime now) {
  while (!ring_.empty()) {
    const RingSample& oldest = *ring_.front();
    const bool tooOld = now - oldest.t > options_.preroll;
    const bool tooBig = ringBytes_ > options_.ringBytes && ring_.size() > 1;
    if (!tooOld && !tooBig) break;
    ringBytes_ -= oldest.bytes;
    if (ring_.size() < 2 || ring_[1]->pods != oldest.pods) ringBytes_ -= oldest.pods->bytes;
    ring_.pop_front();
  }
}

std::string Recorder::podKey(const std::string& uid, const std::vector<RecordedPod>& pods) const {
  for (const RecordedPod& recorded : pods) {
    if (recorded.pod->uid == uid) return recorded.pod->key;
  }
  return "unknown/" + uid;
}

void Recorder::cycle(const policy::NodeView& candidates, const policy::Snapshot& snapshot,
                     const policy::EvictionState& state, const policy::EvictionDecision& decision,
                     const policy::Policy& policy, SteadyTime now) {
  if (stopped_) return;
  // The snapshot's pods, each with its figures from the node's summary (by UID).
  const policy::Summary* summary = nullptr;
  if (!snapshot.nodes.empty()) {
    auto it = snapshot.stats.find(snapshot.nodes[0].name);
    if (it != snapshot.stats.end()) summary = &it->second;
  }
  std::unordered_map<std::string_view, const policy::PodStats*> stats;
  if (summary != nullptr) {
    stats.reserve(summary->pods.size());
    for (const policy::PodStats& s : summary->pods) stats.emplace(s.uid, &s);
  }
  RecordedPods pods;  // version 0: copies made for this call, nothing of them reused
  pods.pods.reserve(snapshot.pods.size());
  for (const policy::Pod& pod : snapshot.pods) {
    auto it = stats.find(pod.uid);
    pods.pods.push_back({&pod, it == stats.end() ? nullptr : it->second});
  }
  cycle(candidates, pods, state, decision, policy, now);
}

void Recorder::cycle(const policy::NodeView& candidates, const RecordedPods& pods,
                     const policy::EvictionState& state, const policy::EvictionDecision& decision,
                     const policy::Policy& policy, SteadyTime now) {
  if (stopped_) return;
  auto sample = std::make_shared<RingSample>();
  sample->t = now;
  sample->before = std::move(lastState_);
  lastState_ = state;
  if (candidates.stats != nullptr) sample->node.stats = *candidates.stats;
  if (candidates.node != nullptr) {
    sample->node.capacityMemory = memoryOf(candidates.node->capacity);
    sample->node.allocatableMemory = memoryOf(candidates.node->allocatable);
  }
  sample->pods = podBlock(candidates, pods);
  const auto kills = readKernel(*sample);
  for (const policy::SignalStatus& status : decision.signals) {
    sample->signals.push_back(record::SignalObservation{
        status.key.signal, status.key.hard, status.available, status.capacity, status.threshold,
        status.met, status.actionable});
  }
  for (const policy::Eviction& e : decision.evict) {
    RingSample::Planned planned;
    planned.info = infoFor(*e.pod);
    planned.entry.signal = e.signal;
    planned.entry.hard = e.hard;
    planned.entry.gracePeriodSeconds = e.gracePeriodSeconds;
    planned.entry.ordered = std::any_of(pending_.begin(), pending_.end(), [&](const Pending& p) {
      return p.record.order.uid == e.pod->uid && p.record.order.threshold.signal == e.signal;
    });
    sample->plan.push_back(std::move(planned));
  }
  if (!policy_ || !record::samePolicy(*policy_, policy)) {
    policy_ = std::make_shared<const policy::Policy>(policy);
  }
  sample->policy = policy_;
  sample->bytes = sizeof(RingSample) +
                  sample->signals.capacity() * sizeof(record::SignalObservation) +
                  sample->plan.capacity() * sizeof(RingSample::Planned) +
                  (sample->before.firstObservedAt.size() + sample->before.met.size() +
                   sample->before.conditionLastObservedAt.size()) *
                      64;
  const bool newBlock = ring_.empty() || ring_.back()->pods != sample->pods;
  ring_.push_back(sample);
  ringBytes_ += sample->bytes + (newBlock ? sample->pods->bytes : 0);
  trimRing(now);

  const bool met = std::any_of(decision.signals.begin(), decision.signals.end(),
                               [](const policy::SignalStatus& s) { return s.met; });
  const bool active = met || !pending_.empty() || !kills.empty() || !inFlight_.empty();
  const std::size_t queued = writer_ ? writer_->queuedBytes() : 0;
  if (open_ && queued > options_.maxQueueBytes) closeEpisode("cut", now);  // a stalled disk
  const bool canWrite =
      writer_ && !options_.stateDir.empty() && queued <= options_.maxQueueBytes / 2;
  if (!open_ && active && canWrite) {
    openEpisode(!kills.empty() ? "oom-kill" : !pending_.empty() ? "eviction" : "threshold", now);
  } else if (open_) {
    std::shared_ptr<const RingSample> posted = sample;
    writer_->post([w = writer_.get(), posted] { w->appendSample(*posted); },
                  sample->bytes + (newBlock ? sample->pods->bytes : 0));
  }
  const std::optional<std::string> episode =
      open_ ? std::optional<std::string>(open_->name) : std::nullopt;

  // Orders and kills: into the episode, and as records.
  const auto wallNow = wallMicros(now);
  for (const Pending& p : pending_) {
    auto it = infos_.find(p.record.order.uid);
    if (open_ && it != infos_.end()) {
      record::Order order;
      order.signal = p.record.order.threshold.signal;
      order.hard = p.record.order.threshold.hard;
      order.gracePeriodSeconds = p.record.order.gracePeriodSeconds;
      order.usage = p.usage;
      order.request = p.request;
      order.observed = p.observed;
      order.threshold = p.threshold;
      order.rank = p.rank;
      order.latencyMs = p.record.latencyMs;
      order.dryRun = p.record.order.dryRun;
      order.message = p.record.order.message;
      writer_->post([w = writer_.get(), order, info = it->second,
                     t = p.record.signalledAt] { w->order(order, info, t); },
                    512);
    }
    record::DecisionRecord r;
    r.time = wallMicros(p.record.signalledAt);
    r.kind = record::DecisionKind::Eviction;
    r.node = options_.nodeName;
    r.pod = p.record.order.pod;
    r.uid = p.record.order.uid;
    r.signal = std::string(policy::toString(p.record.order.threshold.signal));
    r.observed = p.observed;
    r.threshold = p.threshold;
    r.rank = p.rank;
    r.action = p.record.order.dryRun ? "evict-dry-run" : "evict";
    r.reason = p.record.order.message;
    r.message = std::string(p.record.order.threshold.hard ? "hard" : "soft") +
                " threshold; working set " + std::to_string(p.usage) + " bytes, request " +
                std::to_string(p.request) + " bytes";
    r.latencyMs = p.record.latencyMs;
    r.gracePeriodSeconds = p.record.order.gracePeriodSeconds;
    r.episode = episode;
    this->decision(std::move(r));
    if (!p.record.order.dryRun) inFlight_.insert(p.record.order.uid);
  }
  for (const auto& [uid, kill] : kills) {
    std::shared_ptr<const PodInfo> info;
    if (!uid.empty()) {
      if (auto it = infos_.find(uid); it != infos_.end()) info = it->second;
    }
    if (open_) {
      writer_->post([w = writer_.get(), k = kill, info, now] { w->oomKill(k, info, now); }, 256);
    }
    record::DecisionRecord r;
    r.time = wallNow;
    r.kind = record::DecisionKind::KernelOomKill;
    r.node = options_.nodeName;
    r.pod = uid.empty() ? "" : podKey(uid, pods.pods);
    r.uid = uid;
    r.action = "oom-kill";
    const std::string processes =
        std::to_string(kill.count) + (kill.count == 1 ? " process" : " processes");
    r.reason = uid.empty() ? "the kernel's OOM killer killed " + processes +
                                 " below the pods' cgroup (its pod cgroup was already gone)"
                           : "the kernel's OOM killer killed " + processes + " of this pod";
    if (kill.limit == "pod") r.reason += ": its own memory limit (or a container's) was reached";
    if (kill.limit == "node") r.reason += ": the memory limit above it (the node's) was reached";
    r.message = "a container's main process or a child process; memory.events oom_kill";
    r.episode = episode;
    if (!uid.empty()) this->decision(std::move(r));
  }
  pending_.clear();

  if (open_) {
    if (active) {
      open_->lastActive = now;
    } else if (now - open_->lastActive >= options_.settle) {
      closeEpisode("settled", now);
    }
  }
}

void Recorder::openEpisode(const std::string& reason, SteadyTime now) {
  // The pre-roll: the ring's samples within it (this cycle's included).
  std::vector<std::shared_ptr<const RingSample>> samples;
  for (const auto& sample : ring_) {
    if (now - sample->t <= options_.preroll) samples.push_back(sample);
  }
  if (samples.empty()) return;
  OpenEpisode episode;
  episode.origin = samples.front()->t;
  episode.lastActive = now;
  episode.name = compactTime(wallMicros(episode.origin)) + "-" + safeName(options_.nodeName) + "-" +
                 std::to_string(::getpid()) + "-" + std::to_string(++episodeSeq_) +
                 std::string(record::kEpisodeSuffix);
  Writer::Header header;
  header.name = episode.name;
  header.origin = episode.origin;
  header.header.node = options_.nodeName;
  header.header.nodewardenVersion = options_.nodewardenVersion;
  header.header.originWallMicros = wallMicros(episode.origin);
  const auto& h = pods_.hierarchy();
  header.header.cgroups = h.mode == cgroups::Mode::Unified  ? "v2"
                          : h.mode == cgroups::Mode::Hybrid ? "hybrid"
                                                            : "v1";
  header.header.dryRun = options_.dryRun;
  header.header.prerollNanos = options_.preroll.count();
  header.header.reason = reason;
  std::size_t bytes = 0;
  for (const auto& s : samples) bytes += s->bytes;  // the pod blocks are the ring's
  writer_->post([w = writer_.get(), header, samples] { w->openEpisode(header, samples); }, bytes);
  open_ = std::move(episode);
}

void Recorder::closeEpisode(const std::string& reason, SteadyTime now) {
  if (!open_) return;
  writer_->post([w = writer_.get(), reason, now] { w->closeEpisode(reason, now); }, 64);
  open_.reset();
}

void Recorder::evicted(const EvictionRecord& record, const policy::Eviction& eviction,
                       const policy::EvictionDecision& decision) {
  if (stopped_) return;
  Pending p;
  p.record = record;
  p.usage = eviction.usage;
  p.request = eviction.request;
  for (const policy::SignalStatus& s : decision.signals) {
    if (s.key.signal == eviction.signal && s.key.hard == eviction.hard) {
      p.observed = s.available;
      p.threshold = s.threshold;
    }
  }
  const policy::Ranking& ranking = policy::shownRanking(decision, eviction.signal);
  for (std::size_t i = 0; i < ranking.pods.size(); ++i) {
    if (ranking.pods[i].pod == eviction.pod) p.rank = std::int64_t(i + 1);
  }
  pending_.push_back(std::move(p));
}

void Recorder::outcome(const EvictionRecord& record) {
  if (stopped_ || !record.outcome || record.order.dryRun) return;
  inFlight_.erase(record.order.uid);
  if (!open_) return;
  auto it = infos_.find(record.order.uid);
  if (it == infos_.end()) return;
  record::Outcome o;
  o.emptied = record.outcome->emptied;
  o.method = methodText(record.order, *record.outcome);
  o.elapsedMs = double(record.outcome->elapsed.count()) / 1000.0;
  writer_->post(
      [w = writer_.get(), o, info = it->second, t = clock_.now()] { w->outcome(o, info, t); }, 256);
}

void Recorder::decision(record::DecisionRecord r) {
  if (r.node.empty()) r.node = options_.nodeName;
  if (writer_ && !stopped_) {
    writer_->post([w = writer_.get(), line = record::storeLine(r),
                   log = record::logLine(r)] { w->store(line, log); },
                  1024);
  }
  keep(std::move(r));
}

void Recorder::keep(record::DecisionRecord r) {
  std::string line = record::storeLine(r);
  line.shrink_to_fit();
  recordBytes_ += line.capacity() + sizeof(std::string);
  records_.push_back(std::move(line));
  while (recordBytes_ > options_.maxRecordBytes && records_.size() > 1) {
    recordBytes_ -= records_.front().capacity() + sizeof(std::string);
    records_.pop_front();
  }
}

std::vector<record::DecisionRecord> Recorder::decisionsFor(const std::string& pod) const {
  std::vector<record::DecisionRecord> out;
  const std::string needle = "\"pod\":" + policy::Json(pod).dump() + ",";
  for (const std::string& line : records_) {
    if (line.find(needle) == std::string::npos) continue;
    auto parsed = record::parseStoreFile(record::storeHeaderLine(options_.nodeName) + line);
    if (parsed && parsed->size() == 1 && parsed->front().pod == pod) out.push_back(parsed->front());
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const record::DecisionRecord& a, const record::DecisionRecord& b) {
                     return a.time < b.time;
                   });
  return out;
}

void Recorder::stop(std::chrono::milliseconds wait) {
  if (stopped_) return;
  if (open_) closeEpisode("stopped", clock_.now());
  stopped_ = true;
  if (writer_) {
    if (!writer_->drain(wait)) {
      // A stalled disk: the writer goes on (and is joined when the recorder is destroyed),
      // but the loop does not wait for it any longer.
      server::logEvent(server::LogLevel::Warn, "recorder-stop",
                       {{"effect",
                         "files are still being written; they finish when the agent "
                         "exits"}});
      return;
    }
    written_ = writer_->finished();
    writer_.reset();
  }
}

std::vector<std::string> Recorder::episodeFiles() const {
  return writer_ ? writer_->finished() : written_;
}

std::size_t Recorder::memoryBytes() const {
  std::size_t bytes = ringBytes_ + recordBytes_ + sizeof(*this);
  bytes += infos_.size() * (sizeof(PodInfo) + 128);
  if (writer_) bytes += writer_->queuedBytes();
  return bytes;
}

}  // namespace nodewarden::node
