"""Numbers from histograms: HDR helpers, costs with their bootstrap intervals and verdicts, rounds and
generators merged, the saturation search and capacity, the core and WAN projections, a generator
host's capacity."""
