#include "common/conv_work.h"

#include <cstdlib>
#include <string>

namespace medprof {
namespace {

// The first `count` bracketed lists in `shapes`, in order ("[]" gives an empty one); nullopt when
// there are fewer or one of them holds anything but non-negative integers.
std::optional<std::vector<std::vector<int64_t>>> Lists(std::string_view shapes, size_t count) {
  std::vector<std::vector<int64_t>> out;
  size_t pos = 0;
  while (out.size() < count && (pos = shapes.find('[', pos)) != std::string_view::npos) {
    const size_t end = shapes.find(']', pos);
    if (end == std::string_view::npos) return std::nullopt;
    std::vector<int64_t>& list = out.emplace_back();
    std::string_view body = shapes.substr(pos + 1, end - pos - 1);
    while (!body.empty()) {
      const size_t comma = body.find(',');
      const std::string item(body.substr(0, comma));
      char* rest = nullptr;
      const long long v = std::strtoll(item.c_str(), &rest, 10);
      if (item.empty() || *rest != '\0' || v < 0) return std::nullopt;
      list.push_back(v);
      body = comma == std::string_view::npos ? std::string_view() : body.substr(comma + 1);
    }
    pos = end + 1;
  }
  if (out.size() < count) return std::nullopt;
  return out;
}

double Product(const std::vector<int64_t>& v, size_t from) {
  double p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= static_cast<double>(v[i]);
  return p;
}

// The work of weight `w` applied at N = n over the output's spatial sizes `out`.
std::optional<ConvWork> Work(int64_t n, const std::vector<int64_t>& w, const std::vector<int64_t>& out) {
  if (w.size() < 3 || out.size() + 2 != w.size() || n <= 0) return std::nullopt;
  ConvWork c;
  c.c_out = w[0];
  c.c_in_per_group = w[1];
  c.kernel.assign(w.begin() + 2, w.end());
  c.flops = 2.0 * static_cast<double>(n) * Product(w, 0) * Product(out, 0);
  return c;
}

std::optional<ConvWork> Forward(const std::vector<std::vector<int64_t>>& l) {
  const std::vector<int64_t>&x = l[0], &w = l[1], &pad = l[2], &stride = l[3], &dil = l[4];
  const size_t dims = w.size() < 2 ? 0 : w.size() - 2;
  if (dims == 0 || x.size() != w.size() || pad.size() != dims || stride.size() != dims || dil.size() != dims)
    return std::nullopt;
  std::vector<int64_t> out;
  for (size_t i = 0; i < dims; ++i) {
    const int64_t span = x[i + 2] + 2 * pad[i] - dil[i] * (w[i + 2] - 1) - 1;
    if (stride[i] <= 0 || span < 0) return std::nullopt;
    out.push_back(span / stride[i] + 1);
  }
  return Work(x[0], w, out);
}

std::optional<ConvWork> Backward(const std::vector<std::vector<int64_t>>& l) {
  if (l[0].size() < 3) return std::nullopt;
  const std::vector<int64_t>&grad_out = l[0], &w = l[2];
  if (grad_out.size() != w.size() || grad_out[1] != w[0]) return std::nullopt;
  return Work(grad_out[0], w, std::vector<int64_t>(grad_out.begin() + 2, grad_out.end()));
}

}  // namespace

std::optional<ConvWork> UsefulConvWork(std::string_view op, std::string_view shapes) {
  // input, weight, padding, stride, dilation | grad_output, input, weight (the rest is not needed)
  const bool forward = op == "aten::cudnn_convolution";
  if (!forward && op != "aten::convolution_backward") return std::nullopt;
  const auto lists = Lists(shapes, forward ? 5 : 3);
  if (!lists) return std::nullopt;
  return forward ? Forward(*lists) : Backward(*lists);
}

}  // namespace medprof
