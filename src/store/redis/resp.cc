#include "resp.h"

#include <limits>

namespace sluice::store::resp {

std::optional<int64_t> ParseInteger(std::string_view s) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty() || s.size() > 19) return std::nullopt;
  // Accumulated as a negative number, whose range includes INT64_MIN.
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (v < (std::numeric_limits<int64_t>::min() + digit) / 10) return std::nullopt;
    v = v * 10 - digit;
  }
  if (!negative) {
    if (v == std::numeric_limits<int64_t>::min()) return std::nullopt;
    v = -v;
  }
  return v;
}

void Parser::Feed(std::string_view bytes) {
  if (!error_.empty()) return;
  // Drop what complete replies consumed before growing, so the buffer holds at most one reply in
  // progress plus what arrived with it.
  if (consumed_ > 0) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

Parser::Status Parser::Next(Value& out) {
  if (!error_.empty()) return Status::kError;
  size_t pos = consumed_;
  Value v;
  // A reply is parsed from its first byte each time more arrives: replies here are small (a
  // metadata row, a script's four fields), and the bounds keep a hostile one from being costly.
  switch (Parse(pos, v, 0)) {
    case Step::kNeedMore:
      return Status::kNeedMore;
    case Step::kError:
      return Status::kError;
    case Step::kDone:
      break;
  }
  consumed_ = pos;
  out = std::move(v);
  return Status::kValue;
}

Parser::Step Parser::Fail(std::string why) {
  error_ = std::move(why);
  return Step::kError;
}

Parser::Step Parser::Line(size_t& pos, std::string_view& line) {
  const size_t start = pos;
  const size_t limit = std::min(buffer_.size(), start + limits_.max_line + 1);
  for (size_t i = start; i < limit; ++i) {
    if (buffer_[i] == '\r') {
      if (i + 1 >= buffer_.size()) return Step::kNeedMore;
      if (buffer_[i + 1] != '\n') return Fail("CR without LF");
      line = std::string_view(buffer_).substr(start, i - start);
      pos = i + 2;
      return Step::kDone;
    }
    if (buffer_[i] == '\n') return Fail("LF without CR");
  }
  if (buffer_.size() - start > limits_.max_line) return Fail("line too long");
  return Step::kNeedMore;
}

Parser::Step Parser::Parse(size_t& pos, Value& out, int depth) {
  if (pos >= buffer_.size()) return Step::kNeedMore;
  const char kind = buffer_[pos];
  size_t at = pos + 1;
  std::string_view line;
  if (Step s = Line(at, line); s != Step::kDone) return s;
  switch (kind) {
    case '+':
    case '-':
      out.type = kind == '+' ? Type::kSimple : Type::kError;
      out.str.assign(line);
      break;
    case ':': {
      const auto n = ParseInteger(line);
      if (!n) return Fail("bad integer");
      out.type = Type::kInteger;
      out.integer = *n;
      break;
    }
    case '$': {
      const auto n = ParseInteger(line);
      if (!n || *n < -1) return Fail("bad bulk length");
      if (*n == -1) {
        out.type = Type::kNil;
        break;
      }
      if (static_cast<uint64_t>(*n) > limits_.max_bulk) return Fail("bulk string too long");
      const size_t len = static_cast<size_t>(*n);
      if (buffer_.size() - at < len + 2) return Step::kNeedMore;
      if (buffer_[at + len] != '\r' || buffer_[at + len + 1] != '\n') {
        return Fail("bulk string not followed by CRLF");
      }
      out.type = Type::kBulk;
      out.str.assign(buffer_, at, len);
      at += len + 2;
      break;
    }
    case '*': {
      const auto n = ParseInteger(line);
      if (!n || *n < -1) return Fail("bad array length");
      if (*n == -1) {
        out.type = Type::kNil;
        break;
      }
      if (static_cast<uint64_t>(*n) > limits_.max_elements) return Fail("array too long");
      if (depth + 1 > limits_.max_depth) return Fail("arrays nested too deep");
      out.type = Type::kArray;
      // Each element takes at least 3 bytes (":0\r\n" is 4, "+\r\n" is 3), so a count the bytes
      // in hand cannot hold yet is not reserved for.
      out.elements.reserve(std::min<size_t>(static_cast<size_t>(*n), (buffer_.size() - at) / 3));
      for (int64_t i = 0; i < *n; ++i) {
        Value element;
        if (Step s = Parse(at, element, depth + 1); s != Step::kDone) return s;
        out.elements.push_back(std::move(element));
      }
      break;
    }
    default:
      // RESP3 types included: the client never asks for RESP3 (no HELLO 3), so one is a surprise.
      return Fail("unknown reply type byte " + std::to_string(static_cast<unsigned char>(kind)));
  }
  pos = at;
  return Step::kDone;
}

void AppendCommand(std::string& out, const std::vector<std::string>& args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const std::string& a : args) {
    out += '$';
    out += std::to_string(a.size());
    out += "\r\n";
    out += a;
    out += "\r\n";
  }
}

}  // namespace sluice::store::resp
