// The PostgreSQL the backend tests run against: the server the CTest fixture started
// (scripts/testenv/postgres.sh), found through SLUICE_TEST_POSTGRES_URL or the file named by
// SLUICE_TEST_POSTGRES_URL_FILE. No server is a failure, never a skip: a backend tested only when
// convenient is not tested.
#pragma once

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

namespace sluice::store::testenv {

inline std::string PostgresUrl() {
  if (const char* url = std::getenv("SLUICE_TEST_POSTGRES_URL"); url && *url) return url;
  if (const char* file = std::getenv("SLUICE_TEST_POSTGRES_URL_FILE"); file && *file) {
    std::ifstream in(file);
    std::string url;
    if (in >> url) return url;
    throw std::runtime_error(std::string("no PostgreSQL URL in ") + file +
                             ": did the postgres fixture start?");
  }
  throw std::runtime_error(
      "set SLUICE_TEST_POSTGRES_URL (or run through ctest, whose fixture starts PostgreSQL with "
      "scripts/testenv/postgres.sh)");
}

/// `url` with its database name replaced.
inline std::string WithDatabase(const std::string& url, const std::string& db) {
  const size_t scheme = url.find("://");
  const size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  const size_t query = url.find('?', slash == std::string::npos ? 0 : slash);
  std::string base = url.substr(0, slash == std::string::npos ? url.size() : slash);
  std::string rest = query == std::string::npos ? "" : url.substr(query);
  return base + "/" + db + rest;
}

/// A loopback port nobody listens on: bound, then closed.
inline int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// A blocking connection for the tests' own statements (locks, stamps, checks).
class Session {
 public:
  explicit Session(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string message = PQerrorMessage(conn_);
      PQfinish(conn_);
      throw std::runtime_error("cannot connect to " + url + ": " + message);
    }
  }
  ~Session() { PQfinish(conn_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs `sql`; returns the first column of the first row ("" if none). Throws on error.
  std::string Exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string message = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error(sql + ": " + message);
    }
    std::string out = PQntuples(r) > 0 && PQnfields(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return out;
  }

 private:
  PGconn* conn_;
};

/// A database of its own for one test, created empty on the fixture's server and dropped after,
/// so tests can run in parallel.
class TestDatabase {
 public:
  explicit TestDatabase(std::string server_url = PostgresUrl())
      : server_url_(std::move(server_url)) {
    static std::atomic<int> counter{0};
    name_ = "sluice_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    Session(server_url_).Exec("CREATE DATABASE " + name_);
    url_ = WithDatabase(server_url_, name_);
  }
  ~TestDatabase() {
    try {
      Session(server_url_).Exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: %s\n", e.what());
    }
  }
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;
  const std::string& url() const { return url_; }

 private:
  std::string server_url_;
  std::string name_;
  std::string url_;
};

/// A PostgreSQL server of a test's own, for tests that stop and restart it.
class PrivateServer {
 public:
  PrivateServer() {
    dir_ = "/tmp/sluice-pg-" + std::to_string(::getpid()) + "-" +
           std::to_string(reinterpret_cast<uintptr_t>(this) & 0xffff);
    url_ = Script("start " + dir_ + " 0");
    if (url_.empty()) throw std::runtime_error("could not start a private PostgreSQL in " + dir_);
  }
  ~PrivateServer() {
    try {
      Script("stop " + dir_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: %s\n", e.what());
    }
  }
  PrivateServer(const PrivateServer&) = delete;
  PrivateServer& operator=(const PrivateServer&) = delete;

  const std::string& url() const { return url_; }
  /// Stops the server at once, keeping its data: an outage.
  void Pause() { Script("pause " + dir_); }
  /// Starts it again on the same port and data.
  void Resume() { Script("resume " + dir_); }

 private:
  static std::string Script(const std::string& args) {
    const char* script = std::getenv("SLUICE_TEST_POSTGRES_SCRIPT");
    const std::string command =
        std::string(script && *script ? script : SLUICE_POSTGRES_SCRIPT) + " " + args;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) throw std::runtime_error("cannot run " + command);
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
    if (::pclose(pipe) != 0) throw std::runtime_error("failed: " + command);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }

  std::string dir_;
  std::string url_;
};

}  // namespace sluice::store::testenv
