"""The whole GEV analysis of a set of durations, in one call.

:func:`analyse_gev` fits the GEV and derives everything the ``gev`` command
reports: the profile-likelihood interval for the shape, the likelihood-ratio
test against the Gumbel law, the AIC ranking against normal, lognormal and
Gumbel models, return levels, and the quantile band of the diagnostics. The
result turns into the ``fit.json`` document (format ``terrain.gev/1``) with
:meth:`GEVAnalysis.to_document`.

Examples
--------
>>> import numpy as np
>>> from terrain_analysis.analysis import analyse_gev
>>> durations = 11.17 + 0.21 * np.random.default_rng(1).gumbel(size=400)
>>> analysis = analyse_gev(durations)
>>> document = analysis.to_document(source="durations.csv", column="total_s")
>>> document["format"], document["n"]
('terrain.gev/1', 400)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from terrain_analysis.comparison import ModelFit, compare_models
from terrain_analysis.fit_json import FORMAT
from terrain_analysis.gev import (
    GEVFit,
    LikelihoodRatioTest,
    QuantileBand,
    ReturnLevels,
    ShapeInterval,
    fit_gev,
    gumbel_likelihood_ratio_test,
    profile_shape_interval,
    quantile_band,
    return_levels,
)

__all__ = ["DEFAULT_RETURN_PERIODS", "SHAPE_CONVENTION", "GEVAnalysis", "analyse_gev"]

DEFAULT_RETURN_PERIODS: tuple[float, ...] = (10.0, 100.0, 1000.0)
"""Return periods (in runs) reported unless others are asked for."""

SHAPE_CONVENTION = (
    "shape is xi as in the seed paper and R ismev/evd: xi > 0 Frechet type (heavy upper tail), "
    "xi < 0 Weibull type (bounded upper tail), xi = 0 Gumbel; scipy.stats.genextreme uses c = -xi"
)


@dataclass(frozen=True, eq=False)
class GEVAnalysis:
    """Everything :func:`analyse_gev` computes.

    Attributes
    ----------
    fit : GEVFit
        The maximum-likelihood fit with standard errors.
    shape_interval : ShapeInterval
        Profile-likelihood interval for xi.
    gumbel_test : LikelihoodRatioTest
        Test of xi = 0.
    models : list of ModelFit
        GEV, Gumbel, normal and (for positive data) lognormal fits, lowest AIC first.
    return_levels : ReturnLevels
        Return levels with delta-method standard errors.
    band : QuantileBand
        The quantile plot's pointwise band and which durations fall outside it.
    level : float
        Confidence level used throughout.
    """

    fit: GEVFit
    shape_interval: ShapeInterval
    gumbel_test: LikelihoodRatioTest
    models: list[ModelFit]
    return_levels: ReturnLevels
    band: QuantileBand
    level: float

    def to_document(self, *, source: str | None = None, column: str | None = None) -> dict[str, Any]:
        """Build the ``fit.json`` document (format ``terrain.gev/1``).

        Parameters
        ----------
        source : str, optional
            The durations file the data came from.
        column : str, optional
            The column of that file.

        Returns
        -------
        dict
            JSON-ready: numbers are Python floats, unbounded or undefined values are None.
            ``docs/GEV.md`` describes every key.
        """
        fit = self.fit
        lower_end, upper_end = fit.support
        best_aic = self.models[0].aic
        outside = self.band.outside
        durations = fit.durations
        document = {
            "format": FORMAT,
            "source": {"file": source, "column": column},
            "n": fit.n,
            "location": fit.location,
            "scale": fit.scale,
            "shape": fit.shape,
            "shape_convention": SHAPE_CONVENTION,
            "se": fit.se.as_dict(),
            "parameter_order": ["location", "scale", "shape"],
            "covariance": _finite_or_none(fit.covariance),
            "nll": fit.nll,
            "aic": fit.aic,
            "converged": fit.converged,
            "iterations": fit.iterations,
            "support": {"lower": _finite_or_none(lower_end), "upper": _finite_or_none(upper_end)},
            "shape_interval": {
                "method": "profile likelihood",
                "level": self.shape_interval.level,
                "lower": self.shape_interval.lower,
                "upper": self.shape_interval.upper,
            },
            "gumbel_test": {
                "method": "likelihood ratio, chi-squared with 1 degree of freedom",
                "statistic": self.gumbel_test.statistic,
                "p_value": self.gumbel_test.p_value,
                "gumbel": {
                    "location": self.gumbel_test.gumbel.location,
                    "scale": self.gumbel_test.gumbel.scale,
                    "nll": self.gumbel_test.gumbel.nll,
                },
            },
            "models": [
                {
                    "name": model.name,
                    "parameters": dict(model.parameters),
                    "n_parameters": model.n_parameters,
                    "nll": model.nll,
                    "aic": model.aic,
                    "delta_aic": model.aic - best_aic,
                }
                for model in self.models
            ],
            "return_levels": [
                {
                    "period": float(t),
                    "level": float(z),
                    "se": _finite_or_none(s),
                    "lower": _finite_or_none(lo),
                    "upper": _finite_or_none(hi),
                }
                for t, z, s, lo, hi in zip(
                    self.return_levels.periods,
                    self.return_levels.levels,
                    self.return_levels.se,
                    self.return_levels.lower,
                    self.return_levels.upper,
                    strict=True,
                )
            ],
            "return_level_confidence": self.return_levels.level,
            "quantile_band": {
                "level": self.band.level,
                "method": "pointwise, F(x_(i)) ~ Beta(i, n + 1 - i) under the fitted model",
                "outside": int(outside.sum()),
                "outside_durations": [float(v) for v in self.band.observed[outside]],
            },
            "summary": {
                "min": float(durations.min()),
                "median": float(np.median(durations)),
                "mean": float(durations.mean()),
                "sd": float(durations.std(ddof=1)),
                "max": float(durations.max()),
            },
        }
        ready: dict[str, Any] = _json_ready(document)
        return ready


def _finite_or_none(value: Any) -> Any:
    """Python floats (nested lists for arrays), with None for NaN and infinities."""
    if isinstance(value, np.ndarray):
        return [_finite_or_none(v) for v in value]
    value = float(value)
    return value if math.isfinite(value) else None


def _json_ready(value: Any) -> Any:
    """Plain Python containers and numbers, with None wherever a float is NaN or infinite.

    Standard errors are NaN when the observed information is not positive definite (a fit
    that did not converge); JSON has no NaN.
    """
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _finite_or_none(value)
    return value


def analyse_gev(
    durations: ArrayLike,
    *,
    level: float = 0.95,
    return_periods: Sequence[float] = DEFAULT_RETURN_PERIODS,
) -> GEVAnalysis:
    """Fit the GEV to durations and compute every derived quantity.

    Parameters
    ----------
    durations : array_like
        At least 10 finite, non-negative durations, not all equal.
    level : float, default 0.95
        Confidence level of the shape interval, the return-level limits and the quantile band.
    return_periods : sequence of float, default (10, 100, 1000)
        Return periods in runs, each > 1.

    Returns
    -------
    GEVAnalysis

    Raises
    ------
    ValueError
        For bad durations (see :func:`terrain_analysis.gev.validate_durations`), a level
        outside (0, 1) or a return period <= 1.
    terrain_analysis.gev.GEVFitError
        If the fit did not converge or its standard errors are not finite: return levels,
        intervals and bands from such a fit mean nothing (a nearly constant sample gave a
        1000-run return level of 2e11 s), so none is computed.
    """
    if not 0 < level < 1:
        raise ValueError(f"'level' must lie in (0, 1), got {level}")
    fit = fit_gev(durations, strict=True)
    gumbel_test = gumbel_likelihood_ratio_test(fit)
    return GEVAnalysis(
        fit=fit,
        shape_interval=profile_shape_interval(fit, level),
        gumbel_test=gumbel_test,
        models=compare_models(fit, gumbel_test.gumbel),
        return_levels=return_levels(fit, return_periods, level),
        band=quantile_band(fit, level),
        level=level,
    )
