"""The report and its reading: the report built from histograms (``report``), its answer table,
headline and evidence, chart data, metric and target names in words, compare and budgets."""
