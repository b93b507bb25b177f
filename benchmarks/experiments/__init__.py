"""The studies behind benchmarks/RESULTS.md, one module (or package) each, named like its record in
docs/experiments/ (hyphens as underscores). The harness and suite users run stay in ``benchmarks``."""
