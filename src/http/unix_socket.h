// The file of a Unix socket the admin listener binds (admin_listen = unix:/PATH, server.cc): the
// lock that makes one server at a time its owner, and the removal of a stale one a killed process
// left behind.
#pragma once

#include <string>

namespace sluice::http {

/// The message of an errno value.
std::string ErrnoText(int error);

/// The socket file at `path` before binding there. Nothing: free. A socket nobody accepts on
/// (connect refused) was left by a process that was killed and is removed; one a process listens on
/// is refused, as a TCP port in use is; anything else (a regular file, a socket that cannot be
/// probed) is never removed. A plain non-blocking connect, so a live server whose queue is full
/// answers at once (EAGAIN) rather than stalling the start.
void ClearStaleSocket(const std::string& path);

/// Holds PATH.lock, exclusively, from before the stale-socket check until this server is gone:
/// without it, two servers started at once on a killed one's file could both find it stale, and
/// the second would remove the socket the first had just bound. A lock held means another server
/// listens there or is starting to. The file stays (removing a lock file races its next taker).
/// Returns the lock's file descriptor, held until closed. Throws when another server holds it.
int LockSocketPath(const std::string& path);

}  // namespace sluice::http
