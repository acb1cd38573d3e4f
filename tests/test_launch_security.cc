// test_launch_security.cc - the job secret (KOLO_SECRET_FILE, the warning
// about a derived one, never in a log), what kolo says by default about
// malformed settings and a root that is not there, and the bootstrap's
// listeners: bound to the chosen address only, and not stalled by strangers.
//
// Messages shown "by default" are checked in forked children whose stderr the
// parent reads (kt::run_children), with KOLO_DEBUG unset there.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "util/free_port.h"
#include "util/proc_util.h"

extern "C" {
#include "common/config.h"
#include "common/log.h"
#include "core/rendezvous.h"
#include "transport/bootstrap.h"
}

namespace {

const char *const kHex = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

int count_of(const std::string &text, const std::string &part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) n++;
  return n;
}

// A child with KOLO_DEBUG as given (nullptr: unset) and no secret set.
int with_log_level(const char *level, const std::function<int()> &body) {
  kt::clear_launcher_env();
  unsetenv("KOLO_SECRET_FILE");
  unsetenv("KOLO_DEBUG_FILE");
  if (level) setenv("KOLO_DEBUG", level, 1);
  else unsetenv("KOLO_DEBUG");
  kolo_log_reset();
  return body();
}

std::string child_stderr(const char *level, const std::function<int()> &body) {
  auto res = kt::run_children(1, [&](int) { return with_log_level(level, body); }, 60000);
  EXPECT_EQ(kt::children_failures(res), "");
  return res[0].output;
}

int derive_twice() {
  kolo_uid uid;
  for (int i = 0; i < 2; i++)
    if (kolo_rendezvous_uid("KOLO_ROOT", "127.0.0.1:29400", 2, &uid) != koloSuccess) return 1;
  return 0;
}

const char *const kDerivedWarning = "derived from the launcher's job id, which anyone on the cluster can compute";

TEST(JobSecret, DerivedSecretWarnsByDefaultOncePerProcess) {
  std::string out = child_stderr(nullptr, derive_twice);
  EXPECT_EQ(count_of(out, kDerivedWarning), 1) << out;
  EXPECT_TRUE(out.find("KOLO_SECRET_FILE") != std::string::npos) << out;
  // KOLO_DEBUG=NONE, said explicitly, silences it.
  out = child_stderr("NONE", derive_twice);
  EXPECT_EQ(count_of(out, kDerivedWarning), 0) << out;
}

std::string secret_file(mode_t mode, const std::string &content) {
  char path[] = "/tmp/kolo-secret-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, content.data(), content.size()), (ssize_t)content.size());
  EXPECT_EQ(fchmod(fd, mode), 0);
  close(fd);
  return path;
}

koloResult_t uid_from_file(const std::string &path, kolo_uid *uid) {
  kt::ScopedEnv file("KOLO_SECRET_FILE", path);
  unsetenv("KOLO_SECRET");
  return kolo_rendezvous_uid("KOLO_ROOT", "127.0.0.1:29400", 2, uid);
}

TEST(JobSecret, FileOfMode0600IsRead) {
  std::string path = secret_file(0600, std::string(kHex) + "\n");
  kolo_uid uid;
  ASSERT_EQ(uid_from_file(path, &uid), koloSuccess) << koloGetLastError(nullptr);
  for (int i = 0; i < KOLO_SECRET_BYTES; i++)
    EXPECT_EQ(uid.secret[i], (uint8_t)strtoul(std::string(kHex + 2 * i, 2).c_str(), nullptr, 16)) << i;
  unlink(path.c_str());
}

TEST(JobSecret, FileOthersCanReadIsRefused) {
  for (mode_t mode : {0640, 0604, 0644}) {
    std::string path = secret_file(mode, kHex);
    kolo_uid uid;
    EXPECT_EQ(uid_from_file(path, &uid), koloInvalidArgument);
    std::string msg = koloGetLastError(nullptr);
    char want[16];
    snprintf(want, sizeof want, "mode %04o", (unsigned)mode);
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
    unlink(path.c_str());
  }
}

TEST(JobSecret, MissingOrMalformedFileIsRefused) {
  kolo_uid uid;
  EXPECT_EQ(uid_from_file("/tmp/kolo-no-such-secret-file", &uid), koloSystemError);
  EXPECT_NE(std::string(koloGetLastError(nullptr)).find("/tmp/kolo-no-such-secret-file"), std::string::npos);
  std::string path = secret_file(0600, "not hex at all, but 32 chars!!!!");
  EXPECT_EQ(uid_from_file(path, &uid), koloInvalidArgument);
  EXPECT_NE(std::string(koloGetLastError(nullptr)).find("is not hex"), std::string::npos);
  unlink(path.c_str());
}

// ---- settings ---------------------------------------------------------------------

TEST(Settings, MalformedValueIsReportedByDefaultOnce) {
  std::string out = child_stderr(nullptr, [] {
    setenv("KOLO_TIMEOUT_MS", "abc", 1);
    int64_t a = kolo_param_int("KOLO_TIMEOUT_MS"), b = kolo_param_int("KOLO_TIMEOUT_MS");
    return a == 300000 && b == 300000 ? 0 : 1;
  });
  EXPECT_EQ(count_of(out, "KOLO_TIMEOUT_MS=abc is not an integer"), 1) << out;
  EXPECT_NE(out.find("using the default 300000"), std::string::npos) << out;
}

TEST(Settings, RootPortOutOfRangeIsRefused) {
  kt::ScopedEnv secret("KOLO_SECRET", kHex);
  for (const char *where : {"127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:-5", "127.0.0.1:80x"}) {
    kolo_uid uid;
    EXPECT_EQ(kolo_rendezvous_uid("KOLO_ROOT", where, 2, &uid), koloInvalidArgument) << where;
    std::string msg = koloGetLastError(nullptr);
    EXPECT_NE(msg.find("is not a number in 1..65535"), std::string::npos) << msg;
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
  }
}

TEST(Settings, TorchrunPortRuleRefusesThePortPast65535) {
  std::string out = child_stderr("NONE", [] {
    setenv("KOLO_RANK", "0", 1);
    setenv("KOLO_WORLD_SIZE", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "65535", 1);
    koloComm_t comm = nullptr;
    if (koloCommInitFromEnv(&comm, nullptr) != koloInvalidArgument) return 1;
    fprintf(stderr, "%s\n", koloGetLastError(nullptr));
    return 0;
  });
  EXPECT_NE(out.find("MASTER_PORT 65535 + KOLO_TORCH_PORT_OFFSET 1 is not a port"), std::string::npos) << out;
}

TEST(Settings, AbsentRootIsReportedWithinSeconds) {
  int port = kt_free_port();
  std::string where = "127.0.0.1:" + std::to_string(port);
  std::string out = child_stderr(nullptr, [&] {
    setenv("KOLO_SECRET", kHex, 1);
    kolo_uid uid;
    if (kolo_rendezvous_uid("KOLO_ROOT", where.c_str(), 2, &uid) != koloSuccess) return 1;
    kolo_errbuf eb{};
    kolo_bootstrap *bs = nullptr;
    koloResult_t res = kolo_bootstrap_init(&uid, 1, 2, 7000, &eb, &bs);
    return res == koloTimeout ? 0 : 2;
  });
  EXPECT_EQ(count_of(out, "still connecting to root " + where + " after 5 s"), 1) << out;
}

}  // namespace
