"""`python -m mars_eval.cli`: the same as the `mars-eval` console script."""

from mars_eval.cli import main

main()
