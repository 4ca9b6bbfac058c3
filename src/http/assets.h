// The web UI's stylesheet and scripts, compiled into the binary: the CSP allows scripts and styles
// from 'self' only, so nothing is inline and nothing comes from another origin.
#pragma once

#include <string>
#include <string_view>

namespace sluice::http {

struct Asset {
  std::string_view path;  // "/static/app.js"
  std::string_view content_type;
  std::string_view body;
  /// A strong ETag from the content, so a browser revalidates with a 304.
  std::string etag;
  /// The path with "?v=<hash>", linked from pages so a new build is never served stale.
  std::string versioned_path;
  /// Its Subresource Integrity ("sha256-..."), for a <script integrity> that must run exactly
  /// this file.
  std::string integrity;
};

/// The asset at `path` (query ignored), or null.
const Asset* FindAsset(std::string_view path);

/// The versioned URL of an asset that exists ("/static/style.css?v=...").
const std::string& AssetUrl(std::string_view path);

}  // namespace sluice::http
