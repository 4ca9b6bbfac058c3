// The read routes of a paste: raw (GET /raw/ID), the view (GET /ID, the page to a browser and the
// text to everyone else), haste's document read and the JSON API's read.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "file_language.h"
#include "handlers.h"
#include "pages.h"
#include "paste_answers.h"
#include "prepared_answers.h"
#include "presenter.h"
#include "sluice/render/highlighter.h"

namespace sluice::http {

namespace {

// kView answers the page to a browser and the text to everyone else (curl, wget, scripts), so
// `curl URL` prints the paste; kDocument is haste's {"key", "data"}; kMeta the JSON API's read.
enum class ReadAs { kRaw, kView, kDocument, kMeta };

// An encrypted paste, read by a person (the page whose script decrypts it with the link's key)
// or by anything else (the envelope itself, as JSON, for `sluice get`). The server never renders
// or inspects it: the cheapest rung there is, by nature.
Reply ReadEncrypted(const Request& req, Context& ctx, const service::CachedPaste& paste,
                    ReadAs as) {
  const std::string_view id = paste.meta.id.view();
  const int64_t max_age = std::max<int64_t>(0, paste.meta.expires_at - ctx.clock.UnixSeconds());
  const bool negotiated = as == ReadAs::kView;
  if (negotiated && req.WantsHtml()) {
    EncryptedView view{std::string(id), paste.meta.expires_at, paste.meta.size_bytes,
                       paste.meta.burn, ctx.service.options()->max_paste_bytes};
    Reply reply = Reply::Html(200, EncryptedPastePage(ReaderOf(req), view));
    reply.Set("Vary", "Accept").Set("X-Robots-Tag", "noindex");
    // A burn paste's page must not be kept: the claim it offers works once.
    reply.Set("Cache-Control", paste.meta.burn ? std::string("no-store")
                                               : fmt::format("public, max-age={}", max_age));
    return reply;
  }
  if (paste.meta.burn) {
    Reply refused = Reply::Refuse(
        ErrorCode::kInvalidArgument,
        fmt::format("this paste burns after reading: POST {}/api/v1/pastes/{}/claim to read it, "
                    "once",
                    ctx.base_url, id),
        "burn_after_reading", 409);
    if (negotiated) refused.Set("Vary", "Accept");
    return refused;
  }
  const std::string etag = fmt::format("\"{}\"", id);
  const std::string_view if_none_match = req.headers.Get("If-None-Match");
  Reply reply = !if_none_match.empty() &&
                        (if_none_match == "*" || if_none_match.find(etag) != std::string_view::npos)
                    ? Reply::Empty(304)
                    : Reply::Json(200, "");
  if (reply.status == 200) {
    reply.shared_body = paste.body;
    reply.Set("Content-Security-Policy", "default-src 'none'; sandbox");
    reply.Set("X-Content-Type-Options", "nosniff");
    if (req.Query("download")) {
      reply.Set("Content-Disposition", fmt::format("attachment; filename=\"{}.json\"", id));
    }
  }
  if (negotiated) reply.Set("Vary", "Accept");
  reply.Set("X-Robots-Tag", "noindex").Set("ETag", etag);
  reply.Set("Cache-Control", fmt::format("public, max-age={}", max_age));
  return reply;
}

awaitable<Reply> Read(const Request& req, Context& ctx, ReadAs as) {
  // haste's links end in the extension of a language (/ID.py); so may a raw or haste read's.
  std::string_view requested = req.id;
  std::string link_language;
  if (const size_t dot = requested.find('.'); dot != std::string_view::npos) {
    link_language = LanguageForExtension(requested.substr(dot + 1));
    requested = requested.substr(0, dot);
  }
  auto reading = ctx.service.Read(req.client, requested);
  auto paste = co_await std::move(reading);
  if (!paste.ok()) co_return Reply::Refuse(paste.error());
  if (paste->meta.encrypted && (as == ReadAs::kView || as == ReadAs::kRaw)) {
    co_return ReadEncrypted(req, ctx, *paste, as);
  }
  if (paste->meta.burn) {
    // A GET never burns: a chat's link preview or a prefetch must not eat the one reading. A
    // browser at the paste's link confirms with a POST; everything else is told where to POST.
    if (as == ReadAs::kView && req.WantsHtml()) {
      co_return std::move(Reply::Html(200, BurnConfirmPage(ReaderOf(req), paste->meta.id.view(),
                                                           paste->meta.views_left))
                              .Set("Cache-Control", "no-store")
                              .Set("Vary", "Accept"));
    }
    Reply refused = Reply::Refuse(
        ErrorCode::kInvalidArgument,
        paste->meta.views_left > 1
            ? fmt::format("this paste is shown {} more times, each to one reader: POST "
                          "{}/api/v1/pastes/{}/claim to read it",
                          paste->meta.views_left, ctx.base_url, paste->meta.id.view())
            : fmt::format("this paste burns after reading: POST {}/api/v1/pastes/{}/claim to "
                          "read it, once",
                          ctx.base_url, paste->meta.id.view()),
        "burn_after_reading", 409);
    if (as == ReadAs::kView) refused.Set("Vary", "Accept");
    co_return refused;
  }
  if (as == ReadAs::kDocument || as == ReadAs::kMeta) {
    nlohmann::json j = as == ReadAs::kMeta
                           ? MetaJson(ctx, *paste, req.Query("content").value_or("0") == "1")
                           : nlohmann::json{{"key", paste->meta.id.str()}, {"data", *paste->body}};
    co_return std::move(Reply::Json(200, JsonText(j)).Set("Cache-Control", "no-cache"));
  }
  const bool negotiated = as == ReadAs::kView;
  const bool raw = as == ReadAs::kRaw || !req.WantsHtml();
  // Only names from the list go further (links, the ETag): the query is the client's to write.
  std::string language = req.Query("lang").value_or(link_language.empty() ? "auto" : link_language);
  if (language != "text" && !render::IsLanguage(language)) language = "auto";
  // The view's ETag names full quality only: a plain-rung answer carries none, so a visitor shed
  // under load revalidates into colours once the load is gone.
  const std::string_view id = paste->meta.id.view();
  const Reader reader = ReaderOf(req);
  const std::string etag =
      raw ? fmt::format("\"{}\"", id) : PageEtag(fmt::format("{}-{}", id, language), reader.lang);
  const int64_t max_age = std::max<int64_t>(0, paste->meta.expires_at - ctx.clock.UnixSeconds());
  std::string cache_control = fmt::format("public, max-age={}", max_age);
  const std::string_view if_none_match = req.headers.Get("If-None-Match");
  if (!if_none_match.empty() &&
      (if_none_match == "*" || if_none_match.find(etag) != std::string_view::npos)) {
    Reply reply = Reply::Empty(304);
    if (negotiated) reply.Set("Vary", "Accept");
    co_return std::move(reply.Set("ETag", etag).Set("Cache-Control", std::move(cache_control)));
  }
  if (raw) {
    Reply reply = Reply::Text(200, "");
    reply.headers.reserve(3);
    reply.fixed = RawFields(id, paste->body, etag);
    if (negotiated) reply.Set("Vary", "Accept");
    reply.shared_body = paste->body;
    if (req.Query("download")) {
      reply.Set("Content-Disposition", fmt::format("attachment; filename=\"{}.txt\"", id));
    }
    reply.Set("Cache-Control", std::move(cache_control));
    co_return reply;
  }
  const std::string id_text(id);
  auto rendering = ctx.renderer.Render(id_text, paste->body, language, req.client.Key());
  const render::RenderedView view = co_await std::move(rendering);
  auto paying = ctx.service.AdmitPageBytes(req.client.Key(), view.html->size());
  if (Status paid = co_await std::move(paying); !paid.ok()) co_return Reply::Refuse(paid.error());
  const auto page = [&] {
    return PastePage(reader, MakePasteView(ctx, id, language, paste->meta.expires_at,
                                           paste->body->size(), view, paste->meta.parent));
  };
  const bool full_quality = view.rung != admission::Rung::kPlain || view.language.empty() ||
                            view.reason == admission::RungReason::kTooLarge;
  std::vector<Header> fields = {{"Vary", "Accept"}};
  if (full_quality) fields.push_back({"ETag", etag});
  PreparedPage prepared =
      SharedPage(id, language, reader.lang, paste->meta.expires_at, view, std::move(fields), page);
  Reply reply = Reply::Html(200, "");
  reply.shared_body = std::move(prepared.page);
  reply.fixed = std::move(prepared.fields);
  reply.Set("Cache-Control", full_quality ? std::move(cache_control) : std::string("no-cache"));
  co_return reply;
}

}  // namespace

awaitable<Reply> HandleRaw(const Request& req, Context& ctx) {
  return Read(req, ctx, ReadAs::kRaw);
}

awaitable<Reply> HandleView(const Request& req, Context& ctx) {
  return Read(req, ctx, ReadAs::kView);
}

awaitable<Reply> HandleDocument(const Request& req, Context& ctx) {
  return Read(req, ctx, ReadAs::kDocument);
}

awaitable<Reply> HandleReadApi(const Request& req, Context& ctx) {
  return Read(req, ctx, ReadAs::kMeta);
}

}  // namespace sluice::http
