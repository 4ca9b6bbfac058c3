// posix_spawn's attributes for a child process that starts clean: the server's threads may block
// or ignore signals (SIGPIPE), and a child inherits both; with these it runs with no signal blocked
// and every signal at its default. Used by the highlight workers (src/render/highlight_workers.cc)
// and the push command (src/notify/command.cc).
#pragma once

#include <signal.h>
#include <spawn.h>

namespace sluice {

class CleanSpawnAttributes {
 public:
  CleanSpawnAttributes() {
    posix_spawnattr_init(&attributes_);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes_, &none);
    posix_spawnattr_setsigdefault(&attributes_, &all);
    posix_spawnattr_setflags(&attributes_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~CleanSpawnAttributes() { posix_spawnattr_destroy(&attributes_); }
  CleanSpawnAttributes(const CleanSpawnAttributes&) = delete;
  CleanSpawnAttributes& operator=(const CleanSpawnAttributes&) = delete;

  /// The child leads a process group of its own, so kill(-pid, ...) reaches whatever it starts
  /// too (a shell's children), not only itself.
  CleanSpawnAttributes& InNewProcessGroup() {
    short flags = 0;
    posix_spawnattr_getflags(&attributes_, &flags);
    posix_spawnattr_setpgroup(&attributes_, 0);
    posix_spawnattr_setflags(&attributes_, flags | POSIX_SPAWN_SETPGROUP);
    return *this;
  }

  const posix_spawnattr_t* get() const { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

}  // namespace sluice
