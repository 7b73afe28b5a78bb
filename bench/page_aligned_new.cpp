// Linked into every benchmark binary (and bench/ab's libraries): the aligned allocation functions,
// which kiln's tensors use, return whole pages. Every buffer then starts at the same offset within
// a page, whatever the process allocated before it.
//
// Where buffers fall modulo 4 KiB decides how often a load waits on an unrelated older store whose
// address matches in its low 12 bits (4K aliasing): with malloc's layout, the same W4 code at 1K
// timed 78 ns in one process and 350 ns in the next, and a destination 128 bytes past a page
// offset of its input slowed a hand-written loop 7x. Each implementation of a workload reads and
// writes the same buffers, so none of them is favoured; page starts are also where large
// allocations land in practice.
#include <algorithm>
#include <cstdlib>
#include <new>

namespace {
void* page_aligned(std::size_t n, std::align_val_t align) {
  std::size_t const a = std::max<std::size_t>(4096, static_cast<std::size_t>(align));
  if (void* p = std::aligned_alloc(a, std::max<std::size_t>(1, (n + a - 1) / a) * a)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n, std::align_val_t align) { return page_aligned(n, align); }
void* operator new[](std::size_t n, std::align_val_t align) { return page_aligned(n, align); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
