// A SQLite VFS that gathers the consecutive writes SQLite makes to a write-ahead log into one
// write. SQLite writes each WAL frame with two calls (its 24-byte header, then its page), so a
// batch of creates that changes 70 pages costs 140 pwrite(2) calls before its one fdatasync; on
// the benchmark machine those calls were 6% of the server's CPU samples during creates
// (bench/results/profile/README.md), and gathered a create makes 2.7 write calls instead of 9.2
// (bench/results/creates-wal-gathering.md). Every file that is not a WAL, and every method other
// than a write that continues the gathered run, goes to the platform's VFS unchanged.
#pragma once

namespace sluice::store::sqlite {

/// The name to open connections with (sqlite3_open_v2's zVfs). Registers the VFS on first use,
/// over the platform's default, without making it the default.
const char* WalWriteGatheringVfs();

}  // namespace sluice::store::sqlite
