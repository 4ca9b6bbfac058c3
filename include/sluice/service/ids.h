// Minting paste ids and delete tokens. Both come from the kernel's CSPRNG (getrandom(2)): an id is
// 12 base62 characters (about 71.5 bits), so ids cannot be guessed or walked; a delete token is 128
// bits and only its SHA-256 is stored.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/store/paste.h"

namespace sluice::service {

/// Fills `out` from the kernel's CSPRNG. Aborts if it fails, as MintPasteId does.
void FillRandom(unsigned char* out, size_t n);

/// A fresh random paste id. Aborts the process if the kernel CSPRNG fails (it does not, after
/// boot). Never one that IsTakenByAPage.
store::PasteId MintPasteId();

/// Whether `id` names one of the site's own one-segment pages (src/http/routes.cc): "/transparency"
/// is 12 base62 characters, so a paste minted with that id would be shadowed at /{id}. One in
/// 62^12 mints, but a link that shows another page is wrong however rare. The routes' unit test
/// (tests/unit/http/handlers_test.cc) fails if a new page of that shape is missing here.
bool IsTakenByAPage(std::string_view id);

/// A fresh 128-bit delete token, as 22 base64url characters.
std::string MintDeleteToken();
/// A creator token's secret: "slt_" and 256 bits as 43 base64url characters.
std::string MintCreatorTokenSecret();
/// A creator token's public id: 8 base62 characters (about 47.6 bits).
std::string MintCreatorTokenId();

/// SHA-256 of the token (a delete token or a creator token's secret), the only form in which it
/// is stored.
store::TokenHash HashDeleteToken(std::string_view token);

/// Compares two hashes in constant time, so response timing says nothing about how close a guess
/// was.
bool SameTokenHash(const store::TokenHash& a, const store::TokenHash& b);

}  // namespace sluice::service
