#include "pages.h"

#include <fmt/format.h>

#include <ctime>

#include "sluice/service/text.h"

namespace sluice::http {

namespace {

constexpr std::string_view kStyle = R"css(
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fbfbfd; --muted: #6e6e73; --line: #d2d2d7; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8e8ed; --bg: #161618; --muted: #a1a1a6; --line: #3a3a3c; } }
body { font: 16px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 0 auto;
       max-width: 60rem; padding: 1rem; }
pre, textarea { font: 14px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { white-space: pre-wrap; word-break: break-word; border: 1px solid var(--line); padding: 1rem;
      border-radius: 6px; overflow-x: auto; }
textarea { width: 100%; min-height: 24rem; box-sizing: border-box; color: inherit; background: inherit;
           border: 1px solid var(--line); border-radius: 6px; padding: .75rem; }
.meta { color: var(--muted); font-size: .9rem; }
code { word-break: break-all; }
a { color: #0a84ff; }
)css";

std::string Layout(std::string_view title, std::string_view body) {
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>{}</title><style>{}</style></head><body>\n{}\n</body></html>\n",
      EscapeHtml(title), kStyle, body);
}

}  // namespace

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string FormatUnixTime(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string IndexPage(std::string_view default_ttl) {
  std::string options;
  for (const auto& [name, seconds] : service::TtlAllowList()) {
    options += fmt::format("<option value=\"{0}\"{1}>{0}</option>", name,
                           name == default_ttl ? " selected" : "");
  }
  return Layout("sluice", fmt::format(R"(<h1>sluice</h1>
<form method="post" action="/" enctype="multipart/form-data">
<textarea name="content" required autofocus placeholder="Paste text here"></textarea>
<p><label>Expires after <select name="ttl">{}</select></label> <button type="submit">Create paste</button></p>
</form>
<p class="meta">From a terminal: <code>curl --data-binary @file.txt HOST/</code> or <code>curl -F file=@file.txt HOST/</code></p>)",
                                      options));
}

std::string PastePage(std::string_view id, std::string_view text, std::string_view raw_url,
                      int64_t expires_at) {
  return Layout(
      fmt::format("paste {}", id),
      fmt::format("<p class=\"meta\">Paste <code>{}</code> &middot; expires {} &middot; "
                  "<a href=\"{}\">raw</a> &middot; <a href=\"/\">new paste</a></p>\n<pre>{}</pre>",
                  EscapeHtml(id), FormatUnixTime(expires_at), EscapeHtml(raw_url),
                  EscapeHtml(text)));
}

std::string CreatedPage(std::string_view url, std::string_view raw_url, std::string_view delete_url,
                        std::string_view delete_token, int64_t expires_at) {
  return Layout("paste created",
                fmt::format(R"(<h1>Paste created</h1>
<p>Link: <a href="{0}">{0}</a> (<a href="{1}">raw</a>), expires {2}.</p>
<p>Delete token, shown only once: <code>{3}</code></p>
<p class="meta">Delete with: <code>curl -X DELETE -H "Authorization: Bearer {3}" {4}</code></p>
<p><a href="/">New paste</a></p>)",
                            EscapeHtml(url), EscapeHtml(raw_url), FormatUnixTime(expires_at),
                            EscapeHtml(delete_token), EscapeHtml(delete_url)));
}

}  // namespace sluice::http
