"""Compare the GEV with simpler models of run durations by AIC.

Performance papers often summarise durations by a mean and a standard deviation
(a normal model) or fit a lognormal tail; Henwood et al. argue for the GEV.
:func:`compare_models` fits all of them by maximum likelihood to the same data
and ranks them by the Akaike information criterion ``AIC = 2 k + 2 nll``
(``k`` parameters, ``nll`` the minimised negative log-likelihood), lowest first.

Examples
--------
>>> import numpy as np
>>> from terrain_analysis.gev import fit_gev
>>> from terrain_analysis.comparison import compare_models
>>> durations = 11.17 + 0.21 * np.random.default_rng(1).gumbel(size=400)
>>> [model.name for model in compare_models(fit_gev(durations))][-1]
'normal'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from terrain_analysis.gev import GEVFit, GumbelFit, fit_gumbel

__all__ = ["ModelFit", "compare_models", "fit_lognormal", "fit_normal"]


@dataclass(frozen=True)
class ModelFit:
    """One model fitted by maximum likelihood.

    Attributes
    ----------
    name : str
        ``"gev"``, ``"gumbel"``, ``"normal"`` or ``"lognormal"``.
    parameters : dict of str to float
        Estimates by name (``location``/``scale``/``shape``; ``mean``/``sd``; ``meanlog``/``sdlog``).
    nll : float
        Minimised negative log-likelihood.
    n_parameters : int
        Number of estimated parameters ``k``.
    """

    name: str
    parameters: dict[str, float]
    nll: float
    n_parameters: int

    @property
    def aic(self) -> float:
        """``2 k + 2 nll``."""
        return 2.0 * self.n_parameters + 2.0 * self.nll


def fit_normal(durations: np.ndarray) -> ModelFit:
    """Maximum-likelihood normal fit (sample mean, standard deviation with divisor n).

    Parameters
    ----------
    durations : ndarray
        The data.

    Returns
    -------
    ModelFit
    """
    x = np.asarray(durations, dtype=float)
    mean = float(x.mean())
    sd = float(x.std())
    nll = 0.5 * x.size * (math.log(2.0 * math.pi * sd * sd) + 1.0)
    return ModelFit("normal", {"mean": mean, "sd": sd}, nll, 2)


def fit_lognormal(durations: np.ndarray) -> ModelFit | None:
    """Maximum-likelihood lognormal fit, or None if a duration is 0 (the density is then 0).

    Parameters
    ----------
    durations : ndarray
        The data.

    Returns
    -------
    ModelFit or None
        Parameters ``meanlog`` and ``sdlog`` are the mean and standard deviation of
        ``log(durations)``, as in R's ``dlnorm``.
    """
    x = np.asarray(durations, dtype=float)
    if np.any(x <= 0):
        return None
    logs = np.log(x)
    meanlog = float(logs.mean())
    sdlog = float(logs.std())
    nll = float(logs.sum()) + 0.5 * x.size * (math.log(2.0 * math.pi * sdlog * sdlog) + 1.0)
    return ModelFit("lognormal", {"meanlog": meanlog, "sdlog": sdlog}, nll, 2)


def compare_models(fit: GEVFit, gumbel: GumbelFit | None = None) -> list[ModelFit]:
    """Fit the normal, lognormal and Gumbel models to a GEV fit's data and rank all by AIC.

    Parameters
    ----------
    fit : GEVFit
        The GEV fit; its ``durations`` are used for the other models.
    gumbel : GumbelFit, optional
        A Gumbel fit of the same data, to avoid fitting it twice (for instance the one from
        :func:`terrain_analysis.gev.gumbel_likelihood_ratio_test`).

    Returns
    -------
    list of ModelFit
        Sorted by AIC, lowest (preferred) first. The lognormal is left out when a duration is 0.
    """
    if gumbel is None:
        gumbel = fit_gumbel(fit.durations)
    models = [
        ModelFit("gev", {"location": fit.location, "scale": fit.scale, "shape": fit.shape}, fit.nll, 3),
        ModelFit("gumbel", {"location": gumbel.location, "scale": gumbel.scale}, gumbel.nll, 2),
        fit_normal(fit.durations),
    ]
    lognormal = fit_lognormal(fit.durations)
    if lognormal is not None:
        models.append(lognormal)
    return sorted(models, key=lambda model: model.aic)
