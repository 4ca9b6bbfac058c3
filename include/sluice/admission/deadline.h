// Deadline moved to common/ (include/sluice/common/deadline.h): every layer passes one, not only
// the admission library. The old name stays so that code written against it keeps compiling.
#pragma once

#include "sluice/common/deadline.h"

namespace sluice::admission {

using ::sluice::Deadline;

}  // namespace sluice::admission
