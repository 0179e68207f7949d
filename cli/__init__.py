"""The headless command line (``rrma-tui``): runs, benches, verify, export, orders and reviews.

It reads and writes runs through the core (``rrma``) and opens the Textual app (``tui``) lazily,
only for the commands that show it: the one place outside ``tui`` that imports the UI.
"""
