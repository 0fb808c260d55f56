"""Tests for terrain_analysis.gev: likelihood, fit, standard errors and inference."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats

from terrain_analysis import gev
from terrain_analysis.gev import (
    GEVFitError,
    fit_gev,
    fit_gumbel,
    gev_cdf,
    gev_logpdf,
    gev_ppf,
    gumbel_likelihood_ratio_test,
    negative_log_likelihood,
    observed_information,
    profile_shape_interval,
    pwm_start,
    quantile_band,
    return_levels,
)

SAMPLES = ("gumbel", "weibull", "frechet", "weibull_small")
PARAMETERS = ("location", "scale", "shape")


@pytest.fixture(scope="module")
def gumbel_data(read_sample):
    return read_sample("gumbel")


@pytest.fixture(scope="module")
def weibull_data(read_sample):
    return read_sample("weibull")


@pytest.fixture(scope="module")
def weibull_fit(weibull_data):
    return fit_gev(weibull_data)


# --------------------------------------------------------------------------------------------------
# Distribution functions and the likelihood
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [-0.6, -0.3, -0.05, 0.0, 0.05, 0.3, 0.8])
def test_distribution_functions_match_scipy_with_c_equal_minus_xi(shape):
    location, scale = 3.0, 0.7
    x = np.linspace(0.5, 9.0, 60)
    frozen = stats.genextreme(-shape, loc=location, scale=scale)
    np.testing.assert_allclose(gev_cdf(x, location, scale, shape), frozen.cdf(x), rtol=1e-12, atol=1e-300)
    logpdf = gev_logpdf(x, location, scale, shape)
    expected = frozen.logpdf(x)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(logpdf[finite], expected[finite], rtol=1e-11)
    assert np.array_equal(np.isneginf(logpdf), np.isneginf(expected))
    q = np.linspace(0.001, 0.999, 50)
    np.testing.assert_allclose(gev_ppf(q, location, scale, shape), frozen.ppf(q), rtol=1e-12)


def test_shape_sign_convention_puts_the_end_point_on_the_right_side():
    location, scale = 10.0, 1.0
    # Weibull type (xi < 0): bounded above at location - scale / xi = 12.
    assert gev_cdf(12.5, location, scale, -0.5) == 1.0
    assert np.isneginf(gev_logpdf(12.5, location, scale, -0.5))
    assert gev_ppf(1.0, location, scale, -0.5) == pytest.approx(12.0)
    # Frechet type (xi > 0): bounded below at location - scale / xi = 8, heavy upper tail.
    assert gev_cdf(7.5, location, scale, 0.5) == 0.0
    assert gev_ppf(0.0, location, scale, 0.5) == pytest.approx(8.0)
    assert gev_ppf(0.999, location, scale, 0.5) > gev_ppf(0.999, location, scale, 0.0)


def test_negative_log_likelihood_is_minus_the_sum_of_scipy_log_densities(weibull_data):
    for shape in (-0.3, 0.0, 0.2):
        expected = -stats.genextreme.logpdf(weibull_data, -shape, loc=5.0, scale=0.9).sum()
        assert negative_log_likelihood(weibull_data, 5.0, 0.9, shape) == pytest.approx(expected, rel=1e-12)


def test_negative_log_likelihood_is_infinite_outside_the_support_or_for_non_positive_scale(weibull_data):
    assert negative_log_likelihood(weibull_data, 5.0, 0.0, 0.1) == math.inf
    # A Weibull-type upper end point below the largest value.
    assert negative_log_likelihood(weibull_data, 5.0, 0.1, -0.5) == math.inf


def test_distribution_functions_reject_bad_parameters():
    with pytest.raises(ValueError, match=r"'scale' must be > 0 and finite, got -1\.0"):
        gev_cdf([1.0], 0.0, -1.0, 0.0)
    with pytest.raises(ValueError, match=r"'shape' must be finite, got nan"):
        gev_logpdf([1.0], 0.0, 1.0, float("nan"))
    with pytest.raises(ValueError, match=r"'q' must lie in \[0, 1\], got \[1\.5\]"):
        gev_ppf([1.5], 0.0, 1.0, 0.0)


@given(
    shape=st.floats(-0.9, 2.0),
    location=st.floats(-100.0, 100.0),
    scale=st.floats(1e-3, 1e3),
    probability=st.floats(1e-12, 1.0 - 1e-12),
)
def test_cdf_inverts_ppf(shape, location, scale, probability):
    x = gev_ppf(probability, location, scale, shape)
    assert gev_cdf(x, location, scale, shape) == pytest.approx(probability, rel=1e-9, abs=1e-15)


# --------------------------------------------------------------------------------------------------
# The Gumbel limit
# --------------------------------------------------------------------------------------------------


def _gumbel_nll(x, location, scale):
    z = (x - location) / scale
    return x.size * math.log(scale) + z.sum() + np.exp(-z).sum()


def _gumbel_shape_derivative(x, location, scale):
    """d nll / d xi at xi = 0, from y = z - xi z^2 / 2 + O(xi^2)."""
    z = (x - location) / scale
    return float(np.sum((1.0 - np.exp(-z)) * (-z * z / 2.0) + z))


def test_likelihood_at_shape_zero_is_the_gumbel_likelihood(gumbel_data):
    assert negative_log_likelihood(gumbel_data, 11.2, 0.2, 0.0) == pytest.approx(
        _gumbel_nll(gumbel_data, 11.2, 0.2), rel=1e-14
    )


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_likelihood_is_continuous_and_differentiable_through_shape_zero(gumbel_data, sign):
    location, scale = 11.2, 0.2
    f0 = _gumbel_nll(gumbel_data, location, scale)
    slope = _gumbel_shape_derivative(gumbel_data, location, scale)
    curvature = abs(gev._nll_derivatives(gumbel_data, np.array([location, scale, 0.0]))[2][2, 2])
    for k in range(2, 16):
        shape = sign * 10.0**-k
        remainder = negative_log_likelihood(gumbel_data, location, scale, shape) - f0 - shape * slope
        # A Taylor remainder: no jump (a switch to the Gumbel formula below some |xi| would leave
        # |xi * slope| here) and no cancellation noise beyond rounding.
        assert abs(remainder) <= curvature * shape * shape + 1e-11, (shape, remainder)


@pytest.mark.parametrize("shape", [0.0, 1e-12, -1e-9, 2e-3, -2e-3, 5e-3, 0.05, -0.3, 0.4])
def test_analytic_gradient_and_hessian_match_finite_differences(gumbel_data, shape):
    theta = np.array([11.17, 0.45, shape])  # every value inside the support for all these shapes
    _, gradient, hessian = gev._nll_derivatives(gumbel_data, theta)
    steps = np.array([1e-6, 1e-6, 1e-6])
    numeric_gradient = np.empty(3)
    numeric_hessian = np.empty((3, 3))
    for i in range(3):
        e = np.zeros(3)
        e[i] = steps[i]
        numeric_gradient[i] = (
            negative_log_likelihood(gumbel_data, *(theta + e)) - negative_log_likelihood(gumbel_data, *(theta - e))
        ) / (2 * steps[i])
        numeric_hessian[i] = (
            gev._nll_derivatives(gumbel_data, theta + e)[1] - gev._nll_derivatives(gumbel_data, theta - e)[1]
        ) / (2 * steps[i])
    np.testing.assert_allclose(gradient, numeric_gradient, rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(hessian, numeric_hessian, rtol=1e-6, atol=1e-2)


# --------------------------------------------------------------------------------------------------
# Start values
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [-0.3, 0.0, 0.3])
def test_pwm_start_recovers_the_parameters_of_a_large_sample(shape):
    rng = np.random.default_rng(11)
    x = stats.genextreme.rvs(-shape, loc=20.0, scale=2.0, size=20_000, random_state=rng)
    location, scale, start_shape = pwm_start(x)
    assert location == pytest.approx(20.0, abs=0.1)
    assert scale == pytest.approx(2.0, rel=0.05)
    assert start_shape == pytest.approx(shape, abs=0.03)


@given(st.lists(st.floats(0.0, 1e6, allow_subnormal=False), min_size=10, max_size=60))
def test_pwm_start_leaves_every_value_inside_the_support(values):
    x = np.array(values)
    if x.min() == x.max():
        return
    assert math.isfinite(negative_log_likelihood(x, *pwm_start(x)))


# --------------------------------------------------------------------------------------------------
# The fit
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_fit_agrees_with_r_evd_fgev(name, fgev_reference, read_sample):
    reference = fgev_reference["samples"][name]
    fit = fit_gev(read_sample(name))
    assert fit.converged
    assert fit.n == reference["n"]
    for parameter in PARAMETERS:
        assert getattr(fit, parameter) == pytest.approx(reference["estimate"][parameter], rel=1e-4), parameter
        assert getattr(fit.se, parameter) == pytest.approx(reference["se"][parameter], rel=1e-2), parameter
    # Not merely close: at least as good an optimum as R's.
    assert fit.nll <= reference["nll"] + 1e-9


def test_no_fit_of_300_samples_ends_above_the_best_likelihood_found():
    rng = np.random.default_rng(20240607)
    gaps = []
    for _ in range(300):
        shape = rng.uniform(-0.45, 0.45)
        location = rng.uniform(1.0, 20.0)
        scale = rng.uniform(0.005, 0.2) * location
        x = stats.genextreme.rvs(-shape, loc=location, scale=scale, size=400, random_state=rng)
        if x.min() < 0:
            x = x - x.min()
        fit = fit_gev(x)
        best = min(fit.nll, _independent_minimum(x))
        gaps.append(fit.nll - best)
    assert max(gaps) <= 1e-6, (int(np.argmax(gaps)), max(gaps))


def _independent_minimum(x):
    """Nelder-Mead from three shapes, then a tight Nelder-Mead polish of the best, in units of the data's scale."""
    spread = math.sqrt(6.0 * x.var()) / math.pi
    centre = x.mean() - 0.5772 * spread

    def objective(p):
        return negative_log_likelihood(x, centre + spread * p[0], spread * p[1], p[2])

    results = []
    for shape in (-0.2, 0.0, 0.2):
        start = np.array([0.0, 1.0, shape])
        while not math.isfinite(objective(start)):
            start[1] *= 1.5
        simplex = start + np.vstack([np.zeros(3), 0.1 * np.eye(3)])
        results.append(
            optimize.minimize(
                objective,
                start,
                method="Nelder-Mead",
                options={"xatol": 1e-3, "fatol": 1e-3, "initial_simplex": simplex},
            )
        )
    best = min(results, key=lambda r: r.fun)
    simplex = best.x + np.vstack([np.zeros(3), 1e-3 * np.eye(3)])
    polished = optimize.minimize(
        objective,
        best.x,
        method="Nelder-Mead",
        options={"xatol": 1e-8, "fatol": 1e-11, "initial_simplex": simplex, "maxfev": 5000},
    )
    return min(best.fun, polished.fun)


def test_standard_errors_are_the_inverse_observed_information(weibull_fit):
    information = observed_information(weibull_fit.durations, *weibull_fit.parameters)
    np.testing.assert_allclose(weibull_fit.observed_information, information)
    np.testing.assert_allclose(weibull_fit.covariance @ information, np.eye(3), atol=1e-10)
    np.testing.assert_allclose(
        [weibull_fit.se.location, weibull_fit.se.scale, weibull_fit.se.shape],
        np.sqrt(np.diag(np.linalg.inv(information))),
    )


def test_numerical_observed_information_matches_the_analytic_hessian(weibull_fit):
    analytic = gev._nll_derivatives(weibull_fit.durations, np.array(weibull_fit.parameters))[2]
    np.testing.assert_allclose(
        weibull_fit.observed_information, analytic, rtol=1e-5, atol=1e-5 * np.abs(analytic).max()
    )


@given(
    shift=st.floats(0.0, 1e3),
    factor=st.floats(1e-3, 1e3),
)
def test_fit_is_equivariant_under_changes_of_time_unit_and_origin(read_sample, shift, factor):
    x = read_sample("frechet")
    base = fit_gev(x)
    moved = fit_gev(shift + factor * x)
    assert moved.location == pytest.approx(shift + factor * base.location, abs=1e-6 * factor * base.scale)
    assert moved.scale == pytest.approx(factor * base.scale, rel=1e-6)
    assert moved.shape == pytest.approx(base.shape, abs=1e-6)
    assert moved.nll == pytest.approx(base.nll + x.size * math.log(factor), abs=1e-7)
    assert moved.se.location == pytest.approx(factor * base.se.location, rel=1e-4)
    assert moved.se.shape == pytest.approx(base.se.shape, rel=1e-4)


def test_fit_that_cannot_converge_warns_and_says_so(weibull_data):
    with pytest.warns(RuntimeWarning, match="did not converge"):
        fit = fit_gev(weibull_data, max_iterations=1)
    assert not fit.converged


def test_fit_keeps_the_data_read_only(weibull_data):
    fit = fit_gev(weibull_data)
    np.testing.assert_array_equal(fit.durations, weibull_data)
    with pytest.raises(ValueError):
        fit.durations[0] = 0.0


@pytest.mark.parametrize(
    ("durations", "message"),
    [
        (np.arange(1.0, 10.0), r"'durations' must hold at least 10 values, got 9"),
        (np.full(20, 3.5), r"'durations' must not be constant, got 20 values all equal to 3\.5"),
        (np.r_[np.arange(1.0, 5.0), np.nan, np.arange(6.0, 20.0)], r"'durations' must be finite, got nan at index 4"),
        (np.r_[1.0, 2.0, np.inf, np.arange(4.0, 20.0)], r"'durations' must be finite, got inf at index 2"),
        (
            np.r_[np.arange(1.0, 8.0), -0.5, np.arange(9.0, 20.0)],
            r"'durations' must be >= 0 \(durations cannot be negative\), got -0\.5 at index 7",
        ),
        (np.ones((4, 5)), r"'durations' must be one-dimensional, got shape \(4, 5\)"),
        (["fast"] * 12, r"'durations' must hold numbers, got \['fast'"),
    ],
    ids=["too-few", "constant", "nan", "infinite", "negative", "two-dimensional", "not-numbers"],
)
def test_fit_rejects_bad_durations_naming_the_argument_and_value(durations, message):
    with pytest.raises(ValueError, match=message):
        fit_gev(durations)


def test_fit_rejects_a_non_positive_iteration_limit(weibull_data):
    with pytest.raises(ValueError, match=r"'max_iterations' must be >= 1, got 0"):
        fit_gev(weibull_data, max_iterations=0)


# --------------------------------------------------------------------------------------------------
# Inference after the fit
# --------------------------------------------------------------------------------------------------


def _profile_nll(x, shape, start):
    """Profile nll of xi by Nelder-Mead over (location, scale), independent of the package's Newton solver."""

    def objective(p):
        return negative_log_likelihood(x, p[0], p[1], shape)

    result = optimize.minimize(
        objective, start, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxfev": 20_000}
    )
    return result.fun


@pytest.mark.parametrize("name", ["weibull", "frechet"])
def test_profile_interval_ends_where_the_profile_likelihood_drops_by_the_chi_squared_quantile(name, read_sample):
    fit = fit_gev(read_sample(name))
    interval = profile_shape_interval(fit, 0.95)
    assert interval.lower < fit.shape < interval.upper
    drop = stats.chi2.ppf(0.95, 1) / 2.0
    for end in (interval.lower, interval.upper):
        start = gev._feasible_start(fit.durations, fit.location, fit.scale, end)[:2]
        assert _profile_nll(fit.durations, end, start) - fit.nll == pytest.approx(drop, abs=1e-6)


def test_profile_interval_is_close_to_the_wald_interval_for_a_large_sample(read_sample):
    fit = fit_gev(read_sample("gumbel"))
    interval = profile_shape_interval(fit)
    half_width = 1.959964 * fit.se.shape
    assert interval.lower == pytest.approx(fit.shape - half_width, abs=0.25 * half_width)
    assert interval.upper == pytest.approx(fit.shape + half_width, abs=0.25 * half_width)


def test_profile_interval_rejects_a_level_outside_zero_one(weibull_fit):
    with pytest.raises(ValueError, match=r"'level' must lie in \(0, 1\), got 1\.5"):
        profile_shape_interval(weibull_fit, 1.5)


def test_gumbel_fit_matches_scipy_gumbel_r(gumbel_data):
    gumbel = fit_gumbel(gumbel_data)
    location, scale = stats.gumbel_r.fit(gumbel_data)
    assert gumbel.location == pytest.approx(location, rel=1e-7)
    assert gumbel.scale == pytest.approx(scale, rel=1e-6)
    assert gumbel.nll == pytest.approx(-stats.gumbel_r.logpdf(gumbel_data, location, scale).sum(), abs=1e-8)


def test_likelihood_ratio_test_rejects_gumbel_for_weibull_type_data_only(weibull_fit, gumbel_data):
    weibull_test = gumbel_likelihood_ratio_test(weibull_fit)
    assert weibull_test.statistic == pytest.approx(2 * (weibull_test.gumbel.nll - weibull_fit.nll))
    assert weibull_test.p_value < 1e-4
    gumbel_test = gumbel_likelihood_ratio_test(fit_gev(gumbel_data))
    assert gumbel_test.p_value > 0.05
    assert gumbel_test.p_value == pytest.approx(stats.chi2.sf(gumbel_test.statistic, 1))


def test_return_level_is_exceeded_with_probability_one_over_the_period(weibull_fit):
    periods = np.array([2.0, 10.0, 100.0, 1e4])
    levels = return_levels(weibull_fit, periods)
    np.testing.assert_allclose(1.0 - weibull_fit.cdf(levels.levels), 1.0 / periods, rtol=1e-10)


@pytest.mark.parametrize("shape", [-0.25, 0.0, 0.3])
def test_return_level_standard_errors_follow_the_delta_method(weibull_fit, shape):
    fit = dataclasses.replace(weibull_fit, shape=shape)
    periods = np.array([5.0, 50.0, 500.0])
    result = return_levels(fit, periods)
    theta = np.array(fit.parameters)
    gradient = np.empty((3, periods.size))
    for i in range(3):
        e = np.zeros(3)
        e[i] = 1e-6
        gradient[i] = (gev_ppf(1 - 1 / periods, *(theta + e)) - gev_ppf(1 - 1 / periods, *(theta - e))) / 2e-6
    expected = np.sqrt(np.einsum("in,ij,jn->n", gradient, fit.covariance, gradient))
    np.testing.assert_allclose(result.se, expected, rtol=1e-6)
    np.testing.assert_allclose(result.upper - result.levels, 1.959964 * result.se, rtol=1e-6)


def test_return_levels_are_continuous_through_shape_zero(weibull_fit):
    at_zero = return_levels(dataclasses.replace(weibull_fit, shape=0.0), [10.0, 1000.0])
    for shape in (1e-12, -1e-12, 1e-7):
        near = return_levels(dataclasses.replace(weibull_fit, shape=shape), [10.0, 1000.0])
        np.testing.assert_allclose(near.levels, at_zero.levels, rtol=1e-6)
        np.testing.assert_allclose(near.se, at_zero.se, rtol=1e-5)


def test_return_levels_reject_periods_of_one_or_less(weibull_fit):
    with pytest.raises(ValueError, match=r"'periods' must be finite and > 1, got \[10, 1\]"):
        return_levels(weibull_fit, [10, 1])


def test_quantile_band_flags_a_planted_outlier(gumbel_data):
    x = gumbel_data.copy()
    x[np.argmax(x)] += 3.0  # fifteen scales beyond the largest value
    band = quantile_band(fit_gev(x))
    assert np.all(band.lower < band.model) and np.all(band.model < band.upper)
    assert band.outside[-1]
    clean = quantile_band(fit_gev(gumbel_data))
    assert not clean.outside[-1]
    assert clean.outside.sum() < 0.05 * clean.outside.size


def test_fit_without_an_interior_maximum_warns_why_and_has_no_standard_errors(read_durations_file):
    # 20 values drawn from a Weibull-type GEV (xi = -0.43): the profile likelihood keeps rising
    # towards xi = -1, so the maximum-likelihood estimate does not exist.
    x = read_durations_file("bounded_small.csv")
    with pytest.warns(RuntimeWarning) as caught:
        fit = fit_gev(x)
    messages = [str(warning.message) for warning in caught]
    assert any("keeps increasing towards shape = -1" in message for message in messages)
    assert any("standard errors are NaN" in message for message in messages)
    assert not fit.converged
    assert fit.shape == pytest.approx(-1.0, abs=1e-3)
    assert math.isnan(fit.se.shape)


@given(
    shape=st.floats(-0.45, 0.6, allow_subnormal=False),
    n=st.integers(50, 400),
    seed=st.integers(0, 2**32 - 1),
)
def test_fit_of_a_simulated_sample_beats_the_true_parameters_and_the_start(shape, n, seed):
    rng = np.random.default_rng(seed)
    x = stats.genextreme.rvs(-shape, loc=10.0, scale=1.0, size=n, random_state=rng)
    offset = min(x.min(), 0.0)  # durations are non-negative
    x = x - offset
    fit = fit_gev(x)
    assert fit.converged
    assert fit.nll <= negative_log_likelihood(x, 10.0 - offset, 1.0, shape) + 1e-9
    assert fit.nll <= negative_log_likelihood(x, *pwm_start(x)) + 1e-9
    assert np.all(np.isfinite([fit.se.location, fit.se.scale, fit.se.shape]))


NEARLY_CONSTANT = [0.5] * 12 + [0.6]


def test_strict_fit_of_a_nearly_constant_sample_raises_why():
    with pytest.raises(GEVFitError) as caught:
        fit_gev(NEARLY_CONSTANT, strict=True)
    message = str(caught.value)
    assert message.startswith("the GEV fit failed: it did not converge after ")
    assert "ties or a cluster at the smallest values" in message
    assert "12 of 13 durations equal 0.5" in message
    assert "its standard errors are not finite: the observed information is not positive definite" in message
    assert isinstance(caught.value, ValueError)
    assert not caught.value.fit.converged


def test_strict_fit_without_an_interior_maximum_raises_why(read_durations_file):
    with pytest.raises(GEVFitError, match="keeps increasing towards shape = -1"):
        fit_gev(read_durations_file("bounded_small.csv"), strict=True)


def test_strict_fit_of_a_good_sample_is_the_fit(weibull_data):
    assert fit_gev(weibull_data, strict=True).parameters == fit_gev(weibull_data).parameters


def test_a_failed_fit_and_its_inference_raise_no_numpy_warning():
    # only the fit's own two RuntimeWarnings; numpy's floating-point warnings from
    # evaluating the likelihood far from the optimum never escape
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_gev(NEARLY_CONSTANT)
        profile_shape_interval(fit)
        gumbel_likelihood_ratio_test(fit)
        return_levels(fit, [10, 100, 1000])
        quantile_band(fit)
    messages = [str(warning.message) for warning in caught]
    assert len(messages) == 2, messages
    assert messages[0].startswith("the GEV fit did not converge")
    assert messages[1] == "the observed information is not positive definite; standard errors are NaN"
