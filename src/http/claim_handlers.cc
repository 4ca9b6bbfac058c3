// The one reading of a counted paste (burn after reading, max_views): the API's claim and the
// browser's confirmation POST. A GET never claims (read_handlers.cc answers the confirmation).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "handlers.h"
#include "pages.h"
#include "paste_answers.h"
#include "presenter.h"
#include "sluice/render/view_bounds.h"

namespace sluice::http {

namespace {

// The one reading of a burn paste: JSON (the read API's fields and content) or, for a browser's
// confirmation POST, the paste page in plain text (never highlighted: the render cache keeps
// renderings by id, and a burned text must not outlive its reading there).
enum class ClaimAs { kJson, kRaw, kPage };

awaitable<Reply> Claim(const Request& req, Context& ctx, ClaimAs as) {
  auto claiming = ctx.service.Claim(req.client, req.id);
  auto paste = co_await std::move(claiming);
  if (!paste.ok()) {
    if (paste.error().reason == "not_burn") co_return Reply::Refuse(paste.error(), 409);
    co_return Reply::Refuse(paste.error());
  }
  const std::string_view id = paste->meta.id.view();
  // The views still to give after this one (0: this was the last, the paste is gone).
  const uint32_t left = paste->meta.views_left > 0 ? paste->meta.views_left - 1 : 0;
  Reply reply;
  if (paste->meta.encrypted && as != ClaimAs::kJson) {
    // The envelope, never a page: only the reader's script can open it (its page claims through
    // the JSON API, src/http/assets.cc, crypt.js).
    reply = Reply::Json(200, "");
    reply.shared_body = paste->body;
    reply.Set("Content-Security-Policy", "default-src 'none'; sandbox");
    reply.Set("X-Content-Type-Options", "nosniff");
  } else if (as == ClaimAs::kPage) {
    render::RenderedView view;
    auto lines = std::make_shared<const render::Rendering>(
        render::PlainRendering(*paste->body, ctx.renderer.options()->bounds));
    view.html = std::shared_ptr<const std::string>(lines, &lines->html);
    view.lines = lines->lines;
    view.cut = lines->cut;
    PasteView page =
        MakePasteView(ctx, id, "text", paste->meta.expires_at, paste->body->size(), view);
    page.rung_tag = "plain; burn after reading";
    page.raw_url = "/";  // the raw link answers the confirmation (or 404), never the text
    page.reportable = left > 0;
    page.views_left = left;
    reply = Reply::Html(200, PastePage(ReaderOf(req), page));
  } else if (as == ClaimAs::kRaw) {
    reply = Reply::Text(200, "");
    reply.shared_body = paste->body;
    reply.Set("Content-Security-Policy", "default-src 'none'; sandbox");
    reply.Set("X-Content-Type-Options", "nosniff");
    reply.Set("Sluice-Views-Left", std::to_string(left));
  } else {
    nlohmann::json j = MetaJson(ctx, *paste, true);
    j["burn"] = true;
    j["views_left"] = left;
    reply = Reply::Json(200, JsonText(j));
  }
  reply.Set("Cache-Control", "no-store");
  co_return reply;
}

}  // namespace

awaitable<Reply> HandleClaimApi(const Request& req, Context& ctx) {
  // Refused before the claim: a mistyped format must not spend the paste's one reading.
  Result<std::string> format = FormatAsked(req, {"raw"});
  if (!format.ok()) co_return Reply::Refuse(format.error());
  co_return co_await Claim(req, ctx, *format == "raw" ? ClaimAs::kRaw : ClaimAs::kJson);
}

awaitable<Reply> HandleClaimForm(const Request& req, Context& ctx) {
  return Claim(req, ctx, req.WantsHtml() ? ClaimAs::kPage : ClaimAs::kRaw);
}

}  // namespace sluice::http
