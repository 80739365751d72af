// Counts heap allocations by interposing malloc/calloc/realloc in the benchmark executable
// and forwarding to glibc's own entry points. Benchmarks only; never linked into gatt2mqtt.
#include "malloc_counter.h"
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic uint64_t allocations = 0;

uint64_t malloc_counter_allocations(void) { return allocations; }

void *malloc(size_t n) { allocations++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { allocations++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { allocations++; return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
int posix_memalign(void **out, size_t align, size_t n) {
    allocations++;
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) { allocations++; return __libc_memalign(align, n); }
void *memalign(size_t align, size_t n) { allocations++; return __libc_memalign(align, n); }
