// rethrow_as_error: a client's exception, of whatever type, as an ember::Error naming its source.
#include "core/base/error.h"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <typeinfo>

namespace ember {

void rethrow_as_error(const std::string& who) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::throw_with_nested(Error(who + " threw: " + e.what()));
  } catch (...) {
    std::string type = "of an unknown type";
    if (const std::type_info* info = abi::__cxa_current_exception_type()) {
      int status = 0;
      char* demangled = abi::__cxa_demangle(info->name(), nullptr, nullptr, &status);
      type = std::string("of type ") + (status == 0 && demangled ? demangled : info->name());
      std::free(demangled);
    }
    std::throw_with_nested(Error(who + " threw an exception " + type + " (not a std::exception)"));
  }
}

}  // namespace ember
