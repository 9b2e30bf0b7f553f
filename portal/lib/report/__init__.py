"""The report and its reading: the report built from histograms, its headline, answer table,
evidence, charts, metric words, compare and budgets."""
