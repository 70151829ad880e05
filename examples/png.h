// A tiny PNG writer for the examples' pictures (attention maps, loss curves): RGB pixels,
// stored (uncompressed) deflate blocks, no dependency. Not part of the library.
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace ember::examples {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
  Image(int w, int h) : width(w), height(h), rgb(static_cast<std::size_t>(w) * h * 3, 255) {}
  void set(int x, int y, std::array<uint8_t, 3> c) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    std::size_t i = (static_cast<std::size_t>(y) * width + x) * 3;
    rgb[i] = c[0], rgb[i + 1] = c[1], rgb[i + 2] = c[2];
  }
};

// A light-to-dark blue ramp for values in [0, 1] (clamped).
inline std::array<uint8_t, 3> blue_ramp(double v) {
  v = v < 0 ? 0 : (v > 1 ? 1 : v);
  auto mix = [v](double a, double b) { return static_cast<uint8_t>(a + (b - a) * v); };
  return {mix(247, 8), mix(251, 48), mix(255, 107)};
}

namespace png_detail {
inline uint32_t crc32(const uint8_t* data, std::size_t n, uint32_t crc = 0xFFFFFFFFu) {
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc;
}
inline void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}
inline void chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put32(out, static_cast<uint32_t>(data.size()));
  std::vector<uint8_t> body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  out.insert(out.end(), body.begin(), body.end());
  put32(out, crc32(body.data(), body.size()) ^ 0xFFFFFFFFu);
}
}  // namespace png_detail

// Writes img as a PNG file; returns false if the file cannot be written.
inline bool write_png(const std::string& path, const Image& img) {
  using namespace png_detail;
  std::vector<uint8_t> raw;  // each row: filter byte 0, then RGB
  for (int y = 0; y < img.height; ++y) {
    raw.push_back(0);
    auto row = img.rgb.begin() + static_cast<std::ptrdiff_t>(y) * img.width * 3;
    raw.insert(raw.end(), row, row + img.width * 3);
  }
  std::vector<uint8_t> z = {0x78, 0x01};  // zlib header, then stored blocks of <= 65535 bytes
  for (std::size_t pos = 0; pos < raw.size() || raw.empty(); pos += 65535) {
    std::size_t len = std::min<std::size_t>(65535, raw.size() - pos);
    z.push_back(pos + len >= raw.size() ? 1 : 0);
    z.push_back(len & 0xFF), z.push_back(len >> 8);
    z.push_back(~len & 0xFF), z.push_back((~len >> 8) & 0xFF);
    z.insert(z.end(), raw.begin() + pos, raw.begin() + pos + len);
    if (raw.empty()) break;
  }
  uint32_t a = 1, b = 0;  // Adler-32 of the uncompressed data
  for (uint8_t c : raw) a = (a + c) % 65521, b = (b + a) % 65521;
  put32(z, (b << 16) | a);

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> header;
  put32(header, img.width), put32(header, img.height);
  header.insert(header.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, no interlace
  chunk(png, "IHDR", header);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", {});
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  return static_cast<bool>(f);
}

// A heat map of a rows x cols matrix of values in [0, 1] (e.g. attention weights), `cell` pixels
// per entry, with a thin grid.
inline Image heatmap(const std::vector<double>& values, int rows, int cols, int cell = 32) {
  Image img(cols * cell + 1, rows * cell + 1);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      for (int y = 1; y < cell; ++y)
        for (int x = 1; x < cell; ++x)
          img.set(c * cell + x, r * cell + y,
                  blue_ramp(values[static_cast<std::size_t>(r) * cols + c]));
  return img;
}

}  // namespace ember::examples
