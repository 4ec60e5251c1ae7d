"""Build prompt packs from local checkouts of the reference repositories.

`import_mars(path)` reads thu-nics/MARS (`importers.mars`): each game environment's
`_get_prefix_prompt` and the turn texts of `_format_messages`. `import_maslab(path)` reads
MASWorks/MASLab (`importers.maslab`): MAD's, AutoGen's, llm_debate's, DyLAN's, AgentVerse's and
MacNet's prompts and the GPQA / AIME query format.

The files are parsed (`ast`), never run (`importers.reading`): string literals and f-strings
are turned into our `str.format` templates, each f-string expression mapped to one of our
placeholders by the table of its source file (an expression not in the table stops the import
with one line, so a changed reference is noticed instead of imported wrongly). Templates the
reference has no counterpart for (our answer formats, the solver-reviewer AutoGen) are taken
from `ours`, and the pack's `source` lists which keys came from the checkout and its commit.

Reading is bounded (docs/prompts.md): a file must be a regular file inside the checkout (a
symlink leading out of it, a FIFO or a device is refused unread), at most `MAX_SOURCE_BYTES`
are read, and a syntax tree nested past `MAX_SOURCE_DEPTH` levels (a `+` chain of 30,000 terms)
is refused before anything recurses over it. Whatever the importer cannot read is one line
(`ImportFailure`, exit 2).
"""

from __future__ import annotations

from mars_eval.prompts.importers.mars import MARS_GAMES, MARS_REPO, import_mars
from mars_eval.prompts.importers.maslab import MASLAB_REPO, import_maslab
from mars_eval.prompts.importers.reading import (
    MAX_SOURCE_BYTES,
    MAX_SOURCE_DEPTH,
    ImportFailure,
    source_commit,
    template_of,
)

__all__ = [
    "MARS_GAMES",
    "MARS_REPO",
    "MASLAB_REPO",
    "MAX_SOURCE_BYTES",
    "MAX_SOURCE_DEPTH",
    "ImportFailure",
    "import_maslab",
    "import_mars",
    "source_commit",
    "template_of",
]
