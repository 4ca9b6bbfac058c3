# Varnish in front of sluice (the edge). It caches GET/HEAD of /{id} (a page and a text variant,
# kept apart by Vary: Accept) and /raw/{id} for as long as the app's Cache-Control allows (the app
# bounds max-age by the paste's expiry and sends no-store on every error), and passes everything
# else. Deleted pastes are purged by sluice's outbox worker:
# run sluice with --edge-purge http://THIS_VARNISH:PORT.
#
# `make stack` starts Varnish with this file, the backend rewritten to the stack's nginx.
vcl 4.1;

backend balancer {
  .host = "127.0.0.1";
  .port = "8080";
  .connect_timeout = 1s;
  .first_byte_timeout = 5s;
}

# Who may purge: the app processes. Keep it to their addresses.
acl purgers {
  "127.0.0.1";
  "::1";
}

sub vcl_recv {
  if (req.method == "PURGE") {
    if (client.ip !~ purgers) {
      return (synth(405, "purge not allowed from here"));
    }
    return (purge);
  }
  if (req.method != "GET" && req.method != "HEAD") {
    return (pass);
  }
  if (req.url ~ "^/(raw/)?[0-9A-Za-z]{12}$") {
    # A paste is the same for everyone: no cookie or authorization makes it personal, but for the
    # language of its page (docs/translations.md), which the app's Vary: Accept-Language, Cookie
    # keeps apart: of the cookies only sluice_lang, the reader's choice, goes on to the app.
    if (req.url !~ "^/raw/" && req.http.Cookie ~ "(^|;\s*)sluice_lang=") {
      set req.http.Cookie = regsub(req.http.Cookie, "^(.*;\s*)?(sluice_lang=[^;]*).*$", "\2");
    } else {
      unset req.http.Cookie;
    }
    unset req.http.Authorization;
    if (req.url !~ "^/raw/") {
      # /{id} answers a page to browsers and the text to everyone else, with Vary: Accept
      # (src/http/paste_handlers.cc). Accept is folded to the two answers the app tells apart
      # (Request::WantsHtml: does it name text/html), so each paste has two variants, not one per
      # browser's Accept string; a purge of the URL drops both.
      if (req.http.Accept ~ "text/html") {
        set req.http.Accept = "text/html";
      } else {
        set req.http.Accept = "text/plain";
      }
    }
    return (hash);
  }
  return (pass);
}

sub vcl_hash {
  # One site: the URL alone is the key, so a purge from the app needs no matching Host.
  hash_data(req.url);
  return (lookup);
}

sub vcl_backend_response {
  # Only what the app marked cacheable is kept (Varnish honours Cache-Control max-age); errors,
  # 429s and 503s carry no-store and are never cached, so a shed is never served from the edge.
  if (beresp.status != 200 && beresp.status != 304) {
    set beresp.uncacheable = true;
    set beresp.ttl = 0s;
    return (deliver);
  }
  if (beresp.http.Cache-Control ~ "(no-store|private)") {
    set beresp.uncacheable = true;
    set beresp.ttl = 0s;
  }
  return (deliver);
}

sub vcl_deliver {
  # Whether the edge answered (HIT) or the origin did (MISS), for tests and operators.
  if (obj.hits > 0) {
    set resp.http.X-Cache = "HIT";
  } else {
    set resp.http.X-Cache = "MISS";
  }
}
