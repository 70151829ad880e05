// glibc 2.36's tanhf and erff, operation for operation (libm.h says why). Sun's fdlibm code
// (Copyright (C) 1993 by Sun Microsystems, Inc.; permission to use, copy, modify and distribute
// freely granted, provided that this notice is preserved), written out in C++ from its
// description. Every operation rounds: Ember compiles with -ffp-contract=off.
#include "core/kernels/libm.h"

#include <cstdint>

#include "core/base/bit_cast.h"
#include "core/kernels/exp.h"

namespace ember::kernels::libm {

namespace {

float from_bits(uint32_t bits) { return ember::bit_cast<float>(bits); }
uint32_t bits_of(float x) { return ember::bit_cast<uint32_t>(x); }

// y with k added to its exponent field (2^k y, no rounding)
float scale(float y, int32_t k) {
  return from_bits(bits_of(y) + static_cast<uint32_t>(k) * (uint32_t{1} << 23));
}

// expm1(x) = e^x - 1 (Sun's s_expm1f.c): x = k ln2 + r, ln2 split in ln2_hi (trailing zero
// bits: k ln2_hi is exact) and ln2_lo, r's rounding error kept in c; a rational approximation
// on the primary range; then 2^k (1 + expm1 r) - 1 in the order that loses nothing for k.
float expm1(float x) {
  const float ln2_hi = from_bits(0x3f317180), ln2_lo = from_bits(0x3717f7d1);
  const float invln2 = from_bits(0x3fb8aa3b);
  const float q1 = from_bits(0xbd088889), q2 = from_bits(0x3ad00d01), q3 = from_bits(0xb8a670cd);
  const float q4 = from_bits(0x36867e54), q5 = from_bits(0xb457edbb);
  const bool negative = std::signbit(x);
  const uint32_t hx = bits_of(x) & 0x7fffffff;  // |x|'s bits
  if (hx >= 0x4195b844) {                       // |x| >= 27 ln2
    if (hx >= 0x42b17218) {                     // |x| >= 88.72..., inf or nan
      if (hx > 0x7f800000) return x + x;        // nan
      if (hx == 0x7f800000) return negative ? -1.0f : x;
      if (x > from_bits(0x42b17180)) return 1e30f * 1e30f;  // overflow: +inf
    }
    if (negative) return 1e-30f - 1.0f;  // -1
  }
  int32_t k = 0;
  float c = 0.0f;
  if (hx > 0x3eb17218) {  // |x| > ln2 / 2: reduce
    float hi, lo;
    if (hx < 0x3f851592) {  // and |x| < 3 ln2 / 2: k = +-1
      k = negative ? -1 : 1;
      hi = negative ? x + ln2_hi : x - ln2_hi;
      lo = negative ? -ln2_lo : ln2_lo;
    } else {
      k = static_cast<int32_t>(invln2 * x + (negative ? -0.5f : 0.5f));
      const float t = static_cast<float>(k);
      hi = x - t * ln2_hi;
      lo = t * ln2_lo;
    }
    x = hi - lo;
    c = (hi - x) - lo;
  } else if (hx < 0x33000000) {  // |x| < 2^-25
    return x;
  }
  const float hfx = 0.5f * x;
  const float hxs = x * hfx;
  const float r1 = 1.0f + hxs * (q1 + hxs * (q2 + hxs * (q3 + hxs * (q4 + hxs * q5))));
  const float t = 3.0f - r1 * hfx;
  float e = hxs * ((r1 - t) / (6.0f - x * t));
  if (k == 0) return x - (x * e - hxs);
  e = x * (e - c) - c;
  e -= hxs;
  if (k == -1) return 0.5f * (x - e) - 0.5f;
  if (k == 1) return x < -0.25f ? -2.0f * (e - (x + 0.5f)) : 1.0f + 2.0f * (x - e);
  if (k <= -2 || k > 56) return scale(1.0f - (e - x), k) - 1.0f;
  if (k < 23) return scale(from_bits(0x3f800000 - (0x1000000u >> k)) - (e - x), k);      // 1 - 2^-k
  return scale((x - (e + from_bits(static_cast<uint32_t>(0x7f - k) << 23))) + 1.0f, k);  // 2^-k
}

}  // namespace

float tanh(float x) {
  const uint32_t ix = bits_of(x) & 0x7fffffff;
  if (ix >= 0x7f800000) return std::signbit(x) ? 1.0f / x - 1.0f : 1.0f / x + 1.0f;  // inf, nan
  float z;
  if (ix < 0x41b00000) {                         // |x| < 22
    if (ix == 0) return x;                       // +-0
    if (ix < 0x24000000) return x * (1.0f + x);  // |x| < 2^-55
    if (ix >= 0x3f800000) {                      // |x| >= 1
      const float t = expm1(2.0f * std::fabs(x));
      z = 1.0f - 2.0f / (t + 2.0f);
    } else {
      const float t = expm1(-2.0f * std::fabs(x));
      z = -t / (t + 2.0f);
    }
  } else {
    z = 1.0f - 1e-30f;  // 1
  }
  return std::signbit(x) ? -z : z;
}

// erf (Sun's s_erff.c): an odd rational function of x on |x| < 0.84375; erx + a rational
// function of |x| - 1 on [0.84375, 1.25); 1 - erfc with erfc = exp(-z^2 - 0.5625)
// exp((z - x)(z + x) + R/S) / x on [1.25, 6) (z: |x| with its low 12 bits cleared, so z^2 is
// exact); +-1 beyond.
float erf(float x) {
  const float erx = from_bits(0x3f58560b), efx = from_bits(0x3e0375d4);
  const uint32_t hx = bits_of(x), ix = hx & 0x7fffffff;
  const bool negative = std::signbit(x);
  if (ix >= 0x7f800000) return (negative ? -1.0f : 1.0f) + 1.0f / x;          // +-1 at +-inf, nan
  if (ix < 0x3f580000) {                                                      // |x| < 0.84375
    if (ix < 0x31800000) {                                                    // |x| < 2^-28
      if (ix < 0x04000000) return 0.0625f * (16.0f * x + (16.0f * efx) * x);  // no underflow
      return x + efx * x;
    }
    const float pp0 = from_bits(0x3e0375d4), pp1 = from_bits(0xbea66beb);
    const float pp2 = from_bits(0xbce9528f), pp3 = from_bits(0xbbbd1489);
    const float pp4 = from_bits(0xb7c756b1);
    const float qq1 = from_bits(0x3ecbbbce), qq2 = from_bits(0x3d852a63);
    const float qq3 = from_bits(0x3ba68116), qq4 = from_bits(0x390aee49);
    const float qq5 = from_bits(0xb684e21a);
    const float z = x * x;
    const float r = pp0 + z * (pp1 + z * (pp2 + z * (pp3 + z * pp4)));
    const float s = 1.0f + z * (qq1 + z * (qq2 + z * (qq3 + z * (qq4 + z * qq5))));
    return x + x * (r / s);
  }
  if (ix < 0x3fa00000) {  // 0.84375 <= |x| < 1.25
    const float pa0 = from_bits(0xbb1acdc6), pa1 = from_bits(0x3ed46805);
    const float pa2 = from_bits(0xbebe9208), pa3 = from_bits(0x3ea2fe54);
    const float pa4 = from_bits(0xbde31cc2), pa5 = from_bits(0x3d1151b3);
    const float pa6 = from_bits(0xbb0df9c0);
    const float qa1 = from_bits(0x3dd9f331), qa2 = from_bits(0x3f0a5785);
    const float qa3 = from_bits(0x3d931ae7), qa4 = from_bits(0x3e013307);
    const float qa5 = from_bits(0x3c5f6e13), qa6 = from_bits(0x3c445aa3);
    const float s = std::fabs(x) - 1.0f;
    const float p = pa0 + s * (pa1 + s * (pa2 + s * (pa3 + s * (pa4 + s * (pa5 + s * pa6)))));
    const float q = 1.0f + s * (qa1 + s * (qa2 + s * (qa3 + s * (qa4 + s * (qa5 + s * qa6)))));
    return negative ? -erx - p / q : erx + p / q;
  }
  if (ix >= 0x40c00000) return negative ? 1e-30f - 1.0f : 1.0f - 1e-30f;  // |x| >= 6: +-1
  const float a = std::fabs(x);
  const float s = 1.0f / (a * a);
  float r, q;
  if (ix < 0x4036db6e) {  // |x| < 1 / 0.35
    const float ra0 = from_bits(0xbc21a093), ra1 = from_bits(0xbf31a0b7);
    const float ra2 = from_bits(0xc128f022), ra3 = from_bits(0xc2798057);
    const float ra4 = from_bits(0xc322658c), ra5 = from_bits(0xc3389ae7);
    const float ra6 = from_bits(0xc2a2932b), ra7 = from_bits(0xc11d077e);
    const float sa1 = from_bits(0x419d35ce), sa2 = from_bits(0x4309a863);
    const float sa3 = from_bits(0x43d9486f), sa4 = from_bits(0x442158c9);
    const float sa5 = from_bits(0x43d6810b), sa6 = from_bits(0x42d9451f);
    const float sa7 = from_bits(0x40d23f7c), sa8 = from_bits(0xbd777f97);
    r = ra0 + s * (ra1 + s * (ra2 + s * (ra3 + s * (ra4 + s * (ra5 + s * (ra6 + s * ra7))))));
    q = 1.0f +
        s * (sa1 + s * (sa2 + s * (sa3 + s * (sa4 + s * (sa5 + s * (sa6 + s * (sa7 + s * sa8)))))));
  } else {
    const float rb0 = from_bits(0xbc21a092), rb1 = from_bits(0xbf4c9dd4);
    const float rb2 = from_bits(0xc18e104b), rb3 = from_bits(0xc320a2ea);
    const float rb4 = from_bits(0xc41f6441), rb5 = from_bits(0xc480230b);
    const float rb6 = from_bits(0xc3f1c275);
    const float sb1 = from_bits(0x41f2b459), sb2 = from_bits(0x43a2e571);
    const float sb3 = from_bits(0x44c01759), sb4 = from_bits(0x4547fdbb);
    const float sb5 = from_bits(0x451f90ce), sb6 = from_bits(0x43ed43a7);
    const float sb7 = from_bits(0xc1b38712);
    r = rb0 + s * (rb1 + s * (rb2 + s * (rb3 + s * (rb4 + s * (rb5 + s * rb6)))));
    q = 1.0f + s * (sb1 + s * (sb2 + s * (sb3 + s * (sb4 + s * (sb5 + s * (sb6 + s * sb7))))));
  }
  const float z = from_bits(bits_of(a) & 0xfffff000);
  // glibc's expf, as exp_row computes it on every CPU
  const float arguments[2] = {-z * z - 0.5625f, (z - a) * (z + a) + r / q};
  float e[2];
  exp_row(arguments, 0.0f, e, 2);
  const float erfc = e[0] * e[1];
  return negative ? erfc / a - 1.0f : 1.0f - erfc / a;
}

}  // namespace ember::kernels::libm
