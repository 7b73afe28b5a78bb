// A user's op without a grad rule runs forward, but cannot be differentiated.
#include <kiln/kiln.hpp>

struct twice_op : kiln::math::op_base<1, kiln::op_kind::floating> {
  static constexpr std::string_view name = "twice";
  template <class T> T operator()(T x) const { return x + x; }
#ifndef KILN_SHOULD_FAIL
  template <class T> std::array<T, 1> grad(T g, T, T) const { return {g + g}; }
#endif
};

int main() {
  kiln::tensor<float, 1> x = kiln::ones<float>({3});
  auto f = [](auto const& v) { return kiln::sum(kiln::make_map(twice_op{}, v)); };
  auto result = kiln::value_and_grad(f, x);
  (void)result;
}
