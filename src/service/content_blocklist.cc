#include "sluice/service/content_blocklist.h"

#include <algorithm>

namespace sluice::service {

bool ContentBlocklist::Contains(const store::BodyDigest& digest) const {
  if (empty()) return false;
  const std::shared_ptr<const std::vector<store::BodyDigest>> sorted = sorted_.Load();
  return std::binary_search(sorted->begin(), sorted->end(), digest);
}

void ContentBlocklist::Replace(std::vector<store::BodyDigest> digests, int64_t version) {
  std::sort(digests.begin(), digests.end());
  digests.erase(std::unique(digests.begin(), digests.end()), digests.end());
  std::lock_guard lock(change_mu_);
  const size_t n = digests.size();
  sorted_.Store(std::move(digests));
  size_.store(n, std::memory_order_release);
  version_.store(version, std::memory_order_release);
}

void ContentBlocklist::Add(const store::BodyDigest& digest) {
  std::lock_guard lock(change_mu_);
  const auto current = sorted_.Load();
  const auto at = std::lower_bound(current->begin(), current->end(), digest);
  if (at != current->end() && *at == digest) return;
  std::vector<store::BodyDigest> next;
  next.reserve(current->size() + 1);
  next.insert(next.end(), current->begin(), at);
  next.push_back(digest);
  next.insert(next.end(), at, current->end());
  const size_t n = next.size();
  sorted_.Store(std::move(next));
  size_.store(n, std::memory_order_release);
}

void ContentBlocklist::Remove(const store::BodyDigest& digest) {
  std::lock_guard lock(change_mu_);
  const auto current = sorted_.Load();
  const auto at = std::lower_bound(current->begin(), current->end(), digest);
  if (at == current->end() || *at != digest) return;
  std::vector<store::BodyDigest> next;
  next.reserve(current->size() - 1);
  next.insert(next.end(), current->begin(), at);
  next.insert(next.end(), at + 1, current->end());
  const size_t n = next.size();
  sorted_.Store(std::move(next));
  size_.store(n, std::memory_order_release);
}

std::string ContentBlocklist::Hex(const store::BodyDigest& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * digest.size());
  for (unsigned char c : digest) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

std::optional<store::BodyDigest> ContentBlocklist::ParseHex(std::string_view text) {
  store::BodyDigest out{};
  if (text.size() != 2 * out.size()) return std::nullopt;
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(text[2 * i]);
    const int lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace sluice::service
