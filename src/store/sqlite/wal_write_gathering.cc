#include "wal_write_gathering.h"

#include <sqlite3.h>

#include <cstddef>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

// Why a VFS of our own (the SQLite manual's "VFS shim" pattern) and not a library: no Debian
// package offers write gathering, and SQLite has no setting for it. It stays small because its
// one rule is simple: bytes reach the file in the order SQLite wrote them, before anything that
// could observe the file (a read, its size, a sync, a truncation, a close) runs.
//
// Why a WAL may be written late at all: SQLite makes a committed WAL frame visible to readers
// only through the wal-index, and it updates the wal-index after the commit's xSync (wal.c,
// sqlite3WalFrames). The durable connections run with synchronous = FULL (sqlite_db.cc,
// OpenDurable), so every commit syncs the WAL, and the gathered bytes are written before that
// sync. A connection without a sync per commit must not use this VFS: its readers could see a
// frame the file does not have yet.

namespace sluice::store::sqlite {
namespace {

// The platform VFS writes at most this many bytes per call: os_unix.c (seekAndWriteFd) masks a
// larger count with it, and a count that masks to 0 fails as SQLITE_FULL. So a run is written
// once it would pass this, 31 frames of 4 KB: a batch of 64 creates of 10 KB bodies is a few
// writes instead of a few hundred.
constexpr size_t kMostGathered = 0x1ffff;

sqlite3_vfs* platform_vfs = nullptr;

struct GatheringFile {
  sqlite3_file base;  // first: SQLite hands this struct's address to every method
  sqlite3_file* wal;  // the platform VFS's file, in the same allocation (see Open)
  std::string pending;
  sqlite3_int64 pending_offset = 0;
};

constexpr size_t kWalFileOffset = (sizeof(GatheringFile) + alignof(std::max_align_t) - 1) /
                                  alignof(std::max_align_t) * alignof(std::max_align_t);

GatheringFile& Gathering(sqlite3_file* file) { return *reinterpret_cast<GatheringFile*>(file); }
sqlite3_file* Wal(sqlite3_file* file) { return Gathering(file).wal; }

int Flush(GatheringFile& g) {
  if (g.pending.empty()) return SQLITE_OK;
  const int rc = g.wal->pMethods->xWrite(g.wal, g.pending.data(),
                                         static_cast<int>(g.pending.size()), g.pending_offset);
  g.pending.clear();
  return rc;
}

int Close(sqlite3_file* file) {
  GatheringFile& g = Gathering(file);
  const int flushed = Flush(g);
  sqlite3_file* wal = g.wal;
  g.~GatheringFile();
  const int closed = wal->pMethods->xClose(wal);
  return flushed != SQLITE_OK ? flushed : closed;
}

int Write(sqlite3_file* file, const void* bytes, int amount, sqlite3_int64 offset) {
  GatheringFile& g = Gathering(file);
  const auto size = static_cast<size_t>(amount);
  const bool continues = !g.pending.empty() &&
                         offset == g.pending_offset + static_cast<sqlite3_int64>(g.pending.size());
  if (continues && g.pending.size() + size <= kMostGathered) {
    g.pending.append(static_cast<const char*>(bytes), size);
    return SQLITE_OK;
  }
  if (const int rc = Flush(g); rc != SQLITE_OK) return rc;
  if (size > kMostGathered) return g.wal->pMethods->xWrite(g.wal, bytes, amount, offset);
  g.pending.assign(static_cast<const char*>(bytes), size);
  g.pending_offset = offset;
  return SQLITE_OK;
}

// Every method below first writes what is gathered, so it sees the file SQLite believes it wrote.
int Read(sqlite3_file* file, void* into, int amount, sqlite3_int64 offset) {
  if (const int rc = Flush(Gathering(file)); rc != SQLITE_OK) return rc;
  return Wal(file)->pMethods->xRead(Wal(file), into, amount, offset);
}
int Truncate(sqlite3_file* file, sqlite3_int64 size) {
  if (const int rc = Flush(Gathering(file)); rc != SQLITE_OK) return rc;
  return Wal(file)->pMethods->xTruncate(Wal(file), size);
}
int Sync(sqlite3_file* file, int flags) {
  if (const int rc = Flush(Gathering(file)); rc != SQLITE_OK) return rc;
  return Wal(file)->pMethods->xSync(Wal(file), flags);
}
int FileSize(sqlite3_file* file, sqlite3_int64* size) {
  if (const int rc = Flush(Gathering(file)); rc != SQLITE_OK) return rc;
  return Wal(file)->pMethods->xFileSize(Wal(file), size);
}
int FileControl(sqlite3_file* file, int op, void* arg) {
  if (const int rc = Flush(Gathering(file)); rc != SQLITE_OK) return rc;
  return Wal(file)->pMethods->xFileControl(Wal(file), op, arg);
}
int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** into) {
  *into = nullptr;
  if (const int rc = Flush(Gathering(file)); rc != SQLITE_OK) return rc;
  if (Wal(file)->pMethods->iVersion < 3) return SQLITE_OK;  // no mapping: SQLite reads instead
  return Wal(file)->pMethods->xFetch(Wal(file), offset, amount, into);
}

// A WAL is not locked or shared-memory mapped itself (its database file is), but SQLite may
// still ask; these pass through.
int Lock(sqlite3_file* file, int level) { return Wal(file)->pMethods->xLock(Wal(file), level); }
int Unlock(sqlite3_file* file, int level) { return Wal(file)->pMethods->xUnlock(Wal(file), level); }
int CheckReservedLock(sqlite3_file* file, int* out) {
  return Wal(file)->pMethods->xCheckReservedLock(Wal(file), out);
}
int SectorSize(sqlite3_file* file) { return Wal(file)->pMethods->xSectorSize(Wal(file)); }
int DeviceCharacteristics(sqlite3_file* file) {
  return Wal(file)->pMethods->xDeviceCharacteristics(Wal(file));
}
int ShmMap(sqlite3_file* file, int region, int size, int extend, void volatile** into) {
  if (Wal(file)->pMethods->iVersion < 2) return SQLITE_IOERR;
  return Wal(file)->pMethods->xShmMap(Wal(file), region, size, extend, into);
}
int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
  if (Wal(file)->pMethods->iVersion < 2) return SQLITE_IOERR;
  return Wal(file)->pMethods->xShmLock(Wal(file), offset, n, flags);
}
void ShmBarrier(sqlite3_file* file) {
  if (Wal(file)->pMethods->iVersion >= 2) Wal(file)->pMethods->xShmBarrier(Wal(file));
}
int ShmUnmap(sqlite3_file* file, int delete_flag) {
  if (Wal(file)->pMethods->iVersion < 2) return SQLITE_OK;
  return Wal(file)->pMethods->xShmUnmap(Wal(file), delete_flag);
}
int Unfetch(sqlite3_file* file, sqlite3_int64 offset, void* mapped) {
  if (Wal(file)->pMethods->iVersion < 3) return SQLITE_OK;
  return Wal(file)->pMethods->xUnfetch(Wal(file), offset, mapped);
}

constexpr sqlite3_io_methods kGatheringMethods = {
    3,
    Close,
    Read,
    Write,
    Truncate,
    Sync,
    FileSize,
    Lock,
    Unlock,
    CheckReservedLock,
    FileControl,
    SectorSize,
    DeviceCharacteristics,
    ShmMap,
    ShmLock,
    ShmBarrier,
    ShmUnmap,
    Fetch,
    Unfetch,
};

int Open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  // Database files, journals and temporary files are the platform VFS's own, opened in place: the
  // space SQLite gives each file is at least the platform's (szOsFile below).
  if ((flags & SQLITE_OPEN_WAL) == 0) {
    return platform_vfs->xOpen(platform_vfs, name, file, flags, out_flags);
  }
  auto* wal = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kWalFileOffset);
  wal->pMethods = nullptr;
  const int rc = platform_vfs->xOpen(platform_vfs, name, wal, flags, out_flags);
  if (rc != SQLITE_OK) {
    // A file whose methods are unset is not closed by SQLite: close what the platform left open.
    if (wal->pMethods != nullptr) wal->pMethods->xClose(wal);
    file->pMethods = nullptr;
    return rc;
  }
  auto* g = new (file) GatheringFile{};
  g->wal = wal;
  g->base.pMethods = &kGatheringMethods;
  return SQLITE_OK;
}

// The rest of a VFS (names, randomness, time, dynamic loading) is the platform's.
int Delete(sqlite3_vfs*, const char* name, int sync_dir) {
  return platform_vfs->xDelete(platform_vfs, name, sync_dir);
}
int Access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return platform_vfs->xAccess(platform_vfs, name, flags, out);
}
int FullPathname(sqlite3_vfs*, const char* name, int size, char* out) {
  return platform_vfs->xFullPathname(platform_vfs, name, size, out);
}
void* DlOpen(sqlite3_vfs*, const char* name) { return platform_vfs->xDlOpen(platform_vfs, name); }
void DlError(sqlite3_vfs*, int size, char* out) { platform_vfs->xDlError(platform_vfs, size, out); }
void (*DlSym(sqlite3_vfs*, void* handle, const char* symbol))(void) {
  return platform_vfs->xDlSym(platform_vfs, handle, symbol);
}
void DlClose(sqlite3_vfs*, void* handle) { platform_vfs->xDlClose(platform_vfs, handle); }
int Randomness(sqlite3_vfs*, int size, char* out) {
  return platform_vfs->xRandomness(platform_vfs, size, out);
}
int Sleep(sqlite3_vfs*, int microseconds) {
  return platform_vfs->xSleep(platform_vfs, microseconds);
}
int CurrentTime(sqlite3_vfs*, double* out) { return platform_vfs->xCurrentTime(platform_vfs, out); }
int GetLastError(sqlite3_vfs*, int size, char* out) {
  return platform_vfs->xGetLastError(platform_vfs, size, out);
}
int CurrentTimeInt64(sqlite3_vfs*, sqlite3_int64* out) {
  return platform_vfs->xCurrentTimeInt64(platform_vfs, out);
}

constexpr const char* kName = "sluice-wal-gathering";

}  // namespace

const char* WalWriteGatheringVfs() {
  static std::once_flag registered;
  static sqlite3_vfs vfs{};
  std::call_once(registered, [] {
    platform_vfs = sqlite3_vfs_find(nullptr);
    if (platform_vfs == nullptr) throw std::runtime_error("sqlite: no default VFS to wrap");
    // Version 2 methods at most (xCurrentTimeInt64): the platform's xSetSystemCall family is for
    // SQLite's own tests.
    vfs.iVersion = 2;
    vfs.szOsFile = static_cast<int>(kWalFileOffset) + platform_vfs->szOsFile;
    vfs.mxPathname = platform_vfs->mxPathname;
    vfs.zName = kName;
    vfs.xOpen = Open;
    vfs.xDelete = Delete;
    vfs.xAccess = Access;
    vfs.xFullPathname = FullPathname;
    vfs.xDlOpen = DlOpen;
    vfs.xDlError = DlError;
    vfs.xDlSym = DlSym;
    vfs.xDlClose = DlClose;
    vfs.xRandomness = Randomness;
    vfs.xSleep = Sleep;
    vfs.xCurrentTime = CurrentTime;
    vfs.xGetLastError = GetLastError;
    vfs.xCurrentTimeInt64 = CurrentTimeInt64;
    sqlite3_vfs_register(&vfs, /*makeDflt=*/0);
  });
  return kName;
}

}  // namespace sluice::store::sqlite
