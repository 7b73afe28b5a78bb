// tests/static.cpp: what kiln decides at compile time, as static_asserts only (mp-units' style):
// the rank and element type of expressions, promotion through expression trees, which types are
// expressions, and which uses of views are rejected. Compiling this file is the test; the
// executable runs no test case.
#include <kiln/kiln.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using kiln::tensor;
using kiln::tensor_view;

// Lvalues and rvalues of any type, for use in unevaluated operands only.
template <class T>
T& lv();
template <class T>
T&& rv();

// Whether a call compiles. Requires-expressions must depend on a template parameter to turn an
// invalid call into `false` instead of an error.
template <class X>
concept can_exp = requires { kiln::exp(std::declval<X>()); };
template <class A, class B>
concept can_add = requires { kiln::add(std::declval<A>(), std::declval<B>()); };
template <class A, class B>
concept can_plus = requires { std::declval<A>() + std::declval<B>(); };
template <class X>
concept can_view = requires { kiln::view(std::declval<X>()); };
template <class X>
concept can_transpose = requires { kiln::transpose(std::declval<X>()); };

template <class E>
using value_t = typename std::remove_cvref_t<E>::value_type;
template <class E>
inline constexpr int rank_v = std::remove_cvref_t<E>::rank;

using f32 = tensor<float, 1>;
using f64 = tensor<double, 1>;
using i32 = tensor<std::int32_t, 1>;
using i64 = tensor<std::int64_t, 1>;
using b8 = tensor<bool, 1>;

// --- the expression concept -----------------------------------------------------------------

static_assert(kiln::expression<tensor<float, 2>>);
static_assert(kiln::expression<tensor<float, 2>&>);
static_assert(kiln::expression<tensor<float, 2> const&>);
static_assert(kiln::expression<tensor<bool, 0>>);
static_assert(kiln::expression<tensor_view<float, 3>>);
static_assert(kiln::expression<tensor_view<float const, 1>>);
static_assert(kiln::expression<decltype(lv<f32>() + lv<f32>())>);            // a node
static_assert(kiln::expression<decltype(kiln::exp(lv<f32>()) * 2.f)>);      // a nested node
static_assert(kiln::expression<decltype(lv<f32>() < 1.f)>);
static_assert(kiln::expression<kiln::leaf<float, 2>>);
static_assert(kiln::expression<kiln::constant<double>>);

static_assert(!kiln::expression<std::vector<float>>);
static_assert(!kiln::expression<float>);
static_assert(!kiln::expression<float*>);
static_assert(!kiln::expression<float const*>);
static_assert(!kiln::expression<int>);
static_assert(!kiln::expression<std::span<float>>);
static_assert(!kiln::expression<std::array<float, 3>>);
static_assert(!kiln::expression<kiln::extents<2>>);

// Operands are expressions or arithmetic scalars; at least one must be an expression.
static_assert(kiln::operand<float>);
static_assert(kiln::operand<f32&>);
static_assert(!kiln::operand<std::vector<float>>);
static_assert(!kiln::operand<float*>);
static_assert(!can_exp<std::vector<float>&>);
static_assert(!can_exp<float>);
static_assert(!can_exp<float*>);
static_assert(can_exp<f32&>);
static_assert(can_exp<f32>);
static_assert(!can_add<float, float>);
static_assert(can_add<f32&, float>);
static_assert(!can_plus<std::vector<float>&, f32&>);
static_assert(!can_plus<f32&, float*>);
static_assert(can_plus<float, f32&>);

// --- rank inference: right-aligned broadcasting gives the largest rank ----------------------

static_assert(rank_v<decltype(lv<tensor<float, 2>>() + lv<tensor<float, 1>>())> == 2);
static_assert(rank_v<decltype(lv<tensor<float, 1>>() + lv<tensor<float, 2>>())> == 2);
static_assert(rank_v<decltype(lv<tensor<float, 0>>() * lv<tensor<float, 3>>())> == 3);
static_assert(rank_v<decltype(lv<tensor<float, 2>>() * 2.f)> == 2);
static_assert(rank_v<decltype(2.f * lv<tensor<float, 0>>())> == 0);
static_assert(rank_v<decltype(kiln::exp(lv<tensor<float, 2>>() * lv<tensor<double, 1>>()) +
                              lv<tensor<float, 3>>())> == 3);
static_assert(rank_v<decltype(kiln::where(lv<tensor<bool, 3>>(), lv<tensor<float, 1>>(), 0.f))> == 3);
static_assert(rank_v<decltype(kiln::fma(lv<tensor<float, 1>>(), lv<tensor<float, 4>>(), lv<tensor<float, 2>>()))> == 4);
static_assert(std::is_same_v<decltype((lv<tensor<float, 2>>() + lv<tensor<float, 1>>()).shape()), kiln::extents<2> const&>);

// --- element type inference and promotion through trees -------------------------------------

// Comparisons and logical ops give bool; the comparison itself runs in the promoted type.
static_assert(std::is_same_v<value_t<decltype(lv<f32>() < lv<f32>())>, bool>);
static_assert(std::is_same_v<value_t<decltype(lv<i32>() == 2.5)>, bool>);
static_assert(std::is_same_v<value_t<decltype(kiln::isnan(lv<f64>()))>, bool>);
static_assert(std::is_same_v<value_t<decltype(lv<f32>() < lv<f64>())>, bool>);
static_assert(std::is_same_v<typename decltype(lv<f32>() < lv<f64>())::compute_type, double>);
static_assert(std::is_same_v<typename decltype(lv<i32>() < 2.5)::compute_type, float>);
static_assert(std::is_same_v<value_t<decltype(lv<f32>() && lv<i32>())>, bool>);
static_assert(std::is_same_v<value_t<decltype(!lv<f32>())>, bool>);

// True division: integers divide as float.
static_assert(std::is_same_v<value_t<decltype(lv<i32>() / lv<i32>())>, float>);
static_assert(std::is_same_v<value_t<decltype(lv<i64>() / 2)>, float>);
static_assert(std::is_same_v<value_t<decltype(lv<f64>() / lv<i32>())>, double>);

// Tensor op tensor promotes; a scalar never widens a tensor.
static_assert(std::is_same_v<value_t<decltype(lv<f32>() * lv<f64>())>, double>);
static_assert(std::is_same_v<value_t<decltype(lv<f32>() * 2.0)>, float>);
static_assert(std::is_same_v<value_t<decltype(2.0 * lv<f32>())>, float>);
static_assert(std::is_same_v<value_t<decltype(lv<f32>() + 1)>, float>);
static_assert(std::is_same_v<value_t<decltype(lv<f64>() * 2.f)>, double>);
static_assert(std::is_same_v<value_t<decltype(lv<i32>() * 2.5)>, float>);
static_assert(std::is_same_v<value_t<decltype(lv<i32>() * 2)>, std::int32_t>);
static_assert(std::is_same_v<value_t<decltype(lv<i32>() * std::int64_t{2})>, std::int32_t>);
static_assert(std::is_same_v<value_t<decltype(lv<i32>() + lv<i64>())>, std::int64_t>);
static_assert(std::is_same_v<value_t<decltype(lv<i64>() + lv<f32>())>, float>);
static_assert(std::is_same_v<value_t<decltype(lv<b8>() + 1)>, std::int64_t>);
static_assert(std::is_same_v<value_t<decltype(lv<b8>() + lv<i32>())>, std::int32_t>);

// Floating ops make integers float and keep float and double.
static_assert(std::is_same_v<value_t<decltype(kiln::exp(lv<i32>()))>, float>);
static_assert(std::is_same_v<value_t<decltype(kiln::exp(lv<f64>()))>, double>);
static_assert(std::is_same_v<value_t<decltype(kiln::sqrt(lv<f32>()))>, float>);

// where: the condition does not take part; the two branches promote.
static_assert(std::is_same_v<value_t<decltype(kiln::where(lv<b8>(), lv<i32>(), lv<f32>()))>, float>);
static_assert(std::is_same_v<value_t<decltype(kiln::where(lv<b8>(), lv<f32>(), lv<f64>()))>, double>);
static_assert(std::is_same_v<value_t<decltype(kiln::where(lv<b8>(), lv<f32>(), 0))>, float>);
static_assert(std::is_same_v<value_t<decltype(kiln::where(lv<f32>() > 0.f, lv<i32>(), lv<i64>()))>, std::int64_t>);

// Promotion composes through nested nodes.
static_assert(std::is_same_v<value_t<decltype(lv<i32>() / lv<i32>() * lv<f64>())>, double>);
static_assert(std::is_same_v<value_t<decltype((lv<i32>() + lv<i64>()) * 2.5)>, float>);
static_assert(std::is_same_v<value_t<decltype(kiln::exp(lv<i32>()) * 2.0)>, float>);
static_assert(std::is_same_v<value_t<decltype((lv<i32>() < lv<f32>()) + 1)>, std::int64_t>);
static_assert(std::is_same_v<value_t<decltype(kiln::where(lv<i32>() < 3, lv<i32>() * 2, lv<i32>() / 2))>, float>);

// Views take part like the tensors they view; a read-only view's elements are not const values.
static_assert(std::is_same_v<value_t<tensor_view<float const, 2>>, float>);
static_assert(std::is_same_v<typename tensor_view<float const, 2>::element_type, float const>);
static_assert(std::is_same_v<value_t<decltype(lv<tensor_view<float const, 2>>() * lv<f64>())>, double>);

// Materialising an expression gives a tensor of its rank and element type.
static_assert(std::is_same_v<decltype(kiln::eval(lv<tensor<std::int32_t, 2>>() * 2.5)), tensor<float, 2>>);
static_assert(std::is_same_v<decltype(kiln::eval(lv<f32>() < lv<tensor<double, 3>>())), tensor<bool, 3>>);

// --- views: what they return, and what they refuse --------------------------------------------

static_assert(std::is_same_v<decltype(kiln::transpose(lv<tensor<float, 2>>())), tensor_view<float, 2>>);
static_assert(std::is_same_v<decltype(kiln::transpose(lv<tensor<float, 2> const>())), tensor_view<float const, 2>>);
static_assert(std::is_same_v<decltype(kiln::transpose(rv<tensor_view<float, 2>>())), tensor_view<float, 2>>);
static_assert(std::is_same_v<decltype(kiln::select(lv<tensor<int, 3>>(), 0, 0)), tensor_view<int, 2>>);
static_assert(std::is_same_v<decltype(kiln::unsqueeze(lv<tensor<int, 3>>(), 0)), tensor_view<int, 4>>);
static_assert(std::is_same_v<decltype(kiln::reshape(lv<tensor<int, 3>>(), {-1})), tensor_view<int, 1>>);
static_assert(std::is_same_v<decltype(kiln::expand(lv<tensor<int, 1>>(), {2, 3})), tensor_view<int const, 2>>);
static_assert(std::is_same_v<decltype(kiln::view(lv<std::vector<float>>())), tensor_view<float, 1>>);
static_assert(std::is_same_v<decltype(kiln::view(lv<std::vector<float> const>())), tensor_view<float const, 1>>);
static_assert(std::is_same_v<decltype(kiln::view(lv<double*>(), {2, 3})), tensor_view<double, 2>>);
// A view of a temporary vector would dangle at the end of the statement.
static_assert(!can_view<std::vector<float>>);
static_assert(can_view<std::vector<float>&>);
// Views of temporary tensors are rejected by a static_assert inside the function, so they are
// checked in tests/fail/ (transpose_temporary) rather than here.

// Only tensors and views are viewable.
static_assert(kiln::viewable<tensor<float, 2>&>);
static_assert(kiln::viewable<tensor_view<float const, 1>>);
static_assert(!kiln::viewable<std::vector<float>&>);
static_assert(!can_transpose<decltype(lv<tensor<float, 2>>() * 2.f)&>);
static_assert(!can_transpose<std::vector<float>&>);
static_assert(can_transpose<tensor<float, 2>&>);

// A view of const elements cannot be written through.
using ro = tensor_view<float const, 1>;
using rw = tensor_view<float, 1>;
static_assert(!std::is_assignable_v<ro&, float>);
static_assert(!std::is_assignable_v<ro const&, float>);
static_assert(!std::is_assignable_v<ro&, ro const&>);
static_assert(!std::is_assignable_v<ro&, rw const&>);
static_assert(!std::is_assignable_v<ro&, f32 const&>);
static_assert(!std::is_assignable_v<ro&, decltype(lv<f32>() * 2.f)>);
static_assert(!std::is_assignable_v<decltype(lv<ro>()(0)), float>);
// A mutable view writes through, also as a temporary (kiln::slice(x, ...) = 0).
static_assert(std::is_assignable_v<rw&, float>);
static_assert(std::is_assignable_v<rw, float>);
static_assert(std::is_assignable_v<rw const&, ro const&>);
static_assert(std::is_assignable_v<rw&, decltype(lv<f64>() * 2.0)>);
static_assert(std::is_convertible_v<rw, ro>);
static_assert(!std::is_convertible_v<ro, rw>);

// --- tensors: value semantics and a small surface -------------------------------------------

static_assert(std::is_copy_constructible_v<tensor<float, 2>>);
static_assert(std::is_nothrow_move_constructible_v<tensor<float, 2>>);
static_assert(std::is_nothrow_move_assignable_v<tensor<float, 2>>);
static_assert(std::is_nothrow_move_assignable_v<tensor<float, 0>>);
static_assert(!std::is_nothrow_move_constructible_v<tensor<float, 0>>);  // copies its one element
static_assert(!std::is_convertible_v<kiln::extents<2>, tensor<float, 2>>);  // shapes are explicit
static_assert(std::is_constructible_v<tensor<float, 2>, kiln::extents<2>>);
static_assert(!std::is_constructible_v<tensor<float, 1>, std::vector<float>>);  // go through kiln::view
static_assert(!std::is_constructible_v<tensor<float, 1>, float*>);
static_assert(std::is_convertible_v<float, tensor<float, 0>>);
static_assert(!std::is_constructible_v<tensor<float, 1>, float>);
static_assert(std::is_convertible_v<tensor<float, 2>&, tensor_view<float, 2>>);
static_assert(std::is_convertible_v<tensor<float, 2> const&, tensor_view<float const, 2>>);
static_assert(!std::is_convertible_v<tensor<float, 2> const&, tensor_view<float, 2>>);
static_assert(std::is_constructible_v<tensor<double, 2>, decltype(lv<tensor<float, 2>>() * 2.f)>);
static_assert(std::is_assignable_v<tensor<float, 2>&, decltype(lv<tensor<float, 1>>() * 2.f)>);
static_assert(!std::is_assignable_v<tensor<float, 2>&, std::vector<float>>);
static_assert(tensor<float, 3>::rank == 3 && tensor_view<int, 0>::rank == 0);
static_assert(tensor<float, 2>::is_contiguous());

}  // namespace
