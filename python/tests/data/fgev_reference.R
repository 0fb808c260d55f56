# Reference GEV fits from R's evd::fgev for terrain-analysis's accuracy tests.
#
# Run from the repository root (needs Debian's r-base-core and r-cran-evd):
#
#     Rscript python/tests/data/fgev_reference.R python/tests/data
#
# It simulates one sample per GEV type, writes each to <dir>/gev_<name>.csv in the
# durations CSV shape (columns run,total_s; values printed with 17 significant
# digits so Python reads exactly the numbers R fitted), fits each with
# evd::fgev and writes estimates, standard errors and the negative
# log-likelihood to <dir>/fgev_reference.json. CI does not run R: the tests read
# the committed CSV and JSON files.
#
# Shape convention: evd's `shape` is xi (xi > 0 Frechet type, xi < 0 Weibull
# type), the same as terrain_analysis.gev.
#
# fgev minimises with optim(method = "BFGS") and a finite-difference gradient.
# With optim's default controls (reltol 1e-8, steps ndeps = 1e-3 in absolute
# units) it can stop a few 1e-5 (relative) short of the optimum, which is too
# loose for a 1e-4 relative comparison, so the fit is started again from its
# own estimate with reltol 1e-14 and steps of 1e-4 of each parameter's scale
# (parscale). The standard errors are fgev's: the inverse of optim's
# finite-difference Hessian of the negative log-likelihood at the optimum.

suppressPackageStartupMessages(library(evd))

args <- commandArgs(trailingOnly = TRUE)
out_dir <- if (length(args) >= 1) args[[1]] else "."

set.seed(20240607)

samples <- list(
  # Gumbel type, with the parameters Henwood et al. report for their Lustre writes.
  list(name = "gumbel", n = 400, loc = 11.1679, scale = 0.2120, shape = 0),
  # Weibull type: bounded upper tail.
  list(name = "weibull", n = 250, loc = 5.0, scale = 0.8, shape = -0.25),
  # Frechet type: heavy upper tail (lower end point loc - scale/shape = 1 > 0).
  list(name = "frechet", n = 150, loc = 2.0, scale = 0.3, shape = 0.3),
  # A small Weibull-type sample: a flatter likelihood, harder to optimise.
  list(name = "weibull_small", n = 30, loc = 3.0, scale = 0.5, shape = -0.4)
)

num <- function(v) sprintf("%.17g", v)     # round-trips a double exactly
short <- function(v) sprintf("%.15g", v)

fit_tight <- function(x) {
  first <- fgev(x, std.err = FALSE)
  start <- as.list(first$estimate)
  scale <- first$estimate[["scale"]]
  fgev(x, start = start,
       control = list(reltol = 1e-14, maxit = 10000,
                      parscale = c(scale, scale, 0.1), ndeps = rep(1e-3, 3)))
}

entries <- character(0)
for (s in samples) {
  x <- rgev(s$n, loc = s$loc, scale = s$scale, shape = s$shape)
  x <- as.numeric(num(x))                     # fit exactly the printed values
  file <- sprintf("gev_%s.csv", s$name)
  lines <- c("run,total_s", sprintf("%d,%s", seq_along(x), num(x)))
  writeLines(lines, file.path(out_dir, file))

  fit <- fit_tight(x)
  if (fit$convergence != "successful") stop("fgev did not converge for ", s$name)
  est <- fit$estimate
  se <- fit$std.err
  entries <- c(entries, paste0(
    '    "', s$name, '": {\n',
    '      "file": "', file, '",\n',
    '      "n": ', length(x), ',\n',
    '      "simulated": {"location": ', short(s$loc), ', "scale": ', short(s$scale),
    ', "shape": ', short(s$shape), '},\n',
    '      "estimate": {"location": ', num(est[["loc"]]), ', "scale": ', num(est[["scale"]]),
    ', "shape": ', num(est[["shape"]]), '},\n',
    '      "se": {"location": ', num(se[["loc"]]), ', "scale": ', num(se[["scale"]]),
    ', "shape": ', num(se[["shape"]]), '},\n',
    '      "nll": ', num(fit$deviance / 2), '\n',
    '    }'))
}

json <- paste0(
  '{\n',
  '  "format": "terrain.fgev-reference/1",\n',
  '  "generator": "python/tests/data/fgev_reference.R",\n',
  '  "r_version": "', R.version.string, '",\n',
  '  "evd_version": "', as.character(packageVersion("evd")), '",\n',
  '  "seed": 20240607,\n',
  '  "samples": {\n', paste(entries, collapse = ",\n"), '\n  }\n',
  '}\n')
writeLines(json, file.path(out_dir, "fgev_reference.json"), sep = "")
