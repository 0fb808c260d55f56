"""Tests for terrain_analysis.plots: the seed's Figure 2 panels and the return-level plot."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from terrain_analysis.analysis import analyse_gev
from terrain_analysis.plots import UNIT, density_plot, diagnostics_figure, return_level_figure, write_plots


@pytest.fixture(scope="module")
def analysis_with_outlier(read_sample):
    x = read_sample("gumbel").copy()
    x[np.argmax(x)] += 3.0
    return analyse_gev(x)


def test_write_plots_writes_png_and_svg_for_both_figures(tmp_path, analysis_with_outlier):
    paths = write_plots(analysis_with_outlier, tmp_path)
    assert sorted(path.name for path in paths) == [
        "gev_diagnostics.png",
        "gev_diagnostics.svg",
        "gev_return_levels.png",
        "gev_return_levels.svg",
    ]
    for path in paths:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert ElementTree.parse(path).getroot().tag.endswith("svg")


def test_svg_output_is_reproducible(tmp_path, analysis_with_outlier):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    write_plots(analysis_with_outlier, first)
    write_plots(analysis_with_outlier, second)
    assert (first / "gev_diagnostics.svg").read_bytes() == (second / "gev_diagnostics.svg").read_bytes()


def test_diagnostics_has_the_three_panels_of_figure_2(analysis_with_outlier):
    figure = diagnostics_figure(analysis_with_outlier)
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == ["Probability plot", "Quantile plot", "Histogram (20 bins) and fitted density"]


def test_quantile_plot_colours_exactly_the_points_outside_the_band_red(analysis_with_outlier):
    quantile_axes = diagnostics_figure(analysis_with_outlier).axes[1]
    red = [line for line in quantile_axes.get_lines() if to_rgba(line.get_color()) == to_rgba("red")]
    outside = analysis_with_outlier.band.outside
    assert outside.any()
    assert len(red) == 1
    np.testing.assert_array_equal(red[0].get_ydata(), analysis_with_outlier.band.observed[outside])


def test_histogram_has_twenty_bins_and_the_fitted_density(analysis_with_outlier):
    density_axes = diagnostics_figure(analysis_with_outlier).axes[2]
    assert len(density_axes.patches) == 20
    (curve,) = density_axes.get_lines()
    np.testing.assert_allclose(curve.get_ydata(), analysis_with_outlier.fit.pdf(curve.get_xdata()))


def test_density_plot_rejects_zero_bins(analysis_with_outlier):
    figure = diagnostics_figure(analysis_with_outlier)
    with pytest.raises(ValueError, match=r"'bins' must be >= 1, got 0"):
        density_plot(figure.axes[2], analysis_with_outlier.fit, bins=0)


def test_return_level_plot_is_on_a_log_period_axis(analysis_with_outlier):
    (ax,) = return_level_figure(analysis_with_outlier).axes
    assert ax.get_xscale() == "log"
    observed = [line for line in ax.get_lines() if line.get_label() == "observed"]
    np.testing.assert_array_equal(observed[0].get_ydata(), np.sort(analysis_with_outlier.fit.durations))


def test_axes_of_durations_carry_their_unit(analysis_with_outlier):
    probability, quantile, density = diagnostics_figure(analysis_with_outlier).axes
    (levels,) = return_level_figure(analysis_with_outlier).axes
    assert UNIT == "s"
    assert quantile.get_xlabel() == "model quantile (s)"
    assert quantile.get_ylabel() == "observed duration (s)"
    assert density.get_xlabel() == "duration (s)"
    assert density.get_ylabel() == "density (1/s)"
    assert levels.get_ylabel() == "return level: duration (s)"
    assert levels.get_xlabel() == "return period (runs)"
    assert (probability.get_xlabel(), probability.get_ylabel()) == ("model probability", "empirical probability")


@pytest.mark.parametrize("scale", [1.0, 1e-4, 1e4])
def test_titles_fit_inside_the_figure(read_sample, scale):
    # long numbers (durations of 1e-4 s or 1e4 s) make the longest titles
    analysis = analyse_gev(scale * read_sample("gumbel"))
    for figure in (diagnostics_figure(analysis), return_level_figure(analysis)):
        renderer = figure.canvas.get_renderer()
        figure.canvas.draw()
        frame = figure.bbox
        titles = [ax.title for ax in figure.axes] + ([figure._suptitle] if figure._suptitle else [])
        for title in titles:
            box = title.get_window_extent(renderer)
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1, (title.get_text(), box, frame)
