//===- PassOptionCheck.cpp - pass options checked before MLIR parses them -===//
//
// A pass's options are known only through its help text (MLIR keeps the
// option objects private), so the help is printed into a temporary file
// and read back: one `--name=<type>` line per option, followed by
// `=value` lines for an option with a fixed list of values.
//
//===----------------------------------------------------------------------===//

#include "ppc/PassOptionCheck.h"

#include "ppc/Support/Alternatives.h"
#include "ppc/Support/CaptureOutput.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Regex.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <unistd.h>

namespace ppc {
namespace {

/// What a pass's help says of one option: the values it takes, when it has
/// a fixed list of them.
struct OptionInfo {
  std::vector<std::string> values;
};

/// The options of the pass or pipeline registered as `name`, from its help;
/// nullopt when nothing is registered under `name`.
std::optional<std::map<std::string, OptionInfo>>
optionsOf(llvm::StringRef name) {
  const mlir::PassRegistryEntry *entry = mlir::PassInfo::lookup(name);
  if (!entry)
    entry = mlir::PassPipelineInfo::lookup(name);
  if (!entry)
    return std::nullopt;
  std::string help;
  llvm::outs().flush();
  std::fflush(stdout);
  if (!captureFileDescriptor(
          STDOUT_FILENO,
          [&] {
            entry->printHelpStr(0, 40);
            llvm::outs().flush();
          },
          help))
    return std::nullopt;
  static const llvm::Regex optionLine("^ *--([A-Za-z0-9_.-]+)");
  static const llvm::Regex valueLine("^ *=([^ ]+) ");
  std::map<std::string, OptionInfo> options;
  OptionInfo *last = nullptr;
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(help).split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::SmallVector<llvm::StringRef, 2> match;
    if (optionLine.match(line, &match)) {
      last = match[1] == name ? nullptr : &options[match[1].str()];
    } else if (last && valueLine.match(line, &match)) {
      last->values.push_back(match[1].str());
    }
  }
  return options;
}

/// One `key[=value]` of a pass's option string, as MLIR splits it: at
/// spaces outside quotes and braces.
struct OptionWord {
  size_t keyBegin, keyEnd;
  std::optional<std::string> value;
};

std::vector<OptionWord> splitOptions(llvm::StringRef text) {
  std::vector<OptionWord> words;
  size_t i = 0, n = text.size();
  while (i < n) {
    while (i < n && text[i] == ' ')
      ++i;
    if (i == n)
      break;
    OptionWord word{i, i, std::nullopt};
    while (i < n && text[i] != '=' && text[i] != ' ')
      ++i;
    word.keyEnd = i;
    if (i < n && text[i] == '=') {
      size_t begin = ++i;
      int depth = 0;
      char quote = 0;
      for (; i < n; ++i) {
        char c = text[i];
        if (quote) {
          if (c == quote)
            quote = 0;
        } else if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == '{') {
          ++depth;
        } else if (c == '}') {
          --depth;
        } else if (c == ' ' && depth <= 0) {
          break;
        }
      }
      std::string value = text.slice(begin, i).str();
      if (value.size() >= 2 &&
          (value.front() == '"' || value.front() == '\'') &&
          value.back() == value.front())
        value = value.substr(1, value.size() - 2);
      word.value = value;
    }
    words.push_back(word);
  }
  return words;
}

/// The option of `options` nearest to `key`, if one is near enough to be
/// what was meant.
std::optional<std::string>
nearest(llvm::StringRef key, const std::map<std::string, OptionInfo> &options) {
  std::optional<std::string> best;
  unsigned bestDistance = ~0u;
  for (const auto &[name, info] : options) {
    unsigned distance = key.edit_distance(name, /*AllowReplacements=*/true);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = name;
    }
  }
  unsigned allowed = std::max<unsigned>(2, key.size() / 3);
  if (best && bestDistance <= allowed)
    return best;
  return std::nullopt;
}

/// The registered pass or pipeline an argument `--NAME=...` or `-NAME=...`
/// names, with the position of its options.
struct PassArgument {
  std::string name;
  size_t optionsBegin;
};

std::optional<PassArgument> passArgument(llvm::StringRef arg) {
  llvm::StringRef body = arg;
  if (!body.consume_front("-"))
    return std::nullopt;
  body.consume_front("-");
  size_t equals = body.find('=');
  if (equals == llvm::StringRef::npos)
    return std::nullopt;
  llvm::StringRef name = body.take_front(equals);
  if (!mlir::PassInfo::lookup(name) && !mlir::PassPipelineInfo::lookup(name))
    return std::nullopt;
  return PassArgument{name.str(), arg.size() - body.size() + equals + 1};
}

/// A word that reads as a pass option (`search=dp`, `budget=30s`) rather
/// than a file.
bool looksLikeOption(llvm::StringRef arg) {
  static const llvm::Regex option("^[A-Za-z][A-Za-z0-9_-]*=");
  return option.match(arg) && !llvm::sys::fs::exists(arg);
}

} // namespace

std::vector<std::string> checkPassOptions(llvm::StringRef name,
                                          std::string &options) {
  std::vector<std::string> errors;
  std::optional<std::map<std::string, OptionInfo>> known = optionsOf(name);
  if (!known)
    return errors;
  std::string flag = "--" + name.str();
  // Keys are rewritten in place, same length: positions stay valid.
  std::string text = options;
  for (const OptionWord &word : splitOptions(text)) {
    std::string key = text.substr(word.keyBegin, word.keyEnd - word.keyBegin);
    std::string dashed = key;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    auto it = known->find(dashed);
    if (it == known->end()) {
      std::string message = flag + " has no option '" + key + "'";
      if (std::optional<std::string> near = nearest(dashed, *known))
        message += "; did you mean '" + *near + "'?";
      std::vector<std::string> names;
      for (const auto &entry : *known)
        names.push_back(entry.first);
      if (names.empty())
        message += " (it takes none)";
      else
        message += "\n  its options: " + listAlternatives(names) +
                   " (ppc-opt --help says what each means)";
      errors.push_back(message);
      continue;
    }
    options.replace(word.keyBegin, dashed.size(), dashed);
    const std::vector<std::string> &values = it->second.values;
    if (word.value && !values.empty() &&
        !llvm::is_contained(values, *word.value))
      errors.push_back(flag + ": '" + *word.value + "' is not a value of " +
                       dashed + "; expected " + listAlternatives(values));
  }
  return errors;
}

std::vector<std::string>
checkCommandLinePassOptions(std::vector<std::string> &args) {
  std::vector<std::string> errors;
  // The last pass given with options, as `--NAME` and its options.
  std::optional<std::pair<std::string, std::string>> lastPass;
  std::vector<std::string> stray;
  for (std::string &arg : args) {
    if (arg == "--")
      break;
    std::optional<PassArgument> pass = passArgument(arg);
    if (!pass) {
      if (lastPass && looksLikeOption(arg))
        stray.push_back(arg);
      continue;
    }
    std::string options = arg.substr(pass->optionsBegin);
    lastPass = {arg.substr(0, pass->optionsBegin - 1), options};
    for (std::string &error : checkPassOptions(pass->name, options))
      errors.push_back(std::move(error));
    arg = arg.substr(0, pass->optionsBegin) + options;
  }
  if (!stray.empty()) {
    std::string joined;
    for (const std::string &word : stray)
      joined += " " + word;
    errors.push_back("'" + stray.front() +
                     "' is not an input file but reads as a pass option: "
                     "quote a pass's options together, as in " +
                     lastPass->first + "=\"" + lastPass->second + joined +
                     "\"");
  }
  return errors;
}

} // namespace ppc
