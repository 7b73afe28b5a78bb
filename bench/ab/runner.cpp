// Times the workloads of several shared libraries (bench/ab/workloads.cpp built against different
// kiln revisions) in one process: round after round, each library's function runs `calls` times
// and the fastest round counts. Interleaving the candidates round by round exposes them to the same
// phases of a shared host's load, which separate runs do not. Each library has its own data, and
// slow phases last seconds: repeat a comparison (bench/README.md).
//
//   runner N WORKLOADS ROUNDS lib.so...      e.g. runner 1024 146 300 ./a.so ./b.so
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s N WORKLOADS ROUNDS lib.so...\n", argv[0]);
    return 2;
  }
  long const n = std::atol(argv[1]);
  std::string const workloads = argv[2];
  int const rounds = std::atoi(argv[3]);
  struct candidate {
    std::string name;
    void (*run)();
    double best = 1e300;
  };
  std::vector<candidate> all;
  for (int i = 4; i < argc; ++i) {
    void* lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    reinterpret_cast<void (*)(long)>(dlsym(lib, "setup"))(n);
    for (char w : workloads) {
      std::string const symbol = std::string("w") + w;
      auto run = reinterpret_cast<void (*)()>(dlsym(lib, symbol.c_str()));
      if (!run) {
        std::fprintf(stderr, "%s has no %s\n", argv[i], symbol.c_str());
        return 1;
      }
      all.push_back({"W" + std::string(1, w) + " " + argv[i], run});
    }
  }
  // About 50 us per timed batch of calls, so that the clock's cost is negligible.
  for (auto& c : all) {
    auto const t0 = std::chrono::steady_clock::now();
    c.run();
    double const ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    c.best = std::max(1.0, 50000.0 / std::max(ns, 1.0));  // calls per round, for now
  }
  std::vector<int> calls;
  for (auto& c : all) calls.push_back(static_cast<int>(c.best)), c.best = 1e300;
  for (int r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < all.size(); ++k) {
      auto const t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls[k]; ++i) all[k].run();
      double const ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      all[k].best = std::min(all[k].best, ns / calls[k]);
    }
  for (auto const& c : all) std::printf("%-40s %12.1f ns per call\n", c.name.c_str(), c.best);
}
