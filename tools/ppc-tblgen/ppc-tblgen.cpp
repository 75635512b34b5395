//===- ppc-tblgen.cpp - ppc's TableGen backends ---------------------------===//
//
// mlir-tblgen's driver with ppc's own backends registered (PlanFormatGen.cpp:
// the plan file's format from the plan dialect's instruction ops).
//
//===----------------------------------------------------------------------===//

#include "mlir/Tools/mlir-tblgen/MlirTblgenMain.h"

int main(int argc, char **argv) { return mlir::MlirTblgenMain(argc, argv); }
