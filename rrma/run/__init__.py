"""The run room: the research loop and what it decides with.

``loop`` (the :class:`~rrma.run.loop.ResearchLoop` and the run entry points), ``promotion`` (when a
trial beats the best), ``abort`` (early abort from progress samples), ``cache`` (outcomes already
measured), ``experiment`` (arms x seeds of whole runs).
"""
