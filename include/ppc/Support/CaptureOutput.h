//===- CaptureOutput.h - what a call writes to a file descriptor -*- C++
//-*-===//
//
// MLIR-free. Some of what ppc needs is only ever printed: a pass's help
// (llvm::outs()), llvm::cl's complaint about an option value
// (llvm::errs()). This runs the call with the descriptor pointed at a
// temporary file and hands back what it wrote.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_CAPTUREOUTPUT_H
#define PPC_SUPPORT_CAPTUREOUTPUT_H

#include <functional>
#include <string>

namespace ppc {

/// Runs `call` with file descriptor `fd` (STDOUT_FILENO, STDERR_FILENO)
/// redirected to a temporary file and sets `text` to what was written
/// there. Returns false, without running `call`, when `fd` cannot be
/// redirected. Buffered streams writing to `fd` (stdio, llvm::outs(),
/// llvm::errs()) must be flushed before the call and at its end by the
/// caller. Not thread-safe: the descriptor is the process's.
bool captureFileDescriptor(int fd, const std::function<void()> &call,
                           std::string &text);

} // namespace ppc

#endif // PPC_SUPPORT_CAPTUREOUTPUT_H
