/* The C API from C: open a generated table, gather, compare with the bytes
 * engram-inspect dumps, read stats and metrics, and check error reporting.
 * argv[1] is the build directory (where engram-gen and engram-inspect are). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engram/engram.h"
#include "src/common/sanitizers.h"
#include "tests/testing/capi_check.h"

/* GET path from 127.0.0.1:port over a fresh connection; the answer (at most
 * capacity - 1 bytes, NUL-terminated) until the server closes, or 5 s pass. */
static void http_get(uint16_t port, const char* path, char* answer, size_t capacity) {
  answer[0] = '\0';
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char request[256];
  int n = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
  if (connect(fd, (struct sockaddr*)&sa, sizeof sa) == 0 && write(fd, request, (size_t)n) == n) {
    size_t used = 0;
    for (int rounds = 0; rounds < 50 && used + 1 < capacity; ++rounds) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      ssize_t got = read(fd, answer + used, capacity - 1 - used);
      if (got <= 0) break;
      used += (size_t)got;
    }
    answer[used] = '\0';
  }
  close(fd);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: capi_test BUILD_DIR\n");
    return 2;
  }
  char dir[] = "/tmp/engram-capi-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  char table[256], dump[256], cmd[1024];
  snprintf(table, sizeof table, "%s/layer.engram", dir);
  snprintf(dump, sizeof dump, "%s/rows.bin", dir);
  snprintf(cmd, sizeof cmd, "%s/engram-gen --rows 5000 --record-bytes 264 --seed 3 %s >/dev/null", argv[1], table);
  CHECK(system(cmd) == 0);
  snprintf(cmd, sizeof cmd, "%s/engram-inspect dump %s --rows 7,4999,7,1234 --raw > %s", argv[1], table, dump);
  CHECK(system(cmd) == 0);
  unsigned char expected[4 * 264];
  FILE* f = fopen(dump, "rb");
  CHECK(f != NULL);
  if (f) {
    CHECK(fread(expected, 1, sizeof expected, f) == sizeof expected);
    fclose(f);
  }

  const char* paths[] = {table};
  engram_store_options o;
  memset(&o, 0, sizeof o);
  /* A struct without its size is refused, with a message saying what to set. */
  engram_store* unsized = NULL;
  CHECK(engram_store_open(&o, &unsized) == ENGRAM_INVALID_ARGUMENT && unsized == NULL);
  CHECK(strstr(engram_last_error(), "sizeof(engram_store_options)") != NULL);
  o.size = sizeof o;
  o.table_paths = paths;
  o.table_count = 1;
  o.cache_bytes = 4 << 20;
  o.cache_policy = "legacy";
  engram_store* store = NULL;
  CHECK(engram_store_open(&o, &store) == ENGRAM_OK);
  if (!store) return 1;
  CHECK(engram_table_count(store) == 1);
  CHECK(engram_record_bytes(store, 0) == 264);
  CHECK(engram_row_count(store, 0) == 5000);

  uint64_t ids[4] = {7, 4999, 7, 1234};
  unsigned char rows[4 * 264];
  engram_gather_result r;
  memset(&r, 0, sizeof r);
  r.size = sizeof r;
  CHECK(engram_gather_rows(store, 0, ids, 4, rows, 264, &r) == ENGRAM_OK);
  CHECK(memcmp(rows, expected, sizeof rows) == 0);
  CHECK(r.distinct_rows == 3 && r.misses == 3 && r.hits == 0);
  CHECK(r.cache_nanoseconds + r.disk_nanoseconds <= r.wait_nanoseconds);

  engram_gather* g = NULL;
  memset(rows, 0, sizeof rows);
  CHECK(engram_gather_start(store, 0, ids, 4, rows, 264, &g) == ENGRAM_OK);
  CHECK(engram_gather_wait(g, &r) == ENGRAM_OK);
  CHECK(memcmp(rows, expected, sizeof rows) == 0);
  CHECK(r.hits == 3);

  uint64_t bad[1] = {5000};
  CHECK(engram_gather_rows(store, 0, bad, 1, rows, 264, &r) == ENGRAM_OUT_OF_RANGE);
  CHECK(strstr(engram_last_error(), "5000") != NULL);

  uint64_t ahead[2] = {10, 11};
  CHECK(engram_read_ahead(store, 0, ahead, 2) == ENGRAM_OK);
  engram_read_ahead_wait(store);
  engram_read_ahead_release(store, 0, ahead, 2);

  engram_cache_memory_wait(store); /* the background commit is done when it returns */
  engram_cache_memory_wait(NULL);  /* a no-op */
  memset(rows, 0, sizeof rows);
  CHECK(engram_gather_rows(store, 0, ids, 4, rows, 264, &r) == ENGRAM_OK);
  CHECK(memcmp(rows, expected, sizeof rows) == 0);

  engram_table_stats s;
  memset(&s, 0, sizeof s);
  CHECK(engram_table_stats_get(store, 0, &s) == ENGRAM_INVALID_ARGUMENT); /* size 0 */
  s.size = sizeof s;
  CHECK(engram_table_stats_get(store, 0, &s) == ENGRAM_OK);
  CHECK(s.lookups == 9 && s.hits == 6 && s.misses == 3);
  CHECK(s.misses == s.inserts + s.refusals);
  CHECK(s.gathers == 4 && s.failed_gathers == 1);
  CHECK(s.read_ahead_rows == 2 && s.read_ahead_wasted_rows == 2);
  CHECK(s.rows_requested == 13 && s.failed_rows == 0);
  /* A caller built against an older, shorter struct gets only what fits:
   * nothing past its size is written. */
  {
    engram_table_stats older;
    memset(&older, 0xAB, sizeof older);
    older.size = offsetof(engram_table_stats, lookups);
    CHECK(engram_table_stats_get(store, 0, &older) == ENGRAM_OK);
    CHECK(older.row_count == 5000 && older.record_bytes == 264);
    CHECK(((const unsigned char*)&older)[offsetof(engram_table_stats, lookups)] == 0xAB);
    CHECK(older.gathers == 0xABABABABABABABABull);
  }
  CHECK(engram_table_stats_get(store, 9, &s) == ENGRAM_INVALID_ARGUMENT);

  size_t need = engram_metrics_text(store, NULL, 0);
  CHECK(need > 0);
  char* text = malloc(need + 1);
  CHECK(engram_metrics_text(store, text, need + 1) == need);
  CHECK(strstr(text, "engram_row_cache_hits_total{table=\"layer\"} 6") != NULL);
  free(text);

  /* The metrics port: 0 without an endpoint; with "127.0.0.1:0", the port
   * the system chose, serving this store's /metrics. */
  CHECK(engram_metrics_port(store) == 0);
  CHECK(engram_metrics_port(NULL) == 0);
  {
    engram_store_options served = o;
    served.metrics_listen = "127.0.0.1:0";
    engram_store* with_endpoint = NULL;
    CHECK(engram_store_open(&served, &with_endpoint) == ENGRAM_OK);
    if (with_endpoint) {
      uint16_t port = engram_metrics_port(with_endpoint);
      CHECK(port != 0);
      CHECK(engram_gather_rows(with_endpoint, 0, ids, 4, rows, 264, &r) == ENGRAM_OK);
      CHECK(engram_gather_rows(with_endpoint, 0, ids, 4, rows, 264, &r) == ENGRAM_OK);
      static char answer[1 << 18];
      http_get(port, "/metrics", answer, sizeof answer);
      CHECK(strncmp(answer, "HTTP/1.1 200", 12) == 0);
      CHECK(strstr(answer, "engram_row_cache_hits_total{table=\"layer\"} 3") != NULL);
      engram_store_close(with_endpoint);
    }
  }

  /* Reads over two io_uring rings (where io_uring is there; else the pread
   * fallback) give the same rows; more rings than reads in flight are refused. */
  {
    engram_store_options ringed = o;
    ringed.io_rings = 2;
    engram_store* two_rings = NULL;
    CHECK(engram_store_open(&ringed, &two_rings) == ENGRAM_OK);
    if (two_rings) {
      memset(rows, 0, sizeof rows);
      CHECK(engram_gather_rows(two_rings, 0, ids, 4, rows, 264, &r) == ENGRAM_OK);
      CHECK(memcmp(rows, expected, sizeof rows) == 0 && r.misses == 3);
      engram_store_close(two_rings);
    }
    ringed.io_rings = 1000;
    CHECK(engram_store_open(&ringed, &two_rings) == ENGRAM_INVALID_ARGUMENT && two_rings == NULL);
    CHECK(strstr(engram_last_error(), "rings") != NULL);
  }

  /* A stride so large that the rows would wrap round the address space is a
   * bad argument, not a write through a wrapped pointer. */
  CHECK(engram_gather_rows(store, 0, ids, 2, rows, (size_t)1 << 63, &r) == ENGRAM_INVALID_ARGUMENT);

  /* A corrupt block fails only its own rows: engram_gather_rows_checked
   * tells which rows of dst hold their row; those equal the true rows. */
  {
    char bad_table[256];
    snprintf(bad_table, sizeof bad_table, "%s/corrupt.engram", dir);
    snprintf(cmd, sizeof cmd, "cp %s %s", table, bad_table);
    CHECK(system(cmd) == 0);
    FILE* bf = fopen(bad_table, "r+b");
    CHECK(bf != NULL);
    if (bf) {
      CHECK(fseek(bf, 0, SEEK_END) == 0);
      long mid = ftell(bf) / 2;
      int c;
      CHECK(fseek(bf, mid, SEEK_SET) == 0);
      c = fgetc(bf);
      CHECK(fseek(bf, mid, SEEK_SET) == 0);
      fputc(c ^ 0x40, bf);
      fclose(bf);
    }
    enum { kAll = 5000 };
    uint64_t* all = malloc(kAll * sizeof *all);
    unsigned char* good = malloc((size_t)kAll * 264);
    unsigned char* got = malloc((size_t)kAll * 264);
    unsigned char* written = malloc(kAll);
    for (size_t i = 0; i < kAll; ++i) all[i] = i;
    CHECK(engram_gather_rows(store, 0, all, kAll, good, 264, &r) == ENGRAM_OK);
    const char* bad_paths[] = {bad_table};
    engram_store_options bo = o;
    bo.table_paths = bad_paths;
    engram_store* bad_store = NULL;
    CHECK(engram_store_open(&bo, &bad_store) == ENGRAM_OK);
    if (bad_store) {
      memset(written, 7, kAll);
      CHECK(engram_gather_rows_checked(bad_store, 0, all, kAll, got, 264, &r, written) == ENGRAM_CORRUPTION);
      size_t failed = 0;
      for (size_t i = 0; i < kAll; ++i) {
        CHECK(written[i] == 0 || written[i] == 1);
        if (written[i] == 0) {
          ++failed;
        } else if (memcmp(got + i * 264, good + i * 264, 264) != 0) {
          CHECK(!"a row marked written differs from the true row");
          break;
        }
      }
      CHECK(failed > 0 && failed < 20); /* one 4 KiB block's rows */
      /* A bad argument: every row is marked not written. */
      memset(written, 7, kAll);
      CHECK(engram_gather_rows_checked(bad_store, 0, all, kAll, got, 1, &r, written) == ENGRAM_INVALID_ARGUMENT);
      CHECK(written[0] == 0 && written[kAll - 1] == 0);
      engram_store_close(bad_store);
    }
    free(all);
    free(good);
    free(got);
    free(written);
  }

  /* A gather may be waited on after its store is closed: closing finishes
   * it (the handle holds no pointer into the closed store). */
  uint64_t cold[2] = {2000, 3000};
  unsigned char cold_rows[2 * 264];
  g = NULL;
  CHECK(engram_gather_start(store, 0, cold, 2, cold_rows, 264, &g) == ENGRAM_OK);
  engram_store_close(store);
  engram_status after_close = engram_gather_wait(g, &r);
  CHECK(after_close == ENGRAM_OK || after_close == ENGRAM_CANCELLED);

  /* Warm start: a store with a hot set saves it at close, and the next one
   * reads those rows back (engram_warm_up_wait), byte for byte. */
  char hot_set[256];
  snprintf(hot_set, sizeof hot_set, "%s/hot.set", dir);
  o.hot_set_path = hot_set;
  for (int round = 0; round < 2; ++round) {
    store = NULL;
    CHECK(engram_store_open(&o, &store) == ENGRAM_OK);
    if (!store) return 1;
    engram_warm_up_wait(store);
    engram_table_stats warm;
    memset(&warm, 0, sizeof warm);
    warm.size = sizeof warm;
    CHECK(engram_table_stats_get(store, 0, &warm) == ENGRAM_OK);
    CHECK(warm.warm_rows == (round == 0 ? 0u : 3u));
    CHECK(engram_gather_rows(store, 0, ids, 4, rows, 264, &r) == ENGRAM_OK);
    CHECK(memcmp(rows, expected, sizeof rows) == 0);
    CHECK(r.hits == (round == 0 ? 0u : 3u));
    engram_store_close(store);
  }
  o.hot_set_path = NULL;
  unlink(hot_set);

  const char* missing[] = {"/nonexistent/x.engram"};
  o.table_paths = missing;
  store = NULL;
  CHECK(engram_store_open(&o, &store) == ENGRAM_NOT_FOUND);
  CHECK(store == NULL);
  CHECK(strlen(engram_last_error()) > 0);
  CHECK(strcmp(engram_status_string(ENGRAM_CORRUPTION), "Corruption") == 0);
  CHECK(strcmp(engram_status_string((engram_status)256), "Unknown") == 0);
  CHECK(strcmp(engram_status_string((engram_status)-1), "Unknown") == 0);

  /* Rank tables: a 4-slot layer split over 2 ranks (engram-convert --ranks),
   * rank 1 opened by its manifest holds slots 1 and 3, whose rows are the
   * unsharded table's. */
  {
    char layout[256], full[256], manifest[256];
    snprintf(layout, sizeof layout, "%s/layout.json", dir);
    snprintf(full, sizeof full, "%s/full.engram", dir);
    snprintf(manifest, sizeof manifest, "%s/split.json", dir);
    FILE* lf = fopen(layout, "w");
    CHECK(lf != NULL);
    if (lf) {
      fputs("{\"layers\":[{\"layer_id\":1,\"orders\":[2,3],\"heads\":2,\"pad_id\":0,"
            "\"multipliers\":[\"1000003\",\"1000033\",\"1000037\"],\"primes\":[[1249,1259],[1277,1279]],"
            "\"offsets\":[[0,1249],[2508,3785]],\"total_rows\":5064}]}",
            lf);
      fclose(lf);
    }
    snprintf(cmd, sizeof cmd, "%s/engram-gen --layout %s --layer 1 --seed 4 --record-bytes 264 %s >/dev/null 2>&1",
             argv[1], layout, full);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s/engram-convert --table %s --ranks 2 %s 2>/dev/null", argv[1], full, manifest);
    CHECK(system(cmd) == 0);
    const char* full_paths[] = {full};
    const char* manifests[] = {manifest};
    engram_store_options ro = o;
    ro.table_paths = NULL;
    ro.table_count = 0;
    ro.cache_bytes = 4 << 20;
    ro.manifest_paths = manifests;
    ro.manifest_count = 1;
    ro.rank = 1;
    engram_store* rank_store = NULL;
    CHECK(engram_store_open(&ro, &rank_store) == ENGRAM_OK);
    engram_store_options fo = ro;
    fo.table_paths = full_paths;
    fo.table_count = 1;
    fo.manifest_paths = NULL;
    fo.manifest_count = 0;
    fo.rank = 0;
    engram_store* full_store = NULL;
    CHECK(engram_store_open(&fo, &full_store) == ENGRAM_OK);
    if (rank_store && full_store) {
      CHECK(engram_row_count(rank_store, 0) == 1259 + 1279);
      /* Local rows: slot 1's first and last, slot 3's first and last. */
      uint64_t local[4] = {0, 1258, 1259, 2537}, global[4] = {1249, 2507, 3785, 5063};
      unsigned char got[4 * 264], want[4 * 264];
      CHECK(engram_gather_rows(rank_store, 0, local, 4, got, 264, &r) == ENGRAM_OK);
      CHECK(engram_gather_rows(full_store, 0, global, 4, want, 264, &r) == ENGRAM_OK);
      CHECK(memcmp(got, want, sizeof got) == 0);
    }
    engram_store_close(rank_store);
    engram_store_close(full_store);
    ro.rank = 2;
    rank_store = NULL;
    CHECK(engram_store_open(&ro, &rank_store) == ENGRAM_INVALID_ARGUMENT && rank_store == NULL);
    CHECK(strstr(engram_last_error(), "has ranks 0..1") != NULL);
    fo.rank = 1; /* a rank without manifests */
    CHECK(engram_store_open(&fo, &full_store) == ENGRAM_INVALID_ARGUMENT);
    ro.manifest_paths = NULL;
    CHECK(engram_store_open(&ro, &rank_store) == ENGRAM_INVALID_ARGUMENT);
    for (int k = 0; k < 2; ++k) {
      snprintf(cmd, sizeof cmd, "%s/split.rank%d-of-2.engram", dir, k);
      unlink(cmd);
    }
    unlink(manifest);
    unlink(full);
    unlink(layout);
  }

#if !ENGRAM_UNDER_SANITIZER
  /* Out of memory is a status, not an exception through C: a child process
   * limits its address space so that the cache's index and slab (capped at
   * the table's 5,000 rows) fit but its 1 GiB sketch does not. (Sanitizers
   * reserve terabytes of address space, so this runs in the plain build
   * only.) */
  pid_t child = fork();
  if (child == 0) {
    long pages = 0;
    FILE* statm = fopen("/proc/self/statm", "r");
    if (!statm || fscanf(statm, "%ld", &pages) != 1) _exit(3);
    fclose(statm);
    rlim_t limit = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)512 << 20);
    struct rlimit as = {limit, limit};
    if (setrlimit(RLIMIT_AS, &as) != 0) _exit(4);
    o.table_paths = paths;
    o.cache_bytes = (uint64_t)2 << 30;
    o.cache_policy = "legacy,sketch_bytes=1073741824";
    store = NULL;
    engram_status st = engram_store_open(&o, &store);
    if (st != ENGRAM_RESOURCE_EXHAUSTED) {
      fprintf(stderr, "open under an address-space limit: %s (%s)\n", engram_status_string(st), engram_last_error());
      _exit(1);
    }
    /* The cache says what it could not allocate. */
    if (!strstr(engram_last_error(), "sketch")) {
      fprintf(stderr, "out-of-memory message: %s\n", engram_last_error());
      _exit(2);
    }
    _exit(0);
  }
  int child_status = 0;
  CHECK(child > 0 && waitpid(child, &child_status, 0) == child);
  CHECK(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0);
#endif

  unlink(table);
  unlink(dump);
  rmdir(dir);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("capi_test: all checks passed\n");
  return 0;
}
