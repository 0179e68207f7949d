"""The TUI's screens: runs list, run dashboard, trial, trace, review queue, lineage, compare, proof tree,
experiment. None imports another: each posts a message of tui/messages.py that the app handles;
what they share is in base.py, the dialogs they ask with in tui/dialogs.py."""
