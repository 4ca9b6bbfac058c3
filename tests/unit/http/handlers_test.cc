// The HTTP edge without a socket: the route table, the presenter, and the handlers on a real
// PasteService over the in-memory stores, fed requests built from strings.
#include "../../../src/http/handlers.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "../../../src/http/presenter.h"
#include "../../../src/http/routes.h"
#include "../../support/fake_request.h"
#include "../../support/run_sync.h"
#include "sluice/service/ids.h"
#include "sluice/store/backends.h"

namespace sluice::http {
namespace {

using testing::FakeBody;
using testing::FakeHeaders;
using testing::RunSync;

struct FixedClient final : service::ClientKeySource {
  std::string Key() const override { return "10.0.0.1"; }
};

// ---- the route table ------------------------------------------------------------------------

TEST(RouteTableTest, EachPathFindsItsRouteAndId) {
  const RouteTable table(DefaultRoutes());
  const RouteMatch raw = table.Match(Method::kGet, "/raw/AAAAAAAAAAAA");
  ASSERT_NE(raw.route, nullptr);
  EXPECT_EQ(raw.label, "raw");
  EXPECT_EQ(raw.id, "AAAAAAAAAAAA");
  const RouteMatch view = table.Match(Method::kHead, "/AAAAAAAAAAAA");
  ASSERT_NE(view.route, nullptr);
  EXPECT_EQ(view.label, "view");
  EXPECT_EQ(table.Match(Method::kGet, "/healthz").label, "healthz");
  EXPECT_EQ(table.Match(Method::kPost, "/").label, "create_form");
  EXPECT_EQ(table.Match(Method::kGet, "/").label, "index");
  EXPECT_EQ(table.Match(Method::kGet, "/static/app.js").id, "app.js");
  EXPECT_EQ(table.Match(Method::kDelete, "/api/v1/pastes/AAAAAAAAAAAA").id, "AAAAAAAAAAAA");
}

TEST(RouteTableTest, AKnownPathWithTheWrongMethodNamesTheMethodsItTakes) {
  const RouteTable table(DefaultRoutes());
  const RouteMatch root = table.Match(Method::kDelete, "/");
  EXPECT_EQ(root.route, nullptr);
  ASSERT_TRUE(root.allowed);
  EXPECT_EQ(root.allowed->Allow(), "GET, HEAD, POST");
  EXPECT_EQ(root.label, "index");
  const RouteMatch api = table.Match(Method::kGet, "/api/v1/pastes");
  ASSERT_TRUE(api.allowed);
  EXPECT_EQ(api.allowed->Allow(), "POST");
  EXPECT_EQ(table.Match(Method::kPut, "/raw/x").allowed->Allow(), "GET, HEAD");
}

TEST(RouteTableTest, UnknownPathsAreLabelledOtherAndNeverDecoded) {
  const RouteTable table(DefaultRoutes());
  for (std::string_view path : {"/api/v1/pastes/a/b", "/raw/a/b", "/a/b", "/delete/a/b"}) {
    const RouteMatch m = table.Match(Method::kGet, path);
    EXPECT_EQ(m.route, nullptr) << path;
    EXPECT_FALSE(m.allowed) << path;
    EXPECT_EQ(m.label, "other") << path;
    EXPECT_EQ(table.Labels()[m.label_index], "other") << path;
  }
  // An encoded slash stays inside the one segment it arrived in.
  EXPECT_EQ(table.Match(Method::kGet, "/raw/..%2F..%2Fetc").id, "..%2F..%2Fetc");
}

TEST(RouteTableTest, LabelsAreDistinctAndEveryMatchIndexesItsOwn) {
  const RouteTable table(DefaultRoutes());
  const auto& labels = table.Labels();
  EXPECT_EQ(labels.back(), "other");
  for (std::string_view path : {"/", "/raw/x", "/x", "/metrics", "/status", "/api/v1/status"}) {
    const RouteMatch m = table.Match(Method::kGet, path);
    EXPECT_EQ(labels[m.label_index], m.label) << path;
  }
}

TEST(RouteTableTest, NoPasteIdIsMintedThatAOneSegmentPageShadows) {
  // A page at "/name" comes before "/{id}" in the table, so a paste whose id were "name" could
  // not be viewed at its link: every such name must be one MintPasteId skips.
  size_t shadowing = 0;
  for (const Route& route : DefaultRoutes()) {
    const std::string_view name = route.pattern.substr(1);
    if (name.find('/') != std::string_view::npos || name.find('{') != std::string_view::npos ||
        !store::PasteId::Parse(name)) {
      continue;
    }
    ++shadowing;
    EXPECT_TRUE(service::IsTakenByAPage(name)) << route.pattern;
    const RouteTable table(DefaultRoutes());
    EXPECT_EQ(table.Match(Method::kGet, route.pattern).label, route.label) << route.pattern;
  }
  EXPECT_GE(shadowing, 1u) << "/transparency is such a page: the check above checked nothing";
  EXPECT_FALSE(service::IsTakenByAPage("AAAAAAAAAAAA"));
}

// ---- the presenter --------------------------------------------------------------------------

TEST(PresenterTest, ARefusalIsJsonWithItsRetryAfterAndRateLimitFields) {
  Error e = MakeError(ErrorCode::kResourceExhausted, "slow down", "ip_create_count");
  e.retry_after_seconds = 7;
  e.limit = LimitInfo{"ip_create_count", 10, 60, 0, 7};
  const Reply r = Present(Reply::Refuse(e), false, 1'700'000'000);
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.content_type, "application/json");
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["reason"], "ip_create_count");
  EXPECT_EQ(j["error"], "slow down");
  EXPECT_EQ(j["retry_after"], 7);
  EXPECT_EQ(r.Get("Retry-After"), "7");
  EXPECT_EQ(r.Get("Cache-Control"), "no-store");
  EXPECT_EQ(r.Get("RateLimit-Policy"), "\"ip_create_count\";q=10;w=60");
  EXPECT_FALSE(r.error);
}

TEST(PresenterTest, ABrowserGetsTheSameRefusalAsAPageWithItsStatusAndHeaders) {
  Error e = MakeError(ErrorCode::kUnavailable, "storage is slow", "storage_unavailable");
  e.retry_after_seconds = 9;
  const Reply r = Present(Reply::Refuse(e), true, 1'700'000'000);
  EXPECT_EQ(r.status, 503u);
  EXPECT_TRUE(r.content_type.starts_with("text/html"));
  EXPECT_NE(r.body.find("storage is slow"), std::string::npos);
  EXPECT_EQ(r.Get("Retry-After"), "9");
  EXPECT_FALSE(r.Get("Content-Security-Policy").empty());
  EXPECT_EQ(r.Get("X-Content-Type-Options"), "nosniff");
}

TEST(PresenterTest, AStatusTheErrorCodeCannotSayIsKept) {
  const Reply r =
      Present(Reply::Refuse(ErrorCode::kInvalidArgument, "m", "method_not_allowed", 405), false, 0);
  EXPECT_EQ(r.status, 405u);
  EXPECT_EQ(nlohmann::json::parse(r.body)["reason"], "method_not_allowed");
}

TEST(PresenterTest, AnErrorWithoutReasonIsNamedByItsCode) {
  const Reply r = Present(Reply::Refuse(MakeError(ErrorCode::kNotFound, "gone")), false, 0);
  EXPECT_EQ(nlohmann::json::parse(r.body)["reason"], ErrorCodeName(ErrorCode::kNotFound));
}

// ---- the handlers ---------------------------------------------------------------------------

class HandlersTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore(&clock_);
  service::PasteCache cache_{1 << 20};
  service::AdmissionControl admission_{Limits(), clock_, metrics_};
  service::PasteService service_{*meta_, *blobs_, cache_, admission_, clock_, metrics_, Options()};
  render::ViewRenderer renderer_{RendererOptions(), clock_, metrics_};
  Context ctx_{service_, renderer_, metrics_, clock_, "https://paste.example", {}, {}};
  FixedClient client_;

  static service::AdmissionOptions Limits() {
    service::AdmissionOptions o;
    o.ip_create_count = o.global_create_count = {1e6, 1e6};
    o.ip_create_bytes = o.global_create_bytes = {1e12, 1e12};
    o.ip_read = {1e6, 1e6};
    return o;
  }
  static service::ServiceOptions Options() {
    service::ServiceOptions o;
    o.max_paste_bytes = 1000;
    return o;
  }
  static render::ViewRendererOptions RendererOptions() {
    render::ViewRendererOptions o;
    o.worker_command = {SLUICE_HIGHLIGHT_WORKER};
    return o;
  }

  Reply Call(Handler handler, Method method, std::string path, const HeaderFields& headers,
             BodyReader* body = nullptr, std::string_view small_body = {}) {
    const RouteTable table(DefaultRoutes());
    const size_t q = path.find('?');
    const std::string_view p = std::string_view(path).substr(0, q);
    const RouteMatch m = table.Match(method, p);
    const std::optional<uint64_t> length =
        body
            ? std::optional<uint64_t>(std::string(headers.Get("Content-Length")).empty()
                                          ? 0
                                          : std::stoull(std::string(headers.Get("Content-Length"))))
            : std::nullopt;
    Request req{method,  path,
                p,       q == std::string::npos ? "" : std::string_view(path).substr(q + 1),
                m.id,    headers,
                client_, length,
                false,   small_body,
                body};
    return RunSync(handler(req, ctx_));
  }

  nlohmann::json CreateApi(std::string text) {
    FakeBody body(text);
    const FakeHeaders headers{{"Content-Length", std::to_string(text.size())}};
    const Reply r = Call(HandleCreateApi, Method::kPost, "/api/v1/pastes", headers, &body);
    EXPECT_EQ(r.status, 201u) << r.body << (r.error ? r.error->message : "");
    return nlohmann::json::parse(r.body);
  }
};

TEST_F(HandlersTest, AnApiCreateAnswersLinksOnThePublicUrlAndReadsBack) {
  const auto doc = CreateApi("hello, handlers");
  const std::string id = doc["id"];
  EXPECT_EQ(doc["url"], "https://paste.example/" + id);
  EXPECT_EQ(doc["raw_url"], "https://paste.example/raw/" + id);
  EXPECT_FALSE(doc["delete_token"].get<std::string>().empty());
  const FakeHeaders none{};
  const Reply raw = Call(HandleRaw, Method::kGet, "/raw/" + id, none);
  EXPECT_EQ(raw.status, 200u);
  ASSERT_TRUE(raw.shared_body);
  EXPECT_EQ(*raw.shared_body, "hello, handlers");
  EXPECT_EQ(raw.Get("ETag"), "\"" + id + "\"");
  EXPECT_EQ(raw.Get("Cache-Control"), "public, max-age=604800");
}

TEST_F(HandlersTest, ARevalidationWithTheSameEtagIs304WithoutABody) {
  const std::string id = CreateApi("cache me")["id"];
  const FakeHeaders revalidate{{"If-None-Match", "\"" + id + "\""}};
  const Reply r = Call(HandleRaw, Method::kGet, "/raw/" + id, revalidate);
  EXPECT_EQ(r.status, 304u);
  EXPECT_EQ(r.body_size(), 0u);
  EXPECT_TRUE(r.content_type.empty());
}

TEST_F(HandlersTest, ACreateOverTheLimitIsRefusedFromItsHeadersAndItsBodyNeverRead) {
  FakeBody body(std::string(2000, 'x'));
  const FakeHeaders headers{{"Content-Length", "2000"}};
  const Reply r = Call(HandleCreateApi, Method::kPost, "/api/v1/pastes", headers, &body);
  EXPECT_EQ(r.status, 413u);
  EXPECT_TRUE(r.close);
  EXPECT_EQ(body.reads, 0);
}

TEST_F(HandlersTest, ABodyThatStopsArrivingIs408AndClosesTheConnection) {
  FakeBody body(MakeError(ErrorCode::kDeadlineExceeded, "timed out", "incomplete_body"));
  const FakeHeaders headers{{"Content-Length", "10"}};
  const Reply r = Call(HandleCreateApi, Method::kPost, "/api/v1/pastes", headers, &body);
  EXPECT_EQ(r.status, 408u);
  EXPECT_TRUE(r.close);
  EXPECT_EQ(body.reads, 1);
  EXPECT_EQ(body.last_limit, 10u);
}

TEST_F(HandlersTest, CurlsFormCreateAnswersTheLinkAndTheDeleteToken) {
  const std::string form =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n"
      "from curl\r\n--XyZ--\r\n";
  FakeBody body(form);
  const FakeHeaders headers{{"Content-Length", std::to_string(form.size())},
                            {"Content-Type", "multipart/form-data; boundary=XyZ"},
                            {"Accept", "*/*"}};
  const Reply r = Call(HandleCreateForm, Method::kPost, "/", headers, &body);
  ASSERT_EQ(r.status, 201u);
  EXPECT_TRUE(r.body.starts_with("https://paste.example/"));
  EXPECT_FALSE(r.Get("X-Delete-Token").empty());
  const std::string id = r.body.substr(r.body.rfind('/') + 1, 12);
  const Reply raw = Call(HandleRaw, Method::kGet, "/raw/" + id, FakeHeaders{});
  ASSERT_TRUE(raw.shared_body);
  EXPECT_EQ(*raw.shared_body, "from curl");
}

TEST_F(HandlersTest, AFormWithoutContentIsABadRequestThatKeepsTheConnection) {
  const std::string form =
      "--b\r\nContent-Disposition: form-data; name=\"ttl\"\r\n\r\n1h\r\n--b--\r\n";
  FakeBody body(form);
  const FakeHeaders headers{{"Content-Length", std::to_string(form.size())},
                            {"Content-Type", "multipart/form-data; boundary=b"}};
  const Reply r = Call(HandleCreateForm, Method::kPost, "/", headers, &body);
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.error->reason, "bad_multipart");
  EXPECT_FALSE(r.close);
}

TEST_F(HandlersTest, ADeleteNeedsABearerTokenAndThenThePasteIsGone) {
  const auto doc = CreateApi("delete me");
  const std::string id = doc["id"];
  const Reply anonymous =
      Call(HandleDelete, Method::kDelete, "/api/v1/pastes/" + id, FakeHeaders{});
  EXPECT_EQ(anonymous.status, 401u);
  EXPECT_EQ(anonymous.Get("WWW-Authenticate"), "Bearer");
  const FakeHeaders wrong{{"Authorization", "Bearer nope"}};
  EXPECT_EQ(Call(HandleDelete, Method::kDelete, "/api/v1/pastes/" + id, wrong).status, 404u);
  const FakeHeaders right{{"Authorization", "bearer " + doc["delete_token"].get<std::string>()}};
  EXPECT_EQ(Call(HandleDelete, Method::kDelete, "/api/v1/pastes/" + id, right).status, 204u);
  EXPECT_EQ(Call(HandleRaw, Method::kGet, "/raw/" + id, FakeHeaders{}).status, 404u);
}

TEST_F(HandlersTest, TheDeleteLinkOnlyAsksAndItsFormDeletes) {
  const auto doc = CreateApi("form delete");
  const std::string id = doc["id"];
  const std::string token = doc["delete_token"];
  const Reply ask =
      Call(HandleDeleteForm, Method::kGet, "/delete/" + id + "?token=" + token, FakeHeaders{});
  EXPECT_EQ(ask.status, 200u);
  EXPECT_EQ(Call(HandleRaw, Method::kGet, "/raw/" + id, FakeHeaders{}).status, 200u);
  const std::string form = "token=" + token;
  const Reply done =
      Call(HandleDeleteForm, Method::kPost, "/delete/" + id, FakeHeaders{}, nullptr, form);
  EXPECT_EQ(done.status, 200u);
  EXPECT_EQ(done.Get("Cache-Control"), "no-store");
  EXPECT_EQ(Call(HandleRaw, Method::kGet, "/raw/" + id, FakeHeaders{}).status, 404u);
}

TEST_F(HandlersTest, APlainTextViewIsAPageWithItsRungAndAnEtagPerLanguage) {
  const std::string id = CreateApi("<b>not bold</b>")["id"];
  const Reply r =
      Call(HandleView, Method::kGet, "/" + id + "?lang=text", FakeHeaders{{"Accept", "text/html"}});
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.content_type.starts_with("text/html"));
  EXPECT_EQ(r.Get("Vary"), "Accept");
  EXPECT_EQ(r.body_view().find("<b>not bold"), std::string::npos);
  EXPECT_NE(r.body_view().find("&lt;b&gt;not bold"), std::string::npos);
  EXPECT_FALSE(r.Get("X-Sluice-Rung").empty());
  EXPECT_EQ(r.Get("ETag"), "\"" + id + "-text\"");
}

TEST_F(HandlersTest, AViewForAProgramIsTheTextWithTheHeadersOfRaw) {
  const std::string id = CreateApi("<b>text</b>\n")["id"];
  const Reply r = Call(HandleView, Method::kGet, "/" + id, FakeHeaders{{"Accept", "*/*"}});
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.content_type.starts_with("text/plain"));
  ASSERT_TRUE(r.shared_body);
  EXPECT_EQ(*r.shared_body, "<b>text</b>\n");
  EXPECT_EQ(r.Get("Vary"), "Accept");
  EXPECT_EQ(r.Get("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(r.Get("ETag"), "\"" + id + "\"");
}

TEST_F(HandlersTest, AJsonCreateStoresTheContentAndHostileJsonStoresNothing) {
  const std::string envelope = R"({"content": "a\r\nb", "language": "python"})";
  FakeBody body(envelope);
  const FakeHeaders json{{"Content-Length", std::to_string(envelope.size())},
                         {"Content-Type", "text/json"}};
  const Reply r = Call(HandleCreateApi, Method::kPost, "/api/v1/pastes", json, &body);
  ASSERT_EQ(r.status, 201u) << (r.error ? r.error->message : r.body);
  const std::string id = nlohmann::json::parse(r.body)["id"];
  EXPECT_NE(r.Get("Location").find("lang=python"), std::string_view::npos);
  const Reply raw = Call(HandleRaw, Method::kGet, "/raw/" + id, FakeHeaders{});
  ASSERT_TRUE(raw.shared_body);
  EXPECT_EQ(*raw.shared_body, "a\r\nb");

  const std::string hostile = R"({"content": "a", "content": "b"})";
  FakeBody refused(hostile);
  const FakeHeaders hostile_headers{{"Content-Length", std::to_string(hostile.size())},
                                    {"Content-Type", "application/json"}};
  const Reply bad =
      Call(HandleCreateApi, Method::kPost, "/api/v1/pastes", hostile_headers, &refused);
  EXPECT_EQ(bad.status, 400u);
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->reason, "bad_json");
}

TEST_F(HandlersTest, HasteCreatesWith200AndReadsItsDocument) {
  const std::string text = "a=1&b=%41+c";
  FakeBody body(text);
  const FakeHeaders headers{{"Content-Length", std::to_string(text.size())},
                            {"Content-Type", "application/x-www-form-urlencoded"}};
  const Reply r = Call(HandleCreateHaste, Method::kPost, "/documents", headers, &body);
  ASSERT_EQ(r.status, 200u) << (r.error ? r.error->message : r.body);
  const std::string key = nlohmann::json::parse(r.body)["key"];
  const Reply doc = Call(HandleDocument, Method::kGet, "/documents/" + key, FakeHeaders{});
  EXPECT_EQ(doc.status, 200u);
  EXPECT_EQ(nlohmann::json::parse(doc.body), (nlohmann::json{{"key", key}, {"data", text}}));
  const Reply view =
      Call(HandleView, Method::kGet, "/" + key + ".py", FakeHeaders{{"Accept", "text/html"}});
  EXPECT_EQ(view.status, 200u);
  EXPECT_EQ(view.Get("ETag"), "\"" + key + "-python\"");
}

// The session writes what SerializeHead makes of a presented reply, then the body.
std::string HeadOf(const Reply& reply, std::string_view request_id = "r1", bool close = false) {
  std::string head;
  SerializeHead(reply, request_id, close, head);
  return head;
}

TEST(PresenterTest, TheHeadCarriesTheStatusFieldsLengthAndRequestIdAndEndsInABlankLine) {
  Reply r = Reply::Text(201, "hello");
  r.Set("Location", "https://paste.example/x");
  const std::string head = HeadOf(r, "abc", true);
  EXPECT_EQ(head,
            "HTTP/1.1 201 Created\r\nServer: sluice\r\nContent-Type: text/plain; "
            "charset=utf-8\r\nLocation: https://paste.example/x\r\nX-Request-Id: abc\r\n"
            "Content-Length: 5\r\nConnection: close\r\n\r\n");
  // No Content-Length on answers that carry no content (RFC 9110 8.6), no request id if none.
  EXPECT_EQ(HeadOf(Reply::Empty(304), ""), "HTTP/1.1 304 Not Modified\r\nServer: sluice\r\n\r\n");
  EXPECT_EQ(HeadOf(Reply::Empty(204)).find("Content-Length"), std::string::npos);
}

TEST(PresenterTest, AFieldValueCannotEndTheHeadEarly) {
  Reply r = Reply::Text(200, "");
  r.Set("X-Evil", "a\r\nSet-Cookie: x=1");
  const std::string head = HeadOf(r);
  EXPECT_NE(head.find("X-Evil: a  Set-Cookie: x=1\r\n"), std::string::npos);
  EXPECT_EQ(head.find("\r\nSet-Cookie"), std::string::npos);
}

TEST(PresenterTest, FixedFieldsAreSentOnceAndAPageGetsItsSecurityHeadersOnlyOnce) {
  Reply r = Reply::Html(200, "<p>x</p>");
  r.fixed = MakeFixedFields({{"ETag", "\"a\""}}, true);
  r.Set("Cache-Control", "public, max-age=5");
  const Reply presented = Present(std::move(r), true, 0);
  EXPECT_EQ(presented.Get("ETag"), "\"a\"");
  EXPECT_FALSE(presented.Get("Content-Security-Policy").empty());
  const std::string head = HeadOf(presented);
  for (const char* field : {"Content-Security-Policy:", "X-Content-Type-Options:",
                            "Referrer-Policy:", "ETag:", "Cache-Control:"}) {
    const size_t at = head.find(field);
    ASSERT_NE(at, std::string::npos) << field;
    EXPECT_EQ(head.find(field, at + 1), std::string::npos) << field << " twice";
  }
  // A refusal drops the fixed fields of the answer it replaces.
  Reply refused = Reply::Refuse(ErrorCode::kUnavailable, "m", "r");
  refused.fixed = MakeFixedFields({{"ETag", "\"a\""}}, false);
  EXPECT_TRUE(Present(std::move(refused), false, 0).Get("ETag").empty());
}

TEST_F(HandlersTest, HotRawReadsShareTheirFixedFieldsAndEachPasteHasItsOwn) {
  const std::string a = CreateApi("first paste")["id"];
  const std::string b = CreateApi("second paste")["id"];
  const Reply a1 = Call(HandleRaw, Method::kGet, "/raw/" + a, FakeHeaders{});
  const Reply a2 = Call(HandleRaw, Method::kGet, "/raw/" + a, FakeHeaders{});
  // ?download varies per request: added beside the shared fields, not into them. Asked before
  // b is read: the fields live in a small table of slots by body address, and b's may be a's
  // slot (a main build failed so once; 3,000 runs of this test alone found it again), which
  // rightly makes them again.
  const Reply d = Call(HandleRaw, Method::kGet, "/raw/" + a + "?download=1", FakeHeaders{});
  const Reply b1 = Call(HandleRaw, Method::kGet, "/raw/" + b, FakeHeaders{});
  ASSERT_TRUE(a1.fixed && a2.fixed && b1.fixed);
  EXPECT_EQ(a1.fixed, a2.fixed);
  EXPECT_EQ(d.fixed, a1.fixed);
  EXPECT_EQ(d.Get("Content-Disposition"), "attachment; filename=\"" + a + ".txt\"");
  EXPECT_NE(a1.fixed, b1.fixed);
  EXPECT_EQ(a1.Get("ETag"), "\"" + a + "\"");
  EXPECT_EQ(b1.Get("ETag"), "\"" + b + "\"");
  EXPECT_EQ(b1.Get("Content-Security-Policy"), "default-src 'none'; sandbox");
  const std::string head = HeadOf(Present(Reply(a1), false, 0));
  EXPECT_NE(head.find("\r\nETag: \"" + a + "\"\r\n"), std::string::npos);
  EXPECT_NE(head.find("\r\nContent-Length: 11\r\n"), std::string::npos);
  EXPECT_NE(head.find("\r\nCache-Control: public, max-age="), std::string::npos);
}

TEST_F(HandlersTest, AViewFromTheRenderCacheIsOnePageSharedPerLanguage) {
  const auto doc = CreateApi("<b>not bold</b>\n");
  const std::string id = doc["id"];
  const FakeHeaders browser{{"Accept", "text/html"}};
  const Reply first = Call(HandleView, Method::kGet, "/" + id + "?lang=text", browser);
  ASSERT_EQ(first.status, 200u);
  const Reply second = Call(HandleView, Method::kGet, "/" + id + "?lang=text", browser);
  const Reply third = Call(HandleView, Method::kGet, "/" + id + "?lang=text", browser);
  ASSERT_EQ(second.Get("X-Sluice-Rung"), "cached");
  ASSERT_TRUE(second.shared_body && third.shared_body);
  EXPECT_EQ(second.shared_body, third.shared_body);
  EXPECT_NE(second.body_view().find("&lt;b&gt;not bold"), std::string::npos);
  EXPECT_EQ(second.Get("ETag"), "\"" + id + "-text\"");
  EXPECT_EQ(second.Get("Vary"), "Accept");
  EXPECT_FALSE(second.Get("Cache-Control").empty());
  // The same page as the one formatted for the first view, but for its rung.
  std::string expected(first.body_view());
  const size_t rung = expected.find(">highlighted<");
  if (rung != std::string::npos) expected.replace(rung, 13, ">cached<");
  EXPECT_EQ(second.body_view(), expected);
  // Another language is another page (its links and ETag name it).
  Call(HandleView, Method::kGet, "/" + id + "?lang=python", browser);
  const Reply python = Call(HandleView, Method::kGet, "/" + id + "?lang=python", browser);
  EXPECT_EQ(python.Get("ETag"), "\"" + id + "-python\"");
  EXPECT_NE(python.shared_body, second.shared_body);
  // Deleted, its page is never served again.
  const FakeHeaders auth{{"Authorization", "Bearer " + doc["delete_token"].get<std::string>()}};
  EXPECT_EQ(Call(HandleDelete, Method::kDelete, "/api/v1/pastes/" + id, auth).status, 204u);
  EXPECT_EQ(Call(HandleView, Method::kGet, "/" + id + "?lang=text", browser).status, 404u);
}

TEST_F(HandlersTest, AnUnknownPasteIs404AndAMalformedIdToo) {
  for (std::string path : {"/raw/AAAAAAAAAAAA", "/raw/..%2Fetc", "/raw/"}) {
    const Reply r = Call(HandleRaw, Method::kGet, path, FakeHeaders{});
    EXPECT_EQ(r.status, 404u) << path;
    ASSERT_TRUE(r.error) << path;
  }
}

TEST_F(HandlersTest, FaultInjectionIsAbsentUnlessConfigured) {
  const Reply r = Call(HandleFaults, Method::kGet, "/debug/faults", FakeHeaders{});
  EXPECT_EQ(r.status, 404u);
  std::string rules = "blob.put=error";
  ctx_.get_faults = [&] { return rules; };
  ctx_.set_faults = [&](std::string_view replaced) {
    rules = std::string(replaced);
    return Status();
  };
  EXPECT_EQ(Call(HandleFaults, Method::kPut, "/debug/faults", FakeHeaders{}, nullptr, "x").status,
            204u);
  EXPECT_EQ(rules, "x");
}

TEST_F(HandlersTest, LimitsShowTheCallersKeyAndBuckets) {
  const Reply r = Call(HandleLimits, Method::kGet, "/api/v1/limits", FakeHeaders{});
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["client_key"], "10.0.0.1");
  EXPECT_EQ(j["buckets_from"], "this_process");  // no shared store here
  EXPECT_TRUE(j["buckets"].is_object());
  EXPECT_EQ(r.Get("Cache-Control"), "no-store");
}

}  // namespace
}  // namespace sluice::http
