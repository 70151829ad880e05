// The one file of x86 intrinsics in Ember's Highway kernels: what Highway 1.0.3 (Debian
// bookworm's) lacks, for its AVX2 and AVX3 targets. Included by simd-inl.h inside the target's
// namespace, for those targets only; the other targets have portable versions there.
//
// look_up_32_pair: a lookup in a table of 32 64-bit entries (exp's 2^(j / 32)), by permutes
// within registers, as Ember's hand-written exp did before Highway. Why here: Highway 1.0.3's
// TableLookupLanes reads one vector, so 32 entries take 4 (AVX3) or 8 (AVX2) lookups and a
// selection by compares, and the x86 permutes that read two vectors (vpermt2q) or that pair
// 32-bit halves (vshufps, vpunpckldq) have no Highway op there (TwoTablesLookupLanes came in a
// later release, upstream pull request #1303). Written with Highway's ops (the 32-bit halves of two vectors of keys, one-vector
// lookups chosen by compares), exp_row took ~1.15x the time of this version on AVX3 and on
// AVX2 (AMD EPYC, Zen 4).
//
// (GCC 12 warns that its own _mm512_undefined_* placeholders may be used uninitialized in the
// AVX-512 intrinsics' expansions: a known false positive, silenced for this file.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if HWY_TARGET == HWY_AVX2

// The eight keys of ka and kb in 32-bit lanes, in the order [a0 a1 b0 b1 | a2 a3 b2 b3] that
// unpacking the looked-up halves puts back into 64-bit entries; each half of an entry looked up
// in the four registers holding the table's 32 halves (a permute reads the low 3 bits of the
// key), the register chosen by bits 3 and 4 (blends on the sign bits of the keys shifted up).
HWY_INLINE void look_up_32_pair(const Table32& table, hn::Vec256<uint64_t> ka,
                                hn::Vec256<uint64_t> kb, hn::Vec256<uint64_t>& ta,
                                hn::Vec256<uint64_t>& tb) {
  const __m256i keys = _mm256_castps_si256(_mm256_shuffle_ps(
      _mm256_castsi256_ps(ka.raw), _mm256_castsi256_ps(kb.raw), _MM_SHUFFLE(2, 0, 2, 0)));
  const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(keys, 28));
  const __m256 bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(keys, 27));
  const auto half = [&](const uint32_t* h) {
    const __m256i* r = reinterpret_cast<const __m256i*>(h);
    const auto look = [&](int q) {
      return _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_load_si256(r + q), keys));
    };
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_blendv_ps(look(0), look(1), bit3),
                                                _mm256_blendv_ps(look(2), look(3), bit3), bit4));
  };
  const __m256i lo = half(table.lo), hi = half(table.hi);
  ta.raw = _mm256_unpacklo_epi32(lo, hi);  // the entries of a0 a1 | a2 a3
  tb.raw = _mm256_unpackhi_epi32(lo, hi);  // b0 b1 | b2 b3
}

#else  // AVX3: eight keys to a register, each lookup on its own

// Two two-register permutes (each reads bits 0..3 of the key: the entry in a pair of the four
// registers holding the table), and bit 4 of the key picks the pair.
HWY_INLINE hn::Vec512<uint64_t> look_up_32(const Table32& table, hn::Vec512<uint64_t> k) {
  const __m512i* r = reinterpret_cast<const __m512i*>(table.entries);
  const __m512i low =
      _mm512_permutex2var_epi64(_mm512_load_si512(r), k.raw, _mm512_load_si512(r + 1));
  const __m512i high =
      _mm512_permutex2var_epi64(_mm512_load_si512(r + 2), k.raw, _mm512_load_si512(r + 3));
  const __mmask8 upper = _mm512_test_epi64_mask(k.raw, _mm512_set1_epi64(16));
  return hn::Vec512<uint64_t>{_mm512_mask_blend_epi64(upper, low, high)};
}

HWY_INLINE void look_up_32_pair(const Table32& table, hn::Vec512<uint64_t> ka,
                                hn::Vec512<uint64_t> kb, hn::Vec512<uint64_t>& ta,
                                hn::Vec512<uint64_t>& tb) {
  ta = look_up_32(table, ka);
  tb = look_up_32(table, kb);
}

#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
