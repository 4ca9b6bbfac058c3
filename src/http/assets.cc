#include "assets.h"

#include <stdexcept>

namespace sluice::http {

const Asset* FindAsset(std::string_view path) {
  path = path.substr(0, path.find('?'));
  for (const Asset& asset : EmbeddedAssets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

std::string_view AssetUrl(std::string_view path) {
  const Asset* asset = FindAsset(path);
  if (asset == nullptr) throw std::logic_error("no such asset");
  return asset->versioned_path;
}

}  // namespace sluice::http
