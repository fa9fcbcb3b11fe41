#include "kernels/ggml_type.h"

namespace ecoserve::kernels {

const TypeTraits* type_traits(GgmlType type) {
  static constexpr TypeTraits kF32{"f32", 1, 4, true};
  static constexpr TypeTraits kF16{"f16", 1, 2, true};
  static constexpr TypeTraits kBF16{"bf16", 1, 2, true};
  static constexpr TypeTraits kQ4_0{"q4_0", 32, 18, true};
  static constexpr TypeTraits kQ4_1{"q4_1", 32, 20, false};
  static constexpr TypeTraits kQ5_0{"q5_0", 32, 22, false};
  static constexpr TypeTraits kQ5_1{"q5_1", 32, 24, false};
  static constexpr TypeTraits kQ8_0{"q8_0", 32, 34, true};
  static constexpr TypeTraits kQ8_1{"q8_1", 32, 36, false};
  static constexpr TypeTraits kQ2_K{"q2_K", 256, 84, false};
  static constexpr TypeTraits kQ3_K{"q3_K", 256, 110, false};
  static constexpr TypeTraits kQ4_K{"q4_K", 256, 144, true};
  static constexpr TypeTraits kQ5_K{"q5_K", 256, 176, false};
  static constexpr TypeTraits kQ6_K{"q6_K", 256, 210, true};
  static constexpr TypeTraits kQ8_K{"q8_K", 256, 292, false};
  static constexpr TypeTraits kI8{"i8", 1, 1, false};
  static constexpr TypeTraits kI16{"i16", 1, 2, false};
  static constexpr TypeTraits kI32{"i32", 1, 4, false};
  static constexpr TypeTraits kI64{"i64", 1, 8, false};
  static constexpr TypeTraits kF64{"f64", 1, 8, false};
  switch (type) {
    case GgmlType::kF32: return &kF32;
    case GgmlType::kF16: return &kF16;
    case GgmlType::kBF16: return &kBF16;
    case GgmlType::kQ4_0: return &kQ4_0;
    case GgmlType::kQ4_1: return &kQ4_1;
    case GgmlType::kQ5_0: return &kQ5_0;
    case GgmlType::kQ5_1: return &kQ5_1;
    case GgmlType::kQ8_0: return &kQ8_0;
    case GgmlType::kQ8_1: return &kQ8_1;
    case GgmlType::kQ2_K: return &kQ2_K;
    case GgmlType::kQ3_K: return &kQ3_K;
    case GgmlType::kQ4_K: return &kQ4_K;
    case GgmlType::kQ5_K: return &kQ5_K;
    case GgmlType::kQ6_K: return &kQ6_K;
    case GgmlType::kQ8_K: return &kQ8_K;
    case GgmlType::kI8: return &kI8;
    case GgmlType::kI16: return &kI16;
    case GgmlType::kI32: return &kI32;
    case GgmlType::kI64: return &kI64;
    case GgmlType::kF64: return &kF64;
  }
  return nullptr;
}

std::string_view type_name(GgmlType type) {
  const TypeTraits* t = type_traits(type);
  return t ? t->name : std::string_view("unknown");
}

}  // namespace ecoserve::kernels
