/* The C API's step staging from C: a stager over two generated layers (a
 * small hash layout embedded), a stage waited for layer by layer, each
 * staged record checked against its table's rows, the synchronous stage,
 * a step's row IDs in, completion words, the step ring, and the argument
 * errors.
 * argv[1] is the build directory (where engram-gen is). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/engram.h"
#include "tests/testing/capi_check.h"

enum { kRecord = 264, kSlots = 3, kRows = 311, kTokens = 40, kLayers = 2 };
/* One (order, head) slot per order: rows [offset, offset + prime). */
static const uint64_t kOffsets[kSlots] = {0, 101, 204};
static const uint64_t kPrimes[kSlots] = {101, 103, 107};

static const char kLayout[] =
    "{\"layers\": [{\"layer_id\": 1, \"orders\": [2, 3, 4], \"heads\": 1, \"pad_id\": 2,"
    " \"multipliers\": [\"76632096046245\", \"4839876093313\", \"35959672319349\", \"73987337458391\"],"
    " \"primes\": [[101], [103], [107]], \"offsets\": [[0], [101], [204]], \"total_rows\": 311}]}";

/* Counts the step ring's registrations (user = the counter). */
static engram_status CountRegistration(void* user, void* address, size_t bytes) {
  (void)address;
  (void)bytes;
  ++*(int*)user;
  return ENGRAM_OK;
}
static void CountUnregistration(void* user, void* address, size_t bytes) {
  (void)address;
  (void)bytes;
  --*(int*)user;
}

/* Whether `out` holds, for each [token][layer][slot] ID of `ids`, that row of its layer's table. */
static int StepHoldsRows(const unsigned char* out, const uint64_t* ids, size_t id_count,
                         unsigned char rows[][kRows * kRecord]) {
  for (size_t i = 0; i < id_count; ++i) {
    const int layer = (int)((i / kSlots) % kLayers);
    if (memcmp(out + i * kRecord, rows[layer] + ids[i] * kRecord, kRecord) != 0) return 0;
  }
  return 1;
}

/* Spins on a step's words as a GPU stream would, until each holds sequence; 0 after ~10 s. */
static int WaitForWords(const uint32_t* words, uint32_t sequence) {
  for (long spins = 0; spins < 100000000L; ++spins) {
    if (__atomic_load_n(&words[0], __ATOMIC_ACQUIRE) == sequence &&
        __atomic_load_n(&words[1], __ATOMIC_ACQUIRE) == sequence) {
      return 1;
    }
    if (spins % 1000 == 999) usleep(100);
  }
  return 0;
}

/* A result struct with its size set and every field zero. */
static engram_stage_result NewResult(void) {
  engram_stage_result r;
  memset(&r, 0, sizeof r);
  r.size = sizeof r;
  return r;
}

/* Whether record is row r of `rows` for some r in slot's range. */
static int IsRowOfSlot(const unsigned char* rows, int slot, const unsigned char* record) {
  for (uint64_t r = kOffsets[slot]; r < kOffsets[slot] + kPrimes[slot]; ++r) {
    if (memcmp(rows + r * kRecord, record, kRecord) == 0) return 1;
  }
  return 0;
}

/* Every record of layer `layer` in out is a row of that layer's table, from its slot's range. */
static int LayerHoldsItsRows(const unsigned char* out, const unsigned char* rows, int layer) {
  for (int t = 0; t < kTokens; ++t) {
    for (int s = 0; s < kSlots; ++s) {
      const unsigned char* record = out + (((size_t)t * kLayers + layer) * kSlots + s) * kRecord;
      if (!IsRowOfSlot(rows, s, record)) return 0;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: capi_stage_test BUILD_DIR\n");
    return 2;
  }
  char dir[] = "/tmp/engram-capi-stage-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  char layout[256], tables[kLayers][256], cmd[1024];
  snprintf(layout, sizeof layout, "%s/layout.json", dir);
  FILE* f = fopen(layout, "w");
  CHECK(f != NULL);
  if (!f) return 1;
  fputs(kLayout, f);
  fclose(f);
  for (int l = 0; l < kLayers; ++l) {
    snprintf(tables[l], sizeof tables[l], "%s/layer%d.engram", dir, l);
    snprintf(cmd, sizeof cmd, "%s/engram-gen --layout %s --layer 1 --seed %d %s >/dev/null", argv[1], layout, 20 + l,
             tables[l]);
    CHECK(system(cmd) == 0);
  }
  const char* paths[kLayers] = {tables[0], tables[1]};
  engram_store_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.table_paths = paths;
  o.table_count = kLayers;
  o.cache_bytes = 1 << 20;
  o.io_backend = "pread";
  engram_store* store = NULL;
  CHECK(engram_store_open(&o, &store) == ENGRAM_OK);
  if (!store) return 1;

  /* Every row of each table, to check staged records against. */
  static unsigned char rows[kLayers][kRows * kRecord];
  uint64_t ids[kRows];
  for (uint64_t r = 0; r < kRows; ++r) ids[r] = r;

  const size_t layer_tables[kLayers] = {0, 1};
  engram_stager* stager = NULL;
  CHECK(engram_stager_create(store, layer_tables, kLayers, NULL, &stager) == ENGRAM_OK);
  if (!stager) return 1;
  CHECK(engram_stager_layers(stager) == kLayers);
  CHECK(engram_stager_rows_per_token(stager) == kSlots);
  CHECK(engram_stager_output_bytes(stager, kTokens) == (size_t)kTokens * kLayers * kSlots * kRecord);

  uint32_t tokens[kTokens], history[3] = {7, 8, 9};
  for (int t = 0; t < kTokens; ++t) tokens[t] = 3 + (uint32_t)(t * 7919) % 500;
  static unsigned char out[kTokens * kLayers * kSlots * kRecord];
  memset(out, 0xee, sizeof out);
  engram_stage* stage = NULL;
  CHECK(engram_stage_start(stager, history, 3, tokens, kTokens, out, &stage) == ENGRAM_OK);
  if (!stage) return 1;
  /* Layer 0 first: its rows are all in out once its wait returns. */
  engram_stage_result first = NewResult();
  CHECK(engram_stage_wait_layer(stage, 0, &first) == ENGRAM_OK);
  CHECK(engram_stage_ready(stage, 0) == 1);
  CHECK(first.rows == (uint64_t)kTokens * kSlots);
  CHECK(first.misses > 0 && first.hits + first.misses == first.distinct_rows);
  CHECK(first.wait_nanoseconds > 0 && first.tokens == kTokens);
  engram_stage_result second = NewResult();
  CHECK(engram_stage_wait_layer(stage, 1, &second) == ENGRAM_OK);
  CHECK(engram_stage_ready(stage, 1) == 1);
  /* A layer out of range is refused, and the handle stays usable. */
  CHECK(engram_stage_ready(stage, 2) == -1);
  CHECK(strstr(engram_last_error(), "layer 2 out of range") != NULL);
  engram_stage_result bad = NewResult();
  CHECK(engram_stage_wait_layer(stage, 2, &bad) == ENGRAM_INVALID_ARGUMENT);
  engram_stage_result step = NewResult();
  CHECK(engram_stage_wait(stage, &step) == ENGRAM_OK);
  CHECK(step.rows == (uint64_t)kTokens * kLayers * kSlots);
  CHECK(step.misses == first.misses + second.misses && step.hits == first.hits + second.hits);
  CHECK(step.wait_nanoseconds >= first.wait_nanoseconds && step.wait_nanoseconds >= second.wait_nanoseconds);

  for (int l = 0; l < kLayers; ++l) {
    engram_gather_result g;
    memset(&g, 0, sizeof g);
    g.size = sizeof g;
    CHECK(engram_gather_rows(store, (size_t)l, ids, kRows, rows[l], kRecord, &g) == ENGRAM_OK);
    CHECK(LayerHoldsItsRows(out, rows[l], l));
  }
  /* The two tables differ (seeds 20, 21): layer 1's records are not layer 0's. */
  CHECK(!LayerHoldsItsRows(out, rows[0], 1));

  /* The same step again equals the first, byte for byte. */
  static unsigned char again[sizeof out];
  CHECK(engram_stage_start(stager, history, 3, tokens, kTokens, again, &stage) == ENGRAM_OK);
  engram_stage_result warm = NewResult();
  CHECK(engram_stage_wait(stage, &warm) == ENGRAM_OK);
  CHECK(memcmp(out, again, sizeof out) == 0);

  /* An old caller's smaller struct is written only as far as its size. */
  struct {
    engram_stage_result head;
  } small;
  memset(&small, 0x5a, sizeof small);
  small.head.size = offsetof(engram_stage_result, tokens) + sizeof(uint64_t);
  CHECK(engram_stage_start(stager, NULL, 0, tokens, 1, again, &stage) == ENGRAM_OK);
  CHECK(engram_stage_wait(stage, &small.head) == ENGRAM_OK);
  CHECK(small.head.tokens == 1);
  CHECK(small.head.rows == 0x5a5a5a5a5a5a5a5aull);

  /* The synchronous stage, with completion words: the same rows, and each
   * word holds the sequence number once the call returns. */
  static unsigned char synced[sizeof out];
  uint32_t words[kLayers] = {0, 0};
  engram_step_words w;
  memset(&w, 0, sizeof w);
  w.size = sizeof w;
  w.words = words;
  w.count = kLayers;
  w.sequence = 5;
  engram_stage_result sync_result = NewResult();
  CHECK(engram_stage_rows(stager, history, 3, tokens, kTokens, synced, &w, &sync_result) == ENGRAM_OK);
  CHECK(memcmp(out, synced, sizeof out) == 0);
  CHECK(words[0] == 5 && words[1] == 5);
  CHECK(sync_result.rows == (uint64_t)kTokens * kLayers * kSlots && sync_result.tokens == kTokens);
  w.sequence = 6;
  CHECK(engram_stage_start_with_words(stager, history, 3, tokens, kTokens, synced, &w, &stage) == ENGRAM_OK);
  CHECK(engram_stage_wait_layer(stage, 0, NULL) == ENGRAM_OK);
  CHECK(words[0] == 6);
  CHECK(engram_stage_wait(stage, NULL) == ENGRAM_OK);
  CHECK(words[1] == 6);

  /* A step's row IDs in, [token][layer][slot], as a GPU hash kernel writes them. */
  enum { kStepTokens = 5, kIds = kStepTokens * kLayers * kSlots };
  uint64_t step_ids[kIds];
  for (int i = 0; i < kIds; ++i) step_ids[i] = kOffsets[i % kSlots] + (uint64_t)(i * 31) % kPrimes[i % kSlots];
  static unsigned char by_ids[kStepTokens * kLayers * kSlots * kRecord];
  w.sequence = 7;
  engram_stage_result ids_result = NewResult();
  CHECK(engram_gather_step(stager, step_ids, kIds, by_ids, &w, &ids_result) == ENGRAM_OK);
  CHECK(StepHoldsRows(by_ids, step_ids, kIds, rows));
  CHECK(ids_result.tokens == kStepTokens && ids_result.rows == kIds);
  CHECK(words[0] == 7 && words[1] == 7);
  memset(by_ids, 0, sizeof by_ids);
  w.sequence = 8;
  CHECK(engram_gather_step_start(stager, step_ids, kIds, by_ids, &w, &stage) == ENGRAM_OK);
  CHECK(engram_stage_wait(stage, NULL) == ENGRAM_OK);
  CHECK(StepHoldsRows(by_ids, step_ids, kIds, rows));
  CHECK(words[0] == 8 && words[1] == 8);
  /* IDs that are not whole tokens, or past their table, and words not one per layer: refused, nothing written. */
  memset(by_ids, 0x5a, sizeof by_ids);
  CHECK(engram_gather_step(stager, step_ids, kIds - 1, by_ids, NULL, NULL) == ENGRAM_INVALID_ARGUMENT);
  CHECK(strstr(engram_last_error(), "not a whole number of tokens of 2 layers x 3 slots") != NULL);
  step_ids[4] = kRows; /* token 0, layer 1, slot 1 */
  CHECK(engram_gather_step(stager, step_ids, kIds, by_ids, NULL, NULL) == ENGRAM_OUT_OF_RANGE);
  CHECK(strstr(engram_last_error(), "at [token 0, layer 1, slot 1] is past the end") != NULL);
  CHECK(engram_gather_step_start(stager, step_ids, kIds, by_ids, NULL, &stage) == ENGRAM_OUT_OF_RANGE && !stage);
  step_ids[4] = 101;
  w.count = 3;
  CHECK(engram_gather_step(stager, step_ids, kIds, by_ids, &w, NULL) == ENGRAM_INVALID_ARGUMENT);
  CHECK(strstr(engram_last_error(), "3 words given, the step has 2 layers") != NULL);
  CHECK(engram_stage_start_with_words(stager, NULL, 0, tokens, 2, by_ids, &w, &stage) == ENGRAM_INVALID_ARGUMENT);
  w.count = kLayers;
  w.sequence = 0;
  CHECK(engram_stage_rows(stager, NULL, 0, tokens, 2, by_ids, &w, NULL) == ENGRAM_INVALID_ARGUMENT);
  CHECK(words[0] == 8 && words[1] == 8);
  CHECK(by_ids[0] == 0x5a && by_ids[sizeof by_ids - 1] == 0x5a);

  /* The step ring: buffers that never move, words set as layers land. */
  int registered = 0;
  engram_step_ring_options ro;
  memset(&ro, 0, sizeof ro);
  ro.size = sizeof ro;
  ro.slots = 2;
  ro.max_tokens = kStepTokens;
  ro.register_buffer = CountRegistration;
  ro.unregister_buffer = CountUnregistration;
  ro.user = &registered;
  engram_step_ring* ring = NULL;
  CHECK(engram_step_ring_create(stager, &ro, &ring) == ENGRAM_OK);
  if (!ring) return 1;
  CHECK(registered == 3); /* two buffers and the words */
  CHECK(engram_step_ring_slots(ring) == 2);
  CHECK(engram_step_ring_buffer_bytes(ring) == engram_stager_output_bytes(stager, kStepTokens));
  CHECK(engram_step_ring_buffer(ring, 2) == NULL && engram_step_ring_words(ring, 2) == NULL);
  size_t slot = 9;
  uint32_t sequence = 0;
  CHECK(engram_step_ring_start_ids(ring, step_ids, kIds, &slot, &sequence) == ENGRAM_OK);
  CHECK(slot == 0 && sequence == 1);
  CHECK(WaitForWords(engram_step_ring_words(ring, slot), sequence));
  CHECK(StepHoldsRows(engram_step_ring_buffer(ring, slot), step_ids, kIds, rows));
  engram_stage_result ring_result = NewResult();
  CHECK(engram_step_ring_wait(ring, slot, &ring_result) == ENGRAM_OK && ring_result.tokens == kStepTokens);
  CHECK(engram_step_ring_start_tokens(ring, history, 3, tokens, kStepTokens, &slot, &sequence) == ENGRAM_OK);
  CHECK(slot == 1 && sequence == 2);
  CHECK(engram_step_ring_start_ids(ring, step_ids, kIds, &slot, &sequence) == ENGRAM_RESOURCE_EXHAUSTED);
  CHECK(engram_step_ring_wait(ring, 1, NULL) == ENGRAM_OK);
  CHECK(memcmp(engram_step_ring_buffer(ring, 1), out, (size_t)kStepTokens * kLayers * kSlots * kRecord) == 0);
  CHECK(engram_step_ring_release(ring, 0) == ENGRAM_OK);
  CHECK(engram_step_ring_release(ring, 0) == ENGRAM_INVALID_ARGUMENT);
  CHECK(strstr(engram_last_error(), "released twice") != NULL);
  CHECK(engram_step_ring_start_ids(ring, step_ids, kIds - 1, &slot, &sequence) == ENGRAM_INVALID_ARGUMENT);
  engram_step_ring_destroy(ring);
  CHECK(registered == 0);
  ro.max_tokens = 0;
  CHECK(engram_step_ring_create(stager, &ro, &ring) == ENGRAM_INVALID_ARGUMENT);

  /* Argument errors. */
  engram_stager* none = NULL;
  const size_t out_of_range[1] = {5};
  CHECK(engram_stager_create(store, out_of_range, 1, NULL, &none) == ENGRAM_INVALID_ARGUMENT && none == NULL);
  CHECK(engram_stager_create(store, layer_tables, kLayers, "/nonexistent/map.u32", &none) != ENGRAM_OK);
  CHECK(strstr(engram_last_error(), "token map") != NULL);
  CHECK(engram_stager_create(NULL, layer_tables, kLayers, NULL, &none) == ENGRAM_INVALID_ARGUMENT);
  CHECK(engram_stage_start(stager, NULL, 0, NULL, 5, out, &stage) == ENGRAM_INVALID_ARGUMENT);
  CHECK(engram_stage_ready(NULL, 0) == -1);
  CHECK(engram_stage_wait(NULL, NULL) == ENGRAM_INVALID_ARGUMENT);
  engram_stage_result unsized = NewResult();
  unsized.size = 0;
  CHECK(engram_stage_start(stager, NULL, 0, tokens, 2, out, &stage) == ENGRAM_OK);
  CHECK(engram_stage_wait_layer(stage, 0, &unsized) == ENGRAM_INVALID_ARGUMENT);
  CHECK(engram_stage_wait(stage, &unsized) == ENGRAM_INVALID_ARGUMENT); /* still frees the handle */

  /* A stage may be waited for after its stager is gone. */
  CHECK(engram_stage_start(stager, NULL, 0, tokens, kTokens, again, &stage) == ENGRAM_OK);
  engram_stager_destroy(stager);
  CHECK(engram_stage_wait(stage, NULL) == ENGRAM_OK);
  engram_store_close(store);

  for (int l = 0; l < kLayers; ++l) unlink(tables[l]);
  unlink(layout);
  rmdir(dir);
  if (failures) fprintf(stderr, "%d checks failed\n", failures);
  return failures ? 1 : 0;
}
