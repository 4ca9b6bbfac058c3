// The errors a paste's reads and deletes answer (paste_service_read.cc, paste_service_delete.cc).
// Private to sluice_service; named for the paste so that no other file's own helpers clash with
// them in a unity batch.
#pragma once

#include "sluice/common/result.h"
#include "sluice/store/paste.h"

namespace sluice::service {

inline Error PasteNotFound() {
  return MakeError(ErrorCode::kNotFound,
                   "no paste with this id (it may have expired or been deleted)", "not_found");
}

inline Error PasteWithheld(store::Moderation m) {
  if (m == store::Moderation::kTakenDown) {
    return MakeError(ErrorCode::kWithheld, "this paste was taken down after a report",
                     "taken_down");
  }
  if (m == store::Moderation::kWithheldNotice) {
    // Its own reason, apart from the community's vote: a notice is the operator's obligation,
    // not visitors' reports (docs/moderation.md, "Notices").
    return MakeError(ErrorCode::kWithheld,
                     "this paste is withheld while the operator reviews a notice about it",
                     "withheld_notice");
  }
  return MakeError(ErrorCode::kWithheld,
                   "this paste is withheld while the operator reviews reports about it",
                   "under_review");
}

}  // namespace sluice::service
