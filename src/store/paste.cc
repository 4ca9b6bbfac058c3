#include "sluice/store/paste.h"

namespace sluice::store {

namespace {
bool IsBase62(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
}  // namespace

std::optional<PasteId> PasteId::Parse(std::string_view text) {
  if (text.size() != kLength) return std::nullopt;
  PasteId id;
  for (size_t i = 0; i < kLength; ++i) {
    if (!IsBase62(text[i])) return std::nullopt;
    id.chars_[i] = text[i];
  }
  return id;
}

}  // namespace sluice::store
