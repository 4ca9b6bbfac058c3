// The parts of a Request (src/http/request.h) that a test or a fuzz target builds from strings
// instead of a socket: header fields and a create's body.
#pragma once

#include <strings.h>

#include <boost/asio/awaitable.hpp>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../src/http/request.h"

namespace sluice::testing {

/// Header fields as given, names compared case-insensitively.
class FakeHeaders final : public http::HeaderFields {
 public:
  FakeHeaders(std::initializer_list<std::pair<std::string, std::string>> fields)
      : fields_(fields) {}
  explicit FakeHeaders(std::vector<std::pair<std::string, std::string>> fields)
      : fields_(std::move(fields)) {}
  std::string_view Get(std::string_view name) const override {
    for (const auto& [n, v] : fields_) {
      if (Same(n, name)) return v;
    }
    return {};
  }
  std::vector<std::string_view> All(std::string_view name) const override {
    std::vector<std::string_view> out;
    for (const auto& [n, v] : fields_) {
      if (Same(n, name)) out.push_back(v);
    }
    return out;
  }

 private:
  static bool Same(std::string_view a, std::string_view b) {
    return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
  }
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// A create's body, answered whole on the first Read (or the error it was given).
class FakeBody final : public http::BodyReader {
 public:
  explicit FakeBody(Result<std::string> bytes) : bytes_(std::move(bytes)) {}
  boost::asio::awaitable<Result<std::string>> Read(uint64_t limit) override {
    ++reads;
    last_limit = limit;
    co_return bytes_;
  }
  int reads = 0;
  uint64_t last_limit = 0;

 private:
  Result<std::string> bytes_;
};

}  // namespace sluice::testing
