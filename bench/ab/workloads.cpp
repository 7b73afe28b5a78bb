// The kiln side of the table's workloads as plain C entry points, compiled once per kiln revision
// into a shared library by bench/ab/run.sh, so that one process can time two revisions against each
// other (see runner.cpp). Each library allocates its own data in setup(n).
#include <kiln/kiln.hpp>

#include <memory>

namespace {
struct data {
  explicit data(kiln::index_t n)
      : rows(n / 256), x(kiln::rand<float>({n}, 1)), y(kiln::rand<float>({n}, 2)), z(kiln::zeros<float>({n})),
        A(kiln::randn<float>({rows, 256}, 3)), out(kiln::zeros<float>({rows, 256})), b(kiln::randn<float>({256}, 4)),
        c(kiln::randn<float>({rows, 1}, 5)), sums(kiln::zeros<float>({rows})),
        At(kiln::randn<float>({rows, 255}, 6)), outt(kiln::zeros<float>({rows, 255})), bt(kiln::randn<float>({255}, 7)),
        A3(kiln::randn<float>({batches(), rows / batches(), 256}, 8)), out3(kiln::zeros<float>({batches(), rows / batches(), 256})),
        c3(kiln::randn<float>({batches(), rows / batches(), 1}, 9)) {}
  // W4 at rank 3: the rows in batches of two (one batch of a single row).
  kiln::index_t batches() const { return rows >= 2 ? rows / 2 : 1; }
  kiln::index_t rows;
  kiln::tensor<float, 1> x, y, z;
  kiln::tensor<float, 2> A, out;
  kiln::tensor<float, 1> b;
  kiln::tensor<float, 2> c;
  kiln::tensor<float, 1> sums;
  kiln::tensor<float, 2> At, outt;  // W4t: rows of 255
  kiln::tensor<float, 1> bt;
  kiln::tensor<float, 3> A3, out3, c3;  // W4 at rank 3
  float total = 0;
};
std::unique_ptr<data> d;
}  // namespace

extern "C" {
void setup(long n) { d = std::make_unique<data>(n); }
void w1() { d->z = 2.5f * d->x + d->y; }
void w2() { d->z = kiln::tanh(0.7f * d->x + 0.1f) * kiln::sigmoid(d->y) + kiln::exp(-d->x * d->x); }
void w3() { d->total = kiln::sum(kiln::exp(d->x - 0.5f)); }
void w4() { d->out = kiln::relu(d->A + d->b) * d->c; }
void w6() { d->sums = kiln::sum(d->A * d->A, kiln::axes<1>); }
void w7() { d->out = kiln::softmax(d->A, 1); }
void w8() { d->out = d->A - kiln::amax(d->A, kiln::axes<1>, kiln::keepdim); }
void w9() {
  d->out = (d->A - kiln::mean(d->A, kiln::axes<1>, kiln::keepdim)) /
           kiln::sqrt(kiln::variance(d->A, kiln::axes<1>, kiln::keepdim, kiln::correction{0}) + 1e-5f);
}
// W9 at rank 3, over [N/512, 2, 256].
void wl() {
  d->out3 = (d->A3 - kiln::mean(d->A3, kiln::axes<2>, kiln::keepdim)) /
            kiln::sqrt(kiln::variance(d->A3, kiln::axes<2>, kiln::keepdim, kiln::correction{0}) + 1e-5f);
}
void wt() { d->outt = kiln::relu(d->At + d->bt) * d->c; }
void wr() { d->out3 = kiln::relu(d->A3 + d->b) * d->c3; }
}
