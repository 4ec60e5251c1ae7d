"""mars-eval: multi-agent systems on reasoning benchmarks, OpenSpiel games, and MARS self-play RL.

The packages are layers (README "Layout"): models, tasks, mas / games, run, analysis, report, cli.
"""
