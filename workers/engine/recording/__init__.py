"""What an arm measured: each request timed into µs HDR histograms, counts and the per-second
series (``recorder``), and the generator's own CPU use (``cpu``).
"""
