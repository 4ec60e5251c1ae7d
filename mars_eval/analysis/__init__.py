"""Statistics over finished runs: paired comparisons, planning, tables of cells, paper figures.

Imports run and below; never report or cli.
"""
