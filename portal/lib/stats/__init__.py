"""Numbers from histograms: HDR helpers, costs and their bootstrap intervals, verdicts' directions,
rounds and generators merged, capacity and the saturation search, projections."""
