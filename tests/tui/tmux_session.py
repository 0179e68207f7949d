"""A real terminal for the TUI tests: one tmux session on a private server (its own socket)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


class Tmux:
    """One session on a private tmux server (its own socket), so no user's tmux is touched."""

    def __init__(self, session: str, exit_file: Path) -> None:
        self.session = session
        self.socket = session
        self.exit_file = exit_file

    def run(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed ({proc.stderr.strip()}); {self.post_mortem()}")
        return proc.stdout

    def post_mortem(self) -> str:
        """What became of the app (a crash's traceback stays on the screen: the shell sleeps on)."""
        code = self.exit_file.read_text().strip() if self.exit_file.exists() else "none written"
        return f"app exit code: {code}"

    def capture(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session)

    def send(self, *keys: str) -> None:
        for key in keys:
            self.run("send-keys", "-t", self.session, key)
            time.sleep(0.15)

    def quit_cleanly(self) -> None:
        """Press q; the app must exit 0 within 15 s (the shell writes its exit code to ``done``)."""
        self.send("q")
        deadline = time.monotonic() + 15
        while not self.exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.exit_file.exists() and self.exit_file.read_text().strip() == "0", \
            f"the app did not quit cleanly; {self.post_mortem()}"

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} did not appear within {timeout}s; the screen was:\n{screen}\n"
                             f"{self.post_mortem()}")

    def title(self) -> str:
        """The pane's title (what an OSC 0/2 escape sequence sets)."""
        return self.run("display-message", "-p", "-t", self.session, "#{pane_title}").strip()

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
