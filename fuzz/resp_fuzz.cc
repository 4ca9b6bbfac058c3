// libFuzzer target: the RESP parser of the Redis client (src/store/redis/resp.h), which reads
// whatever a Redis server, or something pretending to be one, sends. Properties: never a crash or a
// hang, limits held, and the same bytes give the same replies however they are split, so a reply
// cut across reads is never misread.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "../src/store/redis/resp.h"

namespace {

using sluice::store::resp::Limits;
using sluice::store::resp::Parser;
using sluice::store::resp::Type;
using sluice::store::resp::Value;

void CheckLimits(const Value& v, const Limits& limits, int depth) {
  if (v.str.size() > limits.max_bulk && v.type == Type::kBulk) std::abort();
  if (v.type == Type::kArray) {
    if (depth + 1 > limits.max_depth || v.elements.size() > limits.max_elements) std::abort();
    for (const Value& e : v.elements) CheckLimits(e, limits, depth + 1);
  } else if (!v.elements.empty()) {
    std::abort();
  }
}

bool Same(const Value& a, const Value& b) {
  if (a.type != b.type || a.integer != b.integer || a.str != b.str ||
      a.elements.size() != b.elements.size()) {
    return false;
  }
  for (size_t i = 0; i < a.elements.size(); ++i) {
    if (!Same(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

// Replies and final status with `bytes` fed in pieces of `step` (0: all at once).
std::vector<Value> Run(std::string_view bytes, size_t step, const Limits& limits,
                       Parser::Status& last) {
  Parser p(limits);
  std::vector<Value> out;
  Value v;
  last = Parser::Status::kNeedMore;
  const size_t piece = step == 0 ? bytes.size() : step;
  for (size_t at = 0; at < bytes.size() && last != Parser::Status::kError; at += piece) {
    p.Feed(bytes.substr(at, piece));
    while ((last = p.Next(v)) == Parser::Status::kValue) {
      CheckLimits(v, limits, 0);
      out.push_back(v);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // Small limits, so the fuzzer reaches them with small inputs.
  Limits limits;
  limits.max_bulk = 64;
  limits.max_elements = 8;
  limits.max_depth = 3;
  limits.max_line = 24;
  const size_t step = data[0] % 8;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  Parser::Status whole_status, split_status;
  const auto whole = Run(bytes, 0, limits, whole_status);
  const auto split = Run(bytes, step, limits, split_status);
  // Split feeding may stop at an error before reaching replies the whole parse reached after it
  // never: an error is at the same place either way, so the replies must agree.
  if (whole.size() != split.size() || whole_status != split_status) std::abort();
  for (size_t i = 0; i < whole.size(); ++i) {
    if (!Same(whole[i], split[i])) std::abort();
  }
  return 0;
}
