// (cases written with ContractionKernels.cu)
#include "BackendAgreement.h"
