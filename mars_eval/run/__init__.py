"""Running evaluations: the mas and games runners, the run store and run folders, suites.

Imports tasks, mas, games and models; never analysis, report or cli.
"""
