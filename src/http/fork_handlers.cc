// What is made from a paste and its parent: the create page filled from a paste (GET /new?from=ID),
// a fork's changes against its parent (GET /ID/diff) and a Markdown paste rendered
// (GET /ID/rendered), the last two rendered in the workers like a highlight.
#include <fmt/format.h>

#include "handlers.h"
#include "pages.h"
#include "paste_answers.h"
#include "prepared_answers.h"
#include "presenter.h"
#include "sluice/common/html.h"
#include "sluice/render/diff.h"
#include "sluice/render/highlighter.h"

namespace sluice::http {

namespace {

// A burn (counted) paste's text is given by its claim only, so neither a fork nor a derived view
// is made of it.
Reply RefuseUnforkable(const Status& forkable) { return Reply::Refuse(forkable.error(), 409); }

// The ETag of a derived view: the paste and its parent are immutable, so the id and the kind
// name the page (full quality only: the plain rung carries none, as the view's).
Reply DerivedReply(const Reader& reader, DerivedView& page, const render::RenderedView& view,
                   std::string_view etag, int64_t expires_at, int64_t max_age) {
  page.rung_tag = view.Tag();
  page.plain = view.rung == admission::Rung::kPlain;
  page.too_large = view.reason == admission::RungReason::kTooLarge;
  page.cut = view.cut;
  page.shown_lines = view.lines;
  page.html = *view.html;
  std::vector<Header> fields;
  std::string cache_control = "no-cache";
  // A diff holds its parent's text, and a delete of the parent purges the parent's links, not
  // its forks': every reuse of one is revalidated here, where a parent gone answers 404 first.
  if (!page.plain || page.too_large) {
    fields.push_back({"ETag", std::string(etag)});
    if (page.kind == DerivedView::Kind::kMarkdown) {
      cache_control = fmt::format("public, max-age={}", max_age);
    }
  }
  PreparedPage prepared =
      SharedPage(page.id, page.kind == DerivedView::Kind::kDiff ? "diff" : "markdown", reader.lang,
                 expires_at, view, std::move(fields), [&] { return DerivedPage(reader, page); });
  Reply reply = Reply::Html(200, "");
  reply.shared_body = std::move(prepared.page);
  reply.fixed = std::move(prepared.fields);
  reply.Set("Cache-Control", std::move(cache_control));
  return reply;
}

}  // namespace

// The most escaped text the fork page carries; a larger paste is loaded by the page's script.
constexpr size_t kPrefillPageBytes = size_t{256} << 10;

awaitable<Reply> HandleNewFrom(const Request& req, Context& ctx) {
  const std::optional<std::string> from = req.Query("from");
  if (!from || from->empty())
    co_return Reply::Html(
        200, IndexPage(ReaderOf(req), DefaultTtlName(ctx), ctx.service.options()->max_paste_bytes,
                       nullptr, ctx.service.ProofOfWorkOn()));
  auto reading = ctx.service.Read(req.client, *from);
  auto paste = co_await std::move(reading);
  if (!paste.ok()) co_return Reply::Refuse(paste.error());
  if (Status forkable = service::PasteService::CheckForkable(paste->meta); !forkable.ok()) {
    co_return RefuseUnforkable(forkable);
  }
  std::string language = req.Query("lang").value_or("");
  if (language != "text" && !render::IsLanguage(language)) language.clear();
  const std::string parent = paste->meta.id.str();
  CreatePrefill prefill{*paste->body, parent, language};
  // The page is made per request and never kept (no-store), so what it carries is bounded here:
  // escaped, a paste can be six times its size.
  if (HtmlEscapedSize(*paste->body) > kPrefillPageBytes) {
    prefill.text = {};
    prefill.load_from = fmt::format("/raw/{}", parent);
    prefill.size_bytes = paste->body->size();
  }
  Reply reply = Reply::Html(
      200, IndexPage(ReaderOf(req), DefaultTtlName(ctx), ctx.service.options()->max_paste_bytes,
                     &prefill, ctx.service.ProofOfWorkOn()));
  // The page holds the text: as private as the paste's own view is public, but never kept.
  reply.Set("Cache-Control", "no-store");
  co_return reply;
}

awaitable<Reply> HandleDiff(const Request& req, Context& ctx) {
  auto reading = ctx.service.Read(req.client, req.id);
  auto child = co_await std::move(reading);
  if (!child.ok()) co_return Reply::Refuse(child.error());
  if (Status forkable = service::PasteService::CheckForkable(child->meta); !forkable.ok()) {
    co_return RefuseUnforkable(forkable);
  }
  if (!child->meta.parent) {
    co_return Reply::Refuse(ErrorCode::kNotFound,
                            "this paste was not forked from another, so it has no diff",
                            "no_parent");
  }
  const std::string parent_id = child->meta.parent->str();
  auto reading_parent = ctx.service.Read(req.client, parent_id);
  auto parent = co_await std::move(reading_parent);
  if (!parent.ok()) {
    if (parent.error().code == ErrorCode::kNotFound) {
      co_return Reply::Refuse(ErrorCode::kNotFound,
                              "the paste this one was forked from has expired or was deleted",
                              "parent_gone");
    }
    co_return Reply::Refuse(parent.error());
  }
  if (Status forkable = service::PasteService::CheckForkable(parent->meta); !forkable.ok()) {
    co_return RefuseUnforkable(forkable);
  }
  const std::string id = child->meta.id.str();
  const Reader reader = ReaderOf(req);
  const std::string etag = PageEtag(fmt::format("{}-diff", id), reader.lang);
  const std::string_view if_none_match = req.headers.Get("If-None-Match");
  const int64_t expires_at = std::min(child->meta.expires_at, parent->meta.expires_at);
  const int64_t max_age = std::max<int64_t>(0, expires_at - ctx.clock.UnixSeconds());
  if (!if_none_match.empty() && if_none_match.find(etag) != std::string_view::npos) {
    co_return std::move(Reply::Empty(304).Set("ETag", etag).Set("Cache-Control", "no-cache"));
  }
  // The diff is computed in a worker, as a highlight is: its cost grows with the product of
  // the lines that differ, which for two large pastes is far past the render timeout.
  auto job = std::make_shared<const std::string>(
      render::EncodeDiffJob(*parent->body, *child->body, parent_id, id));
  auto rendering = ctx.renderer.RenderDerived(id, std::move(job), render::kDiffJob, child->body,
                                              req.client.Key());
  const render::RenderedView view = co_await std::move(rendering);
  DerivedView page;
  page.kind = DerivedView::Kind::kDiff;
  page.id = id;
  page.parent = parent_id;
  auto paying = ctx.service.AdmitPageBytes(req.client.Key(), view.html->size());
  if (Status paid = co_await std::move(paying); !paid.ok()) co_return Reply::Refuse(paid.error());
  co_return DerivedReply(reader, page, view, etag, expires_at, max_age);
}

awaitable<Reply> HandleRendered(const Request& req, Context& ctx) {
  auto reading = ctx.service.Read(req.client, req.id);
  auto paste = co_await std::move(reading);
  if (!paste.ok()) co_return Reply::Refuse(paste.error());
  if (Status forkable = service::PasteService::CheckForkable(paste->meta); !forkable.ok()) {
    co_return RefuseUnforkable(forkable);
  }
  const std::string id = paste->meta.id.str();
  const Reader reader = ReaderOf(req);
  const std::string etag = PageEtag(fmt::format("{}-rendered", id), reader.lang);
  const int64_t max_age = std::max<int64_t>(0, paste->meta.expires_at - ctx.clock.UnixSeconds());
  const std::string_view if_none_match = req.headers.Get("If-None-Match");
  if (!if_none_match.empty() && if_none_match.find(etag) != std::string_view::npos) {
    co_return std::move(Reply::Empty(304)
                            .Set("ETag", etag)
                            .Set("Cache-Control", fmt::format("public, max-age={}", max_age)));
  }
  auto rendering = ctx.renderer.RenderDerived(id, paste->body, render::kMarkdownJob, paste->body,
                                              req.client.Key());
  const render::RenderedView view = co_await std::move(rendering);
  DerivedView page;
  page.kind = DerivedView::Kind::kMarkdown;
  page.id = id;
  auto paying = ctx.service.AdmitPageBytes(req.client.Key(), view.html->size());
  if (Status paid = co_await std::move(paying); !paid.ok()) co_return Reply::Refuse(paid.error());
  co_return DerivedReply(reader, page, view, etag, paste->meta.expires_at, max_age);
}

}  // namespace sluice::http
