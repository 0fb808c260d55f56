"""Maximum-likelihood fits of the generalised extreme value (GEV) distribution.

The seed paper (Henwood, Watkins, Chapman and McLay) models the time a parallel
task takes as the maximum over many independent parts, so repeated run
durations follow a GEV distribution. This module fits that distribution to
durations and answers the questions that follow a fit: how precise the
parameters are, whether the simpler Gumbel law would do, and how long a run
must take before it is unlikely.

Sign convention
---------------
The shape ``xi`` is the one of the seed paper, Coles (2001) and R's ismev and
evd packages::

    F(x) = exp(-(1 + xi * (x - location) / scale) ** (-1 / xi))   where 1 + xi * (x - location) / scale > 0
    F(x) = exp(-exp(-(x - location) / scale))                     when xi = 0 (Gumbel)

* ``xi > 0``: Fréchet type, heavy upper tail, lower end point ``location - scale / xi``;
* ``xi = 0``: Gumbel type, exponentially light tails, unbounded support;
* ``xi < 0``: Weibull type, light upper tail ending at ``location - scale / xi``.

``scipy.stats.genextreme`` uses ``c = -xi``. (The seed's equation (1) prints the
Gumbel case as ``exp(-e^{(x - mu)/sigma})``; the exponent lacks its minus sign.)

Method
------
The negative log-likelihood is written as::

    nll = n log(scale) + sum((1 + xi) y_i + exp(-y_i)),   y_i = log1p(xi z_i) / xi,   z_i = (x_i - location) / scale

``y_i = log1p(xi z_i) / xi`` keeps full precision however small xi is and
tends to ``z_i`` (the Gumbel case, used exactly at xi = 0). The derivatives
with respect to xi involve ``d/du log1p(u) / u`` and ``d2/du2 log1p(u) / u``,
whose closed forms cancel catastrophically near ``u = 0``; they are evaluated
by their Taylor series when ``|u| < 0.01``, so the likelihood and its
derivatives are smooth through the Gumbel case. Fits start from
probability-weighted moments (Hosking, Wallis and Wood, 1985) and minimise with
a safeguarded Newton method on the analytic gradient and Hessian until the
Newton decrement is below 1e-12. The standard errors come from the observed
information: a central-difference Hessian of the negative log-likelihood at the
optimum, computed from likelihood values alone.

Examples
--------
>>> import numpy as np
>>> from terrain_analysis.gev import fit_gev, return_levels
>>> rng = np.random.default_rng(1)
>>> durations = 11.17 + 0.21 * rng.gumbel(size=400)
>>> fit = fit_gev(durations)
>>> round(fit.location, 1), round(fit.scale, 1)
(11.2, 0.2)
>>> levels = return_levels(fit, [100])
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special, stats

__all__ = [
    "GEVFit",
    "GEVFitError",
    "GumbelFit",
    "LikelihoodRatioTest",
    "QuantileBand",
    "ReturnLevels",
    "ShapeInterval",
    "StandardErrors",
    "fit_gev",
    "fit_gumbel",
    "gev_cdf",
    "gev_logpdf",
    "gev_pdf",
    "gev_ppf",
    "gumbel_likelihood_ratio_test",
    "negative_log_likelihood",
    "observed_information",
    "profile_shape_interval",
    "pwm_start",
    "quantile_band",
    "return_levels",
    "validate_durations",
]

MIN_DURATIONS = 10
"""The fewest durations :func:`fit_gev` accepts: three parameters need more than a handful."""

SHAPE_LOWER_LIMIT = -1.0
"""Fits keep ``xi > -1``: below it the likelihood grows without bound at the
upper end point (Smith, 1985), so no maximum-likelihood estimate exists."""

_SERIES_LIMIT = 1e-2  # |u| below which log1p(u)/u and its derivatives use their Taylor series
_SERIES_TERMS = 10  # enough for |u| < 1e-2: the first omitted term is below 1e-19
_TINY_SHAPE = 1e-200  # |xi| below which log1p(xi z) / xi is replaced by its limit z
_DECREMENT_TOLERANCE = 1e-12  # Newton decrement g' H^-1 g (about twice the distance to the optimum, in nll units)
_HESSIAN_STEP = float(np.finfo(float).eps) ** 0.25  # relative step of the numerical Hessian, about 1.2e-4
_PROFILE_SHAPE_UPPER = 10.0  # the profile interval for xi is searched up to here
_EULER_GAMMA = float(np.euler_gamma)

_j = np.arange(_SERIES_TERMS, dtype=float)
_sign = np.where(_j % 2 == 0, 1.0, -1.0)
# log1p(u)/u = sum_j (-1)^j u^j / (j + 1); these are the series of its first two derivatives.
_RATIO_SERIES = {
    1: -_sign * (_j + 1) / (_j + 2),
    2: _sign * (_j + 1) * (_j + 2) / (_j + 3),
}
# expm1(s)/s = sum_j s^j / (j + 1)!, and its derivative sum_j (j + 1) s^j / (j + 2)!.
_EXPM1_SERIES = (
    1.0 / special.factorial(_j + 1),
    (_j + 1) / special.factorial(_j + 2),
)


# --------------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StandardErrors:
    """Standard errors of the three GEV parameters (square roots of the covariance diagonal)."""

    location: float
    scale: float
    shape: float

    def as_dict(self) -> dict[str, float]:
        """Return ``{"location": ..., "scale": ..., "shape": ...}``."""
        return {"location": self.location, "scale": self.scale, "shape": self.shape}


@dataclass(frozen=True, eq=False)
class GEVFit:
    """A maximum-likelihood GEV fit.

    Attributes
    ----------
    location, scale, shape : float
        The estimates; ``shape`` is xi in the seed's convention (xi > 0 Fréchet, xi < 0 Weibull type).
    se : StandardErrors
        Standard errors from the observed information (NaN if it is not positive definite).
    covariance : ndarray of shape (3, 3)
        Inverse of the observed information, in the order location, scale, shape.
    observed_information : ndarray of shape (3, 3)
        Central-difference Hessian of the negative log-likelihood at the estimate.
    nll : float
        Negative log-likelihood at the estimate.
    durations : ndarray
        The fitted data, in the order given.
    iterations : int
        Newton iterations used by the fit that was kept.
    converged : bool
        Whether the Newton decrement reached its tolerance.
    """

    location: float
    scale: float
    shape: float
    se: StandardErrors
    covariance: NDArray[np.float64] = field(repr=False)
    observed_information: NDArray[np.float64] = field(repr=False)
    nll: float
    durations: NDArray[np.float64] = field(repr=False)
    iterations: int
    converged: bool

    @property
    def n(self) -> int:
        """Number of durations fitted."""
        return int(self.durations.size)

    @property
    def parameters(self) -> tuple[float, float, float]:
        """``(location, scale, shape)``."""
        return (self.location, self.scale, self.shape)

    @property
    def aic(self) -> float:
        """Akaike information criterion, ``2 * 3 + 2 * nll``."""
        return 6.0 + 2.0 * self.nll

    @property
    def support(self) -> tuple[float, float]:
        """End points of the fitted distribution (``-inf`` or ``inf`` where unbounded)."""
        return _support(self.location, self.scale, self.shape)

    def cdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """Fitted distribution function; see :func:`gev_cdf`."""
        return gev_cdf(x, self.location, self.scale, self.shape)

    def pdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """Fitted density; see :func:`gev_pdf`."""
        return gev_pdf(x, self.location, self.scale, self.shape)

    def ppf(self, q: ArrayLike) -> NDArray[np.float64]:
        """Fitted quantile function; see :func:`gev_ppf`."""
        return gev_ppf(q, self.location, self.scale, self.shape)


@dataclass(frozen=True, eq=False)
class GumbelFit:
    """A maximum-likelihood Gumbel fit (the GEV with xi fixed at 0).

    Attributes
    ----------
    location, scale : float
        The estimates.
    nll : float
        Negative log-likelihood at the estimate.
    n : int
        Number of durations fitted.
    """

    location: float
    scale: float
    nll: float
    n: int

    @property
    def aic(self) -> float:
        """Akaike information criterion, ``2 * 2 + 2 * nll``."""
        return 4.0 + 2.0 * self.nll


@dataclass(frozen=True)
class ShapeInterval:
    """Profile-likelihood confidence interval for the shape xi.

    Attributes
    ----------
    lower, upper : float or None
        End points. ``lower`` is None when the profile stays below the threshold all the way
        down to xi = -1 (where the likelihood stops having a maximum); ``upper`` is None when it
        stays below the threshold up to xi = 10.
    level : float
        Confidence level, e.g. 0.95.
    """

    lower: float | None
    upper: float | None
    level: float


@dataclass(frozen=True)
class LikelihoodRatioTest:
    """Likelihood-ratio test of xi = 0 (Gumbel) against the GEV.

    Attributes
    ----------
    statistic : float
        ``2 * (nll_gumbel - nll_gev)``, asymptotically chi-squared with one degree of freedom.
    p_value : float
        Upper tail probability of ``statistic``; small values reject the Gumbel model.
    gumbel : GumbelFit
        The fit under the null hypothesis.
    """

    statistic: float
    p_value: float
    gumbel: GumbelFit


@dataclass(frozen=True, eq=False)
class ReturnLevels:
    """Return levels with delta-method standard errors.

    The return level for period ``T`` is the duration exceeded with probability ``1 / T`` by
    one run: on average once in ``T`` runs.

    Attributes
    ----------
    periods, levels, se, lower, upper : ndarray
        Return periods (in runs), levels, their standard errors and the normal-approximation
        confidence limits ``levels -/+ z * se``.
    level : float
        Confidence level of ``lower`` and ``upper``.
    """

    periods: NDArray[np.float64]
    levels: NDArray[np.float64]
    se: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    level: float


@dataclass(frozen=True, eq=False)
class QuantileBand:
    """Pointwise band for the ordered durations under the fitted model.

    The ``i``-th smallest of ``n`` values has ``F(x_(i)) ~ Beta(i, n + 1 - i)``; the band is
    that distribution's central ``level`` interval mapped through the fitted quantile function.

    Attributes
    ----------
    probabilities : ndarray
        Plotting positions ``i / (n + 1)``.
    model : ndarray
        Fitted quantiles at the plotting positions.
    observed : ndarray
        The sorted durations.
    lower, upper : ndarray
        The band.
    level : float
        Pointwise coverage of the band.
    """

    probabilities: NDArray[np.float64]
    model: NDArray[np.float64]
    observed: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    level: float

    @property
    def outside(self) -> NDArray[np.bool_]:
        """Mask of the sorted durations that fall outside the band."""
        return (self.observed < self.lower) | (self.observed > self.upper)


class GEVFitError(ValueError):
    """A GEV fit that failed: it did not converge, or its standard errors are not finite.

    Raised by :func:`fit_gev` with ``strict=True`` (and so by
    :func:`terrain_analysis.analysis.analyse_gev` and ``terrain-analysis gev``). The message
    says why, for instance that most durations are equal.

    Attributes
    ----------
    fit : GEVFit
        The fit as far as it got, for inspection.
    """

    def __init__(self, message: str, fit: GEVFit) -> None:
        super().__init__(message)
        self.fit = fit


# --------------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------------


def validate_durations(durations: ArrayLike, name: str = "durations") -> NDArray[np.float64]:
    """Check durations for a fit and return them as a float array.

    Parameters
    ----------
    durations : array_like
        One-dimensional durations.
    name : str, default "durations"
        Argument name used in error messages.

    Returns
    -------
    ndarray
        A float64 copy.

    Raises
    ------
    ValueError
        If the values are not numbers, not one-dimensional, fewer than 10, not finite,
        negative, or all equal.
    """
    try:
        x = np.array(durations, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name!r} must hold numbers, got {_brief(durations)} ({error})") from None
    if x.ndim != 1:
        raise ValueError(f"{name!r} must be one-dimensional, got shape {x.shape}")
    if x.size < MIN_DURATIONS:
        raise ValueError(f"{name!r} must hold at least {MIN_DURATIONS} values, got {x.size}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ValueError(f"{name!r} must be finite, got {x[bad[0]]} at index {bad[0]}")
    negative = np.flatnonzero(x < 0)
    if negative.size:
        raise ValueError(
            f"{name!r} must be >= 0 (durations cannot be negative), got {x[negative[0]]} at index {negative[0]}"
        )
    if x.min() == x.max():
        raise ValueError(f"{name!r} must not be constant, got {x.size} values all equal to {x[0]}")
    return x


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_parameters(scale: float, shape: float) -> None:
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"'scale' must be > 0 and finite, got {scale}")
    if not np.isfinite(shape):
        raise ValueError(f"'shape' must be finite, got {shape}")


# --------------------------------------------------------------------------------------------------
# Series forms that make xi = 0 exact
# --------------------------------------------------------------------------------------------------


def _horner(coefficients: NDArray[np.float64], u: NDArray[np.float64]) -> NDArray[np.float64]:
    result = np.full_like(u, coefficients[-1])
    for c in coefficients[-2::-1]:
        result *= u
        result += c
    return result


def _log1p_ratio_derivatives(u: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """First and second derivatives of ``log1p(u) / u`` for u > -1, by series where |u| < 0.01."""
    small = np.abs(u) < _SERIES_LIMIT
    if small.all():
        return _horner(_RATIO_SERIES[1], u), _horner(_RATIO_SERIES[2], u)
    v = np.where(small, 1.0, u)
    log_term = np.log1p(v)
    inverse = 1.0 / v
    inverse2 = inverse * inverse
    a = 1.0 / (1.0 + v)
    first = (v * a - log_term) * inverse2
    second = (2.0 * log_term * inverse - (2.0 + 3.0 * v) * a * a) * inverse2
    if small.any():
        index = np.flatnonzero(small)
        us = u[index]
        first[index] = _horner(_RATIO_SERIES[1], us)
        second[index] = _horner(_RATIO_SERIES[2], us)
    return first, second


def _y(z: NDArray[np.float64], u: NDArray[np.float64], shape: float) -> NDArray[np.float64]:
    """``y = log1p(shape z) / shape``, exactly ``z`` in the Gumbel limit.

    ``log1p`` keeps full relative precision for small arguments, so this quotient has no
    cancellation however small ``shape`` is; below 1e-200 the product ``shape z`` could be
    subnormal and ``y = z`` is used, which is the exact limit to double precision.
    """
    if abs(shape) < _TINY_SHAPE:
        return z
    return np.log1p(u) / shape


def _expm1_ratio(s: NDArray[np.float64], order: int) -> list[NDArray[np.float64]]:
    """``expm1(s) / s`` (1 at s = 0) and, if ``order`` is 1, its derivative."""
    small = np.abs(s) < _SERIES_LIMIT
    results = [np.empty_like(s) for _ in range(order + 1)]
    big = ~small
    v = s[big]
    with np.errstate(over="ignore", invalid="ignore"):
        em1 = np.expm1(v)
        results[0][big] = em1 / v
        if order >= 1:
            results[1][big] = (v * (em1 + 1.0) - em1) / (v * v)
    for k in range(order + 1):
        results[k][small] = _horner(_EXPM1_SERIES[k], s[small])
    return results


def _reduced_variate(z: NDArray[np.float64], shape: float) -> NDArray[np.float64]:
    """``y = log1p(shape z) / shape`` (``z`` when shape = 0); NaN outside the support."""
    u = shape * z
    inside = u > -1.0
    if inside.all():
        return _y(z, u, shape)
    y = np.full_like(z, np.nan)
    y[inside] = _y(z[inside], u[inside], shape)
    return y


def _support(location: float, scale: float, shape: float) -> tuple[float, float]:
    if shape > 0:
        return (location - scale / shape, math.inf)
    if shape < 0:
        return (-math.inf, location - scale / shape)
    return (-math.inf, math.inf)


# --------------------------------------------------------------------------------------------------
# Distribution functions
# --------------------------------------------------------------------------------------------------


def gev_cdf(x: ArrayLike, location: float, scale: float, shape: float) -> NDArray[np.float64]:
    """GEV distribution function.

    Parameters
    ----------
    x : array_like
        Points at which to evaluate.
    location, scale, shape : float
        Parameters; ``shape`` is xi (seed convention, scipy's ``c = -xi``).

    Returns
    -------
    ndarray
        ``F(x)``: 0 below a Fréchet-type lower end point, 1 above a Weibull-type upper one.
    """
    _check_parameters(scale, shape)
    z = (np.asarray(x, dtype=float) - location) / scale
    y = _reduced_variate(np.atleast_1d(z), shape)
    with np.errstate(over="ignore"):
        result = np.exp(-np.exp(-y))
    outside = np.isnan(y)
    result[outside] = 0.0 if shape > 0 else 1.0
    return result.reshape(np.shape(z))


def gev_logpdf(x: ArrayLike, location: float, scale: float, shape: float) -> NDArray[np.float64]:
    """Logarithm of the GEV density.

    Parameters
    ----------
    x : array_like
        Points at which to evaluate.
    location, scale, shape : float
        Parameters; ``shape`` is xi (seed convention).

    Returns
    -------
    ndarray
        ``log f(x)``; ``-inf`` outside the support.
    """
    _check_parameters(scale, shape)
    z = (np.asarray(x, dtype=float) - location) / scale
    y = _reduced_variate(np.atleast_1d(z), shape)
    with np.errstate(over="ignore", invalid="ignore"):
        result = -math.log(scale) - (1.0 + shape) * y - np.exp(-y)
    result[np.isnan(y)] = -np.inf
    return result.reshape(np.shape(z))


def gev_pdf(x: ArrayLike, location: float, scale: float, shape: float) -> NDArray[np.float64]:
    """GEV density; see :func:`gev_logpdf` for the parameters."""
    return np.exp(gev_logpdf(x, location, scale, shape))


def gev_ppf(q: ArrayLike, location: float, scale: float, shape: float) -> NDArray[np.float64]:
    """GEV quantile function (inverse of :func:`gev_cdf`).

    Parameters
    ----------
    q : array_like
        Probabilities in [0, 1].
    location, scale, shape : float
        Parameters; ``shape`` is xi (seed convention).

    Returns
    -------
    ndarray
        ``location + scale * ((-log q) ** -xi - 1) / xi``, or ``location - scale * log(-log q)``
        at xi = 0.

    Raises
    ------
    ValueError
        If a probability is outside [0, 1].
    """
    _check_parameters(scale, shape)
    p = np.asarray(q, dtype=float)
    if np.any(~((p >= 0) & (p <= 1))):
        raise ValueError(f"'q' must lie in [0, 1], got {_brief(q)}")
    with np.errstate(divide="ignore"):
        log_y = np.atleast_1d(np.log(-np.log(p)))
    return (location + scale * _standard_quantile(log_y, shape)).reshape(p.shape)


def _standard_quantile(log_y: NDArray[np.float64], shape: float) -> NDArray[np.float64]:
    """``(y ** -shape - 1) / shape`` with ``log_y = log(y)``, exact at shape = 0."""
    finite = np.isfinite(log_y)
    result = np.empty_like(log_y)
    result[finite] = -log_y[finite] * _expm1_ratio(-shape * log_y[finite], 0)[0]
    # log_y = +inf is q = 0, log_y = -inf is q = 1: the end points.
    lower, upper = _support(0.0, 1.0, shape)
    result[~finite] = np.where(log_y[~finite] > 0, lower, upper)
    return result


def negative_log_likelihood(durations: ArrayLike, location: float, scale: float, shape: float) -> float:
    """Negative log-likelihood of GEV parameters for some data.

    Parameters
    ----------
    durations : array_like
        The data (not checked beyond conversion to floats).
    location, scale, shape : float
        Parameters; ``shape`` is xi (seed convention).

    Returns
    -------
    float
        ``-sum(log f(x_i))``; ``inf`` if ``scale <= 0`` or a value lies outside the support.
    """
    x = np.asarray(durations, dtype=float)
    return _nll(x, location, scale, shape)


def _nll(x: NDArray[np.float64], location: float, scale: float, shape: float) -> float:
    if not scale > 0:
        return math.inf
    z = (x - location) / scale
    u = shape * z
    if u.min() <= -1.0:
        return math.inf
    y = _y(z, u, shape)
    with np.errstate(over="ignore"):
        total = x.size * math.log(scale) + (1.0 + shape) * y.sum() + np.exp(-y).sum()
    return float(total)


# --------------------------------------------------------------------------------------------------
# Derivatives and the Newton minimiser
# --------------------------------------------------------------------------------------------------


def _nll_derivatives(
    x: NDArray[np.float64], theta: NDArray[np.float64]
) -> tuple[float, NDArray[np.float64], NDArray[np.float64]] | None:
    """Negative log-likelihood, gradient and Hessian at ``theta = (location, scale, shape)``.

    Returns None outside the region the fit searches (scale <= 0, shape <= -1, a value
    outside the support, or a point where the likelihood or its derivatives overflow).
    """
    location, scale, shape = float(theta[0]), float(theta[1]), float(theta[2])
    if not (scale > 0 and shape > SHAPE_LOWER_LIMIT):
        return None
    n = x.size
    z = (x - location) / scale
    u = shape * z
    if u.min() <= -1.0:
        return None
    y = _y(z, u, shape)
    h1, h2 = _log1p_ratio_derivatives(u)
    with np.errstate(over="ignore"):
        e = np.exp(-y)
    f = n * math.log(scale) + (1.0 + shape) * y.sum() + e.sum()
    if not math.isfinite(f):
        return None
    # Far from the optimum (a trial step, a profile point at an extreme shape) the
    # derivatives can overflow although the likelihood is finite; such a point is
    # outside the region the search can use, like one outside the support.
    with np.errstate(over="ignore", invalid="ignore"):
        a = 1.0 / (1.0 + u)
        w = (1.0 + shape) - e
        zz = z * z
        y_shape = zz * h1  # d y / d shape at fixed z
        psi_z = w * a
        psi_zz = a * a * (e - shape * w)
        psi_z_shape = a * (e * y_shape + 1.0) - w * z * a * a
        psi_shape = w * y_shape + y
        psi_shape_shape = e * y_shape * y_shape + 2.0 * y_shape + w * zz * z * h2

        s_z = psi_z.sum()
        s_z_z = psi_z @ z
        s_zz = psi_zz.sum()
        s_zz_z = psi_zz @ z
        s_zz_zz = psi_zz @ zz
        s_zs = psi_z_shape.sum()
        s_zs_z = psi_z_shape @ z
        inv = 1.0 / scale
        inv2 = inv * inv
        gradient = np.array([-s_z * inv, n * inv - s_z_z * inv, psi_shape.sum()])
        h_ll = s_zz * inv2
        h_ls = (s_zz_z + s_z) * inv2
        h_ss = (-n + s_zz_zz + 2.0 * s_z_z) * inv2
        h_lx = -s_zs * inv
        h_sx = -s_zs_z * inv
        h_xx = psi_shape_shape.sum()
        hessian = np.array([[h_ll, h_ls, h_lx], [h_ls, h_ss, h_sx], [h_lx, h_sx, h_xx]])
    if not (np.isfinite(gradient).all() and np.isfinite(hessian).all()):
        return None
    return f, gradient, hessian


@dataclass
class _Minimum:
    theta: NDArray[np.float64]
    nll: float
    iterations: int
    converged: bool


def _feasible_start(x: NDArray[np.float64], location: float, scale: float, shape: float) -> NDArray[np.float64]:
    """Widen ``scale`` until every value lies strictly inside the support."""
    if shape > 0:
        scale = max(scale, 1.5 * shape * (location - x.min()))
    elif shape < 0:
        scale = max(scale, 1.5 * -shape * (x.max() - location))
    return np.array([location, scale, shape])


def _minimise(x: NDArray[np.float64], theta: NDArray[np.float64], free: Sequence[int], max_iterations: int) -> _Minimum:
    """Safeguarded Newton minimisation of the negative log-likelihood over ``theta[free]``.

    Each step solves with the Hessian (eigenvalues replaced by their absolute values, floored,
    where it is not positive definite), then halves the step until the Armijo condition holds.
    Stops when the Hessian is positive definite and the Newton decrement is below 1e-12.
    """
    free = list(free)
    block = np.ix_(free, free)
    theta = np.array(theta, dtype=float)
    state = _nll_derivatives(x, theta)
    if state is None:
        raise ValueError(f"'start' must lie inside the support of the data, got {tuple(theta)}")
    f, gradient, hessian = state
    for iteration in range(1, max_iterations + 1):
        g = gradient[free]
        h = hessian[block]
        d = np.sqrt(np.maximum(np.abs(np.diag(h)), 1e-300))
        eigenvalues, eigenvectors = np.linalg.eigh(h / np.outer(d, d))
        largest = max(abs(eigenvalues[0]), abs(eigenvalues[-1]))
        positive = eigenvalues[0] > 1e-10 * largest
        if not positive:
            eigenvalues = np.maximum(np.abs(eigenvalues), 1e-6 * max(largest, 1e-300))
        step = -(eigenvectors @ ((eigenvectors.T @ (g / d)) / eigenvalues)) / d
        decrement = float(-g @ step)
        if positive and decrement < _DECREMENT_TOLERANCE:
            return _Minimum(theta, f, iteration, True)
        slack = 1e-13 * max(1.0, abs(f))
        alpha = 1.0
        while True:
            trial = theta.copy()
            trial[free] += alpha * step
            trial_state = _nll_derivatives(x, trial)
            if trial_state is not None and trial_state[0] <= f - 1e-4 * alpha * decrement + slack:
                break
            alpha *= 0.5
            if alpha < 1e-12:
                # No descent left: the decrement is at the rounding floor or the search is stuck.
                return _Minimum(theta, f, iteration, positive and decrement < 1e-8)
        theta = trial
        f, gradient, hessian = trial_state
    return _Minimum(theta, f, max_iterations, False)


# --------------------------------------------------------------------------------------------------
# Start values, fits and standard errors
# --------------------------------------------------------------------------------------------------


def pwm_start(durations: ArrayLike) -> tuple[float, float, float]:
    """Start values from probability-weighted moments (Hosking, Wallis and Wood, 1985).

    With the unbiased sample moments ``b_r = n^-1 sum_j x_(j) prod_{k<r} (j-1-k)/(n-1-k)``::

        c = (2 b1 - b0) / (3 b2 - b0) - log 2 / log 3,     k = 7.8590 c + 2.9554 c^2
        scale = (2 b1 - b0) k / (Gamma(1 + k) (1 - 2^-k)),  location = b0 + scale (Gamma(1 + k) - 1) / k

    and ``xi = -k`` (Hosking's ``k`` has the opposite sign), clipped to [-0.5, 0.5], where the
    approximation for ``k`` holds. If the data lie outside the support of these values, xi is
    halved (recomputing location and scale) until they do not, ending at the Gumbel moments.

    Parameters
    ----------
    durations : array_like
        At least 10 non-negative, finite, not all equal values.

    Returns
    -------
    tuple of float
        ``(location, scale, shape)``.
    """
    x = np.sort(validate_durations(durations))
    n = x.size
    j = np.arange(n, dtype=float)  # j - 1 for the 1-based index
    b0 = float(x.mean())
    b1 = float((j / (n - 1)) @ x) / n
    b2 = float((j * (j - 1) / ((n - 1) * (n - 2))) @ x) / n
    c = (2 * b1 - b0) / (3 * b2 - b0) - math.log(2) / math.log(3)
    k = float(np.clip(7.8590 * c + 2.9554 * c * c, -0.5, 0.5))
    for _ in range(8):
        location, scale = _pwm_location_scale(b0, b1, k)
        if scale > 0 and (k == 0 or np.all(1.0 - k * (x[[0, -1]] - location) / scale > 0)):
            return (location, scale, -k if k != 0 else 0.0)
        k = k / 2 if abs(k) > 1e-3 else 0.0
    location, scale = _pwm_location_scale(b0, b1, 0.0)
    return (location, scale, 0.0)


def _pwm_location_scale(b0: float, b1: float, k: float) -> tuple[float, float]:
    if abs(k) < 1e-8:
        scale = (2 * b1 - b0) / math.log(2)
        return (b0 - _EULER_GAMMA * scale, scale)
    gamma = math.gamma(1 + k)
    scale = (2 * b1 - b0) * k / (gamma * -math.expm1(-k * math.log(2)))
    return (b0 + scale * (gamma - 1) / k, scale)


def fit_gev(durations: ArrayLike, *, max_iterations: int = 100, strict: bool = False) -> GEVFit:
    """Fit a GEV distribution by maximum likelihood.

    Parameters
    ----------
    durations : array_like
        At least 10 finite, non-negative values, not all equal.
    max_iterations : int, default 100
        Newton iterations allowed from each start.
    strict : bool, default False
        Raise :class:`GEVFitError` instead of warning when the fit did not converge or its
        standard errors are not finite.

    Returns
    -------
    GEVFit
        Estimates (xi in the seed's convention), standard errors, covariance and the
        negative log-likelihood.

    Raises
    ------
    ValueError
        If ``durations`` fails :func:`validate_durations` or ``max_iterations < 1``.
    GEVFitError
        With ``strict=True``: if no start reached the convergence tolerance, or the standard
        errors are not finite. The message says why; the fit reached is its ``fit``.

    Warns
    -----
    RuntimeWarning
        Without ``strict``: if no start reached the convergence tolerance, or the observed
        information is not positive definite (the standard errors are then NaN).

    Notes
    -----
    The fit starts from :func:`pwm_start`. Should Newton's method not converge from there, it
    is restarted from the Gumbel moment estimates and from xi = -0.2 and 0.2, and the lowest
    converged negative log-likelihood is kept. The search keeps xi > -1.
    """
    if max_iterations < 1:
        raise ValueError(f"'max_iterations' must be >= 1, got {max_iterations}")
    x = validate_durations(durations)
    best = _minimise(x, _feasible_start(x, *pwm_start(x)), (0, 1, 2), max_iterations)
    if not best.converged:
        scale0 = math.sqrt(6.0 * x.var()) / math.pi
        location0 = x.mean() - _EULER_GAMMA * scale0
        for shape0 in (0.0, -0.2, 0.2):
            candidate = _minimise(x, _feasible_start(x, location0, scale0, shape0), (0, 1, 2), max_iterations)
            if (candidate.converged, -candidate.nll) > (best.converged, -best.nll):
                best = candidate
    # each problem as a warning and as a clause of the error
    problems = [] if best.converged else [_non_convergence(best, x)]
    location, scale, shape = (float(v) for v in best.theta)
    information = _observed_information(x, best.theta)
    inverse = _invert_information(information)
    if inverse is None:
        problems.append(
            (
                "the observed information is not positive definite; standard errors are NaN",
                "its standard errors are not finite: the observed information is not positive definite",
            )
        )
        covariance = np.full((3, 3), np.nan)
        se = np.full(3, np.nan)
    else:
        covariance = inverse
        with np.errstate(invalid="ignore"):  # a negative variance (rounding) gives NaN, reported here
            se = np.sqrt(np.diag(covariance))
        if not np.isfinite(se).all():
            problems.append(
                (
                    "a variance of the GEV fit is negative (rounding); standard errors are NaN",
                    "its standard errors are not finite: a variance is negative (rounding)",
                )
            )
    x.setflags(write=False)
    fit = GEVFit(
        location=location,
        scale=scale,
        shape=shape,
        se=StandardErrors(float(se[0]), float(se[1]), float(se[2])),
        covariance=covariance,
        observed_information=information,
        nll=best.nll,
        durations=x,
        iterations=best.iterations,
        converged=best.converged,
    )
    if strict and problems:
        raise GEVFitError("the GEV fit failed: " + "; and ".join(clause for _, clause in problems), fit)
    for warning, _ in problems:
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    return fit


def _non_convergence(result: _Minimum, x: NDArray[np.float64]) -> tuple[str, str]:
    """Why a fit did not converge: as a warning and as a clause of :class:`GEVFitError`."""
    location, scale, shape = result.theta
    where = f"stopped at location={location:.6g}, scale={scale:.6g}, shape={shape:.6g}"
    if shape < SHAPE_LOWER_LIMIT + 1e-3:
        reason = (
            "the likelihood keeps increasing towards shape = -1, where it stops having a maximum: "
            "the sample looks sharply bounded above, or is too small for three parameters"
        )
    elif shape > 2.0:
        reason = (
            "the likelihood keeps increasing with the shape: ties or a cluster at the smallest values "
            "make the density's lower end point infinitely likely"
        )
    else:
        reason = "Newton's method did not reach its tolerance"
    values, counts = np.unique(x, return_counts=True)
    if counts.max() * 2 >= x.size:
        reason += (
            f" ({counts.max()} of {x.size} durations equal {values[counts.argmax()]:.6g}: the sample is nearly "
            "constant; a finer clock or longer runs would spread it)"
        )
    clause = f"it did not converge after {result.iterations} iterations ({where}): {reason}"
    return (f"the GEV fit did not converge after {result.iterations} iterations ({where}): {reason}", clause)


def observed_information(durations: ArrayLike, location: float, scale: float, shape: float) -> NDArray[np.float64]:
    """Observed information: a numerical Hessian of the negative log-likelihood.

    Central differences of likelihood values with steps ``h = eps**0.25 * (scale, scale, 1)``
    (about 1.2e-4 of the scale for location and scale, 1.2e-4 for the dimensionless xi),
    halved for a parameter if a step leaves the support. Diagonal entries use
    ``(f(+h) - 2 f + f(-h)) / h^2``, off-diagonal ones the four-point formula.

    Parameters
    ----------
    durations : array_like
        The data.
    location, scale, shape : float
        The point, normally the maximum-likelihood estimate.

    Returns
    -------
    ndarray of shape (3, 3)
        The Hessian, in the order location, scale, shape.
    """
    _check_parameters(scale, shape)
    x = np.asarray(durations, dtype=float)
    return _observed_information(x, np.array([location, scale, shape], dtype=float))


def _observed_information(x: NDArray[np.float64], theta: NDArray[np.float64]) -> NDArray[np.float64]:
    steps = _HESSIAN_STEP * np.array([theta[1], theta[1], 1.0])
    f0 = _nll(x, *theta)

    def f(offsets: NDArray[np.float64]) -> float:
        return _nll(x, *(theta + offsets))

    for _ in range(30):
        unit = np.diag(steps)
        plus = [f(unit[i]) for i in range(3)]
        minus = [f(-unit[i]) for i in range(3)]
        finite = np.isfinite(plus) & np.isfinite(minus)
        if finite.all():
            break
        steps = np.where(finite, steps, steps / 2)
    hessian = np.empty((3, 3))
    for i in range(3):
        hessian[i, i] = (plus[i] - 2.0 * f0 + minus[i]) / steps[i] ** 2
        for k in range(i + 1, 3):
            ei, ek = unit[i], unit[k]
            value = (f(ei + ek) - f(ei - ek) - f(ek - ei) + f(-ei - ek)) / (4.0 * steps[i] * steps[k])
            hessian[i, k] = hessian[k, i] = value
    return hessian


def _invert_information(information: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """The covariance, or None if the information is not finite and positive definite."""
    try:
        if not np.all(np.isfinite(information)):
            raise np.linalg.LinAlgError("not finite")
        np.linalg.cholesky(information)
    except np.linalg.LinAlgError:
        return None
    return np.asarray(np.linalg.inv(information), dtype=np.float64)


def fit_gumbel(durations: ArrayLike, *, max_iterations: int = 100) -> GumbelFit:
    """Fit a Gumbel distribution (the GEV with xi = 0) by maximum likelihood.

    Parameters
    ----------
    durations : array_like
        As for :func:`fit_gev`.
    max_iterations : int, default 100
        Newton iterations allowed.

    Returns
    -------
    GumbelFit
    """
    x = validate_durations(durations)
    return _fit_gumbel(x, max_iterations)


def _fit_gumbel(x: NDArray[np.float64], max_iterations: int = 100) -> GumbelFit:
    scale0 = math.sqrt(6.0 * x.var()) / math.pi
    start = np.array([x.mean() - _EULER_GAMMA * scale0, scale0, 0.0])
    result = _minimise(x, start, (0, 1), max_iterations)
    if not result.converged:
        warnings.warn("the Gumbel fit did not converge", RuntimeWarning, stacklevel=3)
    return GumbelFit(float(result.theta[0]), float(result.theta[1]), result.nll, int(x.size))


# --------------------------------------------------------------------------------------------------
# Inference after a fit
# --------------------------------------------------------------------------------------------------


class _ShapeProfile:
    """Profile negative log-likelihood of xi, warm-starting from the nearest solved point."""

    def __init__(self, fit: GEVFit) -> None:
        self._x = fit.durations
        self._solved: list[tuple[float, float, float]] = [(fit.shape, fit.location, fit.scale)]

    def __call__(self, shape: float) -> float:
        _, location, scale = min(self._solved, key=lambda s: abs(s[0] - shape))
        start = _feasible_start(self._x, location, scale, shape)
        if _nll_derivatives(self._x, start) is None:
            # the nearest solved point is too far off for this shape (its likelihood or
            # derivatives overflow there): start from the fit instead
            _, location, scale = self._solved[0]
            start = _feasible_start(self._x, location, scale, shape)
            if _nll_derivatives(self._x, start) is None:
                return math.inf  # no usable point at this shape: outside any interval
        result = _minimise(self._x, start, (0, 1), 100)
        self._solved.append((shape, float(result.theta[0]), float(result.theta[1])))
        return result.nll


def profile_shape_interval(fit: GEVFit, level: float = 0.95) -> ShapeInterval:
    """Profile-likelihood confidence interval for xi.

    The interval holds the values of xi whose profile negative log-likelihood (minimised over
    location and scale) is within ``chi2.ppf(level, 1) / 2`` of the fit's. Unlike
    ``shape -/+ 1.96 se`` it follows the asymmetry of the likelihood.

    Parameters
    ----------
    fit : GEVFit
        The fit.
    level : float, default 0.95
        Confidence level, in (0, 1).

    Returns
    -------
    ShapeInterval
    """
    if not 0 < level < 1:
        raise ValueError(f"'level' must lie in (0, 1), got {level}")
    profile = _ShapeProfile(fit)
    threshold = fit.nll + stats.chi2.ppf(level, 1) / 2.0

    def excess(shape: float) -> float:
        return float(profile(shape) - threshold)

    step = fit.se.shape if np.isfinite(fit.se.shape) and fit.se.shape > 0 else 0.1
    upper = _find_crossing(excess, fit.shape, step, _PROFILE_SHAPE_UPPER)
    lower = _find_crossing(excess, fit.shape, -step, SHAPE_LOWER_LIMIT + 1e-9)
    return ShapeInterval(lower=lower, upper=upper, level=level)


def _find_crossing(excess: Callable[[float], float], start: float, step: float, limit: float) -> float | None:
    """Walk from ``start`` in steps growing by half until ``excess`` turns positive, then bisect."""
    inside = start
    while True:
        candidate = start + step
        if (step > 0 and candidate >= limit) or (step < 0 and candidate <= limit):
            candidate = limit
        if excess(candidate) > 0:
            return float(optimize.brentq(excess, inside, candidate, xtol=1e-10, rtol=1e-12))
        if candidate == limit:
            return None
        inside = candidate
        start, step = candidate, step * 1.5


def gumbel_likelihood_ratio_test(fit: GEVFit) -> LikelihoodRatioTest:
    """Likelihood-ratio test of xi = 0 (the Gumbel distribution).

    Parameters
    ----------
    fit : GEVFit
        The unrestricted fit.

    Returns
    -------
    LikelihoodRatioTest
        ``statistic = 2 (nll_gumbel - nll_gev)`` and its chi-squared (1 d.f.) p-value.
    """
    gumbel = _fit_gumbel(fit.durations)
    statistic = max(2.0 * (gumbel.nll - fit.nll), 0.0)
    return LikelihoodRatioTest(statistic=statistic, p_value=float(stats.chi2.sf(statistic, 1)), gumbel=gumbel)


def return_levels(fit: GEVFit, periods: ArrayLike, level: float = 0.95) -> ReturnLevels:
    """Return levels with delta-method standard errors.

    Parameters
    ----------
    fit : GEVFit
        The fit.
    periods : array_like
        Return periods in runs, each > 1: the level for ``T`` is exceeded by one run with
        probability ``1 / T``.
    level : float, default 0.95
        Confidence level of the normal-approximation limits.

    Returns
    -------
    ReturnLevels

    Notes
    -----
    With ``L = log(-log(1 - 1/T))`` the level is ``location + scale * q`` with
    ``q = (exp(-xi L) - 1) / xi``; its gradient ``(1, q, scale * L^2 * g(-xi L))`` with
    ``g(s) = d/ds (expm1(s) / s)`` is evaluated through series near xi = 0, and
    ``se^2 = grad' covariance grad``.
    """
    if not 0 < level < 1:
        raise ValueError(f"'level' must lie in (0, 1), got {level}")
    t = np.atleast_1d(np.asarray(periods, dtype=float))
    if t.ndim != 1 or np.any(~(t > 1)) or np.any(~np.isfinite(t)):
        raise ValueError(f"'periods' must be finite and > 1, got {_brief(periods)}")
    log_y = np.log(-np.log1p(-1.0 / t))
    s = -fit.shape * log_y
    ratio, ratio_derivative = _expm1_ratio(s, 1)
    q = -log_y * ratio
    levels = fit.location + fit.scale * q
    gradient = np.stack([np.ones_like(q), q, fit.scale * log_y * log_y * ratio_derivative])
    variance = np.einsum("in,ij,jn->n", gradient, fit.covariance, gradient)
    se = np.sqrt(variance)
    z = stats.norm.ppf(0.5 + level / 2.0)
    return ReturnLevels(periods=t, levels=levels, se=se, lower=levels - z * se, upper=levels + z * se, level=level)


def quantile_band(fit: GEVFit, level: float = 0.95) -> QuantileBand:
    """Pointwise band for the sorted durations under the fitted model.

    Parameters
    ----------
    fit : GEVFit
        The fit.
    level : float, default 0.95
        Pointwise coverage.

    Returns
    -------
    QuantileBand
        Model quantiles at ``i / (n + 1)``, the sorted data and the band; points outside it are
        the ones the quantile plot colours red.
    """
    if not 0 < level < 1:
        raise ValueError(f"'level' must lie in (0, 1), got {level}")
    n = fit.n
    i = np.arange(1, n + 1, dtype=float)
    probabilities = i / (n + 1)
    tail = (1.0 - level) / 2.0
    return QuantileBand(
        probabilities=probabilities,
        model=fit.ppf(probabilities),
        observed=np.sort(fit.durations),
        lower=fit.ppf(stats.beta.ppf(tail, i, n + 1 - i)),
        upper=fit.ppf(stats.beta.ppf(1.0 - tail, i, n + 1 - i)),
        level=level,
    )
