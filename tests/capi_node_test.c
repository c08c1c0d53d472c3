/* The C API as a client of engram-served (engram_store_options.node): a
 * gather through the service is exact; while the service is stopped
 * (SIGSTOP) an open and a gather of missed rows fail at their deadlines with
 * ENGRAM_DEADLINE_EXCEEDED, and the session answers again once it runs; once
 * the service is killed a gather fails with ENGRAM_UNAVAILABLE instead of
 * hanging. argv[1] is the build directory (where engram-gen and
 * engram-served are). */
#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engram/engram.h"
#include "tests/testing/capi_check.h"

enum { kRecord = 264, kRows = 3000, kGather = 50 };

static double Seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* What a client may not ask for, refused before it connects. */
/* Stops the process and waits until every thread of it is stopped: a signal
 * is delivered when its target next runs. */
static void StopProcess(pid_t pid) {
  kill(pid, SIGSTOP);
  char tasks[64];
  snprintf(tasks, sizeof tasks, "/proc/%d/task", (int)pid);
  for (int tries = 0; tries < 10000; ++tries) {
    int running = 0, seen = 0;
    DIR* d = opendir(tasks);
    if (d == NULL) return;
    for (struct dirent* e; (e = readdir(d)) != NULL;) {
      if (e->d_name[0] == '.') continue;
      char path[sizeof tasks + sizeof e->d_name + sizeof "//stat"], buf[512] = {0};
      snprintf(path, sizeof path, "%s/%s/stat", tasks, e->d_name);
      FILE* f = fopen(path, "r");
      if (f == NULL) continue;
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      const char* close = strrchr(buf, ')');
      if (n == 0 || close == NULL || close[1] == 0 || close[2] == 0) continue;
      ++seen;
      if (close[2] != 'T' && close[2] != 't') ++running;
    }
    closedir(d);
    if (seen > 0 && running == 0) return;
    usleep(1000);
  }
}

static void CheckRefusedOptions(const engram_store_options* client) {
  engram_store* store = NULL;
  engram_store_options o = *client;
  o.node = "";
  CHECK(engram_store_open(&o, &store) == ENGRAM_INVALID_ARGUMENT && store == NULL);
  CHECK(strstr(engram_last_error(), "empty socket path") != NULL);
  o = *client;
  o.cache_policy = "legacy";
  CHECK(engram_store_open(&o, &store) == ENGRAM_INVALID_ARGUMENT && store == NULL);
  CHECK(strstr(engram_last_error(), "cache_policy") != NULL);
  o = *client;
  o.node_call_timeout_ms = 3600001;
  CHECK(engram_store_open(&o, &store) == ENGRAM_INVALID_ARGUMENT && store == NULL);
  CHECK(strstr(engram_last_error(), "node_call_timeout_ms") != NULL);
}

/* With the service stopped: an open fails after its open deadline, and a
 * gather of rows the client has not seen after its call deadline, both with
 * ENGRAM_DEADLINE_EXCEEDED; the session outlives the deadline, so once the
 * service runs again the same store gathers `fresh` as `reference` does. */
static void CheckDeadlines(const engram_store_options* client, pid_t service, engram_store* reference) {
  engram_store_options quick_options = *client;
  quick_options.node_call_timeout_ms = 300;
  engram_store* quick = NULL;
  CHECK(engram_store_open(&quick_options, &quick) == ENGRAM_OK);
  if (!quick) return;
  uint64_t fresh[kGather];
  for (int i = 0; i < kGather; ++i) fresh[i] = (uint64_t)(2000 + i);  /* never gathered before */
  unsigned char* got = malloc((size_t)kGather * kRecord);
  unsigned char* want = malloc((size_t)kGather * kRecord);
  engram_gather_result r;
  memset(&r, 0, sizeof r);
  r.size = sizeof r;

  StopProcess(service);
  double start = Seconds();
  CHECK(engram_gather_rows(quick, 0, fresh, kGather, got, kRecord, &r) == ENGRAM_DEADLINE_EXCEEDED);
  double waited = Seconds() - start;
  CHECK(waited >= 0.29 && waited < 10);
  CHECK(strstr(engram_last_error(), "engram-served") != NULL);
  engram_store_options stopped = *client;
  stopped.node_open_timeout_ms = 300;
  engram_store* never = NULL;
  start = Seconds();
  CHECK(engram_store_open(&stopped, &never) == ENGRAM_DEADLINE_EXCEEDED && never == NULL);
  waited = Seconds() - start;
  CHECK(waited >= 0.29 && waited < 10);
  kill(service, SIGCONT);

  /* A loaded machine may take the service past 300 ms again; the session
   * must never be lost. */
  engram_status after = ENGRAM_DEADLINE_EXCEEDED;
  for (int i = 0; i < 20 && after == ENGRAM_DEADLINE_EXCEEDED; ++i) {
    after = engram_gather_rows(quick, 0, fresh, kGather, got, kRecord, &r);
  }
  CHECK(after == ENGRAM_OK);
  CHECK(engram_gather_rows(reference, 0, fresh, kGather, want, kRecord, &r) == ENGRAM_OK);
  CHECK(memcmp(got, want, (size_t)kGather * kRecord) == 0);
  CHECK(strcmp(engram_status_string(ENGRAM_DEADLINE_EXCEEDED), "Deadline exceeded") == 0);
  engram_store_close(quick);
  free(got);
  free(want);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: capi_node_test BUILD_DIR\n");
    return 2;
  }
  char dir[] = "/tmp/engram-capi-node-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  char table[256], socket_path[256], cmd[1024];
  snprintf(table, sizeof table, "%s/t.engram", dir);
  snprintf(socket_path, sizeof socket_path, "%s/node.sock", dir);
  snprintf(cmd, sizeof cmd, "'%s/engram-gen' --rows %d --seed 5 '%s' > /dev/null 2>&1", argv[1], kRows, table);
  if (system(cmd) != 0) return 2;

  /* The service: fork/exec, ready once its socket answers. */
  char served[512];
  snprintf(served, sizeof served, "%s/engram-served", argv[1]);
  const pid_t parent = getpid();
  const pid_t service = fork();
  if (service == 0) {
    /* Dies with this test, however it ends. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    execl(served, served, "--socket", socket_path, "--table", table, "--cache-bytes", "8MiB", "--log-level", "warn",
          (char*)NULL);
    _exit(127);
  }
  const char* paths[] = {table};
  engram_store_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.table_paths = paths;
  o.table_count = 1;
  o.node = socket_path;
  o.node_client_name = "capi";
  engram_store* store = NULL;
  engram_status s = ENGRAM_UNAVAILABLE;
  for (int i = 0; i < 300 && s == ENGRAM_UNAVAILABLE; ++i) {
    s = engram_store_open(&o, &store);
    if (s == ENGRAM_UNAVAILABLE) usleep(20000);
  }
  CHECK(s == ENGRAM_OK);
  if (s == ENGRAM_OK) {
    uint64_t ids[kGather];
    for (int i = 0; i < kGather; ++i) ids[i] = (uint64_t)(i * 37) % kRows;
    unsigned char* rows = malloc((size_t)kGather * kRecord);
    unsigned char* again = malloc((size_t)kGather * kRecord);
    engram_gather_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    CHECK(engram_gather_rows(store, 0, ids, kGather, rows, kRecord, &r) == ENGRAM_OK);
    CHECK(r.misses == kGather);
    CHECK(engram_gather_rows(store, 0, ids, kGather, again, kRecord, &r) == ENGRAM_OK);
    CHECK(r.hits == kGather);
    CHECK(memcmp(rows, again, (size_t)kGather * kRecord) == 0);
    /* An older caller's struct, without the deadlines: their defaults. */
    engram_store_options older = o;
    older.size = offsetof(engram_store_options, node_open_timeout_ms);
    engram_store* old_caller = NULL;
    CHECK(engram_store_open(&older, &old_caller) == ENGRAM_OK);
    engram_store_close(old_caller);
    CheckRefusedOptions(&o);
    CheckDeadlines(&o, service, store);
    kill(service, SIGKILL);
    waitpid(service, NULL, 0);
    /* The client learns of the death when its receiving thread reads the
     * end of the stream: until then a gather of cached rows may still be
     * served, exactly, from the memory it maps. Within moments it fails. */
    engram_status after = ENGRAM_OK;
    for (int i = 0; i < 500 && after == ENGRAM_OK; ++i) {
      after = engram_gather_rows(store, 0, ids, kGather, again, kRecord, &r);
      if (after == ENGRAM_OK) {
        CHECK(memcmp(rows, again, (size_t)kGather * kRecord) == 0);
        usleep(10000);
      }
    }
    CHECK(after == ENGRAM_UNAVAILABLE);
    CHECK(strstr(engram_last_error(), "engram-served") != NULL);
    CHECK(strcmp(engram_status_string(ENGRAM_UNAVAILABLE), "Unavailable") == 0);
    engram_store_close(store);
    free(rows);
    free(again);
  } else {
    kill(service, SIGKILL);
    waitpid(service, NULL, 0);
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 2;
  return failures == 0 ? 0 : 1;
}
