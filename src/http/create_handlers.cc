// The create routes: the API (raw body or JSON), the browser's form (multipart, also curl -F),
// and haste's POST /documents. Each runs the service's AdmitCreate, then reads the body, then
// Create, so limits, caps and statuses are those of any create.
#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "field_text.h"
#include "file_language.h"
#include "handlers.h"
#include "json_create.h"
#include "multipart.h"
#include "pages.h"
#include "paste_answers.h"
#include "presenter.h"
#include "sluice/render/highlighter.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

// Multipart framing (boundaries, part headers) allowed on top of the paste size limit.
constexpr uint64_t kMultipartAllowance = 16 * 1024;
// The JSON envelope's keys, quotes and escapes allowed on top of the limit, decided like the
// multipart allowance from the headers alone. Escapes can grow a text up to six times (\u00XX), so
// a text near the limit with many escapes is refused: the raw route has no overhead at all.
constexpr uint64_t kJsonAllowance = 16 * 1024;

// Browsers send a text area's line breaks as CRLF whatever the person typed (HTML's form
// submission rules); a file part keeps its bytes.
std::string FromTextArea(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out += text[i];
  }
  return out;
}

// What a create carries besides its text, from the query, the Sluice-TTL header and form fields.
struct CreateInput {
  std::string text;
  std::string ttl;
  std::string language;
  /// From a file part's filename or the Sluice-Filename header.
  std::string filename;
  /// Burn after reading: ?burn=1, the form's checkbox, or JSON "burn": true.
  bool burn = false;
  /// An encrypted envelope (docs/encryption.md): ?encrypted=1, the form's "encrypted" field (set
  /// by the page's script), or JSON "encrypted": true.
  bool encrypted = false;
  /// Expire after N views: ?max_views=N, the form's field, or JSON "max_views": N. Unset, burn
  /// means 1.
  std::optional<uint64_t> max_views{};
  /// The paste this one is forked from: ?parent=ID, the form's hidden field, or JSON "parent".
  std::string parent{};
  /// The first max_views text that is no number, for the refusal.
  std::optional<std::string> bad_max_views{};

  /// The views the service is asked for: 0 for an ordinary paste.
  uint64_t Views() const { return max_views.value_or(burn ? 1 : 0); }
};

// A max_views value: digits only, at least 1 ("" asks for none: an empty form field).
void ReadMaxViews(std::string_view text, CreateInput& in) {
  if (text.empty()) return;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n == 0) {
    if (!in.bad_max_views) in.bad_max_views = std::string(text);
    return;
  }
  in.max_views = n;
}

// "1", "true", "on" (an HTML checkbox's value when it has none) and "yes" ask for it.
bool IsYes(std::string_view v) { return v == "1" || v == "true" || v == "on" || v == "yes"; }

std::optional<Reply> ReadForm(std::string body, std::string_view boundary, CreateInput& in) {
  auto parts = ParseMultipart(body, boundary);
  if (!parts) {
    return Reply::Refuse(ErrorCode::kInvalidArgument, "malformed multipart body", "bad_multipart");
  }
  std::optional<std::string> content;
  for (const FormPart& part : *parts) {
    // Text everywhere in a create is UTF-8, the form's names too: a name that is not is a broken
    // client's, refused before anything else is made of it.
    if (!service::IsValidUtf8(part.name)) {
      return Reply::Refuse(ErrorCode::kInvalidArgument,
                           fmt::format("the form field name '{}' is not valid UTF-8",
                                       service::QuotedClientText(part.name)),
                           "bad_multipart");
    }
    if (part.filename && !service::IsValidUtf8(*part.filename)) {
      return Reply::Refuse(ErrorCode::kInvalidArgument,
                           fmt::format("the file name '{}' of the form field '{}' is not valid "
                                       "UTF-8",
                                       service::QuotedClientText(*part.filename),
                                       service::QuotedClientText(part.name)),
                           "bad_filename");
    }
    if (part.name == "file" && !content) {
      content = std::string(part.content);
      if (part.filename) in.filename = *part.filename;
    }
    if (part.name == "content" && !content) content = FromTextArea(part.content);
    if (part.name == "ttl" && in.ttl.empty()) in.ttl = std::string(part.content);
    if (part.name == "lang") in.language = std::string(part.content);
    if (part.name == "burn") in.burn = IsYes(part.content);
    if (part.name == "encrypted") in.encrypted = IsYes(part.content);
    if (part.name == "max_views") ReadMaxViews(part.content, in);
    if (part.name == "parent") in.parent = std::string(TrimBlanks(part.content));
  }
  if (!content) {
    return Reply::Refuse(ErrorCode::kInvalidArgument, "the form has no 'file' or 'content' field",
                         "bad_multipart");
  }
  in.text = std::move(*content);
  return std::nullopt;
}

// The JSON create's fields replace what the query and headers said.
std::optional<Reply> ReadJson(CreateInput& in) {
  auto decoded = DecodeJsonCreate(in.text);
  if (!decoded.ok()) return Reply::Refuse(decoded.error());
  in.text = std::move(decoded->content);
  if (decoded->ttl) in.ttl = std::move(*decoded->ttl);
  if (decoded->language) in.language = std::move(*decoded->language);
  if (decoded->burn) in.burn = true;
  if (decoded->encrypted) in.encrypted = true;
  if (decoded->max_views) in.max_views = decoded->max_views;
  if (decoded->parent) in.parent = std::move(*decoded->parent);
  return std::nullopt;
}

// kHaste: haste's POST /documents, a raw body answered with {"key": ID}.
enum class CreateFrom { kApi, kForm, kHaste };

// A multipart envelope that this route cannot take apart, refused from the headers before any
// of the body is read: stored as it came, it would publish the envelope (and the sender's local
// file name) as the paste.
std::optional<Reply> RefuseEnvelope(std::string_view content_type, CreateFrom from,
                                    bool has_boundary) {
  if (!IsMultipart(content_type) || has_boundary) return std::nullopt;
  if (from != CreateFrom::kForm) {
    return Reply::Refuse(ErrorCode::kInvalidArgument,
                         "this route takes the paste as the raw body, not a multipart form; send "
                         "the text as the body, or the form to POST /",
                         "unsupported_media_type", 415)
        .Closing();
  }
  return Reply::Refuse(ErrorCode::kInvalidArgument,
                       "a multipart body needs multipart/form-data with a boundary parameter",
                       "bad_multipart")
      .Closing();
}

awaitable<Reply> Create(const Request& req, Context& ctx, CreateFrom from) {
  const std::string_view content_type = req.headers.Get("Content-Type");
  const auto boundary =
      from == CreateFrom::kForm ? MultipartBoundary(content_type) : std::optional<std::string>();
  if (auto refused = RefuseEnvelope(content_type, from, boundary.has_value())) {
    co_return std::move(*refused);
  }
  const bool json = from == CreateFrom::kApi && IsJsonContentType(content_type);
  service::CreateHeaders headers{req.content_length, req.chunked, {}};
  // A solved proof of work rides in a header, or in the query for a browser's form, whose body is
  // read only after the create is admitted (docs/overload.md, "Proof of work").
  headers.proof = req.headers.Get("Sluice-Proof");
  if (headers.proof.empty()) headers.proof = req.Query("proof").value_or("");
  // Who may create, size, rate limits and in-flight caps, decided from the headers alone. A
  // refused body is never read, so the connection cannot be reused.
  const uint64_t allowance = boundary ? kMultipartAllowance : json ? kJsonAllowance : 0;
  Result<admission::Creator> creator = CreatorOf(req, ctx);
  if (!creator.ok()) co_return RefuseCreate(creator.error());
  // At a full cap, the slowest body in flight under the rate of a full cap may give its slot up
  // to this create (docs/overload.md, "Pressure").
  const service::FreeCreateSlot cut_slowest_body = [&req](bool own_network) {
    return req.body->CutSlowestBody(own_network);
  };
  auto admitting = ctx.service.AdmitCreate(*creator, headers, allowance, &cut_slowest_body);
  auto ticket = co_await std::move(admitting);
  if (!ticket.ok()) co_return RefuseCreate(ticket.error());
  auto reading = req.body->Read(*headers.declared_length);
  Result<std::string> body = co_await std::move(reading);
  if (!body.ok()) {
    const bool slow = body.error().code == ErrorCode::kDeadlineExceeded;
    co_return Reply::Refuse(body.error(), slow ? 408 : 0).Closing();
  }
  CreateInput in{std::move(*body), req.Query("ttl").value_or(""),
                 req.Query("lang").value_or("auto"),
                 std::string(req.headers.Get("Sluice-Filename"))};
  if (in.ttl.empty()) in.ttl = std::string(req.headers.Get("Sluice-TTL"));
  in.burn = IsYes(req.Query("burn").value_or(""));
  in.encrypted = IsYes(req.Query("encrypted").value_or(""));
  ReadMaxViews(req.Query("max_views").value_or(""), in);
  in.parent = req.Query("parent").value_or("");
  if (boundary) {
    if (auto refused = ReadForm(std::move(in.text), *boundary, in)) co_return std::move(*refused);
  } else if (!service::IsValidUtf8(in.filename)) {
    co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                            fmt::format("the Sluice-Filename '{}' is not valid UTF-8",
                                        service::QuotedClientText(in.filename)),
                            "bad_filename");
  }
  if (json) {
    if (auto refused = ReadJson(in)) co_return std::move(*refused);
  }
  if (in.bad_max_views) {
    co_return Reply::Refuse(
        ErrorCode::kInvalidArgument,
        fmt::format("max_views must be a whole number from 1 to {}, not '{}'", service::kMaxViews,
                    service::QuotedClientText(*in.bad_max_views)),
        "invalid_max_views");
  }
  if (in.Views() > service::kMaxViews) {
    co_return Reply::Refuse(
        ErrorCode::kInvalidArgument,
        fmt::format("max_views may be at most {}, not {}", service::kMaxViews, in.Views()),
        "invalid_max_views");
  }
  const auto views = static_cast<uint32_t>(in.Views());
  // A file name's language is carried by the link's extension, unless a language was chosen. A
  // plain-text name (notes.txt) keeps the bare link: the view would be plain either way.
  std::string extension;
  if (in.encrypted) {
    // Nothing of the text is in the link: a language or an extension would say what it is.
    in.language = "auto";
    in.filename.clear();
  }
  if (in.language == "auto") {
    const std::string_view ext = FileExtension(in.filename);
    const std::string language = LanguageForExtension(ext);
    if (render::IsLanguage(language) &&
        ext.find_first_not_of("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "abcdefghijklmnopqrstuvwxyz") == std::string_view::npos) {
      extension = std::string(ext);
      in.language = language;
    }
  }
  // An encrypted create from a form is answered as to a script: the page that sent it holds the
  // key, and the server has nothing of the paste it could show.
  const bool browser = from == CreateFrom::kForm && req.WantsHtml() && !in.encrypted;
  // The page after a browser create shows the paste, so it keeps the text the service consumes.
  auto text = browser ? std::make_shared<const std::string>(in.text) : nullptr;
  auto creating = ctx.service.Create(std::move(*ticket), std::move(in.text), in.ttl, views,
                                     in.parent, in.encrypted);
  auto created = co_await std::move(creating);
  if (!created.ok()) co_return Reply::Refuse(created.error());
  if (creator->token && ctx.creator_tokens) ctx.creator_tokens->NoteCreate(creator->token->id);
  const std::string id = created->id.str();
  const std::string url =
      extension.empty() ? PasteUrl(ctx, id) : PasteUrl(ctx, id, in.language, extension);
  Reply reply;
  if (from == CreateFrom::kHaste) {
    // haste answers 200 (not 201), and its clients read only "key".
    reply = Reply::Json(200, JsonText({{"key", id}}));
    reply.Set("X-Delete-Token", created->delete_token);
  } else if (from == CreateFrom::kApi) {
    nlohmann::json j = {{"id", id},
                        {"url", url},
                        {"raw_url", fmt::format("{}/raw/{}", ctx.base_url, id)},
                        {"delete_url", fmt::format("{}/api/v1/pastes/{}", ctx.base_url, id)},
                        {"expires_at", FormatUnixTime(created->expires_at)},
                        {"delete_token", created->delete_token}};
    if (!in.parent.empty()) j["parent"] = in.parent;
    if (views > 0) {
      j["burn"] = true;
      j["max_views"] = views;
      j["views_left"] = views;
      j["claim_url"] = fmt::format("{}/api/v1/pastes/{}/claim", ctx.base_url, id);
    }
    if (in.encrypted) j["encrypted"] = true;
    reply = Reply::Json(201, JsonText(j));
  } else if (browser && views > 0) {
    // No rendering: the render cache must never hold a counted paste's text (src/render/).
    reply = Reply::Html(201, BurnCreatedPage(ReaderOf(req), url,
                                             fmt::format("{}/delete/{}?token={}", ctx.base_url, id,
                                                         created->delete_token),
                                             views));
  } else if (browser) {
    auto rendering = ctx.renderer.Render(id, text, in.language, req.client.Key());
    const render::RenderedView view = co_await std::move(rendering);
    PasteView page = MakePasteView(ctx, id, in.language, created->expires_at, text->size(), view,
                                   store::PasteId::Parse(in.parent));
    page.created = CreatedNotice{
        fmt::format("{}/delete/{}?token={}", ctx.base_url, id, created->delete_token)};
    reply = Reply::Html(201, PastePage(ReaderOf(req), page));
    reply.Set("X-Sluice-Rung", view.Tag());
  } else {
    reply = Reply::Text(201, url + "\n");
    reply.Set("X-Delete-Token", created->delete_token);
  }
  reply.Set("Location", PasteUrl(ctx, id, in.language, extension));
  reply.Set("Cache-Control", "no-store");
  co_return reply;
}

}  // namespace

// A refused create: a refusal that a credential would lift is a 401, which names how to give one
// (RFC 9110 11.6.1; a bad token as RFC 6750 3.1 says), docs/admission.md, "Who may create".
Reply RefuseCreate(const Error& error) {
  if (error.reason == "create_access_credential") {
    Reply reply = Reply::Refuse(error, 401).Closing();
    reply.Set("WWW-Authenticate", "Bearer realm=\"sluice\"");
    return reply;
  }
  if (error.reason == "invalid_token") {
    Reply reply = Reply::Refuse(error, 401).Closing();
    reply.Set("WWW-Authenticate", "Bearer realm=\"sluice\", error=\"invalid_token\"");
    return reply;
  }
  return Reply::Refuse(error).Closing();
}

Result<admission::Creator> CreatorOf(const Request& req, const Context& ctx) {
  admission::Creator creator;
  creator.address_key = req.client.Key();
  const std::vector<std::string_view> auths = req.headers.All("Authorization");
  std::optional<std::string_view> bearer;
  for (std::string_view auth : auths) {
    if (auto credentials = BearerCredentials(auth)) bearer = credentials;
  }
  if (bearer) {
    // The secret is never quoted back nor logged: a message names only what was wrong with it.
    // Two fields are two credentials, of which the one meant cannot be told.
    if (auths.size() == 1 && ctx.creator_tokens) creator.token = ctx.creator_tokens->Find(*bearer);
    if (!creator.token) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "the bearer token is not a creator token in force on this server (unknown, "
                       "revoked or expired); create without it, or ask the operator for another",
                       "invalid_token");
    }
    return creator;  // the token names the creator: a forward-auth name is not read beside it
  }
  if (std::optional<std::string> user = req.client.ForwardedUser()) {
    if (!admission::IsValidForwardedUser(*user)) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          fmt::format("the forward-auth name '{}' is not 1 to {} letters, digits or "
                      "'.', '_', '@', '+', '-'",
                      service::QuotedClientText(*user), admission::kMaxForwardedUserBytes),
          "bad_forwarded_user");
    }
    creator.forwarded_user = std::move(*user);
  }
  return creator;
}

awaitable<Reply> HandleCreateApi(const Request& req, Context& ctx) {
  return Create(req, ctx, CreateFrom::kApi);
}

awaitable<Reply> HandleCreateForm(const Request& req, Context& ctx) {
  return Create(req, ctx, CreateFrom::kForm);
}

awaitable<Reply> HandleCreateHaste(const Request& req, Context& ctx) {
  return Create(req, ctx, CreateFrom::kHaste);
}

}  // namespace sluice::http
