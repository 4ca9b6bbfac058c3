// Pressure reclaims what idles (docs/overload.md, "Pressure"). A cap that only refuses can be
// filled by clients that hold without working: idle keep-alive connections, bodies trickling in
// just above the rate floor. As Envoy's overload manager scales its timeouts down while a
// resource fills, the edge shrinks the idle timeout as the connection cap fills (PressureCurve)
// and raises the rate a create body must keep as the create slots fill with work
// (BodiesInFlight::RequiredOf); and as nginx reuses its idle keep-alive connections first, a new
// connection at the cap closes the longest-idle one (IdleConnections), and a new create refused
// by a full cap cuts the slowest body in flight (BodiesInFlight::TakeSlowest). Standard library
// only: what "close" or "cut" means is the caller's Handle.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/common/clock.h"

namespace sluice::admission {

/// How hard a resource presses, from how full it is: 0 (relaxed) up to `start`, 1 (full pressure)
/// from `full` on, linear between, as Envoy's scaled timeouts are.
struct PressureCurve {
  /// The fill (in use / cap) at which pressure begins. Default: 0.5.
  double start = 0.5;
  /// The fill at which pressure is full. Precondition: full >= start. Default: 0.9.
  double full = 0.9;

  /// 0 to 1. A cap of 0 or less is full. Pure function.
  double Level(int64_t in_use, int64_t cap) const {
    if (cap <= 0) return 1.0;
    return Level(static_cast<double>(in_use) / static_cast<double>(cap));
  }
  /// The same from a fill already worked out (in use / cap). Pure function.
  double Level(double fill) const {
    if (fill >= full) return 1.0;
    if (fill <= start) return 0.0;
    return (fill - start) / (full - start);
  }
};

/// `relaxed` at level 0 shrinking linearly to `floor` at level 1; never above `relaxed` (a floor
/// above it changes nothing). Pure function.
inline Duration ScaledTimeout(Duration relaxed, Duration floor, double level) {
  if (floor >= relaxed) return relaxed;
  level = std::clamp(level, 0.0, 1.0);
  const double span = static_cast<double>((relaxed - floor).count());
  return relaxed - Duration(static_cast<Duration::rep>(span * level));
}

/// `relaxed` at level 0 rising linearly to `pressed` at level 1; never below `relaxed`. Pure
/// function.
inline double ScaledRate(double relaxed, double pressed, double level) {
  if (pressed <= relaxed) return relaxed;
  level = std::clamp(level, 0.0, 1.0);
  return relaxed + (pressed - relaxed) * level;
}

/// The body rate a fill of the create slots requires: `relaxed` (the floor) up to `curve.start`,
/// rising to `pressed` at `curve.full`.
struct BodyRateCurve {
  PressureCurve curve;
  /// Bytes per second. Default: 1024.
  double relaxed = 1024;
  /// Bytes per second; never lowers the rate below `relaxed`. Default: 65536.
  double pressed = 65536;

  /// The rate `in_use` of `cap` slots require. Pure function.
  double At(int64_t in_use, int64_t cap) const {
    return ScaledRate(relaxed, pressed, curve.Level(in_use, cap));
  }
};

/// The connections waiting between requests, longest-idle first. A connection enters when it
/// starts waiting for its next request and leaves (its Entry destroyed) when bytes arrive or it
/// closes; TakeLongestIdle removes the one it picks, so two new connections never reclaim the
/// same one. Thread-safe: one mutex, held for O(log n). `Handle` is what the caller needs to close
/// the connection (copyable).
template <typename Handle>
class IdleConnections {
 public:
  /// A connection's place in the set. Move-only; leaves on destruction (on any thread).
  /// Precondition: the IdleConnections outlives it.
  class Entry {
   public:
    Entry(Entry&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)), id_(other.id_) {}
    Entry& operator=(Entry&&) = delete;
    Entry(const Entry&) = delete;
    ~Entry() {
      if (owner_ != nullptr) owner_->Leave(id_);
    }

   private:
    friend class IdleConnections;
    Entry(IdleConnections* owner, uint64_t id) : owner_(owner), id_(id) {}
    IdleConnections* owner_;
    uint64_t id_;
  };

  IdleConnections() = default;
  IdleConnections(const IdleConnections&) = delete;
  IdleConnections& operator=(const IdleConnections&) = delete;

  /// Enters a connection of client `key` idle since `since`.
  Entry Enter(TimePoint since, std::string key, Handle handle) {
    std::lock_guard lock(mu_);
    const uint64_t id = next_id_++;
    by_key_[key].emplace(since, id);
    by_since_.emplace(since, id);
    by_id_.emplace(id, Idle{since, std::move(key), std::move(handle)});
    return Entry(this, id);
  }

  /// The connection to close for a new one of client `key`, removed from the set: the longest
  /// idle of all; nothing when none is idle, or when `key` has one of its own idle. Such a
  /// client is not short of a connection, it has one waiting; and closing its own (or anyone's)
  /// for it would let a client that reconnects as soon as it is closed close the next, round
  /// and round, at the speed of its reconnects.
  std::optional<Handle> TakeLongestIdle(std::string_view key = {}) {
    std::lock_guard lock(mu_);
    if (by_since_.empty() || by_key_.contains(std::string(key))) return std::nullopt;
    auto it = by_id_.find(by_since_.begin()->second);
    Handle handle = std::move(it->second.handle);
    EraseLocked(it);
    return handle;
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return by_id_.size();
  }

 private:
  struct Idle {
    TimePoint since;
    std::string key;
    Handle handle;
  };
  void Leave(uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it != by_id_.end()) EraseLocked(it);  // else taken already
  }
  void EraseLocked(typename std::unordered_map<uint64_t, Idle>::iterator it) {
    const std::pair<TimePoint, uint64_t> place{it->second.since, it->first};
    by_since_.erase(place);
    auto own = by_key_.find(it->second.key);
    own->second.erase(place);
    if (own->second.empty()) by_key_.erase(own);
    by_id_.erase(it);
  }

  using Places = std::set<std::pair<TimePoint, uint64_t>>;
  mutable std::mutex mu_;
  uint64_t next_id_ = 0;                            // guarded by mu_
  std::unordered_map<uint64_t, Idle> by_id_;        // guarded by mu_
  Places by_since_;                                 // guarded by mu_
  std::unordered_map<std::string, Places> by_key_;  // guarded by mu_; no empty sets
};

/// The create bodies being read: what pressure judges. A body enters when its read starts, reports
/// its bytes as they arrive, and leaves (its Entry destroyed) when the read ends. The rate each
/// must keep counts only the slots held by work and by bodies faster than it (RequiredOf), and a
/// create refused by a full cap cuts the slowest (TakeSlowest). Thread-safe: one mutex; every
/// question scans every body, at most the create slots (tens), so a heap would only add work to
/// every Progress.
template <typename Handle>
class BodiesInFlight {
 public:
  /// A body's place in the set. Move-only; leaves on destruction. Precondition: the
  /// BodiesInFlight outlives it.
  class Entry {
   public:
    Entry(Entry&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)), id_(other.id_) {}
    Entry& operator=(Entry&&) = delete;
    Entry(const Entry&) = delete;
    ~Entry() {
      if (owner_ != nullptr) owner_->Leave(id_);
    }
    /// `bytes` of the body have arrived so far (a total, not an increment).
    void Progress(uint64_t bytes) {
      if (owner_ != nullptr) owner_->SetBytes(id_, bytes);
    }

   private:
    friend class BodiesInFlight;
    Entry(BodiesInFlight* owner, uint64_t id) : owner_(owner), id_(id) {}
    BodiesInFlight* owner_;
    uint64_t id_;
  };

  /// `memory`: how long a client whose body was cut for slowness may not cut another's
  /// (MayCut). At most `remembered` clients are remembered; past it the oldest are forgotten.
  explicit BodiesInFlight(Duration memory = std::chrono::seconds(10), size_t remembered = 4096)
      : memory_(memory), remembered_(remembered) {}
  BodiesInFlight(const BodiesInFlight&) = delete;
  BodiesInFlight& operator=(const BodiesInFlight&) = delete;

  /// Enters the body of a create of client `key`, of network `network` (network.h; empty: none
  /// given), started at `started`.
  Entry Begin(TimePoint started, std::string key, Handle handle, std::string network = {}) {
    std::lock_guard lock(mu_);
    const uint64_t id = next_id_++;
    bodies_.emplace(id, Body{started, 0, std::move(key), std::move(network), std::move(handle)});
    return Entry(this, id);
  }

  /// The rate required now of a body whose average so far is `rate` bytes per second, with
  /// `slots_in_use` of `cap` create slots taken: `curve` at the fill of the slots held by work
  /// (those taken by no body in flight here: creates whose bodies have arrived) and by the bodies
  /// faster than `rate`. A body is judged by the pressure of those that outpace it: bodies that
  /// send nothing, or less than it, raise nothing it must do, so slots filled at no cost cannot
  /// be turned on an honest slow upload; and among bodies that all work, the slower go first.
  double RequiredOf(TimePoint now, double rate, int64_t slots_in_use, int64_t cap,
                    const BodyRateCurve& curve) const {
    std::lock_guard lock(mu_);
    int64_t faster = 0;
    for (const auto& [id, body] : bodies_) {
      if (RateLocked(body, now) > rate) ++faster;
    }
    return curve.At(WorkingLocked(slots_in_use) + faster, cap);
  }

  /// The rate under which a body is cut now (RequiredOf is above its own rate exactly when its
  /// rate is under this): for the gauge. The highest, over the k fastest bodies, of the lesser of
  /// the k-th fastest rate and what the work and those k require.
  double Required(TimePoint now, int64_t slots_in_use, int64_t cap,
                  const BodyRateCurve& curve) const {
    std::lock_guard lock(mu_);
    std::vector<double> rates;
    rates.reserve(bodies_.size());
    for (const auto& [id, body] : bodies_) rates.push_back(RateLocked(body, now));
    std::sort(rates.begin(), rates.end(), std::greater<>());
    const int64_t working = WorkingLocked(slots_in_use);
    double required = curve.At(working, cap);
    for (size_t k = 1; k <= rates.size(); ++k) {
      required = std::max(required,
                          std::min(rates[k - 1], curve.At(working + static_cast<int64_t>(k), cap)));
    }
    return required;
  }

  /// For a create of client `asker`: the body with the lowest average rate since its start among
  /// those at least `min_age` old and under `required_rate` bytes per second (and, when `network`
  /// is not empty, of that network), removed from the
  /// set; nothing when none qualifies, or when `asker` has a body of its own in flight (it is
  /// using a slot, not waiting for one: without the rule, a client whose cut bodies reconnect at
  /// once would cut the next, round and round, and every body would stay too young to judge
  /// when someone else's create arrives). `min_age` keeps a body whose first bytes are still on
  /// the wire from looking like one that sends nothing. Ties go to the older body (it has held
  /// its slot longer).
  std::optional<Handle> TakeSlowest(TimePoint now, double required_rate, Duration min_age,
                                    std::string_view asker = {}, std::string_view network = {}) {
    std::lock_guard lock(mu_);
    if (!MayCutLocked(asker, now)) return std::nullopt;
    auto slowest = bodies_.end();
    double slowest_rate = 0;
    for (auto it = bodies_.begin(); it != bodies_.end(); ++it) {
      if (!network.empty() && it->second.network != network) continue;
      const Duration age = now - it->second.started;
      if (age < min_age || age <= Duration::zero()) continue;
      const double rate = static_cast<double>(it->second.bytes) / ToSeconds(age);
      if (rate >= required_rate) continue;
      if (slowest == bodies_.end() || rate < slowest_rate ||
          (rate == slowest_rate && it->second.started < slowest->second.started)) {
        slowest = it;
        slowest_rate = rate;
      }
    }
    if (slowest == bodies_.end()) return std::nullopt;
    NoteSlowLocked(slowest->second.key, now);
    Handle handle = std::move(slowest->second.handle);
    bodies_.erase(slowest);
    return handle;
  }

  /// Whether any body in flight (of `network`, when not empty), whatever its age, has arrived so
  /// far at under `required_rate` bytes per second (one younger than TakeSlowest's `min_age` may
  /// qualify soon; with none, a create at the cap has nothing to wait for: the slots are held by
  /// work, not by trickles).
  bool AnyUnder(TimePoint now, double required_rate, std::string_view network = {}) const {
    std::lock_guard lock(mu_);
    for (const auto& [id, body] : bodies_) {
      if (!network.empty() && body.network != network) continue;
      const Duration age = now - body.started;
      if (age <= Duration::zero()) return true;
      if (static_cast<double>(body.bytes) / ToSeconds(age) < required_rate) return true;
    }
    return false;
  }

  /// Whether a create of client `asker` may cut another's body now: not while it has a body of
  /// its own in flight (TakeSlowest), nor within `memory` of one of its bodies being cut for
  /// slowness (here, or by the rate: NoteSlow). A client whose trickle was just cut, and who
  /// reconnects at once, would otherwise cut the next body in its turn, and the slow clients
  /// would take turns at the slots while a create of anyone else found every body too young to
  /// judge. An empty `asker` may always cut.
  bool MayCut(std::string_view asker, TimePoint now) {
    std::lock_guard lock(mu_);
    return MayCutLocked(asker, now);
  }

  /// A body of client `key` was cut at `now` for arriving under the required rate.
  void NoteSlow(std::string key, TimePoint now) {
    std::lock_guard lock(mu_);
    NoteSlowLocked(std::move(key), now);
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return bodies_.size();
  }

 private:
  struct Body {
    TimePoint started;
    uint64_t bytes;
    std::string key;
    std::string network;
    Handle handle;
  };
  void Leave(uint64_t id) {
    std::lock_guard lock(mu_);
    bodies_.erase(id);
  }
  // Its average since its start; 0 before any time has passed.
  static double RateLocked(const Body& body, TimePoint now) {
    const Duration age = now - body.started;
    if (age <= Duration::zero()) return 0;
    return static_cast<double>(body.bytes) / ToSeconds(age);
  }
  // The slots in use that no body here holds. A body's slot is taken before its read begins and
  // given back after it ends, so the count may briefly lag by a body either way: never below 0.
  int64_t WorkingLocked(int64_t slots_in_use) const {
    return std::max<int64_t>(0, slots_in_use - static_cast<int64_t>(bodies_.size()));
  }
  bool MayCutLocked(std::string_view asker, TimePoint now) {
    if (asker.empty()) return true;
    for (const auto& [id, body] : bodies_) {
      if (body.key == asker) return false;
    }
    auto it = slow_.find(std::string(asker));
    if (it == slow_.end()) return true;
    if (now - it->second < memory_) return false;
    slow_.erase(it);
    return true;
  }
  void NoteSlowLocked(std::string key, TimePoint now) {
    if (slow_.size() >= remembered_) {
      // Forget those past their memory, then, if still full, the oldest: a scan of at most
      // `remembered` entries, only when full.
      std::erase_if(slow_, [&](const auto& entry) { return now - entry.second >= memory_; });
      if (slow_.size() >= remembered_) {
        slow_.erase(std::min_element(slow_.begin(), slow_.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        }));
      }
    }
    slow_[std::move(key)] = now;
  }
  void SetBytes(uint64_t id, uint64_t bytes) {
    std::lock_guard lock(mu_);
    auto it = bodies_.find(id);
    if (it != bodies_.end()) it->second.bytes = bytes;
  }

  const Duration memory_;
  const size_t remembered_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 0;             // guarded by mu_
  std::map<uint64_t, Body> bodies_;  // guarded by mu_
  // Clients whose bodies were cut for slowness, and when.
  std::unordered_map<std::string, TimePoint> slow_;  // guarded by mu_
};

}  // namespace sluice::admission
