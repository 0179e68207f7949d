"""The headless command line (``rrma-tui``): runs, benches, experiments, verify, export, orders, reviews.

It reads and writes runs through the core (``rrma``) and never imports the UI: a command that shows
the TUI hands back a :class:`cli.output.TuiRequest`, which the console script's entry point
(``tui/main.py``) opens. Arrows point down only: tui -> cli -> rrma.
"""
