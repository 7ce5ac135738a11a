#include <atomic>
#include <cstdio>
#include <cstdlib>
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

// libgcc's check also requires the OS to save the zmm and mask registers (XCR0).
bool CpuHasAvx512() { return CpuHasAvx2() && __builtin_cpu_supports("avx512f"); }
bool CpuHasAvx512Vnni() {
  return CpuHasAvx512() && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}

std::atomic<const KernelTable*> g_active{nullptr};

}  // namespace

namespace internal {
bool CpuHasAvx512Bf16() {
  static const bool has =
      CpuHasAvx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  return has;
}
}  // namespace internal

namespace {

// The best table this CPU runs, unless KVFORGE_KERNELS names another one it runs ("avx2" on an
// AVX-512 machine, say, to compare with a peer built for AVX2 only). An unknown or unavailable
// name is ignored with a warning on stderr.
const KernelTable* ChooseTable() {
  const std::vector<const KernelTable*> tables = AvailableTables();
  if (const char* want = std::getenv("KVFORGE_KERNELS"); want != nullptr && *want != 0) {
    for (const KernelTable* t : tables)
      if (std::strcmp(t->name, want) == 0) return t;
    std::fprintf(stderr, "kvforge: KVFORGE_KERNELS=%s is not available on this CPU; using %s\n",
                 want, tables.back()->name);
  }
  return tables.back();
}

}  // namespace

std::vector<const KernelTable*> AvailableTables() {
  std::vector<const KernelTable*> out{&ReferenceTable()};
  if (CpuHasAvx2()) out.push_back(&internal::kAvx2Table);
  if (CpuHasAvx512()) out.push_back(&internal::kAvx512Table);
  if (CpuHasAvx512Vnni()) out.push_back(&internal::kAvx512VnniTable);
  return out;
}

const KernelTable& Active() {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t == nullptr) {
    t = ChooseTable();
    g_active.store(t, std::memory_order_release);
  }
  return *t;
}

bool QuantizesLargeBatches(const KernelTable& t, WType w) {
  return &t == &internal::kAvx512VnniTable && (w == WType::kQ4_K || w == WType::kQ5_K);
}

// The tables whose float-weight matmuls are kernels_avx512.cc's.
bool IsZmmTable(const KernelTable& t) {
  return &t == &internal::kAvx512Table || &t == &internal::kAvx512VnniTable;
}

bool RoundsBatchActivationsToBf16(const KernelTable& t, WType w) {
  return IsZmmTable(t) && w == WType::kBF16 && internal::CpuHasAvx512Bf16();
}

bool RoundsDecodeActivationsToHalf(const KernelTable& t, WType w) {
  return IsZmmTable(t) && (w == WType::kF16 || w == WType::kBF16);
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
