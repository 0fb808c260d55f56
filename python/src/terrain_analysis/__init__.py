"""terrain-analysis: statistics and plots for terrain runs.

The package reads what the Erlang side of terrain writes (durations CSV files,
latency matrices, topology files) and turns it into fitted models, diagnostics and
reports: the extreme-value analysis of run durations from Henwood et al., "Time
taken to write data in parallel on Lustre follows extreme statistics"
(:func:`fit_gev`, ``terrain-analysis gev``), and topology discovery from a latency
matrix with RELEASE D3.5's non-binary α clustering (:func:`discover`,
``terrain-analysis topology``).

Modules
-------
gev
    GEV distribution, maximum-likelihood fit, standard errors, profile interval,
    Gumbel likelihood-ratio test, return levels.
comparison
    AIC of the GEV against the normal, lognormal and Gumbel distributions.
durations
    Reading a column of a durations CSV file.
analysis
    One call that runs the whole GEV analysis and builds the ``fit.json`` document.
fit_json
    Writing and reading ``fit.json`` (format ``terrain.gev/1``).
plots
    Diagnostic plots (probability, quantile, density, return level).
topology
    latency.json, the α algorithm with automatic α per level, outlier repair,
    topology JSON, adjusted Rand index.
topology_plots
    Heatmap ordered by the tree, dendrogram, the non-binary tree.
bench
    DE-Bench's summary.json and sweep.csv, HdrHistogram interval logs (read with the ``hdrhistogram``
    package), throughput and latency figures (``terrain-analysis bench``).
events
    The EventSpace views of a recorded wind tunnel: per-worker timeline, read times.
collective
    ``collective.json`` of ``terrain collective bench`` and its time-against-size figure.
emas
    EMAS runs (``emas.csv``, ``summary.json``) and the scaling table: fitness, throughput, utilisation.
chaos
    A chaos run of ``terrain chaos`` (``checker.json``, ``history.jsonl``): the timeline of faults,
    versions and convergence times, and its figure.
experiment_plots
    The figures of ``terrain experiment`` (attribute placement, distances) and ``attributes.csv``.
scale
    ``scale.json`` of ``terrain experiment scale``: the lab's operations' times against cluster size, with fitted
    growth exponents.
report
    The self-contained HTML page of run directories (a subpackage: model, renderers per concern, registry,
    HTML).
browser
    Headless Chromium through the DevTools protocol, for the report's browser test and its screenshot.
formats
    The registry of format tags and manifest kinds (``spec/formats.json``) and the one format check.
values
    The checks on numbers read from files: no NaN, no infinity, no negative measurement.
output
    Writing output files whole or not at all (temporary file and rename).
cli
    The ``terrain-analysis`` command.
"""

from importlib.metadata import PackageNotFoundError, version

from terrain_analysis.analysis import GEVAnalysis, analyse_gev
from terrain_analysis.comparison import ModelFit, compare_models
from terrain_analysis.durations import read_durations
from terrain_analysis.gev import (
    GEVFit,
    GEVFitError,
    GumbelFit,
    fit_gev,
    fit_gumbel,
    gumbel_likelihood_ratio_test,
    profile_shape_interval,
    quantile_band,
    return_levels,
)
from terrain_analysis.topology import Cluster, Discovery, alpha_tree, auto_alpha, discover, read_latency

try:
    __version__ = version("terrain-analysis")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Cluster",
    "Discovery",
    "GEVAnalysis",
    "GEVFit",
    "GEVFitError",
    "GumbelFit",
    "ModelFit",
    "__version__",
    "alpha_tree",
    "analyse_gev",
    "auto_alpha",
    "compare_models",
    "discover",
    "fit_gev",
    "fit_gumbel",
    "gumbel_likelihood_ratio_test",
    "profile_shape_interval",
    "quantile_band",
    "read_durations",
    "read_latency",
    "return_levels",
]
