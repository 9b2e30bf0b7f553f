"""Distributed runs (``generators`` != 1) on Locust's master/worker mode: the master in the engine
process and the generator processes it knows (``master``), one arm across them (``arm``), and
one generator process (``generator``, ``python -m workers.engine.distribution.generator``).
"""
