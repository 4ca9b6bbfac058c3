// What several paste routes answer alike (paste_answers.h).
#include "paste_answers.h"

#include <fmt/format.h>

#include "sluice/render/highlighter.h"

namespace sluice::http {

namespace {

std::string LanguageLabel(std::string_view language) {
  for (const render::Language& l : render::Languages()) {
    if (l.name == language) return l.label;
  }
  return "";  // plain text: the page says so in its language
}

}  // namespace

std::string PasteUrl(const Context& ctx, std::string_view id) {
  return fmt::format("{}/{}", ctx.base_url, id);
}
std::string PasteUrl(const Context& ctx, std::string_view id, std::string_view language) {
  if (language != "text" && !render::IsLanguage(language)) return PasteUrl(ctx, id);
  return fmt::format("{}/{}?lang={}", ctx.base_url, id, language);
}

std::string PasteUrl(const Context& ctx, std::string_view id, std::string_view language,
                     std::string_view extension) {
  if (extension.empty()) return PasteUrl(ctx, id, language);
  return fmt::format("{}/{}.{}", ctx.base_url, id, extension);
}

PasteView MakePasteView(const Context& ctx, std::string_view id, std::string_view language,
                        int64_t expires_at, uint64_t size, const render::RenderedView& view,
                        const std::optional<store::PasteId>& parent) {
  PasteView page;
  if (parent) page.parent = parent->str();
  page.markdown = view.language == "markdown";
  page.id = std::string(id);
  page.url = PasteUrl(ctx, id, language);
  page.raw_url = fmt::format("/raw/{}", id);
  page.expires_at = expires_at;
  page.size_bytes = size;
  page.language_label = LanguageLabel(view.language);
  page.rung_tag = view.Tag();
  page.too_large = view.reason == admission::RungReason::kTooLarge;
  page.shed = view.rung == admission::Rung::kPlain && !view.language.empty() && !page.too_large;
  page.cut = view.cut;
  page.shown_lines = view.lines;
  page.lines = *view.html;
  return page;
}

nlohmann::json MetaJson(const Context& ctx, const service::CachedPaste& paste, bool content) {
  const std::string id = paste.meta.id.str();
  nlohmann::json j = {{"id", id},
                      {"size", paste.meta.size_bytes},
                      {"created_at", FormatUnixTime(paste.meta.created_at)},
                      {"expires_at", FormatUnixTime(paste.meta.expires_at)},
                      {"url", PasteUrl(ctx, id)},
                      {"raw_url", fmt::format("{}/raw/{}", ctx.base_url, id)},
                      {"api_url", fmt::format("{}/api/v1/pastes/{}", ctx.base_url, id)}};
  if (paste.meta.encrypted) {
    // The server cannot know what the text is; the envelope is `content`.
    j["encrypted"] = true;
  } else {
    // No language is stored (it travels in links); what the view would detect is the best answer.
    const std::string language = render::DetectLanguage(*paste.body);
    if (!language.empty()) j["language"] = language;
  }
  if (paste.meta.parent) j["parent"] = paste.meta.parent->str();
  if (content) j["content"] = *paste.body;
  return j;
}

}  // namespace sluice::http
