//===- SimulationOptions.cpp - quantities in pass options -----------------===//

#include "SimulationOptions.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

namespace ppc::transforms_detail {

std::optional<Quantity> splitQuantity(llvm::StringRef text) {
  text = text.trim();
  Quantity q;
  q.number =
      text.take_while([](char c) { return llvm::isDigit(c) || c == '.'; });
  q.unit = text.drop_front(q.number.size()).trim();
  if (q.number.empty() || q.number.getAsDouble(q.value) || q.value <= 0)
    return std::nullopt;
  return q;
}

std::optional<int64_t> parseBytes(llvm::StringRef text) {
  std::optional<Quantity> q = splitQuantity(text);
  if (!q)
    return std::nullopt;
  double scale = llvm::StringSwitch<double>(q->unit.lower())
                     .Cases({"", "b"}, 1)
                     .Cases({"k", "kib"}, 0x1p10)
                     .Cases({"m", "mib"}, 0x1p20)
                     .Cases({"g", "gib"}, 0x1p30)
                     .Cases({"t", "tib"}, 0x1p40)
                     .Case("kb", 1e3)
                     .Case("mb", 1e6)
                     .Case("gb", 1e9)
                     .Case("tb", 1e12)
                     .Default(0);
  double bytes = q->value * scale;
  // Beyond what any device holds, and beyond int64.
  if (scale == 0 || !(bytes < 0x1p62))
    return std::nullopt;
  return static_cast<int64_t>(bytes);
}

} // namespace ppc::transforms_detail
