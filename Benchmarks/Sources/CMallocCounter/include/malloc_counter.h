#pragma once
#include <stdint.h>
/// Number of malloc/calloc/realloc calls made by this process so far (all threads).
uint64_t malloc_counter_allocations(void);
