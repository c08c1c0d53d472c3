/* ENGRAM_UNDER_SANITIZER: 1 when this file is compiled with a sanitizer
 * (AddressSanitizer, ThreadSanitizer, MemorySanitizer), else 0. gcc says so
 * with __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang 14 only through
 * __has_feature. Tests use it to scale down their work and to skip bounds
 * a sanitizer's runtime changes (RSS, address-space limits, deadlines).
 * Plain C, so the C API's tests can use it too. */
#ifndef ENGRAM_SRC_COMMON_SANITIZERS_H_
#define ENGRAM_SRC_COMMON_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ENGRAM_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ENGRAM_UNDER_SANITIZER 1
#endif
#endif
#ifndef ENGRAM_UNDER_SANITIZER
#define ENGRAM_UNDER_SANITIZER 0
#endif

#endif /* ENGRAM_SRC_COMMON_SANITIZERS_H_ */
