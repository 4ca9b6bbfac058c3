// The web UI's stylesheet and scripts, compiled into the binary: the CSP allows scripts and styles
// from 'self' only, so nothing is inline and nothing comes from another origin. The files live in
// web/static (docs/web.md); tools/embed_assets.cmake turns them into this table at build time.
#pragma once

#include <span>
#include <string_view>

namespace sluice::http {

struct Asset {
  std::string_view path;  // "/static/app.js"
  std::string_view content_type;
  std::string_view body;
  /// A strong ETag from the content, so a browser revalidates with a 304.
  std::string_view etag;
  /// The path with "?v=<hash>", linked from pages so a new build is never served stale.
  std::string_view versioned_path;
  /// Its Subresource Integrity ("sha256-..."), for a <script integrity> that must run exactly
  /// this file.
  std::string_view integrity;
};

/// Every embedded file, worked out at build time (the generated web_assets.cc).
std::span<const Asset> EmbeddedAssets();

/// The asset at `path` (query ignored), or null.
const Asset* FindAsset(std::string_view path);

/// The versioned URL of an asset that exists ("/static/style.css?v=...").
std::string_view AssetUrl(std::string_view path);

}  // namespace sluice::http
