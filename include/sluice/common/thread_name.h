// Names the calling thread, for `ps -L`, `top -H`, perf and gdb: without names every thread of
// the server is "sluice", and a profile cannot say which one is the committer. Linux keeps 15
// bytes. Never call it on the main thread: its name is the process's, which pidof and killall
// match.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace sluice {

inline void NameThisThread(std::string_view name) {
  const std::string kept(name.substr(0, 15));
  pthread_setname_np(pthread_self(), kept.c_str());
}

}  // namespace sluice
