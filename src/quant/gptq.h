// Error-correcting rounding (GPTQ, Frantar et al. 2022): the factor it needs
// from a layer's input second moments H = E[x x^T].
#pragma once

#include <cstdint>
#include <vector>

namespace ork {

// R, the upper-triangular factor with H + damping = R R^T (k x k,
// row-major; the lower triangle is zero; a positive diagonal), as
// quantize_tier's `gptq` argument wants it. (GPTQ is usually written with
// U, the upper Cholesky factor of the inverse: U = R^-1, so R serves
// without inverting anything.) Damping starts at 1 % of H's mean diagonal
// and grows until the factor exists. Empty if H is zero or cannot be
// factored.
std::vector<double> gptq_factor(const std::vector<double>& h, int64_t k);

}  // namespace ork
