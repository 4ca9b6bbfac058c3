// The CLI's end of encrypted pastes (docs/encryption.md): `sluice paste --encrypt [--password]`
// seals the text before it leaves (paste_command.cc calls SealForPaste), `sluice get URL#KEY`
// fetches an envelope and opens it here, and `sluice admin show ID --key KEY` opens what the
// admin listener returned. The server is never sent a key, a password or any plaintext.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "envelope_crypto.h"
#include "sluice/common/result.h"

namespace sluice::app {

/// Largest paste the CLI holds: the most `sluice get` and `sluice admin` read of an answer, and
/// the most it inflates from an envelope. The server does not state its max_paste_bytes (and a
/// hostile one would state anything), so this is a constant: 64 times the default limit.
inline constexpr uint64_t kCliMaxPasteBytes = uint64_t{64} << 20;

/// A password: SLUICE_PASSWORD when set (scripts, tests), else asked on the terminal (/dev/tty,
/// without echo; twice when `confirm`). InvalidArgument when there is neither.
Result<std::string> ReadPassword(std::string_view prompt, bool confirm);

/// The envelope `sluice paste --encrypt` sends, and the key its link carries; with
/// `with_password`, the password from ReadPassword.
Result<SealedPaste> SealForPaste(std::string_view text, bool with_password);

/// Opens `envelope` with `key` (asking for the password when the envelope has one) and writes
/// the text to stdout byte for byte. Returns the exit code: 0, or 1 after saying on stderr, as
/// `who`, why it cannot be opened.
int PrintOpened(std::string_view envelope, std::string_view key, std::string_view who);

}  // namespace sluice::app
