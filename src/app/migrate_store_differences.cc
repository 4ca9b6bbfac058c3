#include "migrate_store_differences.h"

#include <fmt/format.h>

#include "sluice/service/content_blocklist.h"

namespace sluice::app::migrate {
namespace {

// Adds to `out` how `field` differs, unless it is the same.
void Check(std::vector<std::string>& out, bool same, const char* field,
           const std::string& want_text, const std::string& got_text) {
  if (!same)
    out.push_back(
        fmt::format("{}: {} on the source, {} on the target", field, want_text, got_text));
}

// A notice's pastes as "ID OUTCOME open|closed, ...", in the order the notice named them.
std::string NoticePastesText(const store::Notice& n) {
  std::string text;
  for (const store::NoticePaste& p : n.pastes) {
    text += fmt::format("{}{} {} {}", text.empty() ? "" : ", ", p.paste, p.outcome,
                        p.open ? "open" : "closed");
  }
  return text;
}

}  // namespace

// The fields a row is created with: a difference in one of them is a different paste, which the
// copy names and never overwrites.
std::vector<std::string> CreatedDifferences(const store::PasteMeta& want,
                                            const store::PasteMeta& got) {
  std::vector<std::string> out;
  auto check = [&](bool same, const char* field, const std::string& want_text,
                   const std::string& got_text) { Check(out, same, field, want_text, got_text); };
  check(want.created_at == got.created_at, "created_at", std::to_string(want.created_at),
        std::to_string(got.created_at));
  check(want.expires_at == got.expires_at, "expires_at", std::to_string(want.expires_at),
        std::to_string(got.expires_at));
  check(want.size_bytes == got.size_bytes, "size_bytes", std::to_string(want.size_bytes),
        std::to_string(got.size_bytes));
  check(want.token_hash == got.token_hash, "token_hash",
        service::ContentBlocklist::Hex(want.token_hash),
        service::ContentBlocklist::Hex(got.token_hash));
  check(want.body_sha256 == got.body_sha256, "body_sha256",
        want.body_sha256 ? service::ContentBlocklist::Hex(*want.body_sha256) : "none",
        got.body_sha256 ? service::ContentBlocklist::Hex(*got.body_sha256) : "none");
  check(want.burn == got.burn, "burn", want.burn ? "true" : "false", got.burn ? "true" : "false");
  check(want.parent == got.parent, "parent", want.parent ? want.parent->str() : "none",
        got.parent ? got.parent->str() : "none");
  check(want.creator_network == got.creator_network, "creator_network",
        want.creator_network ? std::to_string(*want.creator_network) : "none",
        got.creator_network ? std::to_string(*got.creator_network) : "none");
  check(want.encrypted == got.encrypted, "encrypted", want.encrypted ? "true" : "false",
        got.encrypted ? "true" : "false");
  return out;
}

// Every field, the ones a paste's life changes too (views, moderation, deletion).
std::vector<std::string> AllDifferences(const store::PasteMeta& want, const store::PasteMeta& got) {
  std::vector<std::string> out = CreatedDifferences(want, got);
  if (want.burn && want.views_left != got.views_left) {
    out.push_back(fmt::format("views_left: {} on the source, {} on the target", want.views_left,
                              got.views_left));
  }
  if (want.moderation != got.moderation) {
    out.push_back(fmt::format("moderation: {} on the source, {} on the target",
                              store::ModerationName(want.moderation),
                              store::ModerationName(got.moderation)));
  }
  if (want.deleted != got.deleted) {
    out.push_back(fmt::format("deleted: {} on the source, {} on the target",
                              want.deleted ? "true" : "false", got.deleted ? "true" : "false"));
  }
  return out;
}

std::vector<std::string> NoticeDifferences(const store::Notice& want, const store::Notice& got) {
  std::vector<std::string> out;
  Check(out, want.category == got.category, "category", want.category, got.category);
  Check(out, want.deadline_at == got.deadline_at, "deadline_at",
        want.deadline_at ? std::to_string(*want.deadline_at) : "none",
        got.deadline_at ? std::to_string(*got.deadline_at) : "none");
  Check(out, want.received_at == got.received_at, "received_at", std::to_string(want.received_at),
        std::to_string(got.received_at));
  Check(out, want.open_pastes == got.open_pastes, "open_pastes", std::to_string(want.open_pastes),
        std::to_string(got.open_pastes));
  const std::string want_pastes = NoticePastesText(want), got_pastes = NoticePastesText(got);
  Check(out, want_pastes == got_pastes, "pastes", want_pastes, got_pastes);
  return out;
}

bool SameReport(const store::AbuseReport& a, const store::AbuseReport& b) {
  return a.network == b.network && a.reason == b.reason && a.note == b.note && a.at == b.at &&
         a.from_creator == b.from_creator;
}

}  // namespace sluice::app::migrate
