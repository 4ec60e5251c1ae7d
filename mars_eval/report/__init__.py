"""What people read: the console summary table, HTML and Markdown reports, plots, export.

Imports analysis and below; never cli.
"""
