// The two ways to delete a paste: the API (its token as a bearer token) and the created page's
// delete link (a GET asks, the form's POST deletes).
#include <fmt/format.h>

#include "field_text.h"
#include "handlers.h"
#include "pages.h"
#include "paste_answers.h"
#include "presenter.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

// A delete token is 22 characters (src/service/ids.cc); a link's is quoted back up to this.
constexpr size_t kQuotedTokenBytes = 128;

awaitable<Reply> Delete(const Request& req, Context& ctx, std::string_view token, Reply done) {
  const std::string client_key = req.client.Key();
  auto deleting = ctx.service.Delete(req.id, token, client_key);
  Status deleted = co_await std::move(deleting);
  if (!deleted.ok()) co_return Reply::Refuse(deleted.error());
  ctx.renderer.Forget(req.id);
  done.Set("Cache-Control", "no-store");
  co_return done;
}

bool StartsWithIgnoringCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

awaitable<Reply> HandleDelete(const Request& req, Context& ctx) {
  const std::string_view auth = req.headers.Get("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() <= kBearer.size() || !StartsWithIgnoringCase(auth, kBearer)) {
    Reply refused = Reply::Refuse(ErrorCode::kInvalidArgument,
                                  "send the delete token as 'Authorization: Bearer TOKEN'",
                                  "token_required", 401);
    refused.Set("WWW-Authenticate", "Bearer");
    co_return refused;
  }
  co_return co_await Delete(req, ctx, auth.substr(kBearer.size()), Reply::Empty(204));
}

// The delete link of the created page: a GET only asks (a link preview or prefetch must never
// delete), the form's POST deletes.
awaitable<Reply> HandleDeleteForm(const Request& req, Context& ctx) {
  if (!store::PasteId::Parse(req.id)) {
    // Like every route naming a paste: a malformed id is no paste, and gets no page to confirm.
    co_return Reply::Refuse(ErrorCode::kNotFound,
                            "no paste with this id (it may have expired or been deleted)",
                            "not_found");
  }
  if (req.method != Method::kPost) {
    // The link's token goes into the page's form; a real one (22 base64url characters) passes
    // unchanged, and bytes that could be no token cannot make the page invalid UTF-8.
    const std::string token =
        service::QuotedClientText(req.Query("token").value_or(""), kQuotedTokenBytes);
    co_return std::move(Reply::Html(200, DeleteConfirmPage(ReaderOf(req), req.id, token))
                            .Set("Cache-Control", "no-store"));
  }
  const std::string token = FormValue(req.small_body, "token").value_or("");
  co_return co_await Delete(req, ctx, token, Reply::Html(200, DeletedPage(ReaderOf(req), req.id)));
}

}  // namespace sluice::http
