#pragma once
// What `sluice admin migrate-store` compares between a source's row and the target's
// (docs/scale-out.md, "Outgrowing one box"): each difference named, for the copy (which never
// overwrites a different paste) and the verification pass.

#include <string>
#include <vector>

#include "sluice/store/moderation.h"
#include "sluice/store/paste.h"

namespace sluice::app::migrate {

/// The fields a row is created with that differ, each as "field: X on the source, Y on the
/// target": a difference in one of them is a different paste.
std::vector<std::string> CreatedDifferences(const store::PasteMeta& want,
                                            const store::PasteMeta& got);
/// Every field that differs, the ones a paste's life changes too (views, moderation, deletion).
std::vector<std::string> AllDifferences(const store::PasteMeta& want, const store::PasteMeta& got);
/// The fields of a notice (found on both sides by its sender and reference) that differ: its
/// category, times, open count and pastes (each with its outcome and whether it is open).
std::vector<std::string> NoticeDifferences(const store::Notice& want, const store::Notice& got);
/// The same report: network, reason, note, time and whether the creator made it.
bool SameReport(const store::AbuseReport& a, const store::AbuseReport& b);

}  // namespace sluice::app::migrate
