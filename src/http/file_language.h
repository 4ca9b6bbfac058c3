// The language a file name's extension names ("x.rs" -> rust), for haste's /ID.ext links, a
// multipart upload's filename and the Sluice-Filename header. Nothing about it is stored: the
// extension travels in the link (src/http/create_handlers.cc).
#pragma once

#include <string>
#include <string_view>

namespace sluice::http {

/// The highlighter's name for `extension` (without the dot, any case), or "" if it names none.
std::string LanguageForExtension(std::string_view extension);

/// The extension of a file name ("dir/x.tar.rs" -> "rs"), or "" when it has none.
std::string_view FileExtension(std::string_view filename);

}  // namespace sluice::http
