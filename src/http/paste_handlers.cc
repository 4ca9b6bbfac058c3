// The paste routes: create (API, JSON, form, curl, haste), raw, view (negotiated), the JSON
// read, haste's document read, and the two ways to delete.
#include <fmt/format.h>

#include <array>
#include <charconv>
#include <nlohmann/json.hpp>

#include "field_text.h"
#include "file_language.h"
#include "handlers.h"
#include "json_create.h"
#include "multipart.h"
#include "pages.h"
#include "presenter.h"
#include "sluice/common/html.h"
#include "sluice/common/identity_memo.h"
#include "sluice/render/diff.h"
#include "sluice/render/highlighter.h"
#include "sluice/render/view_bounds.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

// Multipart framing (boundaries, part headers) allowed on top of the paste size limit.
constexpr uint64_t kMultipartAllowance = 16 * 1024;
// The JSON envelope's keys, quotes and escapes allowed on top of the limit, decided like the
// multipart allowance from the headers alone. Escapes can grow a text up to six times (\u00XX), so
// a text near the limit with many escapes is refused: the raw route has no overhead at all.
constexpr uint64_t kJsonAllowance = 16 * 1024;
// A delete token is 22 characters (src/service/ids.cc); a link's is quoted back up to this.
constexpr size_t kQuotedTokenBytes = 128;

std::string PasteUrl(const Context& ctx, std::string_view id) {
  return fmt::format("{}/{}", ctx.base_url, id);
}
// The chosen language travels in the link: nothing about it is stored with the paste.
std::string PasteUrl(const Context& ctx, std::string_view id, std::string_view language) {
  if (language != "text" && !render::IsLanguage(language)) return PasteUrl(ctx, id);
  return fmt::format("{}/{}?lang={}", ctx.base_url, id, language);
}

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

// A link with the file name's extension (/ID.rs) when it names a language, as haste's links do.
std::string PasteUrl(const Context& ctx, std::string_view id, std::string_view language,
                     std::string_view extension) {
  if (extension.empty()) return PasteUrl(ctx, id, language);
  return fmt::format("{}/{}.{}", ctx.base_url, id, extension);
}

std::string LanguageLabel(std::string_view language) {
  for (const render::Language& l : render::Languages()) {
    if (l.name == language) return l.label;
  }
  return "Plain text";
}

// The paste page of a rendered view, for a read and for a browser's create alike.
PasteView MakePasteView(const Context& ctx, std::string_view id, std::string_view language,
                        int64_t expires_at, uint64_t size, const render::RenderedView& view,
                        const std::optional<store::PasteId>& parent = std::nullopt) {
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
  service::CreateHeaders headers{req.content_length, req.chunked};
  // Size, rate limits and in-flight caps, decided from the headers alone. A refused body is
  // never read, so the connection cannot be reused.
  const uint64_t allowance = boundary ? kMultipartAllowance : json ? kJsonAllowance : 0;
  auto admitting = ctx.service.AdmitCreate(req.client.Key(), headers, allowance);
  auto ticket = co_await std::move(admitting);
  const bool network_full = !ticket.ok() && ticket.error().reason == "create_slots_per_network";
  if (!ticket.ok() && (network_full || ticket.error().reason == "create_slots")) {
    // Every slot taken, or every unit of this client's network's share: the slowest body in
    // flight (of that network, for its share), under the rate of a full cap, gives its slot up to
    // this create (docs/overload.md, "Pressure"), kept for it rather than for whoever asks first.
    // A refusal spent no tokens, so asking again costs nothing twice.
    service::CreateSlotPromise promise = network_full
                                             ? ctx.service.PromiseNetworkSlot(req.client.Key())
                                             : ctx.service.PromiseCreateSlot();
    auto cutting = req.body->CutSlowestBody(network_full);
    if (co_await std::move(cutting)) {
      auto again = ctx.service.AdmitCreate(req.client.Key(), headers, allowance, &promise);
      ticket = co_await std::move(again);
    }
  }
  if (!ticket.ok()) co_return Reply::Refuse(ticket.error()).Closing();
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
    reply = Reply::Html(
        201, BurnCreatedPage(
                 url, fmt::format("{}/delete/{}?token={}", ctx.base_url, id, created->delete_token),
                 views));
  } else if (browser) {
    auto rendering = ctx.renderer.Render(id, text, in.language, req.client.Key());
    const render::RenderedView view = co_await std::move(rendering);
    PasteView page = MakePasteView(ctx, id, in.language, created->expires_at, text->size(), view,
                                   store::PasteId::Parse(in.parent));
    page.created = CreatedNotice{
        fmt::format("{}/delete/{}?token={}", ctx.base_url, id, created->delete_token)};
    reply = Reply::Html(201, PastePage(page));
    reply.Set("X-Sluice-Rung", view.Tag());
  } else {
    reply = Reply::Text(201, url + "\n");
    reply.Set("X-Delete-Token", created->delete_token);
  }
  reply.Set("Location", PasteUrl(ctx, id, in.language, extension));
  reply.Set("Cache-Control", "no-store");
  co_return reply;
}

// kView answers the page to a browser and the text to everyone else (curl, wget, scripts), so
// `curl URL` prints the paste; kDocument is haste's {"key", "data"}; kMeta the JSON API's read.
enum class ReadAs { kRaw, kView, kDocument, kMeta };

// What a hot read answers again and again, made once per paste and event-loop thread instead of
// per request: the raw answer's fixed fields, and the page of a view. A read then builds only what
// varies (Cache-Control's max-age, the request id), and the page is shared rather than formatted
// afresh (bench/results/profile/README.md): a reader who stops reading holds a reference to it,
// not a copy. Per thread, so a hit takes no lock; direct-mapped and small, so it bounds itself.
//
// Keyed by the identity of an immutable string the caches already hold (a paste's body, a
// rendering), as sluice/common/identity_memo.h explains.
constexpr size_t kPreparedSlots = 64;
// A page larger than this is formatted per request; at most kPreparedPageBudget is held per thread.
// The limit is above the largest page of the default bounds (render::ViewBounds, 2 MiB of lines,
// plus the page around them), so with them every view's page is shared.
constexpr size_t kPreparedPageLimit = size_t{3} << 20;
constexpr size_t kPreparedPageBudget = size_t{24} << 20;

size_t SlotOf(const void* key) { return IdentitySlot(key, kPreparedSlots); }

std::shared_ptr<const FixedFields> RawFields(std::string_view id,
                                             const std::shared_ptr<const std::string>& body,
                                             const std::string& etag) {
  struct Slot {
    std::weak_ptr<const std::string> body;
    const std::string* seen = nullptr;
    std::string id;
    std::shared_ptr<const FixedFields> fields;
  };
  thread_local std::array<Slot, kPreparedSlots> slots;
  Slot& slot = slots[SlotOf(body.get())];
  if (IdentifiesString(slot.body, slot.seen, body.get()) && slot.id == id) return slot.fields;
  slot.body = body;
  slot.seen = body.get();
  slot.id = std::string(id);
  slot.fields = MakeFixedFields({{"Content-Security-Policy", "default-src 'none'; sandbox"},
                                 {"X-Content-Type-Options", "nosniff"},
                                 {"ETag", etag}},
                                false);
  return slot.fields;
}

// The page and fixed fields of a view or a derived view: everything in them follows from the
// paste (immutable), the page asked for (`kind`: the language, "diff" or "markdown"), the shared
// rendering and its rung tag (which decides the ETag).
struct PreparedPage {
  std::shared_ptr<const std::string> page;
  std::shared_ptr<const FixedFields> fields;
};

template <class MakePage>
PreparedPage SharedPage(std::string_view id, std::string_view kind, int64_t expires_at,
                        const render::RenderedView& view, std::vector<Header> fields,
                        MakePage make_page) {
  struct Slot {
    std::weak_ptr<const std::string> html;
    const std::string* seen = nullptr;
    std::string id;
    std::string kind;
    std::string tag;
    int64_t expires_at = 0;
    PreparedPage prepared;
  };
  thread_local std::array<Slot, kPreparedSlots> slots;
  thread_local size_t held_bytes = 0;
  const std::string tag = view.Tag();
  Slot& slot = slots[SlotOf(view.html.get())];
  if (IdentifiesString(slot.html, slot.seen, view.html.get()) && slot.id == id &&
      slot.kind == kind && slot.tag == tag && slot.expires_at == expires_at) {
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
        Slot{view.html, view.html.get(), std::string(id), std::string(kind), tag, expires_at, made};
  }
  return made;
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
    Reply reply = Reply::Html(200, EncryptedPastePage(view));
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
      co_return std::move(
          Reply::Html(200, BurnConfirmPage(paste->meta.id.view(), paste->meta.views_left))
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
  const std::string etag = raw ? fmt::format("\"{}\"", id) : fmt::format("\"{}-{}\"", id, language);
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
    return PastePage(MakePasteView(ctx, id, language, paste->meta.expires_at, paste->body->size(),
                                   view, paste->meta.parent));
  };
  const bool full_quality = view.rung != admission::Rung::kPlain || view.language.empty() ||
                            view.reason == admission::RungReason::kTooLarge;
  std::vector<Header> fields = {{"Vary", "Accept"}};
  if (full_quality) fields.push_back({"ETag", etag});
  PreparedPage prepared =
      SharedPage(id, language, paste->meta.expires_at, view, std::move(fields), page);
  Reply reply = Reply::Html(200, "");
  reply.shared_body = std::move(prepared.page);
  reply.fixed = std::move(prepared.fields);
  reply.Set("Cache-Control", full_quality ? std::move(cache_control) : std::string("no-cache"));
  co_return reply;
}

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
    page.language_label = "Plain text";
    page.raw_url = "/";  // the raw link answers the confirmation (or 404), never the text
    page.reportable = left > 0;
    page.views_left = left;
    reply = Reply::Html(200, PastePage(page));
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

awaitable<Reply> HandleCreateApi(const Request& req, Context& ctx) {
  return Create(req, ctx, CreateFrom::kApi);
}

awaitable<Reply> HandleCreateForm(const Request& req, Context& ctx) {
  return Create(req, ctx, CreateFrom::kForm);
}

awaitable<Reply> HandleCreateHaste(const Request& req, Context& ctx) {
  return Create(req, ctx, CreateFrom::kHaste);
}

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

awaitable<Reply> HandleClaimApi(const Request& req, Context& ctx) {
  const bool raw = req.Query("format").value_or("") == "raw";
  return Claim(req, ctx, raw ? ClaimAs::kRaw : ClaimAs::kJson);
}

awaitable<Reply> HandleClaimForm(const Request& req, Context& ctx) {
  return Claim(req, ctx, req.WantsHtml() ? ClaimAs::kPage : ClaimAs::kRaw);
}

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
    co_return std::move(
        Reply::Html(200, DeleteConfirmPage(req.id, token)).Set("Cache-Control", "no-store"));
  }
  const std::string token = FormValue(req.small_body, "token").value_or("");
  co_return co_await Delete(req, ctx, token, Reply::Html(200, DeletedPage(req.id)));
}

}  // namespace sluice::http

namespace sluice::http {

namespace {

// A burn (counted) paste's text is given by its claim only, so neither a fork nor a derived view
// is made of it.
Reply RefuseUnforkable(const Status& forkable) { return Reply::Refuse(forkable.error(), 409); }

// The ETag of a derived view: the paste and its parent are immutable, so the id and the kind
// name the page (full quality only: the plain rung carries none, as the view's).
Reply DerivedReply(DerivedView& page, const render::RenderedView& view, std::string_view etag,
                   int64_t expires_at, int64_t max_age) {
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
      SharedPage(page.id, page.kind == DerivedView::Kind::kDiff ? "diff" : "markdown", expires_at,
                 view, std::move(fields), [&] { return DerivedPage(page); });
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
    co_return Reply::Html(200,
                          IndexPage(DefaultTtlName(ctx), ctx.service.options()->max_paste_bytes));
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
      200, IndexPage(DefaultTtlName(ctx), ctx.service.options()->max_paste_bytes, &prefill));
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
  const std::string etag = fmt::format("\"{}-diff\"", id);
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
  co_return DerivedReply(page, view, etag, expires_at, max_age);
}

awaitable<Reply> HandleRendered(const Request& req, Context& ctx) {
  auto reading = ctx.service.Read(req.client, req.id);
  auto paste = co_await std::move(reading);
  if (!paste.ok()) co_return Reply::Refuse(paste.error());
  if (Status forkable = service::PasteService::CheckForkable(paste->meta); !forkable.ok()) {
    co_return RefuseUnforkable(forkable);
  }
  const std::string id = paste->meta.id.str();
  const std::string etag = fmt::format("\"{}-rendered\"", id);
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
  co_return DerivedReply(page, view, etag, paste->meta.expires_at, max_age);
}

}  // namespace sluice::http
