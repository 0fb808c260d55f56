"""Diagnostic plots of a GEV fit, after Figure 2 of Henwood et al.

Henwood et al. judged their fit with three stacked panels: a probability plot (empirical
against fitted cumulative probability), a quantile plot (observed against fitted
quantiles) with a 95% band and the points outside it in red, and a 20-bin
histogram with the fitted density. :func:`diagnostics_figure` draws those;
:func:`return_level_figure` adds the return-level plot (duration exceeded once
in ``T`` runs, against ``T``). :func:`write_plots` saves both as PNG and SVG.

Figures are built with :class:`matplotlib.figure.Figure` on the Agg canvas, never
through ``pyplot``, so nothing depends on a display or on global pyplot state.

Examples
--------
>>> import numpy as np
>>> from terrain_analysis.analysis import analyse_gev
>>> from terrain_analysis.plots import write_plots
>>> analysis = analyse_gev(11.17 + 0.21 * np.random.default_rng(1).gumbel(size=400))
>>> paths = write_plots(analysis, "out")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from terrain_analysis.analysis import GEVAnalysis
from terrain_analysis.gev import GEVFit, QuantileBand, return_levels
from terrain_analysis.output import save_figure

__all__ = [
    "DIAGNOSTICS_NAME",
    "FORMATS",
    "RETURN_LEVELS_NAME",
    "UNIT",
    "density_plot",
    "diagnostics_figure",
    "probability_plot",
    "quantile_plot",
    "return_level_figure",
    "return_level_plot",
    "write_plots",
]

DIAGNOSTICS_NAME = "gev_diagnostics"
"""File stem of the three-panel diagnostics figure."""

RETURN_LEVELS_NAME = "gev_return_levels"
"""File stem of the return-level figure."""

FORMATS = ("png", "svg")
"""Formats :func:`write_plots` writes."""

UNIT = "s"
"""Unit of the durations on the axes: durations files hold seconds (see :mod:`terrain_analysis.durations`)."""

_BAND_COLOUR = "tab:blue"
_OUTSIDE_COLOUR = "red"
_POINT_COLOUR = "black"


def probability_plot(ax: Axes, fit: GEVFit) -> None:
    """Empirical cumulative probability ``i / (n + 1)`` against the fitted ``F(x_(i))``.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    fit : GEVFit
        The fit.
    """
    observed = np.sort(fit.durations)
    empirical = np.arange(1, fit.n + 1) / (fit.n + 1)
    ax.plot([0, 1], [0, 1], color=_BAND_COLOUR, linewidth=1)
    ax.plot(fit.cdf(observed), empirical, "o", markersize=2.5, color=_POINT_COLOUR)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("model probability")
    ax.set_ylabel("empirical probability")
    ax.set_title("Probability plot")


def quantile_plot(ax: Axes, band: QuantileBand) -> None:
    """Observed against fitted quantiles, with the pointwise band; points outside it in red.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    band : QuantileBand
        From :func:`terrain_analysis.gev.quantile_band`.
    """
    outside = band.outside
    lowest = min(band.model[0], band.observed[0])
    highest = max(band.model[-1], band.observed[-1])
    ax.plot([lowest, highest], [lowest, highest], color="grey", linewidth=0.8)
    ax.plot(band.model, band.lower, color=_BAND_COLOUR, linewidth=1, label=f"{band.level:.0%} band")
    ax.plot(band.model, band.upper, color=_BAND_COLOUR, linewidth=1)
    ax.plot(band.model[~outside], band.observed[~outside], "o", markersize=2.5, color=_POINT_COLOUR)
    if outside.any():
        ax.plot(
            band.model[outside],
            band.observed[outside],
            "o",
            markersize=3,
            color=_OUTSIDE_COLOUR,
            label=f"outside band ({int(outside.sum())})",
        )
    ax.set_xlabel(f"model quantile ({UNIT})")
    ax.set_ylabel(f"observed duration ({UNIT})")
    ax.set_title("Quantile plot")
    ax.legend(loc="upper left", frameon=False, fontsize="small")


def density_plot(ax: Axes, fit: GEVFit, bins: int = 20) -> None:
    """Histogram of the durations in ``bins`` equal-width bins with the fitted density.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    fit : GEVFit
        The fit.
    bins : int, default 20
        Number of bins, as in Henwood et al.'s Figure 2.
    """
    if bins < 1:
        raise ValueError(f"'bins' must be >= 1, got {bins}")
    ax.hist(fit.durations, bins=bins, density=True, color="lightgrey", edgecolor="grey")
    low, high = fit.durations.min(), fit.durations.max()
    margin = 0.05 * (high - low)
    grid = np.linspace(low - margin, high + margin, 400)
    ax.plot(grid, fit.pdf(grid), color=_BAND_COLOUR, linewidth=1.5)
    ax.set_xlabel(f"duration ({UNIT})")
    ax.set_ylabel(f"density (1/{UNIT})")
    ax.set_title(f"Histogram ({bins} bins) and fitted density")


def return_level_plot(ax: Axes, fit: GEVFit, level: float = 0.95) -> None:
    """Return level against return period (log scale) with delta-method limits and the data.

    The sorted durations are drawn at the periods ``1 / (1 - i / (n + 1))`` of their
    plotting positions.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    fit : GEVFit
        The fit.
    level : float, default 0.95
        Confidence level of the limits.
    """
    periods = np.logspace(np.log10(1.1), np.log10(max(1000.0, 10.0 * fit.n)), 200)
    levels = return_levels(fit, periods, level)
    ax.plot(periods, levels.levels, color=_BAND_COLOUR, linewidth=1.5, label="fitted")
    ax.plot(periods, levels.lower, "--", color=_BAND_COLOUR, linewidth=1, label=f"{level:.0%} limits")
    ax.plot(periods, levels.upper, "--", color=_BAND_COLOUR, linewidth=1)
    observed = np.sort(fit.durations)
    empirical_periods = 1.0 / (1.0 - np.arange(1, fit.n + 1) / (fit.n + 1))
    ax.plot(empirical_periods, observed, "o", markersize=2.5, color=_POINT_COLOUR, label="observed")
    ax.set_xscale("log")
    ax.set_xlabel("return period (runs)")
    ax.set_ylabel(f"return level: duration ({UNIT})")
    ax.set_title("Return levels")
    ax.legend(loc="upper left", frameon=False, fontsize="small")


def diagnostics_figure(analysis: GEVAnalysis) -> Figure:
    """Henwood et al.'s Figure 2: probability, quantile and density panels, stacked.

    Parameters
    ----------
    analysis : GEVAnalysis
        From :func:`terrain_analysis.analysis.analyse_gev`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fit = analysis.fit
    figure = Figure(figsize=(6.0, 11.0), layout="constrained")
    FigureCanvasAgg(figure)
    top, middle, bottom = figure.subplots(3, 1)
    probability_plot(top, fit)
    quantile_plot(middle, analysis.band)
    density_plot(bottom, fit)
    # two lines, so that the title fits the figure's width whatever the numbers
    # (constrained layout makes room above the panels, but does not wrap)
    figure.suptitle(
        f"GEV fit of n = {fit.n} durations ({UNIT}), estimate ± standard error\n"
        f"location {fit.location:.6g} ± {fit.se.location:.2g}, scale {fit.scale:.4g} ± {fit.se.scale:.2g}, "
        f"shape ξ {fit.shape:.3g} ± {fit.se.shape:.2g}",
        fontsize="small",
    )
    return figure


def return_level_figure(analysis: GEVAnalysis) -> Figure:
    """The return-level plot as a figure of its own.

    Parameters
    ----------
    analysis : GEVAnalysis
        From :func:`terrain_analysis.analysis.analyse_gev`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    figure = Figure(figsize=(6.0, 4.0), layout="constrained")
    FigureCanvasAgg(figure)
    return_level_plot(figure.subplots(), analysis.fit, analysis.level)
    return figure


def write_plots(analysis: GEVAnalysis, directory: str | os.PathLike[str]) -> list[Path]:
    """Save the diagnostics and return-level figures as PNG and SVG.

    Parameters
    ----------
    analysis : GEVAnalysis
        From :func:`terrain_analysis.analysis.analyse_gev`.
    directory : str or path-like
        An existing directory.

    Returns
    -------
    list of Path
        The files written: ``gev_diagnostics.{png,svg}`` and ``gev_return_levels.{png,svg}``.
    """
    directory = Path(directory)
    written = []
    # A fixed hash salt and no date keep the SVG files identical from run to run.
    with matplotlib.rc_context({"svg.hashsalt": "terrain", "svg.fonttype": "none"}):
        for stem, figure in (
            (DIAGNOSTICS_NAME, diagnostics_figure(analysis)),
            (RETURN_LEVELS_NAME, return_level_figure(analysis)),
        ):
            for extension in FORMATS:
                path = directory / f"{stem}.{extension}"
                metadata = {"Date": None} if extension == "svg" else {}
                save_figure(figure, path, format=extension, dpi=150, metadata=metadata)
                written.append(path)
    return written
