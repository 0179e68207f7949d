"""The TUI's screens: runs list, run dashboard, trial, trace, review queue, lineage, help."""
