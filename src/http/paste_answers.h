// What several paste routes answer alike: a paste's links, the page's view of a rendering, and the
// JSON of a paste's metadata (src/http/*_handlers.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "handlers.h"
#include "pages.h"
#include "sluice/render/view_renderer.h"

namespace sluice::http {

/// The paste's link, "BASE/ID".
std::string PasteUrl(const Context& ctx, std::string_view id);
/// The link with the chosen language ("BASE/ID?lang=python"): nothing about it is stored with the
/// paste. A name that is no language gives the bare link.
std::string PasteUrl(const Context& ctx, std::string_view id, std::string_view language);
/// A link with the file name's extension (/ID.rs) when it names a language, as haste's links do.
std::string PasteUrl(const Context& ctx, std::string_view id, std::string_view language,
                     std::string_view extension);

/// The paste page of a rendered view, for a read and for a browser's create alike.
PasteView MakePasteView(const Context& ctx, std::string_view id, std::string_view language,
                        int64_t expires_at, uint64_t size, const render::RenderedView& view,
                        const std::optional<store::PasteId>& parent = std::nullopt);

/// The JSON API's fields of a paste, with its text when `content`.
nlohmann::json MetaJson(const Context& ctx, const service::CachedPaste& paste, bool content);

}  // namespace sluice::http
