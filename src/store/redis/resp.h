// RESP2, the Redis wire protocol, as pure functions over bytes: no sockets, no clock, no threads,
// so the fuzzer (fuzz/resp_fuzz.cc) and the unit tests (tests/unit/state/resp_test.cc) exercise
// exactly what the client (src/store/redis/redis_client.cc) runs.
//
// The parser trusts nothing it reads. Every length is bounded before anything is allocated for it,
// arrays nest only so deep, and anything that is not well-formed RESP2 is a protocol error that the
// caller answers by dropping the connection: after a byte it does not understand, it cannot know
// where the next reply starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::store::resp {

enum class Type { kSimple, kError, kInteger, kBulk, kNil, kArray };

/// One reply. A nil bulk string and a nil array are both kNil.
struct Value {
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;  // kSimple, kError, kBulk
  std::vector<Value> elements;

  bool IsString() const { return type == Type::kBulk || type == Type::kSimple; }
  bool IsError() const { return type == Type::kError; }
  bool Is(std::string_view s) const { return IsString() && str == s; }
};

struct Limits {
  /// Longest bulk string accepted.
  size_t max_bulk = 1 << 20;
  /// Most elements in one array.
  size_t max_elements = 1024;
  /// Deepest nesting of arrays (a flat array is depth 1).
  int max_depth = 4;
  /// Longest line of a simple string, an error or an integer, without its CRLF.
  size_t max_line = 4096;
};

/// Incremental: Feed() bytes as they arrive, then call Next() until it returns kNeedMore. After
/// kError the parser stays failed; the connection must be dropped.
class Parser {
 public:
  enum class Status { kValue, kNeedMore, kError };

  explicit Parser(Limits limits = {}) : limits_(limits) {}

  void Feed(std::string_view bytes);
  /// The next complete reply in `out`, or kNeedMore, or kError with `error()` saying why.
  Status Next(Value& out);

  const std::string& error() const { return error_; }
  /// Bytes received and not yet consumed by a complete reply.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  enum class Step { kDone, kNeedMore, kError };
  Step Parse(size_t& pos, Value& out, int depth);
  Step Line(size_t& pos, std::string_view& line);
  Step Fail(std::string why);

  Limits limits_;
  std::string buffer_;
  size_t consumed_ = 0;
  std::string error_;
};

/// A command as a RESP array of bulk strings, appended to `out`.
void AppendCommand(std::string& out, const std::vector<std::string>& args);

/// Parses a whole RESP integer ("-12", "0"): digits with an optional minus sign and no overflow.
std::optional<int64_t> ParseInteger(std::string_view s);

}  // namespace sluice::store::resp
