//===- CaptureOutput.cpp - what a call writes to a file descriptor --------===//

#include "ppc/Support/CaptureOutput.h"

#include <cstdio>
#include <unistd.h>

namespace ppc {

bool captureFileDescriptor(int fd, const std::function<void()> &call,
                           std::string &text) {
  std::FILE *file = std::tmpfile();
  if (!file)
    return false;
  int saved = ::dup(fd);
  if (saved < 0 || ::dup2(::fileno(file), fd) < 0) {
    if (saved >= 0)
      ::close(saved);
    std::fclose(file);
    return false;
  }
  call();
  ::dup2(saved, fd);
  ::close(saved);
  text.clear();
  std::rewind(file);
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;)
    text.append(buffer, n);
  std::fclose(file);
  return true;
}

} // namespace ppc
