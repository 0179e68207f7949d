"""Training the research agent on the loop's rewards (docs/training.md): TRL + PEFT, an optional extra."""
