#include "workloads/ddpm/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace medprof::ddpm {
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Geometry and contrast of one synthetic subject, drawn once per subject.
struct Wave {
  double fz, fy, fx, phase, amplitude;
};
struct Geometry {
  double brain_c[3], brain_r[3];  // centre offset and semi-axes, unit-box coordinates (z, y, x)
  double tumour_c[3], tumour_r[3];
  Wave waves[4];
};

Geometry DrawGeometry(Rng& rng) {
  Geometry g{};
  const double brain_base[3] = {0.38, 0.34, 0.40};
  for (int a = 0; a < 3; ++a) {
    g.brain_c[a] = rng.Uniform(-0.02, 0.02);
    g.brain_r[a] = brain_base[a] + rng.Uniform(-0.03, 0.03);
  }
  for (int a = 0; a < 3; ++a) {
    // Inside the brain: at most 40 % of the brain radius away from its centre, and the
    // tumour radius at most 30 % of the brain's, so the tumour stays inside the brain.
    g.tumour_c[a] = g.brain_c[a] + rng.Uniform(-0.4, 0.4) * g.brain_r[a];
    g.tumour_r[a] = rng.Uniform(0.15, 0.30) * g.brain_r[a];
  }
  for (Wave& w : g.waves) {
    auto freq = [&rng] {
      const double f = 1.0 + static_cast<double>(rng.Below(3));  // 1..3 cycles per box
      return rng.Uniform() < 0.5 ? -f : f;
    };
    w.fz = freq();
    w.fy = freq();
    w.fx = freq();
    w.phase = rng.Uniform(0.0, 2.0 * std::numbers::pi);
    w.amplitude = rng.Uniform(0.5, 1.0);
  }
  return g;
}

double EllipsoidR2(const double p[3], const double c[3], const double r[3]) {
  double s = 0.0;
  for (int a = 0; a < 3; ++a) {
    const double q = (p[a] - c[a]) / r[a];
    s += q * q;
  }
  return s;
}

}  // namespace

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t StreamKey(uint64_t seed, Stream stream, uint64_t index) {
  uint64_t s = seed;
  uint64_t k = SplitMix64(&s);
  s = k ^ static_cast<uint64_t>(stream);
  k = SplitMix64(&s);
  s = k ^ index;
  return SplitMix64(&s);
}

Rng::Rng(uint64_t key) {
  uint64_t s = key;
  for (uint64_t& word : s_) word = SplitMix64(&s);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int64_t Rng::Below(int64_t n) {
  const auto v = static_cast<int64_t>(Uniform() * static_cast<double>(n));
  return std::min(v, n - 1);
}

double Rng::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - Uniform();  // (0, 1]: log is finite
  const double u2 = Uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

void Rng::FillNormal(float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(Normal());
}

void Rng::FillUniform(float* out, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(Uniform(lo, hi));
}

Subject MakeSubject(uint64_t seed, uint64_t index, int depth, int height, int width, int image_channels,
                    int mask_channels) {
  Subject s;
  s.depth = depth;
  s.height = height;
  s.width = width;
  s.image_channels = image_channels;
  s.mask_channels = mask_channels;
  const int64_t plane = static_cast<int64_t>(height) * width;
  const int64_t voxels = plane * depth;
  s.labels.assign(voxels, 0);
  s.image.assign(voxels * image_channels, 0.0f);
  s.mask.assign(voxels * mask_channels, -1.0f);

  const uint64_t subject_key = StreamKey(seed, Stream::kSubject, index);
  Rng geo_rng(subject_key);
  const Geometry g = DrawGeometry(geo_rng);
  const int tumour_regions = std::max(1, mask_channels - 1);

  // Labels and the geometric fields every channel shares.
  std::vector<double> ring(voxels, 0.0), wave(voxels, 0.0);
  double amplitude_sum = 0.0;
  for (const Wave& w : g.waves) amplitude_sum += w.amplitude;
  for (int d = 0; d < depth; ++d) {
    for (int h = 0; h < height; ++h) {
      for (int x = 0; x < width; ++x) {
        const double p[3] = {(d + 0.5) / depth - 0.5, (h + 0.5) / height - 0.5, (x + 0.5) / width - 0.5};
        const int64_t v = (d * static_cast<int64_t>(height) + h) * width + x;
        const double rb = EllipsoidR2(p, g.brain_c, g.brain_r);
        if (rb > 1.0) continue;
        const double rt = EllipsoidR2(p, g.tumour_c, g.tumour_r);
        if (rt <= 1.0) {
          // Concentric shells: the core (label 2) inside, the outer rim last.
          const int shell = std::min(tumour_regions - 1, static_cast<int>(std::sqrt(rt) * tumour_regions));
          s.labels[v] = static_cast<uint8_t>(2 + shell);
        } else {
          s.labels[v] = 1;
        }
        double w_sum = 0.0;
        for (const Wave& w : g.waves) {
          w_sum += w.amplitude *
                   std::sin(2.0 * std::numbers::pi * (w.fz * p[0] + w.fy * p[1] + w.fx * p[2]) + w.phase);
        }
        wave[v] = w_sum / amplitude_sum;
        ring[v] = std::cos(3.0 * std::numbers::pi * rb);
      }
    }
  }

  // Intensities, one contrast per channel, then per-slice min-max and x*2-1.
  std::vector<double> field(voxels);
  for (int c = 0; c < image_channels; ++c) {
    Rng rng(StreamKey(subject_key, Stream::kSubject, 1 + static_cast<uint64_t>(c)));
    const double base = rng.Uniform(0.40, 0.60);
    const double ring_amp = rng.Uniform(0.05, 0.15);
    // Even channels show the tumour bright (T2/FLAIR-like), odd ones dark (T1-like).
    const double tumour = (c % 2 == 0) ? rng.Uniform(0.80, 1.00) : rng.Uniform(0.10, 0.30);
    for (int64_t v = 0; v < voxels; ++v) {
      double value = 0.0;
      if (s.labels[v] == 1) {
        value = base + 0.12 * wave[v] + ring_amp * ring[v];
      } else if (s.labels[v] >= 2) {
        value = tumour + 0.05 * wave[v] - 0.03 * (s.labels[v] - 2);
      }
      field[v] = value + 0.01 * rng.Normal();
    }
    float* out = s.image.data() + c * voxels;
    for (int d = 0; d < depth; ++d) {
      const double* slice = field.data() + d * plane;
      const auto [lo, hi] = std::minmax_element(slice, slice + plane);
      const double range = *hi - *lo;
      for (int64_t i = 0; i < plane; ++i) {
        const double scaled = range > 0.0 ? (slice[i] - *lo) / range : 0.0;
        out[d * plane + i] = static_cast<float>(scaled * 2.0 - 1.0);
      }
    }
  }

  // One-hot masks: brain (label 1) first, then tumour labels 2...
  for (int64_t v = 0; v < voxels; ++v) {
    const int label = s.labels[v];
    if (label == 0 || mask_channels == 0) continue;
    const int channel = mask_channels == 1 ? 0 : label - 1;
    s.mask[channel * voxels + v] = 1.0f;
  }
  return s;
}

std::vector<float> NormalVolume(uint64_t seed, Stream stream, uint64_t index, int64_t n) {
  std::vector<float> out(n);
  Rng rng(seed, stream, index);
  rng.FillNormal(out.data(), n);
  return out;
}

std::vector<int64_t> Timesteps(uint64_t seed, uint64_t index, int batch, int num_timesteps) {
  Rng rng(seed, Stream::kTimestep, index);
  std::vector<int64_t> t(batch);
  for (int64_t& v : t) v = rng.Below(num_timesteps);
  return t;
}

uint64_t Fnv1a64(const float* data, int64_t n) {
  uint64_t h = 0xCBF29CE484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < n * static_cast<int64_t>(sizeof(float)); ++i) {
    h ^= bytes[i];
    h *= 0x100000001B3ULL;
  }
  return h;
}

uint64_t Fnv1a64(const std::vector<float>& data) {
  return Fnv1a64(data.data(), static_cast<int64_t>(data.size()));
}

}  // namespace medprof::ddpm
