#include <atomic>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/kernels_common.h"

namespace kvforge::kernels {
namespace {

bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

std::atomic<const KernelTable*> g_active{nullptr};

}  // namespace

std::vector<const KernelTable*> AvailableTables() {
  std::vector<const KernelTable*> out{&ReferenceTable()};
  if (CpuHasAvx2()) out.push_back(&internal::kAvx2Table);
  return out;
}

const KernelTable& Active() {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t == nullptr) {
    t = CpuHasAvx2() ? &internal::kAvx2Table : &ReferenceTable();
    g_active.store(t, std::memory_order_release);
  }
  return *t;
}

bool SetActive(const char* name) {
  for (const KernelTable* t : AvailableTables()) {
    if (std::strcmp(t->name, name) == 0) {
      g_active.store(t, std::memory_order_release);
      return true;
    }
  }
  return false;
}

}  // namespace kvforge::kernels
