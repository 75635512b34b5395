//===- ppc-run.cpp - run a ppc plan ---------------------------------------===//

#include <cstdio>

int main() {
  std::fprintf(stderr, "ppc-run: not implemented yet\n");
  return 1;
}
