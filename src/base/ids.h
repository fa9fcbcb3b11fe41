// Strong ids: a RequestId cannot be passed where a BlockId is expected.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>

namespace ecoserve {

template <typename Tag, typename Rep>
struct StrongId {
  Rep value{};
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  friend constexpr auto operator<=>(const StrongId&, const StrongId&) = default;
  friend std::ostream& operator<<(std::ostream& os, const StrongId& id) { return os << id.value; }
};

using RequestId = StrongId<struct RequestIdTag, std::uint64_t>;
using InstanceId = StrongId<struct InstanceIdTag, std::int32_t>;
using BlockId = StrongId<struct BlockIdTag, std::int32_t>;

}  // namespace ecoserve

template <typename Tag, typename Rep>
struct std::hash<ecoserve::StrongId<Tag, Rep>> {
  std::size_t operator()(const ecoserve::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>()(id.value);
  }
};
