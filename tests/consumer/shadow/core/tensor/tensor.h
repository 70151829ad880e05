// The consumer project's own core/tensor/tensor.h: a file of the same name as one of Ember's
// headers. Ember's installed headers must never include it (see CMakeLists.txt).
#pragma once
#error "an installed Ember header included the consumer's core/tensor/tensor.h: header paths clash"
