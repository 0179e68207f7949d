"""Widgets the TUI's screens share: the virtual line table, the score chart, trial formatting."""
