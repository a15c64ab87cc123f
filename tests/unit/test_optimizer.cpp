// Tests src/train/optimizer: the learning-rate schedule, gradient clipping and AdamW against
// hand-computed values.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/adamw/adamw.h"
#include "train/optimizer.h"

using namespace gdn;

TEST_CASE("learning_rate: linear warmup then cosine to min_lr", "[optimizer]") {
  AdamWConfig c;
  c.lr = 1e-3;
  c.warmup_steps = 10;
  c.total_steps = 110;
  c.min_lr = 1e-4;
  CHECK(learning_rate(c, 0) == Approx(1e-4).epsilon(1e-14));
  CHECK(learning_rate(c, 4) == Approx(5e-4).epsilon(1e-14));
  CHECK(learning_rate(c, 9) == Approx(1e-3).epsilon(1e-14));
  CHECK(learning_rate(c, 10) == Approx(1e-3).epsilon(1e-14));
  CHECK(learning_rate(c, 35) == Approx(1e-4 + 9e-4 * 0.5 * (1 + std::sqrt(0.5))).epsilon(1e-14));
  CHECK(learning_rate(c, 60) == Approx(1e-4 + 0.5 * 9e-4).epsilon(1e-14));  // half way
  CHECK(learning_rate(c, 110) == Approx(1e-4).epsilon(1e-14));
  CHECK(learning_rate(c, 500) == Approx(1e-4).epsilon(1e-14));
  c.warmup_steps = 0;
  CHECK(learning_rate(c, 0) == Approx(1e-3).epsilon(1e-14));
}

// The other schedules against their formulas by hand: lr 1e-3, min_lr 1e-4, 10 warmup
// steps, 110 steps (100 after warmup).
TEST_CASE("learning_rate: linear, constant and warmup-stable-decay", "[optimizer]") {
  AdamWConfig c;
  c.lr = 1e-3;
  c.warmup_steps = 10;
  c.total_steps = 110;
  c.min_lr = 1e-4;
  SECTION("linear") {
    c.schedule = LrSchedule::linear;
    CHECK(learning_rate(c, 4) == Approx(5e-4).epsilon(1e-14));  // warmup as every schedule
    CHECK(learning_rate(c, 10) == Approx(1e-3).epsilon(1e-14));
    CHECK(learning_rate(c, 35) == Approx(1e-4 + 9e-4 * 0.75).epsilon(1e-14));
    CHECK(learning_rate(c, 60) == Approx(5.5e-4).epsilon(1e-14));
    CHECK(learning_rate(c, 109) == Approx(1e-4 + 9e-4 * 0.01).epsilon(1e-14));
    CHECK(learning_rate(c, 300) == Approx(1e-4).epsilon(1e-14));
  }
  SECTION("constant") {
    c.schedule = LrSchedule::constant;
    CHECK(learning_rate(c, 4) == Approx(5e-4).epsilon(1e-14));
    for (int s : {10, 60, 109, 300}) CHECK(learning_rate(c, s) == 1e-3);
  }
  SECTION("wsd") {
    // decay_fraction 0.2 of the 100 steps after warmup: 20 steps, from step 90.
    c.schedule = LrSchedule::wsd;
    c.decay_fraction = 0.2;
    CHECK(learning_rate(c, 4) == Approx(5e-4).epsilon(1e-14));
    for (int s : {10, 50, 89, 90}) CHECK(learning_rate(c, s) == 1e-3);
    CHECK(learning_rate(c, 100) == Approx(5.5e-4).epsilon(1e-14));
    CHECK(learning_rate(c, 109) == Approx(1e-4 + 9e-4 * 0.05).epsilon(1e-14));
    CHECK(learning_rate(c, 110) == Approx(1e-4).epsilon(1e-14));
    // A longer run keeps the lr of every step before its decay: what lets it be extended.
    AdamWConfig longer = c;
    longer.total_steps = 220;  // decays over 42 steps, from step 178
    for (int s = 0; s < 178; ++s)
      CHECK(learning_rate(longer, s) == learning_rate(c, std::min(s, 89)));
    CHECK(learning_rate(longer, 179) < 1e-3);
    // The decay never starts inside warmup, and lasts at least one step.
    c.decay_fraction = 1.0;
    CHECK(learning_rate(c, 10) == 1e-3);
    CHECK(learning_rate(c, 60) == Approx(5.5e-4).epsilon(1e-14));
    c.decay_fraction = 1e-9;
    CHECK(learning_rate(c, 108) == 1e-3);
    CHECK(learning_rate(c, 109) == 1e-3);  // p = 0 at the one decay step
    CHECK(learning_rate(c, 110) == Approx(1e-4).epsilon(1e-14));
  }
}

TEST_CASE("adamw_config: the default floor is a tenth of lr, as before min_lr existed",
          "[optimizer]") {
  TrainConfig t;
  t.lr = 3e-4;
  t.steps = 100;
  CHECK(adamw_config(t).min_lr == 0.1 * 3e-4);
  t.min_lr = 0;
  CHECK(adamw_config(t).min_lr == 0);
  t.min_lr = 1e-5;
  t.lr_schedule = LrSchedule::wsd;
  t.decay_fraction = 0.5;
  const AdamWConfig c = adamw_config(t);
  CHECK(c.min_lr == 1e-5);
  CHECK(c.schedule == LrSchedule::wsd);
  CHECK(c.decay_fraction == 0.5);
  CHECK(describe_schedule(c) ==
        "lr 0.0003, 0 warmup steps, then constant (wsd) to step 50, then linear to 1e-05 at "
        "step 100");
}

namespace {
// A store of parameters with the given host values and gradients.
ParamStore<double, Host> store(const std::vector<std::pair<Shape, bool>>& shapes) {
  ParamStore<double, Host> ps;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    ps.add(std::string("p").append(std::to_string(i)), shapes[i].first, shapes[i].second);
  ps.allocate();
  return ps;
}
void set(double* dst, const std::vector<double>& v) {
  std::copy(v.begin(), v.end(), dst);
}

// Clipping as grad_norm and clip_factor, the factor applied here by scaling (the trainer
// hands it to AdamW::step instead, below).
double clip(ParamStore<double, Host>& ps, double max_norm) {
  const double norm = grad_norm(ps), s = clip_factor(norm, max_norm);
  if (s != 1.0) ops::scale(Host{}, ps.grads(), ps.num_elements(), s);
  return norm;
}
}  // namespace

TEST_CASE("grad_norm and clip_factor scale to max_norm; the norm is the one before",
          "[optimizer]") {
  ParamStore<double, Host> ps = store({{{2}, true}, {{1}, false}});
  set(ps.grad(0), {3, 4});
  set(ps.grad(1), {12});
  CHECK(clip(ps, 0.0) == 13.0);  // 0: report only
  CHECK(ps.grad(0)[0] == 3);
  CHECK(clip(ps, 20.0) == 13.0);  // below the limit: unchanged
  CHECK(ps.grad(1)[0] == 12.0);
  CHECK(clip(ps, 6.5) == 13.0);
  CHECK(ps.grad(0)[0] == Approx(1.5));
  CHECK(ps.grad(0)[1] == Approx(2.0));
  CHECK(ps.grad(1)[0] == Approx(6.0));
  CHECK(clip(ps, 0.0) == Approx(6.5));
  ps.grad(1)[0] = std::nan("");
  CHECK(std::isnan(clip(ps, 1.0)));  // reported, nothing scaled
  CHECK(ps.grad(0)[0] == Approx(1.5));
}

TEST_CASE("AdamW: one step matches the hand-computed update", "[optimizer]") {
  AdamWConfig cfg;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-8;
  const double lr = 0.1;
  const double wd = GENERATE(0.0, 0.01);
  DYNAMIC_SECTION("weight_decay " << wd) {
    cfg.weight_decay = wd;
    // w and the last one decay; n (a norm) never does.
    ParamStore<double, Host> ps = store({{{2}, true}, {{2}, false}, {{1}, true}});
    double *w = ps.value(0), *n = ps.value(1);
    set(w, {1.0, -2.0});
    set(n, {1.0, -2.0});
    set(ps.grad(0), {0.5, -1.0});
    set(ps.grad(1), {0.5, -1.0});
    AdamW<double, Host> opt(cfg, ps);
    opt.step(ps, 0, lr);
    // Step 1: m = 0.1 g, v = 0.05 g^2, so m_hat = g and v_hat = g^2: the update is
    // g / (|g| + eps), plus the decoupled decay p * (1 - lr * wd) first.
    const double u0 = 0.5 / (0.5 + 1e-8), u1 = -1.0 / (1.0 + 1e-8);
    const double keep = 1.0 - lr * wd;
    CHECK(w[0] == Approx(1.0 * keep - lr * u0).epsilon(1e-14));
    CHECK(w[1] == Approx(-2.0 * keep - lr * u1).epsilon(1e-14));
    CHECK(n[0] == Approx(1.0 - lr * u0).epsilon(1e-14));
    CHECK(n[1] == Approx(-2.0 - lr * u1).epsilon(1e-14));
    CHECK(opt.m()[0] == Approx(0.05).epsilon(1e-14));
    CHECK(opt.v()[1] == Approx(0.05).epsilon(1e-14));

    // Step 2 with g = (1, 1): m = (0.145, 0.01), v = (0.061875, 0.0975).
    const double p0 = w[0], p1 = w[1];
    set(ps.grad(0), {1.0, 1.0});
    opt.step(ps, 1, lr);
    const double bc1 = 1 - 0.81, bc2 = 1 - 0.9025;
    const double e0 = (0.145 / bc1) / (std::sqrt(0.061875 / bc2) + 1e-8);
    const double e1 = (0.01 / bc1) / (std::sqrt(0.0975 / bc2) + 1e-8);
    CHECK(w[0] == Approx(p0 * keep - lr * e0).epsilon(1e-13));
    CHECK(w[1] == Approx(p1 * keep - lr * e1).epsilon(1e-13));
  }
}

// The trainer folds clipping into AdamW (clip_factor as adamw_update's grad_scale): the
// values and moments must be those of scaling the gradients first, bit for bit, and the
// gradients must stay as they were.
template <typename T>
void check_folded_clip() {
  const std::int64_t n = 70001;  // past the host loop's OpenMP threshold
  std::vector<T> p(static_cast<std::size_t>(n)), g(p.size()), m(p.size()), v(p.size());
  for (std::int64_t e = 0; e < n; ++e) {
    p[std::size_t(e)] = T(std::sin(0.37 * double(e)));
    g[std::size_t(e)] = T(std::cos(1.3 * double(e)) * 3);
    m[std::size_t(e)] = T(0.01 * std::sin(double(e)));
    v[std::size_t(e)] = T(0.02 + 0.01 * std::cos(double(e)));
  }
  const double norm = std::sqrt(ops::sum_squares(Host{}, g.data(), n)), s = clip_factor(norm, 1.0);
  REQUIRE(s < 1.0);
  std::vector<T> p1 = p, m1 = m, v1 = v, g1 = g, p2 = p, m2 = m, v2 = v;
  ops::scale(Host{}, g1.data(), n, s);
  ops::adamw_update(Host{}, p1.data(), g1.data(), m1.data(), v1.data(), n, 1e-3, 0.9, 0.95, 1e-8,
                    0.1, 4);
  ops::adamw_update(Host{}, p2.data(), g.data(), m2.data(), v2.data(), n, 1e-3, 0.9, 0.95, 1e-8,
                    0.1, 4, s);
  CHECK(p2 == p1);
  CHECK(m2 == m1);
  CHECK(v2 == v1);
  CHECK(g1 != g);  // the scaled copy moved; g, read through the factor, did not
}

TEST_CASE("AdamW with the clip factor equals scaling the gradients first, bit for bit",
          "[optimizer]") {
  check_folded_clip<float>();
  check_folded_clip<double>();
  CHECK(clip_factor(0.5, 1.0) == 1.0);
  CHECK(clip_factor(4.0, 1.0) == 0.25);
  CHECK(clip_factor(4.0, 0.0) == 1.0);  // clipping off
  CHECK(clip_factor(std::nan(""), 1.0) == 1.0);
}
