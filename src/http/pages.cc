#include "pages.h"

#include <fmt/format.h>

#include <ctime>
#include <map>

#include "assets.h"
#include "sluice/common/html.h"
#include "sluice/render/highlighter.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

// The scripts a page loads after app.js (docs/web.md).
struct PageScripts {
  bool status = false;  // status.js: the live panels of /status
  bool crypt = false;   // crypt.js: encryption in the browser
  bool share = false;   // qrcode.js and qr.js: the QR code of a share link
};

// A script with its Subresource Integrity, for the scripts that see an encrypted paste's key: a
// page that holds one must run exactly the script this binary shipped, whatever a cache or a proxy
// on the way holds.
std::string PinnedScript(std::string_view path) {
  const Asset* asset = FindAsset(path);
  return fmt::format("<script src=\"{}\" integrity=\"{}\" defer></script>", asset->versioned_path,
                     asset->integrity);
}

std::string Layout(std::string_view title, std::string_view body, PageScripts scripts = {}) {
  std::string extra;
  if (scripts.status) {
    extra += fmt::format("<script src=\"{}\" defer></script>", AssetUrl("/static/status.js"));
  }
  if (scripts.share) extra += PinnedScript("/static/qrcode.js") + PinnedScript("/static/qr.js");
  if (scripts.crypt) extra += PinnedScript("/static/crypt.js");
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta name=\"color-scheme\" content=\"light dark\">"
      "<meta name=\"referrer\" content=\"no-referrer\">"
      "<title>{}</title><link rel=\"stylesheet\" href=\"{}\">"
      "<script src=\"{}\" defer></script>{}</head><body>\n"
      "<header class=\"top\"><a class=\"brand\" href=\"/\">sluice</a>"
      "<span class=\"meta\">a pastebin that stays up</span>"
      "<nav><a href=\"/\">New paste</a><a href=\"/status\">Status</a></nav></header>\n"
      "<main>\n{}\n</main>\n</body></html>\n",
      EscapeHtml(title), AssetUrl("/static/style.css"), AssetUrl("/static/app.js"), extra, body);
}

std::string SizeInWords(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024 * 1024));
}

// A view that shows only the head of its paste says so, and where the whole text is.
std::string CutNotice(const PasteView& view) {
  const size_t shown_lines = view.shown_lines;
  if (view.views_left) {
    // A counted paste's reading: the raw link only asks again, so the whole text is for scripts.
    return fmt::format(
        "<p class=\"notice\" id=\"cut\">This page shows the first {} {} of this paste, which is "
        "{} in all; the rest is shown only to scripts, which read it with <code>POST "
        "/api/v1/pastes/{}/claim</code> (each reading takes one of its views).</p>\n",
        shown_lines, shown_lines == 1 ? "line" : "lines", SizeInWords(view.size_bytes),
        EscapeHtml(view.id));
  }
  const uint64_t size_bytes = view.size_bytes;
  const std::string_view raw_url = view.raw_url;
  return fmt::format(
      "<p class=\"notice\" id=\"cut\">This page shows the first {} {} of this paste, which is "
      "{} in all: read the whole text in <a href=\"{}\">Raw</a> or <a href=\"{}?download=1\" "
      "download>download</a> it.</p>\n",
      shown_lines, shown_lines == 1 ? "line" : "lines", SizeInWords(size_bytes),
      EscapeHtml(raw_url), EscapeHtml(raw_url));
}

std::string ClockTime(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S UTC", &tm);
  return buf;
}

// What a person should read for each refusal reason (the `reason` of the JSON error).
struct Explanation {
  const char* title;
  const char* text;
};

Explanation Explain(unsigned status, std::string_view reason) {
  static const std::map<std::string_view, Explanation> kReasons = {
      {"ip_create_count",
       {"You are creating pastes too quickly",
        "This is a rate limit on how many pastes one visitor may create, not an error with your "
        "paste. Nothing was saved."}},
      {"ip_create_bytes",
       {"You are sending too much text too quickly",
        "This is a rate limit on how much text one visitor may paste per second. Nothing was "
        "saved."}},
      {"global_count",
       {"The server is taking as many new pastes as it can",
        "Everyone together is creating pastes faster than this server accepts. This is a limit, "
        "not a problem with your paste. Nothing was saved."}},
      {"global_bytes",
       {"The server is taking as much new text as it can",
        "Everyone together is pasting more text per second than this server accepts. Nothing was "
        "saved."}},
      {"origin_get_ip",
       {"You are opening pastes too quickly",
        "This is a rate limit on how many pastes one visitor may open per second. The paste is "
        "fine and still there."}},
      {"create_slots",
       {"The server is overloaded", "Too many pastes are being saved at once. Nothing was saved."}},
      {"create_bytes",
       {"The server is overloaded", "Too much text is being saved at once. Nothing was saved."}},
      {"read_slots",
       {"The server is overloaded",
        "Too many pastes are being read from storage at once. The paste itself is not missing."}},
      {"fill_cap",
       {"The server is overloaded",
        "Too many pastes are being looked up at once. The paste itself is not missing."}},
      {"connections",
       {"The server is overloaded", "It has as many open connections as it can take."}},
      {"outcome_unknown",
       {"Your paste may or may not have been saved",
        "The storage service stopped answering while it recorded your paste, so the server cannot "
        "tell. Its link was not given out: if you need the paste, send it again."}},
      {"body_mismatch",
       {"This paste cannot be shown right now",
        "The storage service returned text that is not this paste's, so it is not shown. Try "
        "again later."}},
      {"burn_after_reading",
       {"This paste is shown once",
        "It burns after reading: open its link in a browser and confirm, or POST to "
        "/api/v1/pastes/ID/claim. The first reader who does gets the text; then it is gone."}},
      {"storage_quota",
       {"The server is full",
        "It holds as much text as its operator allows. Nothing was saved; space frees up as "
        "pastes expire or are deleted."}},
      {"body_missing",
       {"This paste cannot be shown right now",
        "The storage service did not return this paste's text. Try again later."}},
      {"under_review",
       {"This paste is under review",
        "Visitors from several networks reported it, so it is withheld until the operator has "
        "looked at it."}},
      {"taken_down",
       {"This paste was taken down",
        "The operator removed it after a report. It will not be shown again."}},
      {"blocked",
       {"This address may not create pastes",
        "The operator blocked new pastes from it for a while. Reading pastes is not affected."}},
      {"report_rate",
       {"You are sending reports too quickly",
        "This is a rate limit on how many reports one visitor may send. Try again later."}},
      {"report_global_rate",
       {"This server takes no more reports for now",
        "Many reports arrived at once. Nothing was recorded; try again in a little while."}},
      {"cross_site",
       {"This report did not come from this site",
        "Reports are taken only from the report form on this site's own pages. Open the paste, "
        "choose Report and send the form from there."}},
      {"delete_rate",
       {"You are deleting too quickly",
        "This is a rate limit on how many deletes one visitor may send. Try again later."}},
  };
  if (auto it = kReasons.find(reason); it != kReasons.end()) return it->second;
  switch (status) {
    case 404:
      return {"No such paste", "It never existed, it has expired, or its owner deleted it."};
    case 429:
      return {"Slow down: you have reached a limit", "This is a rate limit, not a missing paste."};
    case 503:
    case 504:
      return {"The server is overloaded or a storage service is slow",
              "This is temporary and says nothing about whether the paste exists."};
    case 400:
    case 411:
    case 413:
      return {"The request could not be accepted", "Check what was sent and try again."};
    default:
      return {"Something went wrong on the server", "The error has been counted."};
  }
}

}  // namespace

std::string EscapeHtml(std::string_view text) { return HtmlEscaped(text); }

std::string FormatUnixTime(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string DurationInWords(int64_t seconds) {
  auto unit = [](int64_t n, const char* name) {
    return fmt::format("{} {}{}", n, name, n == 1 ? "" : "s");
  };
  if (seconds < 60) return unit(std::max<int64_t>(seconds, 1), "second");
  if (seconds < 3600) {
    const int64_t rest = seconds % 60;
    return rest == 0 ? unit(seconds / 60, "minute")
                     : unit(seconds / 60, "minute") + " " + unit(rest, "second");
  }
  if (seconds < 86400) {
    const int64_t rest = (seconds % 3600) / 60;
    return rest == 0 ? unit(seconds / 3600, "hour")
                     : unit(seconds / 3600, "hour") + " " + unit(rest, "minute");
  }
  return unit(seconds / 86400, "day");
}

std::string IndexPage(std::string_view default_ttl, uint64_t max_paste_bytes,
                      const CreatePrefill* prefill) {
  std::string ttls;
  for (const auto& [name, seconds] : service::TtlAllowList()) {
    ttls += fmt::format("<option value=\"{0}\"{1}>{2}</option>", name,
                        name == default_ttl ? " selected" : "", DurationInWords(seconds.count()));
  }
  const std::string_view chosen = prefill ? prefill->language : std::string_view();
  std::string languages = fmt::format(
      "<option value=\"auto\"{}>Detect automatically</option>"
      "<option value=\"text\"{}>Plain text</option>",
      chosen.empty() ? " selected" : "", chosen == "text" ? " selected" : "");
  for (const render::Language& language : render::Languages()) {
    languages +=
        fmt::format("<option value=\"{}\"{}>{}</option>", EscapeHtml(language.name),
                    chosen == language.name ? " selected" : "", EscapeHtml(language.label));
  }
  std::string fork;
  if (prefill) {
    fork = fmt::format(
        "<p class=\"notice\" id=\"forking\">A new paste from <a "
        "href=\"/{0}\"><code>{0}</code></a>: "
        "edit the text and create it. The original stays as it is; the new one links to it and "
        "to the differences.</p>\n<input type=\"hidden\" name=\"parent\" value=\"{0}\">\n",
        EscapeHtml(prefill->parent));
    if (!prefill->load_from.empty()) {
      fork += fmt::format(
          "<p class=\"notice\" id=\"prefill-large\">Its text ({0}) is too large to carry in this "
          "page: your browser loads it into the box from <a href=\"{1}\">the raw text</a>. "
          "Without JavaScript, copy it from there.</p>\n",
          SizeInWords(prefill->size_bytes), EscapeHtml(prefill->load_from));
    }
  }
  const std::string load_from =
      prefill && !prefill->load_from.empty()
          ? fmt::format(" data-prefill-from=\"{}\"", EscapeHtml(prefill->load_from))
          : std::string();
  return Layout("sluice: new paste",
                fmt::format(R"(<h1>New paste</h1>
<form id="create" method="post" action="/" enctype="multipart/form-data" data-max-bytes="{4}">
{2}<label for="content" class="hint">Paste text here; it is shown exactly as written, never run.</label>
<textarea id="content" name="content" required autofocus spellcheck="false" placeholder="Paste text here"{5}>{3}</textarea>
<div class="controls">
<label>Language <select name="lang">{0}</select></label>
<label>Expires after <select name="ttl">{1}</select></label>
<label><input type="checkbox" name="burn" value="1" id="burn"> Burn after reading</label>
<label>or after <input type="number" name="max_views" id="max-views" min="1" max="10000" inputmode="numeric" class="views"> views</label>
<label class="js-only" hidden><input type="checkbox" id="encrypt"> Encrypt in this browser</label>
<label class="js-only" hidden>Password (optional) <input type="password" id="create-password" autocomplete="new-password" disabled></label>
<button type="submit" class="primary">Create paste</button>
<span class="hint js-only" hidden>or press Ctrl+Enter</span>
</div>
<p class="hint js-only" hidden id="encrypt-hint">Encrypted here before it is sent: the key is in the link after <code>#</code>, which browsers never send to a server, so this server stores only ciphertext. Anyone with the whole link (and the password, if you set one) can read it; without the key nobody can, the operator included.</p>
<p class="notice warn" id="create-problem" role="alert" hidden></p>
</form>
<p class="meta">From a terminal: <code>curl --data-binary @file.txt HOST/</code> or <code>curl -F file=@file.txt HOST/</code></p>)",
                            languages, ttls, fork, prefill ? EscapeHtml(prefill->text) : "",
                            max_paste_bytes, load_from),
                {.crypt = true, .share = true});
}

std::string PastePage(const PasteView& view) {
  std::string notice;
  if (view.created) {
    notice = fmt::format(
        R"(<section class="notice" id="created"><strong>Paste created.</strong> Share this link:
<div class="linkrow"><input id="share-link" readonly value="{0}" aria-label="Link to this paste"><button type="button" class="js-only" hidden data-copy-from="share-link">Copy link</button></div>
<p>Delete link, <strong>shown only this once</strong> (keep it to delete the paste later):</p>
<div class="linkrow"><input id="delete-link" readonly value="{1}" aria-label="Delete link"><a class="button" id="delete" href="{1}">Delete</a></div>
</section>
)",
        EscapeHtml(view.url), EscapeHtml(view.created->delete_url));
  }
  std::string views;
  if (view.views_left) {
    views =
        *view.views_left == 0
            ? std::string(
                  "<p class=\"notice warn\" id=\"views-left\">This was its last view: the "
                  "paste is deleted now, and its link answers \"no such paste\".</p>\n")
            : fmt::format(
                  "<p class=\"notice warn\" id=\"views-left\">{} more {} this paste; then "
                  "it is deleted.</p>\n",
                  *view.views_left, *view.views_left == 1 ? "reader may open" : "readers may open");
  }
  std::string shed;
  if (view.shed) {
    shed = view.cut
               ? "<p class=\"notice warn\" id=\"shed\">Shown without highlighting: the server is "
                 "busy right now. Reload later for colours.</p>\n"
               : "<p class=\"notice warn\" id=\"shed\">Shown without highlighting: the server is "
                 "busy right now. The text is complete; reload later for colours.</p>\n";
  } else if (view.too_large) {
    shed =
        "<p class=\"notice warn\" id=\"shed\">Shown without highlighting: highlighted, it would "
        "be larger than this server shows on one page.</p>\n";
  }
  if (view.cut) shed += CutNotice(view);
  std::string links;
  if (view.parent) {
    links += fmt::format(
        R"(<p class="meta" id="forked-from">Forked from <a href="/{0}"><code>{0}</code></a> &middot; <a id="diff" href="/{1}/diff">what changed</a></p>)"
        "\n",
        EscapeHtml(*view.parent), EscapeHtml(view.id));
  }
  std::string extra_buttons;
  if (view.markdown) {
    extra_buttons += fmt::format(
        R"(<a class="button" id="rendered" href="/{}/rendered">Rendered</a>)", EscapeHtml(view.id));
  }
  if (view.forkable && !view.views_left) {
    extra_buttons +=
        fmt::format(R"(<a class="button" id="fork" href="/new?from={}">New paste from this</a>)",
                    EscapeHtml(view.id));
  }
  return Layout(
      fmt::format("paste {}", view.id),
      fmt::format(
          R"({0}<div class="toolbar"><h1>Paste <code>{1}</code></h1><span class="meta">{2} &middot; {3} &middot; expires {4} <span class="rung" title="X-Sluice-Rung">{5}</span></span>
<a class="button" id="raw" href="{6}">Raw</a><button type="button" class="js-only" hidden id="copy" data-copy-from="code">Copy</button><a class="button" id="download" href="{6}?download=1" download>Download</a>{10}<a class="button" href="/">New paste</a>{9}</div>
{7}<pre class="code" id="code">{8}</pre>)",
          notice, EscapeHtml(view.id), EscapeHtml(view.language_label),
          SizeInWords(view.size_bytes), FormatUnixTime(view.expires_at), EscapeHtml(view.rung_tag),
          EscapeHtml(view.raw_url), links + views + shed, view.lines,
          view.reportable
              ? fmt::format(R"(<a class="button" id="report" href="/report/{}">Report</a>)",
                            EscapeHtml(view.id))
              : std::string(),
          extra_buttons),
      {.share = view.created.has_value()});
}

std::string DerivedPage(const DerivedView& view) {
  const bool diff = view.kind == DerivedView::Kind::kDiff;
  const std::string id = EscapeHtml(view.id);
  std::string heading =
      diff
          ? fmt::format(
                R"(<h1>Changes in <code>{0}</code></h1><span class="meta">against its parent <a href="/{1}"><code>{1}</code></a> <span class="rung" title="X-Sluice-Rung">{2}</span></span>)",
                id, EscapeHtml(view.parent), EscapeHtml(view.rung_tag))
          : fmt::format(
                R"(<h1>Paste <code>{0}</code>, rendered</h1><span class="meta">Markdown <span class="rung" title="X-Sluice-Rung">{1}</span></span>)",
                id, EscapeHtml(view.rung_tag));
  std::string buttons =
      diff
          ? fmt::format(
                R"(<a class="button" href="/{0}">This paste</a><a class="button" href="/{1}">Parent</a>)",
                id, EscapeHtml(view.parent))
          : fmt::format(
                R"(<a class="button" id="source" href="/{0}?lang=markdown">Source</a><a class="button" href="/raw/{0}">Raw</a><a class="button" href="/new?from={0}">New paste from this</a>)",
                id);
  std::string body;
  const std::string cut =
      view.cut ? fmt::format(
                     "<p class=\"notice\" id=\"cut\">This page shows the first {} {}: the "
                     "whole text is in <a href=\"/raw/{}\">Raw</a>.</p>\n",
                     view.shown_lines, view.shown_lines == 1 ? "line" : "lines", id)
               : std::string();
  if (view.plain && view.too_large) {
    body = fmt::format(
        "<p class=\"notice warn\" id=\"shed\">{}</p>\n{}<pre class=\"code\" id=\"code\">{}</pre>",
        diff ? "The differences are larger than this server shows on one page: this is the "
               "paste's own text."
             : "Rendered, this Markdown would be larger than this server shows on one page: this "
               "is its source.",
        cut, view.html);
  } else if (view.plain) {
    body = fmt::format(
        "<p class=\"notice warn\" id=\"shed\">{}</p>\n{}<pre class=\"code\" id=\"code\">{}</pre>",
        diff ? "The differences could not be worked out right now (the server is busy, or they "
               "took too long): this is the paste's own text. Try again later."
             : "Not rendered right now (the server is busy, or it took too long): this is the "
               "Markdown source. Try again later.",
        cut, view.html);
  } else if (diff && view.html.empty()) {
    body = R"(<p class="notice" id="same">No changes: the text is the same as its parent's.</p>)";
  } else if (diff) {
    body = fmt::format(R"({}<pre class="code diff" id="code">{}</pre>)", cut, view.html);
  } else {
    body = fmt::format(R"({}<article class="markdown" id="rendered">{}</article>)", cut, view.html);
  }
  return Layout(diff ? fmt::format("changes in {}", view.id) : fmt::format("paste {}", view.id),
                fmt::format("<div class=\"toolbar\">{}\n{}</div>\n{}", heading, buttons, body));
}

std::string EncryptedPastePage(const EncryptedView& view) {
  const std::string id = EscapeHtml(view.id);
  return Layout(
      fmt::format("paste {}", view.id),
      fmt::format(
          R"(<div class="toolbar"><h1>Paste <code>{0}</code></h1><span class="meta">Encrypted &middot; {1} stored &middot; expires {2}</span>
<a class="button" id="raw" href="/raw/{0}">Envelope</a><a class="button" href="/">New paste</a>{3}</div>
<noscript><p class="notice warn" id="needs-js">This paste is encrypted: this page decrypts it in your browser with the key in its link, and that needs JavaScript. From a terminal: <code>sluice get 'LINK'</code> with the whole link, including the part after <code>#</code>.</p></noscript>
<section id="encrypted" data-id="{0}" data-burn="{4}" data-max-bytes="{5}" data-raw="/raw/{0}" data-claim="/api/v1/pastes/{0}/claim?format=raw">
<p class="notice js-only" hidden id="crypt-status" role="status">Decrypting in this browser&hellip;</p>
<div class="notice warn" id="burn-confirm" hidden><p>This paste will be deleted when you open it. It is shown once, to whoever opens it first.</p><button type="button" class="primary" id="confirm-burn">Open it and delete it</button></div>
<form id="unlock" hidden><label for="paste-password">This paste is protected by a password</label>
<div class="linkrow"><input type="password" id="paste-password" autocomplete="current-password" required><button type="submit" class="primary" id="unlock-button">Decrypt</button></div></form>
<div class="toolbar" id="decrypted-tools" hidden><span class="meta" id="decrypted-meta"></span><button type="button" id="copy">Copy</button><a class="button" id="download" href="/raw/{0}" download="{0}.txt">Download</a></div>
<pre class="code" id="code" hidden></pre>
</section>)",
          id, SizeInWords(view.size_bytes), FormatUnixTime(view.expires_at),
          view.burn
              ? std::string()
              : fmt::format(R"(<a class="button" id="report" href="/report/{}">Report</a>)", id),
          view.burn ? 1 : 0, view.max_paste_bytes),
      {.crypt = true});
}

std::string ErrorPage(unsigned status, std::string_view reason, std::string_view message,
                      std::optional<int64_t> retry_after_seconds, int64_t now_unix) {
  const Explanation e = Explain(status, reason);
  std::string retry;
  if (retry_after_seconds) {
    retry = fmt::format("<p id=\"retry\"><strong>Try again in {}</strong> (after {}).</p>",
                        DurationInWords(*retry_after_seconds),
                        ClockTime(now_unix + *retry_after_seconds));
  }
  const char* kind = status == 429   ? "a limit"
                     : status >= 500 ? "an overload or a dependency problem"
                     : status == 404 ? "not found"
                                     : "a rejected request";
  return Layout(fmt::format("{}: {}", status, e.title),
                fmt::format(R"(<section class="problem" id="problem" data-status="{0}">
<h1>{1}</h1>
<p>{2}</p>
{3}
<p class="meta">HTTP {0}: {4} &middot; reason <code>{5}</code> &middot; {6}</p>
</section>
<p><a href="/">New paste</a></p>)",
                            status, EscapeHtml(e.title), EscapeHtml(e.text), retry, kind,
                            EscapeHtml(reason), EscapeHtml(message)));
}

std::string BurnConfirmPage(std::string_view id, uint32_t views_left) {
  if (views_left > 1) {
    return Layout("limited views",
                  fmt::format(R"(<h1>Paste <code>{0}</code> can be opened {1} more times</h1>
<section class="notice warn" id="burn-warning"><p>Opening it uses one of its views (<strong id="views-left">{1}</strong> left); after the last one it is deleted and its link answers "no such paste".</p></section>
<form method="post" action="/claim/{0}">
<button type="submit" class="primary" id="confirm-burn">Open it (uses one view)</button> <a href="/">Not now</a>
</form>)",
                              EscapeHtml(id), views_left));
  }
  return Layout("burn after reading",
                fmt::format(R"(<h1>Paste <code>{0}</code> burns after reading</h1>
<section class="notice warn" id="burn-warning"><p>This paste will be deleted when you open it. It is shown once, to whoever opens it first; after that its link answers "no such paste".</p></section>
<form method="post" action="/claim/{0}">
<button type="submit" class="primary" id="confirm-burn">Open it and delete it</button> <a href="/">Not now</a>
</form>)",
                            EscapeHtml(id)));
}

std::string BurnCreatedPage(std::string_view url, std::string_view delete_url, uint32_t views) {
  const std::string what =
      views > 1 ? fmt::format(
                      "<h1>Paste created: shown {0} times</h1>\n<p>Share this link. Each of the "
                      "first {0} people to open it (and confirm) sees the text; then it is "
                      "deleted. Opening it yourself uses a view.</p>",
                      views)
                : std::string(
                      "<h1>Paste created: burns after reading</h1>\n<p>Share this link. The "
                      "first person to open it (and confirm) sees the text once; then it is "
                      "deleted. Opening it yourself burns it.</p>");
  return Layout("paste created",
                fmt::format(
                    R"(<section class="notice" id="created">{2}
<div class="linkrow"><input id="share-link" readonly value="{0}" aria-label="Link to this paste"><button type="button" class="js-only" hidden data-copy-from="share-link">Copy link</button></div>
<p>Delete link, <strong>shown only this once</strong>:</p>
<div class="linkrow"><input id="delete-link" readonly value="{1}" aria-label="Delete link"><a class="button" id="delete" href="{1}">Delete</a></div>
</section>
<p><a href="/">New paste</a></p>)",
                    EscapeHtml(url), EscapeHtml(delete_url), what),
                {.share = true});
}

std::string ReportFormPage(std::string_view id, std::string_view token) {
  return Layout("report paste", fmt::format(R"(<h1>Report paste <code>{0}</code></h1>
<p>Tell the operator why this paste should not be here. Your network is recorded with the report.</p>
<p class="hint" id="report-key-note">An encrypted paste is ciphertext to the operator. To let them read it, put its whole link, with the part after <code>#</code>, in the note: the key is then shared with the operator.</p>
<form method="post" action="/report/{0}">
<input type="hidden" name="token" value="{1}">
<p><label for="reason">Reason</label>
<select id="reason" name="reason">
<option value="spam">Spam</option>
<option value="malware">Malware</option>
<option value="illegal">Illegal content</option>
<option value="personal_data">Personal data</option>
<option value="other">Other</option>
</select></p>
<p><label for="note">Note (optional, at most 1000 bytes)</label><br>
<textarea id="note" name="note" rows="4" cols="60" maxlength="1000"></textarea></p>
<button type="submit" class="primary" id="send-report">Send report</button> <a href="/{0}">Back to the paste</a>
</form>)",
                                            EscapeHtml(id), EscapeHtml(token)));
}

std::string ReportedPage(std::string_view id) {
  return Layout("report sent", fmt::format(R"(<h1>Thank you</h1>
<p id="reported">Your report of paste <code>{0}</code> reached the operator.</p>
<p><a href="/">New paste</a></p>)",
                                           EscapeHtml(id)));
}

std::string DeleteConfirmPage(std::string_view id, std::string_view token) {
  return Layout("delete paste", fmt::format(R"(<h1>Delete paste <code>{0}</code>?</h1>
<p>This cannot be undone. The link will answer "no such paste" at once.</p>
<form method="post" action="/delete/{0}">
<input type="hidden" name="token" value="{1}">
<button type="submit" class="primary" id="confirm-delete">Delete it</button> <a href="/{0}">Keep it</a>
</form>)",
                                            EscapeHtml(id), EscapeHtml(token)));
}

std::string DeletedPage(std::string_view id) {
  return Layout("paste deleted",
                fmt::format(R"(<section class="notice" id="deleted"><h1>Paste deleted</h1>
<p>Paste <code>{}</code> is gone; its link now answers "no such paste".</p></section>
<p><a href="/">New paste</a></p>)",
                            EscapeHtml(id)));
}

std::string StatusPage(const std::vector<std::pair<std::string, double>>& metrics,
                       int64_t now_unix) {
  // The panels are drawn by /static/status.js from /api/v1/status, which holds the one table that
  // names metrics in words. Without the script the page still answers what an operator asks first
  // (is the disk full?) and says where every other number is.
  double live = 0, quota = 0, day = 0;
  for (const auto& [key, value] : metrics) {
    if (key == "sluice_storage_live_bytes") live = value;
    if (key == "sluice_storage_quota_bytes") quota = value;
    if (key == "sluice_storage_created_bytes_24h") day = value;
  }
  auto bytes_row = [](std::string_view label, double value) {
    return fmt::format("<tr><td>{}</td><td class=\"n\">{}</td></tr>", label,
                       SizeInWords(static_cast<uint64_t>(std::max(0.0, value))));
  };
  std::string storage = bytes_row("Live pastes", live);
  storage += quota > 0 ? bytes_row("Quota", quota) +
                             fmt::format(
                                 "<tr><td>Used</td><td class=\"n\" id=\"storage-used\">"
                                 "{:.1f}% of the quota</td></tr>",
                                 100.0 * live / quota)
                       : std::string(
                             "<tr><td>Quota</td><td class=\"n\">none "
                             "(<code>max_storage_bytes</code> = 0)</td></tr>");
  storage += bytes_row("Created in the last 24 h (this process)", day);
  return Layout("sluice: status",
                fmt::format(
                    R"(<h1>Status</h1>
<p class="meta">Live numbers from this process, the same ones <a href="/metrics">/metrics</a> serves. Updated <span id="updated">{}</span>; the panels refresh every 2 seconds and their charts show the last 5 minutes.</p>
<noscript><p class="notice warn">The panels are drawn by this page's script from <a href="/api/v1/status">/api/v1/status</a>; without JavaScript, <a href="/metrics">/metrics</a> has every number.</p>
<div class="grid"><section class="card" id="storage"><h2>Storage against the quota</h2><table>{}</table><p class="meta">Creates that would pass the quota answer 507 <code>storage_quota</code>.</p></section></div></noscript>
<div class="grid" id="live"></div>)",
                    FormatUnixTime(now_unix), storage),
                {.status = true});
}

}  // namespace sluice::http
