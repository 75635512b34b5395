//===- PassOptionCheck.h - pass options checked before MLIR parses them -*- C++
//-*-===//
//
// What a person typing a pass's options needs before MLIR's parser sees
// them: for a registered pass or pipeline NAME given options, each option
// name must be one NAME has (`_` is taken for `-`: `memory_limit=` as
// `memory-limit=`), and each value of an option with a fixed list of values
// one of them. A mistake gets an error naming the pass, the nearest option
// ("did you mean 'search'?") and its options, or the values, instead of
// llvm::cl's "<Pass-Options-Parser>: no such option" or "Cannot find option
// named 'adamw'!". ppc-opt checks its command line with it (words that read
// as pass options outside the quotes get a hint to quote them with their
// pass, instead of "Too many positional arguments specified!"), the Python
// module the options it passes.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSOPTIONCHECK_H
#define PPC_PASSOPTIONCHECK_H

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace ppc {

/// Checks `options` (MLIR's `key=value key2=value2` syntax) of the pass or
/// pipeline registered as `name`, rewriting `_` to `-` in option names.
/// Returns one message per mistake, naming the pass as `--name`; none when
/// every option is fine or nothing is registered under `name`.
std::vector<std::string> checkPassOptions(llvm::StringRef name,
                                          std::string &options);

/// Checks every `--NAME=OPTIONS` of a command line (argv without the
/// program name) as above, and words that read as pass options outside any
/// pass's quotes.
std::vector<std::string>
checkCommandLinePassOptions(std::vector<std::string> &args);

} // namespace ppc

#endif // PPC_PASSOPTIONCHECK_H
