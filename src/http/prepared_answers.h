// What a hot read answers again and again, made once per paste and event-loop thread instead of
// per request: the raw answer's fixed fields, and the page of a view. A read then builds only what
// varies (Cache-Control's max-age, the request id), and the page is shared rather than formatted
// afresh (bench/results/profile/README.md): a reader who stops reading holds a reference to it,
// not a copy. Per thread, so a hit takes no lock; direct-mapped and small, so it bounds itself.
//
// Keyed by the identity of an immutable string the caches already hold (a paste's body, a
// rendering), as sluice/common/identity_memo.h explains.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "page_catalog.h"
#include "presenter.h"
#include "sluice/common/identity_memo.h"
#include "sluice/render/view_renderer.h"

namespace sluice::http {

constexpr size_t kPreparedSlots = 64;
// A page larger than this is formatted per request; at most kPreparedPageBudget is held per thread.
// The limit is above the largest page of the default bounds (render::ViewBounds, 2 MiB of lines,
// plus the page around them), so with them every view's page is shared.
constexpr size_t kPreparedPageLimit = size_t{3} << 20;
constexpr size_t kPreparedPageBudget = size_t{24} << 20;

inline size_t PreparedSlotOf(const void* key) { return IdentitySlot(key, kPreparedSlots); }

/// The fixed fields of a raw read of `body` (the paste `id`, whose ETag is `etag`).
std::shared_ptr<const FixedFields> RawFields(std::string_view id,
                                             const std::shared_ptr<const std::string>& body,
                                             const std::string& etag);

// The page and fixed fields of a view or a derived view: everything in them follows from the
// paste (immutable), the page asked for (`kind`: the language, "diff" or "markdown"), the
// reader's language (`lang`: the page's words; a German page must never reach an English reader),
// the shared rendering and its rung tag (which decides the ETag).
struct PreparedPage {
  std::shared_ptr<const std::string> page;
  std::shared_ptr<const FixedFields> fields;
};

template <class MakePage>
PreparedPage SharedPage(std::string_view id, std::string_view kind, i18n::Lang lang,
                        int64_t expires_at, const render::RenderedView& view,
                        std::vector<Header> fields, MakePage make_page) {
  struct Slot {
    std::weak_ptr<const std::string> html;
    const std::string* seen = nullptr;
    std::string id;
    std::string kind;
    std::string tag;
    i18n::Lang lang = i18n::Lang::kEn;
    int64_t expires_at = 0;
    PreparedPage prepared;
  };
  thread_local std::array<Slot, kPreparedSlots> slots;
  thread_local size_t held_bytes = 0;
  const std::string tag = view.Tag();
  // A paste read in two languages takes two slots, not turns at one.
  Slot& slot =
      slots[(PreparedSlotOf(view.html.get()) + static_cast<size_t>(lang)) % kPreparedSlots];
  if (IdentifiesString(slot.html, slot.seen, view.html.get()) && slot.id == id &&
      slot.kind == kind && slot.lang == lang && slot.tag == tag && slot.expires_at == expires_at) {
    return slot.prepared;
  }
  fields.insert(fields.begin(), Header{"X-Sluice-Rung", tag});
  PreparedPage made{std::make_shared<const std::string>(make_page()),
                    MakeFixedFields(std::move(fields), true)};
  const size_t old_bytes = slot.prepared.page ? slot.prepared.page->size() : 0;
  const size_t new_bytes = made.page->size();
  if (new_bytes <= kPreparedPageLimit &&
      held_bytes - old_bytes + new_bytes <= kPreparedPageBudget) {
    held_bytes = held_bytes - old_bytes + new_bytes;
    slot =
        Slot{view.html, view.html.get(), std::string(id), std::string(kind), tag, lang, expires_at,
             made};
  }
  return made;
}

}  // namespace sluice::http
