#include "beast_request.h"

#include <fmt/format.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

#include "framing.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::awaitable;

namespace {

// Requests other than creates have no business sending more than this.
constexpr uint64_t kSmallBodyLimit = 16 * 1024;

}  // namespace

std::optional<Refusal> FramingProblem(const bhttp::request_header<>& req) {
  size_t hosts = 0, lengths = 0;
  std::vector<std::string_view> encodings;
  bool listed_length = false;
  for (const auto& field : req) {
    if (field.name() == bhttp::field::host) ++hosts;
    if (field.name() == bhttp::field::content_length) {
      ++lengths;
      // Beast accepts "5, 5"; RFC 9110 8.6 lets a recipient refuse a list, and the README says
      // a list is refused: two front ends may take different members of it.
      listed_length |= !IsSingleLength({field.value().data(), field.value().size()});
    }
    if (field.name() == bhttp::field::transfer_encoding) {
      encodings.emplace_back(field.value().data(), field.value().size());
    }
  }
  if (req.version() == 11 && hosts != 1) {
    return Refusal{400, "an HTTP/1.1 request needs exactly one Host"};
  }
  if (lengths > 1) return Refusal{400, "more than one Content-Length"};
  if (listed_length) return Refusal{400, "a Content-Length that is not one number"};
  if (!encodings.empty() && lengths > 0) {
    return Refusal{400, "both Transfer-Encoding and Content-Length"};
  }
  if (!encodings.empty()) {
    if (auto problem = CheckTransferCodings(encodings)) {
      return Refusal{problem->status, problem->message};
    }
  }
  const auto target = req.target();
  if (target.empty() || (target.front() != '/' && !target.starts_with("http://") &&
                         !target.starts_with("https://") && target != "*")) {
    return Refusal{400, "a request target that is neither a path nor an absolute URL"};
  }
  return std::nullopt;
}

std::string ReasonFor(unsigned status) {
  switch (status) {
    case 414:
      return "uri_too_long";
    case 431:
      return "header_too_large";
    case 501:
      return "not_implemented";
    default:
      return "bad_request";
  }
}

Method ToMethod(bhttp::verb verb) {
  switch (verb) {
    case bhttp::verb::get:
      return Method::kGet;
    case bhttp::verb::head:
      return Method::kHead;
    case bhttp::verb::post:
      return Method::kPost;
    case bhttp::verb::put:
      return Method::kPut;
    case bhttp::verb::delete_:
      return Method::kDelete;
    case bhttp::verb::unknown:
      return Method::kUnknown;
    default:
      return Method::kOther;
  }
}

std::optional<uint64_t> DeclaredLength(const Parser& parser) {
  const auto length = parser.content_length();
  return length ? std::optional<uint64_t>(*length) : std::nullopt;
}

std::string_view BeastFields::Get(std::string_view name) const {
  const auto it = header_.find(beast::string_view(name.data(), name.size()));
  return it == header_.end() ? std::string_view() : View(it->value());
}

std::vector<std::string_view> BeastFields::All(std::string_view name) const {
  std::vector<std::string_view> out;
  const auto [first, last] = header_.equal_range(beast::string_view(name.data(), name.size()));
  for (auto it = first; it != last; ++it) out.push_back(View(it->value()));
  return out;
}

namespace {

// How often a body's read looks again at the rate required of it, which rises as the create
// slots fill with work and with faster bodies.
constexpr Duration kPressureRecheck = std::chrono::milliseconds(500);
// A body is judged for a cut only once it has had this long: before, its first bytes may still
// be on the wire, and it would look like one that sends nothing.
constexpr Duration kJudgeBodyAfter = std::chrono::milliseconds(500);
// How long a create at the cap waits for a body it may cut, and for that body's slot.
constexpr Duration kCutWait = std::chrono::milliseconds(500);

using SteadyTime = std::chrono::steady_clock::time_point;

// The moment a body begun at `started`, of which `got` bytes have arrived, falls under `rate`
// bytes per second on average since its start; never before the grace.
SteadyTime FallsBehind(SteadyTime started, Duration grace, uint64_t got, double rate) {
  return started + std::max<Duration>(
                       grace, std::chrono::duration_cast<Duration>(
                                  std::chrono::duration<double>(static_cast<double>(got) / rate)));
}

// The body's average so far, in bytes per second.
double RateSince(SteadyTime started, uint64_t got) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return seconds > 0 ? static_cast<double>(got) / seconds : 0;
}

// A rate check cancels the pending read at `at`, instead of the stream's expiry, which would close
// the socket and leave no way to answer. A wait already completed when the read ended may still
// run; once the reader (`alive`) is gone, and with it, perhaps, the stream, it must not touch the
// socket.
void CancelReadAt(asio::steady_timer& timer, SteadyTime at, Stream& stream,
                  std::weak_ptr<int> alive) {
  timer.expires_at(at);
  timer.async_wait(
      [socket = &stream.socket(), alive = std::move(alive)](boost::system::error_code wait_ec) {
        if (!wait_ec && !alive.expired()) {
          boost::system::error_code ignored;
          socket->cancel(ignored);
        }
      });
}

}  // namespace

awaitable<Result<std::string>> SessionBodyReader::Read(uint64_t limit) {
  if (beast::iequals(x_.parser.get()[bhttp::field::expect], "100-continue")) {
    bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, 11};
    x_.stream.expires_after(x_.edge.Live()->body_timeout);
    boost::system::error_code ec;
    co_await bhttp::async_write(x_.stream, go_on, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return MakeError(ErrorCode::kInvalidArgument, "client went away", "aborted");
  }
  x_.parser.body_limit(limit);
  const std::shared_ptr<const ServerOptions> live = x_.edge.Live();
  const ServerOptions& o = *live;
  const auto started = std::chrono::steady_clock::now();
  x_.stream.expires_at(started + o.body_timeout);
  // The stream closes the socket when its expiry fires, which would leave no way to answer, so
  // the rate is watched by a timer of our own that only cancels the read: it is set to the
  // moment the bytes so far stop sufficing (the average since `started` drops under the rate
  // required now, never before the grace), and moved on by every read. A client under the rate
  // gets a 408 and its create slot back at once instead of holding it for body_timeout. The
  // required rate rises as the create slots fill with work and with bodies faster than this one
  // (RequiredBodyRateOf), so the timer also wakes every kPressureRecheck to look again.
  asio::steady_timer behind(x_.stream.get_executor());
  // While the body is read, the required rate judges it against the bodies faster than it, and a
  // create at a full cap (or a full share of this network) may cut it (CutSlowestBody).
  // Counted for its creator as the service budgets it: a forward-auth name apart from its address.
  const std::string creator_key = client_.CreatorKey();
  admission::BodiesInFlight<std::shared_ptr<Reclaimable>>::Entry in_flight = x_.edge.bodies.Begin(
      started, creator_key, reclaimable_, admission::ClientNetwork(creator_key, o.networks));
  reclaimable_->cancel = [socket = &x_.stream.socket()] {
    boost::system::error_code ignored;
    socket->cancel(ignored);
  };
  const struct Forget {
    Reclaimable& r;
    ~Forget() { r.cancel = nullptr; }
  } forget{*reclaimable_};
  uint64_t got = 0;
  double required = 0;
  boost::system::error_code ec;
  while (!x_.parser.is_done()) {
    std::optional<SteadyTime> falls_behind;
    required = RequiredBodyRateOf(x_.edge, o, RateSince(started, got));
    if (required > 0) {
      const auto now = std::chrono::steady_clock::now();
      falls_behind = FallsBehind(started, o.min_body_rate_grace, got, required);
      if (now >= *falls_behind) break;
      CancelReadAt(behind, std::min(*falls_behind, now + kPressureRecheck), x_.stream, alive_);
    }
    const size_t n = co_await bhttp::async_read_some(x_.stream, x_.buffer, x_.parser,
                                                     asio::redirect_error(asio::use_awaitable, ec));
    behind.cancel();
    got += n;
    x_.consumed += n;
    in_flight.Progress(got);
    if (reclaimable_->reclaimed) break;  // cut for a create at the cap
    if (ec == asio::error::operation_aborted && falls_behind) {
      ec.clear();  // our timer: the loop decides whether the client is behind
      continue;
    }
    if (ec) break;
  }
  if (reclaimable_->reclaimed && !x_.parser.is_done()) {
    const double seconds = std::max(
        1e-3, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    co_return MakeError(
        ErrorCode::kDeadlineExceeded,
        fmt::format("every create slot, or every one of this network's share, is taken and this "
                    "body was the slowest in flight ({:.0f} bytes per second, under the {:.0f} "
                    "required at a full cap): it was cut to admit another create; nothing was "
                    "saved",
                    static_cast<double>(got) / seconds, BodyRateAtCap(o)),
        "body_too_slow");
  }
  if (ec == beast::error::timeout) {
    x_.edge.metrics.body_timeouts.Inc();
    co_return MakeError(ErrorCode::kDeadlineExceeded,
                        "the body did not arrive in full: " + ec.message(), "incomplete_body");
  }
  if (ec) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "the body did not arrive in full: " + ec.message(), "incomplete_body");
  }
  if (!x_.parser.is_done()) {
    x_.edge.metrics.body_rate_cuts.Inc();
    x_.edge.bodies.NoteSlow(client_.CreatorKey(), std::chrono::steady_clock::now());
    co_return MakeError(
        ErrorCode::kDeadlineExceeded,
        fmt::format("the body arrived slower than {:.0f} bytes per second (the rate required now; "
                    "{} when the server is not busy); nothing was saved",
                    required, o.min_body_rate),
        "body_too_slow");
  }
  co_return std::move(x_.parser.get().body());
}

awaitable<bool> SessionBodyReader::CutSlowestBody(bool own_network) {
  const std::shared_ptr<const ServerOptions> live = x_.edge.Live();
  const std::string creator_key = client_.CreatorKey();
  service::PasteService& service = x_.edge.context.service;
  // The cap that refused is full: bodies under the rate of full pressure may give way to this
  // create, the slowest first. For a network's share, only the network's own bodies: another
  // network's body frees no unit of it.
  const double required = BodyRateAtCap(*live);
  if (required <= 0) co_return false;  // min_body_rate 0: no rate is required of anyone
  const std::string network =
      own_network ? admission::ClientNetwork(creator_key, live->networks) : std::string();
  // Bodies that all began less than kJudgeBodyAfter ago cannot be judged yet (cut clients that
  // reconnect at once arrive together): while some body under the rate is in flight, this create
  // waits for one to become judgeable, or for a slot to free, at most kCutWait, with its slot
  // promised (the caller's CreateSlotPromise), so no one else takes the one it waits for. A bounded
  // wait at the door, not a queue.
  if (!x_.edge.bodies.MayCut(creator_key, std::chrono::steady_clock::now())) co_return false;
  asio::steady_timer pause(x_.stream.get_executor());
  const auto give_up = std::chrono::steady_clock::now() + kCutWait;
  const auto sleep = [&pause](Duration d) -> awaitable<void> {
    pause.expires_after(d);
    boost::system::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  };
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    std::optional<std::shared_ptr<Reclaimable>> slowest =
        x_.edge.bodies.TakeSlowest(now, required, kJudgeBodyAfter, creator_key, network);
    if (slowest) {
      Reclaim(*slowest, x_.edge.metrics.bodies_reclaimed);
      // Its 408 is answered on its own loop; its slot comes back when its create ends, within
      // a turn of that loop (or, if its body had just arrived in full, when its store calls
      // end).
      while (!(*slowest)->released.load(std::memory_order_acquire) &&
             std::chrono::steady_clock::now() < give_up) {
        co_await sleep(std::chrono::milliseconds(1));
      }
      co_return true;
    }
    // A slot freed meanwhile (of the network's share, the next admission finds out).
    if (!own_network && service.CreateSlotSaturation() < 1.0) co_return true;
    // No trickle at all (the slots are held by creates whose bodies arrived, waiting on a slow
    // store, say): the 503 is answered now, as a full cap always was.
    if (now >= give_up || !x_.edge.bodies.AnyUnder(now, required, network)) co_return false;
    co_await sleep(std::chrono::milliseconds(5));
  }
}

awaitable<std::optional<Reply>> ReadSmallBody(Exchange& x) {
  if (x.parser.is_done()) co_return std::nullopt;
  const auto declared = x.parser.content_length();
  if (declared && *declared > kSmallBodyLimit) {
    co_return Reply::Refuse(ErrorCode::kTooLarge,
                            "this route takes a body of at most 16 KB (it ignores it)",
                            "body_too_large")
        .Closing();
  }
  x.parser.body_limit(kSmallBodyLimit);
  // The create bodies' floor, without their pressure (this body holds no create slot, only a
  // connection): after the grace, min_body_rate on average, so a byte a second holds the
  // connection for the grace, not for body_timeout (docs/hostile-input.md).
  const std::shared_ptr<const ServerOptions> live = x.edge.Live();
  const auto rate = static_cast<double>(live->min_body_rate);
  const auto started = std::chrono::steady_clock::now();
  x.stream.expires_at(started + live->body_timeout);
  asio::steady_timer behind(x.stream.get_executor());
  const auto alive = std::make_shared<int>(0);
  uint64_t got = 0;
  boost::system::error_code ec;
  while (!x.parser.is_done()) {
    if (rate > 0) {
      const SteadyTime falls_behind = FallsBehind(started, live->min_body_rate_grace, got, rate);
      if (std::chrono::steady_clock::now() >= falls_behind) break;
      CancelReadAt(behind, falls_behind, x.stream, alive);
    }
    const size_t n = co_await bhttp::async_read_some(x.stream, x.buffer, x.parser,
                                                     asio::redirect_error(asio::use_awaitable, ec));
    behind.cancel();
    got += n;
    x.consumed += n;
    if (ec == asio::error::operation_aborted && rate > 0) {
      ec.clear();  // our timer: the loop decides whether the client is behind
      continue;
    }
    if (ec) break;
  }
  if (!ec && !x.parser.is_done()) {
    x.edge.metrics.body_rate_cuts.Inc();
    co_return Reply::Refuse(
        ErrorCode::kDeadlineExceeded,
        fmt::format("the body arrived slower than {:.0f} bytes per second; this route takes a "
                    "small body, at that rate or faster once the first {} s have passed",
                    rate, std::chrono::duration<double>(live->min_body_rate_grace).count()),
        "body_too_slow", 408)
        .Closing();
  }
  if (!ec) co_return std::nullopt;
  if (ec == bhttp::error::body_limit) {
    co_return Reply::Refuse(ErrorCode::kTooLarge,
                            "this route takes a body of at most 16 KB (it ignores it)",
                            "body_too_large")
        .Closing();
  }
  if (ec == beast::error::timeout) {
    x.edge.metrics.body_timeouts.Inc();
    co_return Reply::Refuse(ErrorCode::kInvalidArgument, "the body took too long to arrive",
                            "body_timeout", 408)
        .Closing();
  }
  co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                          "the body did not arrive in full: " + ec.message(), "incomplete_body")
      .Closing();
}

}  // namespace sluice::http
