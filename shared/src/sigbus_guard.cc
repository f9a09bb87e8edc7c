// sigbus_guard.cc — see sigbus_guard.h.
#include "tensorscope/shared/sigbus_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace tensorscope {
namespace {

struct Guarded {
  std::atomic<uintptr_t> begin{0};  // 0: a free entry
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

Guarded g_mappings[kMaxGuardedMappings];
std::mutex g_register_mutex;  // registrations only; the handler reads the atomics

void on_sigbus(int, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Guarded& g : g_mappings) {
    const uintptr_t begin = g.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= g.end.load(std::memory_order_acquire)) continue;
    const auto page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    void* page = reinterpret_cast<void*>(address & ~(page_size - 1));
    if (::mmap(page, page_size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      g.faulted.store(true, std::memory_order_release);
      return;  // the access is retried and reads zeros
    }
    break;
  }
  // Not a guarded mapping: the default action, as if no handler were installed.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGBUS, &dfl, nullptr);
}

}  // namespace

void install_sigbus_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

int register_guarded_mapping(const void* base, size_t bytes) {
  if (base == nullptr || bytes == 0) return -1;
  std::lock_guard<std::mutex> lock(g_register_mutex);
  for (int i = 0; i < kMaxGuardedMappings; ++i) {
    Guarded& g = g_mappings[i];
    if (g.begin.load(std::memory_order_relaxed) != 0) continue;
    g.faulted.store(false, std::memory_order_relaxed);
    g.end.store(reinterpret_cast<uintptr_t>(base) + bytes, std::memory_order_release);
    g.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_guarded_mapping(int handle) {
  if (handle < 0 || handle >= kMaxGuardedMappings) return;
  std::lock_guard<std::mutex> lock(g_register_mutex);
  g_mappings[handle].begin.store(0, std::memory_order_release);
}

bool guarded_mapping_faulted(int handle) {
  if (handle < 0 || handle >= kMaxGuardedMappings) return false;
  return g_mappings[handle].faulted.load(std::memory_order_acquire);
}

}  // namespace tensorscope
