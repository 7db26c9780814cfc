/* One pass over a CPU tensor's float32, bfloat16 or float16 values: how many fall in each binade
 * floor(log2|x|) from -149 to 127, then the zeros (+0 and -0), the infinities and the NaNs -- the
 * 280 counts of fpscope_torch.histogram, laid out the same way. The bridge compiles it once with
 * the system's C compiler (exponent_counts.py) and falls back to PyTorch's ops without one.
 *
 * The pass reads one exponent field and bumps one of four interleaved tables (consecutive values
 * in one table would wait on each other's increments). Where it found exponent fields 0 or 255, a
 * second pass counts the zeros without a branch (dropout and ReLU make many), and a third takes
 * apart the subnormals, infinities and NaNs, rare in training tensors, only where there are any. */
#include <stdint.h>
#include <string.h>

enum { MIN_BINADE = -149, SLOTS = 277, ZERO = SLOTS, INF = SLOTS + 1, NAN_SLOT = SLOTS + 2, COUNTS = SLOTS + 3 };
enum { CHUNK = 1 << 20 }; /* elements per 32-bit count: far below 2^32 */

static int top_bit(uint32_t m) { return 31 - __builtin_clz(m); } /* m != 0 */

/* A nonzero float32 (or a bfloat16 widened to one, exactly) whose exponent field is 0 or 255. */
static void rare32(uint32_t magnitude, int64_t* counts) {
  const uint32_t field = magnitude >> 23, mantissa = magnitude & 0x7FFFFFu;
  if (field == 0) {
    if (mantissa != 0) ++counts[top_bit(mantissa)]; /* 2^-149 * mantissa: binade -149 + its top bit */
  } else {
    ++counts[mantissa == 0 ? INF : NAN_SLOT];
  }
}

/* dtype: 0 float32, 1 bfloat16, 2 float16. counts: COUNTS entries, overwritten. */
void fpscope_exponent_counts(const void* data, int64_t n, int dtype, int64_t* counts) {
  int64_t by_field[4][256];
  memset(by_field, 0, sizeof by_field);
  memset(counts, 0, COUNTS * sizeof *counts);
  int64_t i = 0;
  if (dtype == 0 || dtype == 1) {
    /* The float32 exponent field (bfloat16 is float32's upper half: the same field, and the same
     * value once shifted up 16 bits). Each loop is written out for its dtype, so that no test of
     * the dtype runs per element. */
    const uint32_t* w = (const uint32_t*)data;
    const uint16_t* h = (const uint16_t*)data;
#define COUNT_FIELDS(FIELD_OF, MAGNITUDE_OF)                                                               \
  do {                                                                                                  \
    for (; i + 4 <= n; i += 4) {                                                                        \
      ++by_field[0][FIELD_OF(i)];                                                                       \
      ++by_field[1][FIELD_OF(i + 1)];                                                                   \
      ++by_field[2][FIELD_OF(i + 2)];                                                                   \
      ++by_field[3][FIELD_OF(i + 3)];                                                                   \
    }                                                                                                   \
    for (; i < n; ++i) ++by_field[0][FIELD_OF(i)];                                                      \
    if (by_field[0][0] + by_field[1][0] + by_field[2][0] + by_field[3][0] + by_field[0][255] + by_field[1][255] + \
            by_field[2][255] + by_field[3][255] > 0) {                                                  \
      /* Zeros counted without a branch; the few others only where there are any. */                    \
      int64_t zeros = 0, others = 0;                                                                    \
      for (int64_t chunk = 0; chunk < n; chunk += CHUNK) {                                              \
        const int64_t end = chunk + CHUNK < n ? chunk + CHUNK : n;                                      \
        uint32_t chunk_zeros = 0, chunk_others = 0; /* 32-bit lanes: the loop vectorises */            \
        for (int64_t k = chunk; k < end; ++k) {                                                         \
          const uint32_t magnitude = MAGNITUDE_OF(k), field = magnitude >> 23;                          \
          chunk_zeros += magnitude == 0;                                                                \
          chunk_others += (magnitude != 0) & ((field == 0) | (field == 255));                           \
        }                                                                                               \
        zeros += chunk_zeros;                                                                           \
        others += chunk_others;                                                                         \
      }                                                                                                 \
      counts[ZERO] = zeros;                                                                             \
      for (int64_t k = 0; others > 0 && k < n; ++k) {                                                   \
        const uint32_t field = FIELD_OF(k);                                                             \
        if (field == 0 || field == 255) rare32(MAGNITUDE_OF(k), counts);                                \
      }                                                                                                 \
    }                                                                                                   \
  } while (0)
#define FIELD32(k) ((w[k] >> 23) & 0xFFu)
#define MAGNITUDE32(k) (w[k] & 0x7FFFFFFFu)
#define FIELD16(k) ((uint32_t)(h[k] >> 7) & 0xFFu)
#define MAGNITUDE16(k) (((uint32_t)h[k] << 16) & 0x7FFFFFFFu)
    if (dtype == 0) COUNT_FIELDS(FIELD32, MAGNITUDE32);
    else COUNT_FIELDS(FIELD16, MAGNITUDE16);
    for (int field = 1; field < 255; ++field)
      counts[field - 127 - MIN_BINADE] = by_field[0][field] + by_field[1][field] + by_field[2][field] + by_field[3][field];
    return;
  }
  /* float16: 5 exponent bits, bias 15; subnormals are 2^-24 times their 10-bit mantissa. */
  const uint16_t* h = (const uint16_t*)data;
  for (; i + 4 <= n; i += 4) {
    ++by_field[0][(h[i] >> 10) & 0x1Fu];
    ++by_field[1][(h[i + 1] >> 10) & 0x1Fu];
    ++by_field[2][(h[i + 2] >> 10) & 0x1Fu];
    ++by_field[3][(h[i + 3] >> 10) & 0x1Fu];
  }
  for (; i < n; ++i) ++by_field[0][(h[i] >> 10) & 0x1Fu];
  if (by_field[0][0] + by_field[1][0] + by_field[2][0] + by_field[3][0] + by_field[0][31] + by_field[1][31] + by_field[2][31] +
          by_field[3][31] > 0) {
    int64_t zeros = 0, others = 0;
    for (int64_t chunk = 0; chunk < n; chunk += CHUNK) {
      const int64_t end = chunk + CHUNK < n ? chunk + CHUNK : n;
      uint32_t chunk_zeros = 0, chunk_others = 0;
      for (int64_t k = chunk; k < end; ++k) {
        const uint32_t magnitude = h[k] & 0x7FFFu, field = magnitude >> 10;
        chunk_zeros += magnitude == 0;
        chunk_others += (magnitude != 0) & ((field == 0) | (field == 31));
      }
      zeros += chunk_zeros;
      others += chunk_others;
    }
    counts[ZERO] = zeros;
    for (int64_t k = 0; others > 0 && k < n; ++k) {
      const uint32_t field = (h[k] >> 10) & 0x1Fu, mantissa = h[k] & 0x3FFu;
      if (field == 0) {
        if (mantissa != 0) ++counts[top_bit(mantissa) - 24 - MIN_BINADE];
      } else if (field == 31) {
        ++counts[mantissa == 0 ? INF : NAN_SLOT];
      }
    }
  }
  for (int field = 1; field < 31; ++field)
    counts[field - 15 - MIN_BINADE] = by_field[0][field] + by_field[1][field] + by_field[2][field] + by_field[3][field];
}

/* The step sentinel's reading: the largest magnitude bits of n values in their own width (float32:
 * 31 bits; bfloat16 and float16: 15), a NaN's above an infinity's above every number's; 0 for
 * none. One pass the compiler vectorises, in a version for AVX2 chosen at load time
 * where GCC makes it (its unsigned max needs SSE4.1: the baseline loop is scalar). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
__attribute__((target_clones("avx2", "default")))
#endif
uint32_t fpscope_largest_magnitude(const void* data, int64_t n, int dtype) {
  if (dtype == 0) {
    const uint32_t* p = (const uint32_t*)data;
    uint32_t top = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t m = p[i] & 0x7FFFFFFFu;
      top = m > top ? m : top;
    }
    return top;
  }
  const uint16_t* p = (const uint16_t*)data;
  uint16_t top = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t m = (uint16_t)(p[i] & 0x7FFFu);
    top = m > top ? m : top;
  }
  return top;
}
