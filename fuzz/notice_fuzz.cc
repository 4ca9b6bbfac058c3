// libFuzzer target: a notice as it reaches the server (the JSON of POST /admin/notices) and as it
// reaches `sluice admin notice --email` (an e-mail read by GMime), both from bytes anyone can
// write. The first byte picks the parser. Whatever either accepts holds what it promises: ids
// only, each once, at most kMaxNoticePastes, a sender, a reference and a known category.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sluice/notice/email.h"
#include "sluice/service/notice.h"
#include "sluice/store/paste.h"

namespace {

void CheckIds(const std::vector<std::string>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!sluice::store::PasteId::Parse(ids[i])) std::abort();
    if (std::find(ids.begin() + static_cast<std::ptrdiff_t>(i) + 1, ids.end(), ids[i]) !=
        ids.end()) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto notice = sluice::service::ParseNoticeJson(text, 1'800'000'000);
    if (!notice.ok()) return 0;
    CheckIds(notice->pastes);
    if (notice->pastes.empty() || notice->pastes.size() > sluice::service::kMaxNoticePastes ||
        notice->sender.empty() || notice->reference.empty() ||
        std::find(sluice::service::kNoticeCategories.begin(),
                  sluice::service::kNoticeCategories.end(),
                  notice->category) == sluice::service::kNoticeCategories.end()) {
      std::abort();
    }
    return 0;
  }
  auto mail = sluice::notice::ParseNoticeEmail(text);
  if (!mail.ok()) return 0;
  if (mail->sender.find('@') == std::string::npos) std::abort();
  CheckIds(mail->pastes);
  return 0;
}
