// The process-wide default dtype (torch.set_default_dtype); see core/base/dtype.h.
#include "core/base/dtype.h"

#include <atomic>

#include "core/base/error.h"

namespace ember {

namespace {
// Relaxed is enough: the value guards no other memory.
std::atomic<DType> default_dtype{kDefaultDType};
}  // namespace

DType get_default_dtype() { return default_dtype.load(std::memory_order_relaxed); }

void set_default_dtype(DType dtype) {
  check(is_floating(dtype),
        "set_default_dtype: only floating-point types are supported as the default type, got ",
        dtype_name(dtype));
  default_dtype.store(dtype, std::memory_order_relaxed);
}

}  // namespace ember
