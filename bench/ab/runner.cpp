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
    int calls = 1;  // per round
    double best = 1e300;
  };
  auto elapsed_ns = [](candidate const& c) {  // of c.calls calls
    auto const t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < c.calls; ++i) c.run();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
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
  for (auto& c : all) c.calls = static_cast<int>(std::max(1.0, 50000.0 / std::max(elapsed_ns(c), 1.0)));
  for (int r = 0; r < rounds; ++r)
    for (auto& c : all) c.best = std::min(c.best, elapsed_ns(c) / c.calls);
  for (auto const& c : all) std::printf("%-40s %12.1f ns per call\n", c.name.c_str(), c.best);
}
