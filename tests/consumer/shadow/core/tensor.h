// The consumer project's own core/tensor.h: a file of the same name as one of Ember's old
// headers. Ember's installed headers (and their forwarding headers) must never include it.
#pragma once
#error "an installed Ember header included the consumer's core/tensor.h: header paths clash"
