//===- Executor.cpp - runs a rank's program of a plan ---------------------===//

#include "ppc/Runtime/PlanIO.h"
